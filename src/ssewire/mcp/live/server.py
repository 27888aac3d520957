"""A small MCP Streamable HTTP server on ssewire's own encoder and ASGI stream.

It is the probe's known-good target and, with faults switched on (``faults.py``), a
target with one known defect each. 2025-11-25 by default: sessions, the standalone GET
stream with keep-alive comments, SSE answers primed with an event id and ``retry``,
event ids unique across the session, and a bounded event store per stream that resumes a
GET with ``Last-Event-ID`` or, once the cursor was evicted, refuses with 409 and
``Retry-After`` (never a fresh stream that looks like a continuation). With
``profile="2026-07-28"``: no sessions, GET and DELETE answered 405, the request headers
checked against the body (-32020), unknown versions refused (-32022).

Tools: ``echo``, ``countdown`` (progress notifications, then a result), ``big`` (a
multi-megabyte result), ``structured`` (an ``outputSchema`` and ``structuredContent``).
Bind it to 127.0.0.1 only (``ssewire serve`` does).

Shaped like the official SDKs' transports: one handler per HTTP method and per JSON-RPC
method, small validators run before dispatch (each refuses by raising ``_Refused``), faults
as the typed set of ``faults.py``. Tools that stream run as tasks the server owns: their
failures are kept in ``errors`` and logged, their streams end whatever happens, and the
ASGI lifespan shutdown cancels and awaits them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeGuard
from urllib.parse import urlsplit

from ..._encoder import encode_event
from ..._http import acceptable, media_type
from ...asgi import EventStreamResponse
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import KNOWN_VERSIONS, NEWEST_WITH_SESSIONS, PROFILES, resolve
from ..protocol.wire import BOTH, JSON, SSE
from .faults import Fault
from .faults import resolve as resolve_faults

logger = logging.getLogger(__name__)

SERVER_INFO = {"name": "ssewire-reference", "version": "1"}
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version"
MAX_SESSIONS = 64  # oldest dropped beyond this: memory stays bounded under any client
MAX_BODY = 1 << 20
RETRY_MS = 1000
MAX_ERRORS = 64  # failures of background tasks kept for inspection (bounded)

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "countdown",
        "description": "Send `count` progress notifications `delay` seconds apart, then a result of `size` bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "delay": {"type": "number"},
                "size": {"type": "integer"},
            },
        },
    },
    {
        "name": "big",
        "description": "Return one text block of `size` bytes (default 4 MiB).",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
    {
        "name": "ask",
        "description": "Ask the client a question (sampling/createMessage) and return its answer.",
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}},
    },
    {
        "name": "structured",
        "description": "Return `n` as structured content.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"value": {"type": "integer"}},
            "required": ["value"],
            "additionalProperties": False,
        },
    },
]


@dataclass
class _Stream:
    """One SSE stream's events, kept (boundedly) for resumption while a task may still add."""

    number: int
    size: int  # events kept; older ones are evicted
    events: deque[tuple[int, bytes, dict[str, Any] | None]] = field(
        default_factory=deque
    )  # (seq, encoded, message)
    evicted: int = 0  # the highest sequence number dropped from the store
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    next_seq: int = 1

    def add(self, seq: int, encoded: bytes, message: dict[str, Any] | None) -> None:
        if len(self.events) >= self.size:
            self.evicted = self.events.popleft()[0]
        self.events.append((seq, encoded, message))
        self.changed.set()

    def finish(self) -> None:
        self.done = True
        self.changed.set()


@dataclass
class _Session:
    ident: str
    version: str
    streams: dict[int, _Stream] = field(default_factory=dict)
    by_event: dict[str, tuple[int, int]] = field(default_factory=dict)  # event id -> (stream, seq)
    listeners: list[asyncio.Queue[bytes]] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    rate_limited: bool = False


