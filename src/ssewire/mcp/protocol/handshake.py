"""How a conversation opens, sans-IO: the newest revision first (2026-07-28 has no
handshake, but its servers answer ``server/discover``), else ``initialize`` under the newest
revision with sessions (or the one the caller forces), then ``notifications/initialized``.

`handshake` is a generator: the caller sends each `Outgoing` it yields, feeds back what
came as an `Incoming`, and gets the `Agreement` as the generator's return value, or
`HandshakeFailed`. The client and the probe drive the same one, each with its own I/O."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from ... import __version__
from .profiles import NEWEST, NEWEST_WITH_SESSIONS, PROFILES, Profile
from .requests import notification, post_headers, request

DISCOVER = "server/discover"
INITIALIZE = "initialize"
INITIALIZED = "notifications/initialized"

# The client capability that answering each server-to-client request declares.
CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
    "elicitation/create": "elicitation",
}


def capabilities(answered: Iterable[str]) -> dict[str, Any]:
    """The client capabilities for the server requests a client answers (by method)."""
    return {CAPABILITY_OF[method]: {} for method in answered if method in CAPABILITY_OF}


def client_info(name: str) -> dict[str, str]:
    return {"name": name, "version": __version__}


@dataclass(frozen=True)
class Outgoing:
    """One request of the handshake to send (a POST)."""

    name: str  # "discover", "initialize" or "initialized"
    headers: dict[str, str]
    body: dict[str, Any]
    optional: bool = False  # no answer at all is an answer too: fall back (the caller feeds Incoming(None))


@dataclass(frozen=True)
class Incoming:
    """What came back: the HTTP status (None: nothing usable came), the response to the
    step's request (None for a notification, or when none came) and the session id header."""

    status: int | None
    reply: dict[str, Any] | None = None
    session: str | None = None


@dataclass(frozen=True)
class Agreement:
    profile: Profile
    session: str | None  # None: no session (2026-07-28, or a stateless server)
    server: dict[str, Any] = field(default_factory=dict)  # discover's or initialize's result


class HandshakeFailed(Exception):
    """The server answered neither ``server/discover`` (when forced) nor ``initialize``."""

    def __init__(self, message: str, incoming: Incoming) -> None:
        super().__init__(message)
        self.incoming = incoming


def handshake(
    wanted: Profile | None,
    *,
    ids: Callable[[], Any],
    client: dict[str, str],
    answers: dict[str, Any] | None = None,
) -> Generator[Outgoing, Incoming, Agreement]:
    """Open a conversation under ``wanted`` (None: negotiate). ``ids`` gives JSON-RPC ids;
    ``answers`` are the client capabilities it declares."""
    answers = answers or {}
    if wanted is None or wanted.request_headers:
        body = request(ids(), DISCOVER, None, NEWEST, capabilities=answers)
        came = yield Outgoing("discover", post_headers(NEWEST, None, DISCOVER), body, optional=wanted is None)
        server = _result(came)
        if came.status == 200 and server is not None:
            return Agreement(NEWEST, None, server)
        if wanted is not None:
            raise HandshakeFailed(f"server/discover was answered {came.status}", came)
    asked = wanted or NEWEST_WITH_SESSIONS
    params = {"protocolVersion": asked.name, "capabilities": answers, "clientInfo": client}
    came = yield Outgoing("initialize", post_headers(None, None), request(ids(), INITIALIZE, params, None))
    server = _result(came)
    if came.status != 200 or server is None or "protocolVersion" not in server:
        raise HandshakeFailed(f"initialize was answered {came.status}", came)
    named_version = server["protocolVersion"]
    # a revision it names that we do not know (or not a name at all): ours
    profile = PROFILES.get(named_version, asked) if isinstance(named_version, str) else asked
    yield Outgoing("initialized", post_headers(profile, came.session), notification(INITIALIZED))
    return Agreement(profile, came.session, server)


def _result(came: Incoming) -> dict[str, Any] | None:
    result = came.reply.get("result") if came.reply is not None else None
    return result if isinstance(result, dict) else None
