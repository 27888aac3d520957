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
from .headers import UNSUPPORTED_VERSION
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
    ``answers`` are the client capabilities it declares.

    A discover answer is agreement only when it is a discover result naming a stateless
    revision we speak (`discovered`): a server of the revisions with sessions that answers
    ``{}`` is then initialized, as it should be. A ``-32022`` refusal names the versions the
    server supports (`supported_versions`): discover is sent once more under the newest
    stateless one of them we speak, else initialize asks for the newest of them with sessions."""
    answers = answers or {}
    asked: Profile | None = wanted if wanted is not None and not wanted.request_headers else None
    if wanted is None or wanted.request_headers:
        modern = wanted or NEWEST
        for attempt in range(2):  # the first try, and one under a version the server named
            body = request(ids(), DISCOVER, None, modern, capabilities=answers, client_info=client)
            came = yield Outgoing(
                "discover", post_headers(modern, None, DISCOVER), body, optional=wanted is None
            )
            server = _result(came)
            if came.status == 200 and server is not None and discovered(server, modern):
                return Agreement(modern, None, server)
            named = supported_versions(came.reply) or _listed(server)
            stateless = [PROFILES[v] for v in sorted(named, reverse=True) if PROFILES[v].request_headers]
            with_sessions = [PROFILES[v] for v in sorted(named, reverse=True) if PROFILES[v].sessions]
            if attempt == 0 and stateless and (wanted is None or stateless[0] == wanted):
                modern = stateless[0]
                continue
            if wanted is None and with_sessions:
                asked = with_sessions[0]
            break
        if wanted is not None:
            raise HandshakeFailed(f"server/discover was answered {came.status}", came)
    asked = asked or NEWEST_WITH_SESSIONS
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


def discovered(result: dict[str, Any], profile: Profile) -> bool:
    """A ``server/discover`` result (``supportedVersions``, a list of names, and
    ``capabilities``, an object) that names ``profile``: agreement on it."""
    versions, caps = result.get("supportedVersions"), result.get("capabilities")
    return (
        isinstance(versions, list)
        and all(isinstance(v, str) for v in versions)
        and profile.name in versions
        and isinstance(caps, dict)
    )


def supported_versions(reply: dict[str, Any] | None) -> list[str]:
    """The revisions we know among those a ``-32022`` (unsupported version) error names in
    ``data.supported``; [] for any other answer."""
    error = reply.get("error") if isinstance(reply, dict) else None
    if not isinstance(error, dict) or error.get("code") != UNSUPPORTED_VERSION:
        return []
    data = error.get("data")
    named = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(named, list):
        return []
    return [v for v in named[:64] if isinstance(v, str) and v in PROFILES]


def _listed(result: dict[str, Any] | None) -> list[str]:
    """The revisions we know among a discover result's ``supportedVersions``."""
    named = result.get("supportedVersions") if result is not None else None
    return [v for v in named[:64] if isinstance(v, str) and v in PROFILES] if isinstance(named, list) else []


def _result(came: Incoming) -> dict[str, Any] | None:
    result = came.reply.get("result") if came.reply is not None else None
    return result if isinstance(result, dict) else None