class _Refused(Exception):
    """A request refused before dispatch: answered with a JSON-RPC error and this HTTP status.

    ``headers`` follow the CORS headers every answer carries."""

    def __init__(
        self,
        status: int,
        code: int,
        text: str,
        *,
        ident: Any = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(text)
        self.status, self.code, self.text, self.ident = status, code, text, ident
        self.headers = list(headers)


@dataclass
class _Http:
    """One HTTP request as the handlers see it: the ASGI triple, the headers (lower-case
    names, the last of a repeated one) and the CORS headers every answer carries."""

    scope: dict[str, Any]
    receive: Any
    send: Any
    headers: dict[str, str]
    cors: list[tuple[str, str]] = field(default_factory=list)

    async def respond(self, status: int, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        await _respond(self.send, status, body, headers)

    async def error(
        self, status: int, ident: Any, code: int, text: str, headers: Iterable[tuple[str, str]] = ()
    ) -> None:
        await _error(self.send, status, ident, code, text, [*self.cors, *headers])


@dataclass
class _Call:
    """One JSON-RPC request on its way to its handler, in the session it belongs to."""

    http: _Http
    session: _Session
    message: dict[str, Any]

    @property
    def ident(self) -> Any:
        return self.message.get("id")

    @property
    def params(self) -> dict[str, Any]:
        return _object(self.message.get("params"))

    @property
    def session_header(self) -> list[tuple[str, str]]:
        return [("mcp-session-id", self.session.ident)] if self.session.ident else []

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The headers of its answer: CORS, and the session id when there is one."""
        return [*self.http.cors, *self.session_header]


_Handler = Callable[[_Call], Awaitable[None]]
_Tool = Callable[[_Call, dict[str, Any]], Awaitable[None]]


class ReferenceServer:
    """An ASGI application: ``uvicorn.run(ReferenceServer(), host="127.0.0.1")``."""

    def __init__(
        self,
        *,
        profile: str = NEWEST_WITH_SESSIONS.name,
        faults: Iterable[str] = (),
        keepalive: float = 15.0,
        store_size: int = 16,
        json_response: bool = False,
        path: str = "/mcp",
        countdown_delay: float = 0.05,
        result_size: int = 2 << 20,
        retry_ms: int = RETRY_MS,
        stateless: bool = False,
    ) -> None:
        self.profile, _ = resolve(profile)
        self.faults: frozenset[Fault] = resolve_faults(faults)  # an unknown name: UnknownFault
        self.keepalive = keepalive
        self.store_size = store_size
        self.json_response = json_response
        self.path = path
        self.countdown_delay = countdown_delay  # countdown's default pause between notifications
        self.result_size = result_size  # countdown's default result: a multi-MB text block
        self.retry_ms = retry_ms  # the retry field of every priming event
        self.stateless_mode = stateless or not self.profile.sessions  # no Mcp-Session-Id at all
        self.sessions: OrderedDict[str, _Session] = OrderedDict()
        self.tasks: set[asyncio.Task[None]] = set()  # running producers, held until done
        self.errors: deque[BaseException] = deque(maxlen=MAX_ERRORS)  # what those tasks raised
        self.asked: dict[Any, asyncio.Future[dict[str, Any]]] = {}  # our requests to clients, by id
        self.asking = itertools.count(1)
        self.stateless = _Session("", self.profile.name)  # 2026-07-28: one scope for all
        self.ended: deque[str] = deque(maxlen=1024)  # ids ended by DELETE (bounded)
        self._http_methods: dict[str, Callable[[_Http], Awaitable[None]]] = {
            "OPTIONS": self._options,
            "POST": self._post,
            "GET": self._get,
            "DELETE": self._delete,
        }
        self._methods = self._method_table()
        self._tools = self._tool_table()

    def _method_table(self) -> dict[str, _Handler]:
        """The JSON-RPC methods this profile serves (2026-07-28: discover, not ping)."""
        methods: dict[str, _Handler] = {
            "initialize": self._initialize,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
        }
        if self.profile.request_headers:
            methods["server/discover"] = self._discover
        else:
            methods["ping"] = self._ping
        return methods

    def _tool_table(self) -> dict[str, _Tool]:
        tools: dict[str, _Tool] = {
            "echo": self._echo,
            "big": self._big,
            "structured": self._structured,
            "countdown": self._countdown_tool,
        }
        if not self.json_response and not self.profile.request_headers:  # it needs a stream back
            tools["ask"] = self._ask_tool
        return tools

    # -- ASGI ------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] != self.path:
            await _plain(send, 404, "not found")
            return
        if not self._trusted(headers):
            await _plain(send, 403, "forbidden: Origin or Host is not this server's")  # DNS rebinding
            return
        http = _Http(scope, receive, send, headers, self._cors(headers.get("origin")))
        handler = self._http_methods.get(scope["method"], self._not_allowed)
        try:
            await handler(http)
        except _Refused as refused:
            await http.error(refused.status, refused.ident, refused.code, refused.text, refused.headers)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await self.aclose()
        await send({"type": "lifespan.shutdown.complete"})

    async def aclose(self) -> None:
        """Cancel the tasks this server started and wait for them (the lifespan shutdown
        calls it): nothing outlives the app, and each cancelled producer ends its stream."""
        running = list(self.tasks)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _trusted(self, headers: dict[str, str]) -> bool:
        """Host, and Origin when sent, name this machine (DNS rebinding protection)."""
        if Fault.ORIGIN_IGNORED in self.faults:
            return True
        origin = headers.get("origin")
        return _loopback_host(headers.get("host")) and (origin is None or _loopback_origin(origin))

    def _cors(self, origin: str | None) -> list[tuple[str, str]]:
        if origin is None:
            return []
        headers = [("access-control-allow-origin", origin), ("vary", "Origin")]
        if Fault.MISSING_EXPOSE_HEADERS not in self.faults:
            headers.append(("access-control-expose-headers", EXPOSED))
        return headers

    async def _options(self, http: _Http) -> None:
        allow = [("access-control-allow-methods", "GET, POST, DELETE"), ("access-control-allow-headers", "*")]
        await http.respond(204, [*http.cors, *allow])

    async def _not_allowed(self, http: _Http) -> None:
        await http.respond(405, [*http.cors, ("allow", "GET, POST, DELETE")])

    # -- validators: each refuses by raising _Refused ----------------------------------

    def _check_post_accept(self, accept: str | None) -> None:
        if Fault.STRICT_ACCEPT in self.faults:
            ok = accept == BOTH  # the exact string, as a naive server compares it
        else:
            ok = accept is not None and acceptable(accept, JSON) and acceptable(accept, SSE)
        if not ok:
            text = "Not Acceptable: Accept must list application/json and text/event-stream"
            raise _Refused(406, -32600, text)

    def _check_get_accept(self, accept: str | None) -> None:
        ok = accept is not None and acceptable(accept, SSE)
        if Fault.STRICT_ACCEPT in self.faults:
            ok = ok and accept == SSE
        if not ok:
            raise _Refused(406, -32600, "Not Acceptable: Accept must list text/event-stream")

    def _check_content_type(self, ctype: str | None) -> None:
        strict = Fault.STRICT_CONTENT_TYPE in self.faults
        if not (ctype == JSON if strict else media_type(ctype) == JSON):
            raise _Refused(415, -32600, "Unsupported Media Type: send application/json")

    @staticmethod
    def _parse(body: bytes | None) -> dict[str, Any]:
        """One JSON-RPC message: 413 past MAX_BODY, 400 for bad JSON or anything but one object."""
        if body is None:
            raise _Refused(413, -32600, "request body too large")
        try:
            message = json.loads(body)
        except ValueError:
            raise _Refused(400, -32700, "Parse error") from None
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            raise _Refused(400, -32600, "Invalid Request: one JSON-RPC message per POST")
        return message

    def _session(self, headers: dict[str, str]) -> _Session:
        """The request's session: 400 without an id, 404 for an unknown one, 400 for an
        unknown MCP-Protocol-Version."""
        ident = headers.get("mcp-session-id")
        if ident is None:
            raise _Refused(400, -32600, "Bad Request: Mcp-Session-Id required")
        session = self.sessions.get(ident)
        if session is None and Fault.STALE_SESSION_ACCEPTED in self.faults and ident not in self.ended:
            session = self.sessions[ident] = _Session(ident, self.profile.name)
        if session is None:
            status = 400 if Fault.UNKNOWN_SESSION_400 in self.faults else 404
            raise _Refused(status, -32001, "Session not found")
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() not in KNOWN_VERSIONS:
            raise _Refused(400, -32600, f"Unsupported protocol version: {version}")
        return session

    def _modern_headers(self, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, str] | None:
        """2026-07-28: a request's headers must agree with its body (the protocol layer's rules)."""
        if "id" not in message or "method" not in message:
            return None
        return ModernHeaders.of(headers, message).rejection()

    # -- POST ------------------------------------------------------------------------

    async def _post(self, http: _Http) -> None:
        """Validate, find the session, then hand the message to its handler."""
        body = await _body(http.receive)
        self._check_post_accept(http.headers.get("accept"))
        self._check_content_type(http.headers.get("content-type"))
        message = self._parse(body)
        session = self._post_session(http.headers, message)
        if message.get("method") is None:
            await self._client_response(http, message)
        elif "id" not in message:
            await http.respond(202, http.cors)  # a notification: accepted
        else:
            await self._dispatch(_Call(http, session, message))

    def _post_session(self, headers: dict[str, str], message: dict[str, Any]) -> _Session:
        """The session a POST belongs to; initialize opens one (2025 revisions with sessions)."""
        if self.profile.request_headers:
            problem = self._modern_headers(headers, message)
            if problem is not None:
                raise _Refused(400, problem[0], problem[1], ident=message.get("id"))
            return self.stateless
        initialize = message.get("method") == "initialize"
        if self.stateless_mode:
            if initialize:
                self.stateless.version = self._negotiate(message)
            return self.stateless
        return self._new_session(message) if initialize else self._session(headers)

    async def _client_response(self, http: _Http, message: dict[str, Any]) -> None:
        """The client's answer to a request of ours (``ask``): it wakes the waiting tool."""
        waiting = self.asked.pop(message.get("id"), None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message)
        await http.respond(202, http.cors)

    async def _dispatch(self, call: _Call) -> None:
        method = call.message["method"]
        handler = self._methods.get(method) if isinstance(method, str) else None
        if handler is None:
            await call.http.error(200, call.ident, -32601, f"Method not found: {method}", call.session_header)
            return
        await handler(call)

    # -- JSON-RPC methods --------------------------------------------------------------

    async def _initialize(self, call: _Call) -> None:
        result = {
            "protocolVersion": call.session.version,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": SERVER_INFO,
        }
        await self._answer(call, result)

    async def _ping(self, call: _Call) -> None:
        await self._answer(call, {})

    async def _discover(self, call: _Call) -> None:
        discovered = {
            "supportedVersions": [self.profile.name],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
        }
        await self._answer(call, discovered)

    async def _tools_list(self, call: _Call) -> None:
        if Fault.RATE_LIMIT_BURST in self.faults and not call.session.rate_limited:
            call.session.rate_limited = True
            raise _Refused(429, -32000, "rate limited", ident=call.ident, headers=[("retry-after", "1")])
        await self._answer(call, {"tools": TOOLS})

    async def _tools_call(self, call: _Call) -> None:
        params = call.params
        name, arguments = params.get("name"), params.get("arguments") or {}
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            await self._answer(call, {**_text(f"unknown tool {name!r}"), "isError": True})
            return
        await tool(call, arguments)

    def _new_session(self, message: dict[str, Any]) -> _Session:
        session = _Session(uuid.uuid4().hex, self._negotiate(message))
        self.sessions[session.ident] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return session

    def _negotiate(self, message: dict[str, Any]) -> str:
        """The version initialize agrees on: the client's if initialize exists in it, else ours."""
        wanted = _object(message.get("params")).get("protocolVersion")
        return wanted if _negotiable(wanted) else self.profile.name

    # -- tools -------------------------------------------------------------------------

    async def _echo(self, call: _Call, arguments: dict[str, Any]) -> None:
        await self._answer(call, _text(str(arguments.get("text", ""))))

    async def _big(self, call: _Call, arguments: dict[str, Any]) -> None:
        size = min(int(arguments.get("size", 4 << 20)), 64 << 20)
        await self._answer(call, _text("x" * size))

    async def _structured(self, call: _Call, arguments: dict[str, Any]) -> None:
        n = arguments.get("n", 1)
        value: Any = "not an integer" if Fault.OUTPUT_SCHEMA_VIOLATION in self.faults else n
        result = {
            "content": [{"type": "text", "text": json.dumps({"value": value})}],
            "structuredContent": {"value": value},
        }
        await self._answer(call, result)

    async def _ask_tool(self, call: _Call, arguments: dict[str, Any]) -> None:
        question = str(arguments.get("question", "?"))
        await self._streamed(call, lambda stream: self._ask(call.session, stream, question))

    async def _countdown_tool(self, call: _Call, arguments: dict[str, Any]) -> None:
        count = max(0, min(int(arguments.get("count", 20)), 10_000))
        delay = max(0.0, min(float(arguments.get("delay", self.countdown_delay)), 5.0))
        size = max(0, min(int(arguments.get("size", self.result_size)), 64 << 20))
        if self.json_response:
            await asyncio.sleep(count * delay)
            await self._answer(call, _text(_filler(size)))
            return
        token = _object(call.params.get("_meta")).get("progressToken")
        await self._streamed(
            call, lambda stream: self._countdown(call.session, stream, token, count, delay, size)
        )

    # -- producers: background work that fills a stream ---------------------------------

    async def _streamed(
        self, call: _Call, produce: Callable[[_Stream], Coroutine[Any, Any, dict[str, Any]]]
    ) -> None:
        """Answer on a stream that a task of the server's fills: the task goes on whether or
        not anyone reads, so a cut client resumes from the store."""
        stream = self._open_stream(call.session)
        self._spawn(self._produce(call.session, stream, call.ident, produce(stream)))
        await self._serve_stream(call.http, stream, 0, call.headers)

    async def _produce(
        self, session: _Session, stream: _Stream, ident: Any, work: Awaitable[dict[str, Any]]
    ) -> None:
        """Run a producer and answer with its result; its stream ends on every path, so a
        reader (or a GET resuming it) never waits on a producer that failed or was cancelled."""
        try:
            result = await work
        except Exception:
            error = {"code": -32603, "message": "Internal error: the tool failed"}
            self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "error": error})
            raise  # kept in self.errors by _reap
        else:
            self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "result": result})
        finally:
            stream.finish()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._reap)

    def _reap(self, task: asyncio.Task[None]) -> None:
        """Forget a finished task and surface its failure (retrieved here, so asyncio never
        reports it as unretrieved)."""
        self.tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self.errors.append(error)
            logger.error("a reference server task failed", exc_info=error)

    async def _countdown(
        self, session: _Session, stream: _Stream, token: Any, count: int, delay: float, size: int
    ) -> dict[str, Any]:
        """``count`` progress notifications ``delay`` apart, then a result of ``size`` bytes."""
        for i in range(1, count + 1):
            await asyncio.sleep(delay)
            if token is None:
                continue
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": i, "total": count},
            }
            self._emit(session, stream, note)
            if Fault.BROADCAST_TWO_STREAMS in self.faults:
                for queue in session.listeners:
                    queue.put_nowait(encode_event(json.dumps(note), event="message"))
        return _text(_filler(size))

    async def _ask(self, session: _Session, stream: _Stream, question: str) -> dict[str, Any]:
        """Ask the client (sampling/createMessage on the request's stream), then answer with
        what it said; 10 s at most."""
        asked = f"srv-{next(self.asking)}"
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.asked[asked] = waiting
        sampling = {
            "messages": [{"role": "user", "content": {"type": "text", "text": question}}],
            "maxTokens": 16,
        }
        request = {"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage", "params": sampling}
        try:
            self._emit(session, stream, request)
            answer = await asyncio.wait_for(waiting, 10.0)
            text = json.dumps(answer.get("result", answer.get("error")))
        except asyncio.TimeoutError:
            text = "no answer"
        finally:
            self.asked.pop(asked, None)
        return _text(text)

    # -- answers and streams -----------------------------------------------------------

    async def _answer(self, call: _Call, result: dict[str, Any]) -> None:
        reply = {"jsonrpc": "2.0", "id": call.ident, "result": result}
        if self.json_response:
            await call.http.respond(200, [("content-type", JSON), *call.headers], json.dumps(reply).encode())
            return
        stream = self._open_stream(call.session)
        try:
            self._emit(call.session, stream, reply)
        finally:
            stream.finish()
        await self._serve_stream(call.http, stream, 0, call.headers)

    def _open_stream(self, session: _Session, size: int | None = None) -> _Stream:
        number = next(session.numbers)
        stream = _Stream(number, size or self.store_size)
        session.streams[number] = stream
        while len(session.streams) > 64:  # old finished streams go first
            session.streams.pop(next(iter(session.streams)))
        if self.profile.priming:
            self._emit(session, stream, None)
        return stream

    def _emit(self, session: _Session, stream: _Stream, message: dict[str, Any] | None) -> None:
        """Store one event (``None``: the priming event, an id and empty data)."""
        if self.profile.resumability:
            if Fault.DUPLICATE_EVENT_IDS in self.faults:
                seq = stream.next_seq
                ident = str(seq)
            else:
                seq = next(session.counter)
                ident = f"{stream.number}-{seq}"
            stream.next_seq += 1
            session.by_event[ident] = (stream.number, seq)
            if len(session.by_event) > 4096:
                session.by_event.pop(next(iter(session.by_event)))
        else:
            seq, ident = stream.next_seq, None
            stream.next_seq += 1
        if message is None:
            encoded = encode_event("", id=ident, retry=self.retry_ms)
        else:
            encoded = encode_event(json.dumps(message), event="message", id=ident)
        stream.add(seq, encoded, message)

    @property
    def _sse_type(self) -> str:
        return "text/plain" if Fault.WRONG_CONTENT_TYPE in self.faults else SSE

    async def _serve_stream(
        self, http: _Http, stream: _Stream, after: int, headers: list[tuple[str, str]]
    ) -> None:
        source = self._follow(stream, after)
        if Fault.BUFFERED_STREAM in self.faults:
            source = _held_back(source)
        app = EventStreamResponse(source, keepalive=0, headers=[("content-type", self._sse_type), *headers])
        await app(http.scope, http.receive, http.send)

    @staticmethod
    async def _follow(stream: _Stream, after: int) -> AsyncIterator[bytes]:
        """The stream's events with a sequence number above ``after``, as they are stored.

        A follower the store outran (events it never sent were evicted) ends with an error,
        so its client sees a broken stream, never a silent gap."""
        sent = after
        while True:
            stream.changed.clear()
            fresh = [(seq, encoded) for seq, encoded, _ in list(stream.events) if seq > sent]
            if stream.evicted > sent:
                raise RuntimeError("the event store outran this stream's reader")
            for seq, encoded in fresh:
                sent = seq
                yield encoded
            if fresh:
                continue  # events may have arrived while these were written
            if stream.done:
                return
            await stream.changed.wait()

    # -- GET and DELETE ----------------------------------------------------------------

    async def _get(self, http: _Http) -> None:
        """The standalone stream, or with Last-Event-ID a resumption of a stream."""
        if not self.profile.get_stream or self.stateless_mode or Fault.NO_GET in self.faults:
            await http.respond(405, [*http.cors, ("allow", "POST")])
            return
        self._check_get_accept(http.headers.get("accept"))
        session = self._session(http.headers)
        headers = [*http.cors, ("mcp-session-id", session.ident)]
        cursor = http.headers.get("last-event-id")
        if cursor is None:
            await self._listen(http, session, headers)
        else:
            await self._resume(http, session, cursor, headers)

    async def _listen(self, http: _Http, session: _Session, headers: list[tuple[str, str]]) -> None:
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1024)
        session.listeners.append(queue)
        try:
            keepalive = 0 if Fault.NO_KEEPALIVES in self.faults else self.keepalive
            source = self._standalone(session, queue)
            app = EventStreamResponse(
                source, keepalive=keepalive, headers=[("content-type", self._sse_type), *headers]
            )
            await app(http.scope, http.receive, http.send)
        finally:
            session.listeners.remove(queue)

    async def _standalone(self, session: _Session, queue: asyncio.Queue[bytes]) -> AsyncIterator[bytes]:
        """The standalone GET stream: a priming event, then what the server sends on its own."""
        if self.profile.priming:
            stream = self._open_stream(session)
            stream.finish()
            yield stream.events[0][1]
        idle_close = 2 * self.keepalive if Fault.IDLE_CLOSE in self.faults else None
        while True:
            try:
                yield await asyncio.wait_for(queue.get(), idle_close)
            except asyncio.TimeoutError:
                return  # the idle-close fault: the body ends, the server's own close

    async def _resume(
        self, http: _Http, session: _Session, cursor: str, headers: list[tuple[str, str]]
    ) -> None:
        """Replay the cursor's stream after it, or refuse explicitly when it cannot."""
        found = session.by_event.get(cursor)
        stream = session.streams.get(found[0]) if found else None
        refusal = [("mcp-session-id", session.ident), ("retry-after", "1")]
        if stream is None or found is None:
            raise _Refused(409, -32000, "cannot resume: unknown Last-Event-ID", headers=refusal)
        seq = found[1]
        if stream.evicted > seq:  # events after the cursor were evicted: refuse, never fake it
            if Fault.TORN_REPLAY_AFTER_EVICTION in self.faults:
                await self._torn_replay(http, session, stream, headers)
                return
            text = "cannot resume: events after Last-Event-ID were evicted"
            raise _Refused(409, -32000, text, headers=refusal)
        after = seq - 1 if Fault.REPLAY_BEFORE_CURSOR in self.faults else seq
        await self._serve_stream(http, stream, after, headers)

    async def _torn_replay(
        self, http: _Http, session: _Session, stream: _Stream, headers: list[tuple[str, str]]
    ) -> None:
        """The torn-replay-after-eviction fault: a fresh stream, new ids, a gap."""
        fresh = self._open_stream(session, size=len(stream.events) + 1)  # served whole
        try:
            for _, _, message in list(stream.events):
                if message is not None:
                    self._emit(session, fresh, message)
        finally:
            fresh.finish()
        await self._serve_stream(http, fresh, 0, headers)

    async def _delete(self, http: _Http) -> None:
        if self.stateless_mode:
            await http.respond(405, [*http.cors, ("allow", "POST")])
            return
        session = self._session(http.headers)
        if Fault.DELETE_NOT_INVALIDATING not in self.faults:
            self.sessions.pop(session.ident, None)
            self.ended.append(session.ident)
        await http.respond(200, http.cors)


