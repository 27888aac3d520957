"""A stdio server behind an httpx transport that speaks Streamable HTTP (2025-11-25).

The gateway's upstream engine, its revision bridge and `Client` reach every upstream through
httpx; handed this transport, they reach a `StdioHost` with nothing else changed (healing,
tool rules, limits, both downstream revisions through the bridge). In process, so the
server's side is small:

- ``POST initialize`` opens a session (the process's own initialize result, with a session
  id of the host's); any other POST needs a session (400 without, 404 for one it does not
  know);
- a request is answered as an event stream: the progress of the call, then its answer;
  notifications and responses are accepted (202);
- ``GET`` with a session is its listening stream (one at a time: 409), without one it
  answers whether the process runs (405, or 503 when it cannot start: readiness);
- ``DELETE`` ends the session.

Streams carry keep-alive comments every ``keepalive`` seconds, so a long call never looks idle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson

from ..._encoder import encode_comment, encode_raw_event
from ..protocol.codes import INVALID_REQUEST, PARSE_ERROR, SESSION_NOT_FOUND
from ..protocol.handshake import INITIALIZE
from ..protocol.wire import JSON, SESSION_ID, SSE
from .host import Call, Inbox, Session, StdioHost, StdioUnavailable, error, result

KEEPALIVE = 10.0


class StdioTransport(httpx.AsyncBaseTransport):
    """Streamable HTTP onto ``host``; closing the transport stops its process."""

    def __init__(self, host: StdioHost, *, keepalive: float = KEEPALIVE) -> None:
        self.host, self.keepalive = host, keepalive

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sid = request.headers.get(SESSION_ID)
        session = self.host.sessions.get(sid) if sid is not None else None
        if request.method == "POST":
            return await self._post(request, sid, session)
        if request.method == "GET":
            if session is not None:
                return self._listen(session)
            if sid is not None:
                return _refused(404, SESSION_NOT_FOUND, "session not found")
            try:
                await self.host.ready()
            except StdioUnavailable as down:
                return _unavailable(down)
            return httpx.Response(405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            if session is None:
                return _refused(404, SESSION_NOT_FOUND, "session not found")
            await self.host.close_session(session)
            return httpx.Response(200)
        return httpx.Response(405, headers={"allow": "GET, POST, DELETE"})

    async def _post(self, request: httpx.Request, sid: str | None, session: Session | None) -> httpx.Response:
        try:
            message = orjson.loads(await request.aread())
        except orjson.JSONDecodeError:
            return _refused(400, PARSE_ERROR, "the body is not JSON")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _refused(400, INVALID_REQUEST, "one JSON-RPC message a request")
        method = message.get("method")
        if method == INITIALIZE and "id" in message:
            try:
                server = await self.host.ready()
                opened = self.host.open_session()
            except StdioUnavailable as down:
                return _unavailable(down)
            return httpx.Response(
                200,
                headers={"content-type": JSON, SESSION_ID: opened.sid},
                content=result(message["id"], server),
            )
        if session is None:
            if sid is None:
                return _refused(400, INVALID_REQUEST, "no Mcp-Session-Id: initialize first")
            return _refused(404, SESSION_NOT_FOUND, "session not found")
        if not isinstance(method, str) or "id" not in message:
            await self.host.notify(session, message)  # (a response: no request of the process's goes out)
            return httpx.Response(202)
        answer = await self.host.request(session, message)
        if isinstance(answer, bytes):
            return httpx.Response(200, headers={"content-type": JSON}, content=answer)
        return httpx.Response(200, headers={"content-type": SSE}, stream=_Stream(self, answer.inbox, answer))

    def _listen(self, session: Session) -> httpx.Response:
        if session.listen is not None and not session.listen.closed:
            return _refused(409, INVALID_REQUEST, "this session has a listening stream already")
        session.listen = Inbox(self.host.budget)
        return httpx.Response(200, headers={"content-type": SSE}, stream=_Stream(self, session.listen, None))

    async def aclose(self) -> None:
        await self.host.aclose()


class _Stream(httpx.AsyncByteStream):
    """The events of one inbox, keep-alive comments between them; closed by its reader."""

    def __init__(self, transport: StdioTransport, inbox: Inbox, call: Call | None) -> None:
        self.transport, self.inbox, self.call = transport, inbox, call

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (data := await self.inbox.get(self.transport.keepalive)) is not None:
            yield encode_raw_event(data) if data else encode_comment()

    async def aclose(self) -> None:
        if self.call is not None:
            self.transport.host.abandon(self.call)  # (nothing, once it was answered)
        else:
            self.inbox.close()


def _refused(status: int, code: int, text: str) -> httpx.Response:
    return httpx.Response(status, headers={"content-type": JSON}, content=error(None, code, text))


def _unavailable(down: StdioUnavailable) -> httpx.Response:
    retry = max(1, round(down.retry_after))
    return httpx.Response(
        503, headers={"retry-after": str(retry), "content-type": "text/plain"}, content=str(down).encode()
    )
