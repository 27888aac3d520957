"""The MCP client session (``session.py``): the dual-stream lifecycle of the 2025
revisions and the stateless 2026-07-28 mode, every stream read through the resumption
guard; what it counts (``counters.py``)."""

from .counters import ClientStats
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
)

__all__ = [
    "CLIENT_INFO",
    "Client",
    "ClientStats",
    "InputRequired",
    "MessageTooLarge",
    "RPCError",
    "RequestTimeout",
    "StreamBroken",
    "Unauthorized",
    "delivering",
]
