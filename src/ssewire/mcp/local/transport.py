"""An upstream in the process behind an httpx transport that speaks Streamable HTTP (2025-11-25).

The gateway's upstream engine, its revision bridge and `Client` reach every upstream through
httpx; handed this transport, they reach a `LocalServer` (a stdio host, a virtual server)
with nothing else changed: healing, tool rules, limits, both downstream revisions (2026-07-28
through the bridge). In process, so the HTTP side is small:

- ``POST initialize`` opens a session (a session id of the server's); any other POST needs
  one (400 without, 404 for one it does not know);
- a request is answered as an event stream: what the server puts in its inbox (progress,
  requests of the call), then its answer; notifications are accepted (202), and so are
  answers to the server's requests it awaits (400 for one it never asked);
- ``GET`` with a session is its listening stream (one at a time: 409), without one it says
  whether the server can serve (405, or 503 with ``Retry-After``: readiness);
- ``DELETE`` ends the session.

Streams carry keep-alive comments every ``keepalive`` seconds, so a long call never looks idle.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import httpx
import orjson

from ..._encoder import encode_comment, encode_raw_event
from ..protocol.codes import INVALID_REQUEST, PARSE_ERROR, SESSION_NOT_FOUND
from ..protocol.handshake import INITIALIZE
from ..protocol.wire import JSON, SESSION_ID, SSE
from .inbox import Inbox

KEEPALIVE = 10.0


class LocalUnavailable(Exception):
    """The server cannot serve now; the next try in ``retry_after`` seconds."""

    def __init__(self, reason: str, retry_after: float) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class Pending(Protocol):
    """A request in flight: its stream's inbox."""

    inbox: Inbox


class LocalServer(Protocol):
    """What a server in the process answers (its sessions by id)."""

    @property
    def sessions(self) -> Mapping[str, Any]:
        """By id; each with ``calls`` in flight and its ``listen`` inbox (None: none open)."""
        ...

    @property
    def budget(self) -> int:
        """What one reader may leave waiting, in bytes."""
        ...

    async def ready(self) -> Any:
        """Return when it can serve; `LocalUnavailable` otherwise."""
        ...

    async def initialize(self, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A new session: its id and the initialize result; `LocalUnavailable` otherwise."""
        ...

    async def request(self, session: Any, message: dict[str, Any]) -> Pending | bytes:
        """A request of the session: in flight, or answered at once (the answer's bytes)."""
        ...

    async def notify(self, session: Any, message: dict[str, Any]) -> None: ...

    async def answered(self, session: Any, message: dict[str, Any]) -> bool:
        """An answer to a request the server sent the session: False if it sent none such."""
        ...

    async def close_session(self, session: Any) -> None: ...

    def abandon(self, pending: Any) -> None:
        """The reader of a request's stream left (a closed stream is no cancellation)."""
        ...

    async def aclose(self) -> None: ...


MAX_LEFT = 64  # calls whose readers left that a session's late cancellation can still name


def remember_left(left: dict[bytes, Any], key: bytes, upstream: Any) -> None:
    """Keep where a call whose reader left still runs (a relay closes a call's stream before
    it sends the cancellation, which must still reach the call): the last `MAX_LEFT`."""
    left[key] = upstream
    if len(left) > MAX_LEFT:
        del left[next(iter(left))]


def idlest(sessions: Mapping[str, Any]) -> Any:
    """The session to let go for a new one: the one least recently used of those with no
    call in flight and no listening stream open (None: every one is busy). A gateway's
    replicas never end the upstream sessions they hand each other, so a local server makes
    room itself."""
    idle = [s for s in sessions.values() if not s.calls and (s.listen is None or s.listen.closed)]
    return min(idle, key=lambda session: session.used, default=None)


class LocalTransport(httpx.AsyncBaseTransport):
    """Streamable HTTP onto ``server``; closing the transport closes the server."""

    def __init__(self, server: LocalServer, *, keepalive: float = KEEPALIVE) -> None:
        self.server, self.keepalive = server, keepalive

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sid = request.headers.get(SESSION_ID)
        session = self.server.sessions.get(sid) if sid is not None else None
        if session is not None:
            session.used = time.monotonic()
        if request.method == "POST":
            return await self._post(request, sid, session)
        if request.method == "GET":
            if session is not None:
                if session.listen is not None and not session.listen.closed:
                    return _refused(409, INVALID_REQUEST, "this session has a listening stream already")
                inbox = session.listen = Inbox(self.server.budget)
                return httpx.Response(200, headers={"content-type": SSE}, stream=_Stream(self, inbox, None))
            if sid is not None:
                return _refused(404, SESSION_NOT_FOUND, "session not found")
            try:
                await self.server.ready()
            except LocalUnavailable as down:
                return _unavailable(down)
            return httpx.Response(405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            if session is None:
                return _refused(404, SESSION_NOT_FOUND, "session not found")
            await self.server.close_session(session)
            return httpx.Response(200)
        return httpx.Response(405, headers={"allow": "GET, POST, DELETE"})

    async def _post(self, request: httpx.Request, sid: str | None, session: Any) -> httpx.Response:
        try:
            message = orjson.loads(await request.aread())
        except orjson.JSONDecodeError:
            return _refused(400, PARSE_ERROR, "the body is not JSON")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _refused(400, INVALID_REQUEST, "one JSON-RPC message a request")
        method = message.get("method")
        if method == INITIALIZE and "id" in message:
            try:
                opened, server = await self.server.initialize(message)
            except LocalUnavailable as down:
                return _unavailable(down)
            answer = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": server})
            return httpx.Response(200, headers={"content-type": JSON, SESSION_ID: opened}, content=answer)
        if session is None:
            if sid is None:
                return _refused(400, INVALID_REQUEST, "no Mcp-Session-Id: initialize first")
            return _refused(404, SESSION_NOT_FOUND, "session not found")
        if not isinstance(method, str):
            if await self.server.answered(session, message):
                return httpx.Response(202)
            return _refused(400, INVALID_REQUEST, "an answer to no request of this server")
        if "id" not in message:
            await self.server.notify(session, message)
            return httpx.Response(202)
        asked = await self.server.request(session, message)
        if isinstance(asked, bytes):
            return httpx.Response(200, headers={"content-type": JSON}, content=asked)
        return httpx.Response(200, headers={"content-type": SSE}, stream=_Stream(self, asked.inbox, asked))

    async def aclose(self) -> None:
        await self.server.aclose()


class _Stream(httpx.AsyncByteStream):
    """The events of one inbox, keep-alive comments between them; closed by its reader."""

    def __init__(self, transport: LocalTransport, inbox: Inbox, pending: Pending | None) -> None:
        self.transport, self.inbox, self.pending = transport, inbox, pending

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (data := await self.inbox.get(self.transport.keepalive)) is not None:
            yield encode_raw_event(data) if data else encode_comment()

    async def aclose(self) -> None:
        if self.pending is not None:
            self.transport.server.abandon(self.pending)  # (nothing, once it was answered)
        else:
            self.inbox.close()


def _refused(status: int, code: int, text: str) -> httpx.Response:
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}})
    return httpx.Response(status, headers={"content-type": JSON}, content=body)


def _unavailable(down: LocalUnavailable) -> httpx.Response:
    retry = max(1, math.ceil(down.retry_after))  # (never sooner than it said)
    headers = {"retry-after": str(retry), "content-type": "text/plain"}
    return httpx.Response(503, headers=headers, content=str(down).encode())
