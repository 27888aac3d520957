"""The MCP client session, the one upstream engine of the package (the gateway's and the
bridge's upstream sessions are clients too), in layers: ``routing.py`` (what the streams
deliver goes where its id or progress token says; the server's requests answered through
the handlers), ``engine.py`` (a request sent and its answer read through the resumption
guard, resumed or re-issued), ``listener.py`` (the standalone GET stream), ``session.py``
(the public `Client`: the session's lifecycle and its requests, on those); what it raises
(``errors.py``) and counts (``counters.py``)."""

from .counters import ClientStats
from .errors import ConnectFailed, OpenRefused, failure_kind, open_refused, unavailable
from .session import (
    CLIENT_INFO,
    Client,
    InputRequired,
    MessageTooLarge,
    RequestTimeout,
    RPCError,
    StreamBroken,
    Unauthorized,
    delivering,
    learn_tool_hints,
)

__all__ = [
    "CLIENT_INFO",
    "Client",
    "ClientStats",
    "ConnectFailed",
    "InputRequired",
    "MessageTooLarge",
    "OpenRefused",
    "RPCError",
    "RequestTimeout",
    "StreamBroken",
    "Unauthorized",
    "delivering",
    "failure_kind",
    "learn_tool_hints",
    "open_refused",
    "unavailable",
]