def _negotiable(version: Any) -> TypeGuard[str]:
    """A revision initialize can agree on: a known one that still has initialize (the
    revisions with Mcp-Method headers replaced it with discovery)."""
    if not isinstance(version, str) or version not in KNOWN_VERSIONS:
        return False
    profile = PROFILES.get(version)
    return profile is None or not profile.request_headers


async def _held_back(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The buffered-stream fault: everything at once, at the end."""
    held = [piece async for piece in source]
    yield b"".join(held)


def _filler(size: int) -> str:
    """``size`` bytes of text that tell where they were cut: a torn copy never looks whole."""
    line = "".join(f"{n:07d} " for n in range(1, 129))  # 1 KiB, counting
    return (line * (size // len(line) + 1))[:size] if size else "done"


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(text: str) -> dict[str, Any]:  # a tool result of one text block
    return {"content": [{"type": "text", "text": text}]}


def _loopback_host(host: str | None) -> bool:
    if host is None:
        return False
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name.lower() in LOOPBACK


def _loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and (parts.hostname or "") in LOOPBACK


async def _body(receive: Any) -> bytes | None:
    """The request body, or None past MAX_BODY (bounded memory)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(send: Any, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Any, status: int, text: str) -> None:
    await _respond(send, status, text.encode(), [("content-type", "text/plain")])


async def _error(
    send: Any, status: int, ident: Any, code: int, text: str, headers: list[tuple[str, str]]
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": text}}).encode()
    await _respond(send, status, body, [("content-type", JSON), *headers])


@contextlib.contextmanager
def running(app: Any, *, port: int = 0, lifespan: Literal["on", "off", "auto"] = "on") -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yield its base URL; stop it."""
    import threading
    import time

    import uvicorn

    # log_config=None: leave the caller's logging alone (dictConfig is not thread-safe either);
    # a bounded graceful shutdown: an open GET stream would otherwise hold the stop forever
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan=lifespan,
        log_config=None,
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the reference server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
