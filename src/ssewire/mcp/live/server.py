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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from ..._encoder import encode_event
from ..._http import JSON, acceptable, media_type
from ...asgi import EventStreamResponse
from ..protocol.profiles import KNOWN_VERSIONS, resolve
from ..protocol.wire import META_VERSION, NAME_FIELDS, decode_name
from .faults import resolve as resolve_faults

SERVER_INFO = {"name": "ssewire-reference", "version": "1"}
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
EXPOSED = "Mcp-Session-Id, MCP-Protocol-Version"
MAX_SESSIONS = 64  # oldest dropped beyond this: memory stays bounded under any client
MAX_BODY = 1 << 20
RETRY_MS = 1000

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


class ReferenceServer:
    """An ASGI application: ``uvicorn.run(ReferenceServer(), host="127.0.0.1")``."""

    def __init__(
        self,
        *,
        profile: str = "2025-11-25",
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
        self.faults = resolve_faults(tuple(faults))
        self.keepalive = keepalive
        self.store_size = store_size
        self.json_response = json_response
        self.path = path
        self.countdown_delay = countdown_delay  # countdown's default pause between notifications
        self.result_size = result_size  # countdown's default result: a multi-MB text block
        self.retry_ms = retry_ms  # the retry field of every priming event
        self.stateless_mode = stateless or not self.profile.sessions  # no Mcp-Session-Id at all
        self.sessions: OrderedDict[str, _Session] = OrderedDict()
        self.tasks: set[asyncio.Future[None]] = set()  # running tools, referenced until done
        self.asked: dict[Any, asyncio.Future[dict[str, Any]]] = {}  # our requests to clients, by id
        self.asking = itertools.count(1)
        self.stateless = _Session("", self.profile.name)  # 2026-07-28: one scope for all
        self.ended: deque[str] = deque(maxlen=1024)  # ids ended by DELETE (bounded)

    # -- ASGI ------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] != self.path:
            await _plain(send, 404, "not found")
            return
        origin = headers.get("origin")
        if "origin-ignored" not in self.faults and (
            not _loopback_host(headers.get("host")) or (origin is not None and not _loopback_origin(origin))
        ):
            await _plain(send, 403, "forbidden: Origin or Host is not this server's")  # DNS rebinding
            return
        cors = self._cors(origin)
        method = scope["method"]
        if method == "OPTIONS":
            await _respond(
                send,
                204,
                b"",
                [
                    *cors,
                    ("access-control-allow-methods", "GET, POST, DELETE"),
                    ("access-control-allow-headers", "*"),
                ],
            )
            return
        if method == "POST":
            body = await _body(receive)
            await self._post(headers, body, cors, scope, receive, send)
        elif method == "GET":
            await self._get(headers, cors, scope, receive, send)
        elif method == "DELETE":
            await self._delete(headers, cors, send)
        else:
            await _respond(send, 405, b"", [*cors, ("allow", "GET, POST, DELETE")])

    def _cors(self, origin: str | None) -> list[tuple[str, str]]:
        if origin is None:
            return []
        headers = [("access-control-allow-origin", origin), ("vary", "Origin")]
        if "missing-expose-headers" not in self.faults:
            headers.append(("access-control-expose-headers", EXPOSED))
        return headers

    # -- POST ------------------------------------------------------------------------

    async def _post(
        self,
        headers: dict[str, str],
        body: bytes | None,
        cors: list[tuple[str, str]],
        scope: Any,
        receive: Any,
        send: Any,
    ) -> None:
        accept = headers.get("accept")
        if "strict-accept" in self.faults:
            ok = accept == "application/json, text/event-stream"
        else:
            ok = acceptable(accept, JSON) and acceptable(accept, "text/event-stream") and accept is not None
        if not ok:
            await _error(
                send,
                406,
                None,
                -32600,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                cors,
            )
            return
        ctype = headers.get("content-type")
        ok = ctype == JSON if "strict-content-type" in self.faults else media_type(ctype) == JSON
        if not ok:
            await _error(send, 415, None, -32600, "Unsupported Media Type: send application/json", cors)
            return
        if body is None:
            await _error(send, 413, None, -32600, "request body too large", cors)
            return
        try:
            message = json.loads(body)
        except ValueError:
            await _error(send, 400, None, -32700, "Parse error", cors)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await _error(send, 400, None, -32600, "Invalid Request: one JSON-RPC message per POST", cors)
            return
        ident, method = message.get("id"), message.get("method")
        if self.profile.request_headers:
            problem = self._modern_headers(headers, message)
            if problem is not None:
                code, text = problem
                await _error(send, 400, ident, code, text, cors)
                return
            session = self.stateless
        elif self.stateless_mode:
            session = self.stateless
            if method == "initialize":
                session.version = self._new_session(message, register=False).version
        elif method == "initialize":
            session = self._new_session(message)
        else:
            found = await self._session(headers, send, cors)
            if found is None:
                return
            session = found
        if method is None or "id" not in message:
            waiting = self.asked.pop(message.get("id"), None) if method is None else None
            if waiting is not None and not waiting.done():
                waiting.set_result(message)  # the client's answer to a request of ours
            await _respond(send, 202, b"", cors)  # a notification or a response: accepted
            return
        if method == "tools/list" and "rate-limit-burst" in self.faults and not session.rate_limited:
            session.rate_limited = True
            await _error(send, 429, ident, -32000, "rate limited", [*cors, ("retry-after", "1")])
            return
        extra = list(cors)
        if session.ident:
            extra.append(("mcp-session-id", session.ident))
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": session.version,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": SERVER_INFO,
            }
            await self._answer(send, scope, receive, session, ident, result, extra)
        elif method == "ping" and not self.profile.request_headers:  # 2026-07-28 removed ping
            await self._answer(send, scope, receive, session, ident, {}, extra)
        elif method == "server/discover" and self.profile.request_headers:
            discovered = {
                "supportedVersions": [self.profile.name],
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": SERVER_INFO,
            }
            await self._answer(send, scope, receive, session, ident, discovered, extra)
        elif method == "tools/list":
            await self._answer(send, scope, receive, session, ident, {"tools": TOOLS}, extra)
        elif method == "tools/call":
            await self._call(send, scope, receive, session, message, extra)
        else:
            await _error(send, 200, ident, -32601, f"Method not found: {method}", extra)

    def _modern_headers(self, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, str] | None:
        """2026-07-28: the headers must agree with the body (requests only)."""
        if "id" not in message or "method" not in message:
            return None
        version = (headers.get("mcp-protocol-version") or "").strip() or None
        params = _object(message.get("params"))
        meta = _object(params.get("_meta"))
        meta_version = meta.get(META_VERSION)
        if version is None or (meta_version is not None and meta_version != version):
            return -32020, "MCP-Protocol-Version is missing or disagrees with the body"
        if (headers.get("mcp-method") or "").strip() != message["method"]:
            return -32020, "Mcp-Method disagrees with the body"
        field_name = NAME_FIELDS.get(message["method"])
        if field_name is not None and decode_name(headers.get("mcp-name")) != params.get(field_name):
            return -32020, "Mcp-Name disagrees with the body"
        if version not in KNOWN_VERSIONS:
            return -32022, f"Unsupported protocol version: {version}"
        return None

    def _new_session(self, message: dict[str, Any], *, register: bool = True) -> _Session:
        params = _object(message.get("params"))
        wanted = params.get("protocolVersion")
        version = wanted if wanted in KNOWN_VERSIONS and wanted != "2026-07-28" else self.profile.name
        session = _Session(uuid.uuid4().hex, version)
        if not register:
            return session
        self.sessions[session.ident] = session
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return session

    async def _session(
        self, headers: dict[str, str], send: Any, cors: list[tuple[str, str]]
    ) -> _Session | None:
        """The request's session, or an answer: 400 without an id, 404 for an unknown one."""
        ident = headers.get("mcp-session-id")
        if ident is None:
            await _error(send, 400, None, -32600, "Bad Request: Mcp-Session-Id required", cors)
            return None
        session = self.sessions.get(ident)
        if session is None and "stale-session-accepted" in self.faults and ident not in self.ended:
            session = self.sessions[ident] = _Session(ident, self.profile.name)
        if session is None:
            status = 400 if "unknown-session-400" in self.faults else 404
            await _error(send, status, None, -32001, "Session not found", cors)
            return None
        version = headers.get("mcp-protocol-version")
        if version is not None and version.strip() not in KNOWN_VERSIONS:
            await _error(send, 400, None, -32600, f"Unsupported protocol version: {version}", cors)
            return None
        return session

    # -- answers and streams -----------------------------------------------------------

    async def _answer(
        self,
        send: Any,
        scope: Any,
        receive: Any,
        session: _Session,
        ident: Any,
        result: dict[str, Any],
        extra: list[tuple[str, str]],
    ) -> None:
        reply = {"jsonrpc": "2.0", "id": ident, "result": result}
        if self.json_response:
            await _respond(send, 200, json.dumps(reply).encode(), [("content-type", JSON), *extra])
            return
        stream = self._open_stream(session)
        self._emit(session, stream, reply)
        stream.finish()
        await self._serve_stream(scope, receive, send, session, stream, 0, extra)

    async def _call(
        self,
        send: Any,
        scope: Any,
        receive: Any,
        session: _Session,
        message: dict[str, Any],
        extra: list[tuple[str, str]],
    ) -> None:
        params = _object(message.get("params"))
        name, arguments = params.get("name"), params.get("arguments") or {}
        token = _object(params.get("_meta")).get("progressToken")
        ident = message["id"]
        if name == "echo":
            await self._answer(
                send, scope, receive, session, ident, _text(str(arguments.get("text", ""))), extra
            )
        elif name == "big":
            size = min(int(arguments.get("size", 4 << 20)), 64 << 20)
            await self._answer(send, scope, receive, session, ident, _text("x" * size), extra)
        elif name == "structured":
            n = arguments.get("n", 1)
            value: Any = "not an integer" if "output-schema-violation" in self.faults else n
            result: dict[str, Any] = {
                "content": [{"type": "text", "text": json.dumps({"value": value})}],
                "structuredContent": {"value": value},
            }
            await self._answer(send, scope, receive, session, ident, result, extra)
        elif name == "ask" and not self.json_response and not self.profile.request_headers:
            stream = self._open_stream(session)
            self._spawn(self._ask(session, stream, ident, str(arguments.get("question", "?"))))
            await self._serve_stream(scope, receive, send, session, stream, 0, extra)
        elif name == "countdown":
            count = max(0, min(int(arguments.get("count", 20)), 10_000))
            delay = max(0.0, min(float(arguments.get("delay", self.countdown_delay)), 5.0))
            size = max(0, min(int(arguments.get("size", self.result_size)), 64 << 20))
            if self.json_response:
                await asyncio.sleep(count * delay)
                await self._answer(send, scope, receive, session, ident, _text(_filler(size)), extra)
                return
            stream = self._open_stream(session)
            self._spawn(self._countdown(session, stream, ident, token, count, delay, size))
            await self._serve_stream(scope, receive, send, session, stream, 0, extra)
        else:
            result = {**_text(f"unknown tool {name!r}"), "isError": True}
            await self._answer(send, scope, receive, session, ident, result, extra)

    def _spawn(self, work: Any) -> None:
        """Run a tool in the background: it goes on whether or not anyone reads its stream."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _countdown(
        self, session: _Session, stream: _Stream, ident: Any, token: Any, count: int, delay: float, size: int
    ) -> None:
        """Runs to the end whether or not anyone reads: a cut client resumes from the store."""
        for i in range(1, count + 1):
            await asyncio.sleep(delay)
            if token is not None:
                note = {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i, "total": count},
                }
                self._emit(session, stream, note)
                if "broadcast-two-streams" in self.faults:
                    for queue in session.listeners:
                        queue.put_nowait(encode_event(json.dumps(note), event="message"))
        self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "result": _text(_filler(size))})
        stream.finish()

    async def _ask(self, session: _Session, stream: _Stream, ident: Any, question: str) -> None:
        """Ask the client (sampling/createMessage on the request's stream), then answer with
        what it said; 10 s at most."""
        asked = f"srv-{next(self.asking)}"
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.asked[asked] = waiting
        sampling = {
            "messages": [{"role": "user", "content": {"type": "text", "text": question}}],
            "maxTokens": 16,
        }
        self._emit(
            session,
            stream,
            {"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage", "params": sampling},
        )
        try:
            answer = await asyncio.wait_for(waiting, 10.0)
            text = json.dumps(answer.get("result", answer.get("error")))
        except asyncio.TimeoutError:
            text = "no answer"
        finally:
            self.asked.pop(asked, None)
        self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "result": _text(text)})
        stream.finish()

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
            if "duplicate-event-ids" in self.faults:
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

    async def _serve_stream(
        self,
        scope: Any,
        receive: Any,
        send: Any,
        session: _Session,
        stream: _Stream,
        after: int,
        extra: list[tuple[str, str]],
    ) -> None:
        ctype = "text/plain" if "wrong-content-type" in self.faults else "text/event-stream"
        source = self._follow(stream, after)
        if "buffered-stream" in self.faults:
            source = _held_back(source)
        app = EventStreamResponse(source, keepalive=0, headers=[("content-type", ctype), *extra])
        await app(scope, receive, send)

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

    async def _get(
        self, headers: dict[str, str], cors: list[tuple[str, str]], scope: Any, receive: Any, send: Any
    ) -> None:
        if not self.profile.get_stream or self.stateless_mode or "no-get" in self.faults:
            await _respond(send, 405, b"", [*cors, ("allow", "POST")])
            return
        if (
            not acceptable(headers.get("accept"), "text/event-stream")
            or headers.get("accept") is None
            or ("strict-accept" in self.faults and headers.get("accept") != "text/event-stream")
        ):
            await _error(send, 406, None, -32600, "Not Acceptable: Accept must list text/event-stream", cors)
            return
        session = await self._session(headers, send, cors)
        if session is None:
            return
        extra = [*cors, ("mcp-session-id", session.ident)]
        cursor = headers.get("last-event-id")
        if cursor is not None:
            await self._resume(session, cursor, scope, receive, send, extra)
            return
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1024)
        session.listeners.append(queue)
        try:
            keepalive = 0 if "no-keepalives" in self.faults else self.keepalive
            ctype = "text/plain" if "wrong-content-type" in self.faults else "text/event-stream"
            app = EventStreamResponse(
                _listen(self, session, queue), keepalive=keepalive, headers=[("content-type", ctype), *extra]
            )
            await app(scope, receive, send)
        finally:
            session.listeners.remove(queue)

    async def _resume(
        self,
        session: _Session,
        cursor: str,
        scope: Any,
        receive: Any,
        send: Any,
        extra: list[tuple[str, str]],
    ) -> None:
        """Replay the cursor's stream after it, or refuse explicitly when it cannot."""
        found = session.by_event.get(cursor)
        stream = session.streams.get(found[0]) if found else None
        if stream is None or found is None:
            await _error(
                send,
                409,
                None,
                -32000,
                "cannot resume: unknown Last-Event-ID",
                [*extra, ("retry-after", "1")],
            )
            return
        seq = found[1]
        if stream.evicted > seq:  # events after the cursor were evicted: refuse, never fake it
            if "torn-replay-after-eviction" in self.faults:  # a fresh stream, new ids, a gap
                fresh = self._open_stream(session, size=len(stream.events) + 1)  # served whole
                for _, _, message in list(stream.events):
                    if message is not None:
                        self._emit(session, fresh, message)
                fresh.finish()
                await self._serve_stream(scope, receive, send, session, fresh, 0, extra)
                return
            await _error(
                send,
                409,
                None,
                -32000,
                "cannot resume: events after Last-Event-ID were evicted",
                [*extra, ("retry-after", "1")],
            )
            return
        after = seq - 1 if "replay-before-cursor" in self.faults else seq
        await self._serve_stream(scope, receive, send, session, stream, after, extra)

    async def _delete(self, headers: dict[str, str], cors: list[tuple[str, str]], send: Any) -> None:
        if self.stateless_mode:
            await _respond(send, 405, b"", [*cors, ("allow", "POST")])
            return
        session = await self._session(headers, send, cors)
        if session is None:
            return
        if "delete-not-invalidating" not in self.faults:
            self.sessions.pop(session.ident, None)
            self.ended.append(session.ident)
        await _respond(send, 200, b"", cors)


async def _listen(
    server: ReferenceServer, session: _Session, queue: asyncio.Queue[bytes]
) -> AsyncIterator[bytes]:
    """The standalone GET stream: a priming event, then what the server sends on its own."""
    if server.profile.priming:
        stream = server._open_stream(session)
        stream.finish()
        yield stream.events[0][1]
    while True:
        yield await queue.get()


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
