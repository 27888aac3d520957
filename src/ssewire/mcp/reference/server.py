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

With ``conformance=True`` (``ssewire serve --conformance``) it is also the official
conformance suite's fixture (``fixture.py``): its tools, prompts, resources, completion and
logging in the sessions, and 2026-07-28 answered statelessly at the same URL beside them.

Shaped like the official SDKs' transports: one handler per HTTP method and per JSON-RPC
method, the inbound ladder of the protocol layer climbed before dispatch (a refusal is raised
as ``Refused``), sessions in the server core's table and streams in its event log, faults
as the typed set of ``faults.py``. Tools that stream run as tasks the server owns: their
failures are kept in ``errors`` and logged, their streams end whatever happens, and the
ASGI lifespan shutdown cancels and awaits them.

Every peer is untrusted, so everything a client can make it hold is bounded, each bound a
constructor option: the request body (413, read no further), the sessions (the least
recently used idle one makes room, or 503 when all are in use), idle sessions (dropped),
the events kept per stream and in all (the oldest go; a reader or a resumption that needed
them is cut or refused, never given a silent gap) and the background tasks ("server busy").
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ...asgi import EventStreamResponse
from ..protocol import inbound
from ..protocol.codes import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_ERROR, SESSION_NOT_FOUND
from ..protocol.inbound import Refusal
from ..protocol.profiles import KNOWN_VERSIONS, NEWEST_WITH_SESSIONS, PROFILES, resolve
from ..protocol.wire import BOTH, JSON, SSE
from ..server.asgi import (
    Refused,
    climb,
    error_message,
    not_allowed,
    refuse,
)
from ..server.front import Front, Request
from ..server.log import EventLog, Gap, Stream, event_id, follow, parse_event_id, written
from ..server.sessions import SessionsFull, SessionTable
from . import fixture
from .faults import Fault
from .faults import resolve as resolve_faults
from .stateless import Modern, check_request, error_status, is_modern
from .tools import (
    TOOLS,
    InvalidArgument,
    as_object,
    filler,
    integer_argument,
    number_argument,
    text_result,
)

logger = logging.getLogger(__name__)

SERVER_INFO = {"name": "ssewire-reference", "version": "1"}
# The defaults of the bounds (the constructor's docstring says why each value).
MAX_BODY = 1 << 20
MAX_SESSIONS = 64
SESSION_IDLE_TIMEOUT = 600.0
MAX_STREAMS = 64
MAX_STORE_BYTES = 256 << 20
MAX_TASKS = 64
BUSY_RETRY_AFTER = 5  # seconds a client refused for want of room waits: a session frees when a call ends
RETRY_MS = 1000
MAX_ERRORS = 64  # failures of background tasks kept for inspection (bounded)

BODY_TIMEOUT = 30.0  # seconds a request body may take: a stalled upload holds the server no longer


@dataclass(eq=False)
class _Session:
    ident: str
    version: str
    streams: dict[int, Stream] = field(default_factory=dict)  # in the order they were opened
    listeners: list[Stream] = field(default_factory=list)  # the standalone GET streams open now
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    rate_limited: bool = False
    capabilities: dict[str, Any] = field(default_factory=dict)  # the client's, from initialize
    log_level: str | None = None  # logging/setLevel (conformance mode)
    open_streams: int = 0  # responses being written to its client now
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # its running producers

    @property
    def busy(self) -> bool:
        """Work in flight: a stream open to its client, or a producer that may still be resumed."""
        return self.open_streams > 0 or bool(self.tasks)

    @property
    def working(self) -> bool:
        """Busy with more than a standalone GET stream: a session only listening may make
        room for a new one (its stream ends; its client re-initializes on the 404), or one
        client holding idle GET streams would lock every other out."""
        return self.open_streams > len(self.listeners) or bool(self.tasks)


_Http = Request  # one HTTP request as the handlers see it: the front's


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
        return as_object(self.message.get("params"))

    @property
    def session_header(self) -> list[tuple[str, str]]:
        return [("mcp-session-id", self.session.ident)] if self.session.ident else []

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The headers of its answer of its own: the session id when there is one (the front
        adds CORS to every answer)."""
        return self.session_header


@dataclass
class _Cut:
    """Where a call's own response ends before its stream does (2025-11-25 polling): the
    event the tool closed the connection after; None while the connection stays."""

    at: int | None = None


_Handler = Callable[[_Call], Awaitable[None]]
_Tool = Callable[[_Call, dict[str, Any]], Awaitable[None]]


class ReferenceServer:
    """An ASGI application: ``uvicorn.run(ReferenceServer(), host="127.0.0.1")``.

    The bounds against a hostile client, and why their defaults:

    - ``max_body`` (1 MiB): a POST body past it is answered 413 and not read further. The
      largest request this server takes is a client's answer to ``ask``, a few KiB; 1 MiB is
      room for any initialize, and a quarter of the official Python SDK server's 4 MiB cap.
    - ``max_sessions`` (64): a new initialize at the cap drops the least recently used
      session with no running tool and no open stream but its standalone GET stream (which
      then ends; its client gets 404 and initializes again, as the spec provides); when every
      session is working it is refused with 503 and ``Retry-After``, so work in flight is
      never cut to make room for a flood of initializes.
    - ``session_idle_timeout`` (600 s): a session with no request and no open stream for
      that long is dropped (swept at each request, no task of its own). Long enough that a
      client pausing between calls rarely pays a re-initialize; the cap bounds a flood anyway.
    - ``store_size`` (16 events) per stream, the standalone GET stream included, and
      ``max_streams`` (64) per session, finished streams dropped first, the oldest running
      one only when all run: the resumption window of the last few calls.
    - ``max_store_bytes`` (256 MiB) over all sessions: past it, finished streams go first
      (oldest first), then the oldest events of running ones. 64 default ``big`` answers, so
      recent answers stay resumable while a client asking for 64 MiB answers cannot pile them.
    - ``max_tasks`` (64): tools that stream (``countdown``, ``ask``) run as tasks; past the
      cap a call is answered -32000 "server busy" instead of starting one. One long call per
      session at the session cap.

    ``conformance=True``: the official conformance suite's fixture as well (``fixture.py``),
    2026-07-28 served statelessly beside the sessions; it needs a profile with sessions.
    """

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
        max_body: int = MAX_BODY,
        max_sessions: int = MAX_SESSIONS,
        session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
        max_streams: int = MAX_STREAMS,
        max_store_bytes: int = MAX_STORE_BYTES,
        max_tasks: int = MAX_TASKS,
        conformance: bool = False,
    ) -> None:
        for name, bound in (
            ("store_size", store_size),
            ("max_body", max_body),
            ("max_sessions", max_sessions),
            ("max_streams", max_streams),
            ("max_store_bytes", max_store_bytes),
            ("max_tasks", max_tasks),
        ):
            if bound < 1:
                raise ValueError(f"{name} must be at least 1, not {bound}")
        if not session_idle_timeout > 0:  # NaN too
            raise ValueError(f"session_idle_timeout must be > 0 seconds, not {session_idle_timeout}")
        self.profile, _ = resolve(profile)
        if conformance and (
            stateless or not self.profile.sessions
        ):  # 2026-07-28 beside sessions, not instead
            raise ValueError(
                "conformance mode serves sessions (a 2025 profile, not stateless) and 2026-07-28 beside them"
            )
        # the conformance surface (fixture.py): None unless asked for, so faults meet the plain server
        self.fixture: Modern | None = Modern(SERVER_INFO) if conformance else None
        self.faults: frozenset[Fault] = resolve_faults(faults)  # an unknown name: UnknownFault
        self.keepalive = keepalive
        self.store_size = store_size
        self.json_response = json_response
        self.path = path
        self.countdown_delay = countdown_delay  # countdown's default pause between notifications
        self.result_size = result_size  # countdown's default result: a multi-MB text block
        self.retry_ms = retry_ms  # the retry field of every priming event
        self.stateless_mode = stateless or not self.profile.sessions  # no Mcp-Session-Id at all
        self.max_body = max_body
        self.max_sessions = max_sessions
        self.session_idle_timeout = session_idle_timeout
        self.max_streams = max_streams
        self.max_store_bytes = max_store_bytes
        self.max_tasks = max_tasks
        self.clock: Callable[[], float] = time.monotonic  # replaceable: tests move time on
        self.sessions: SessionTable[_Session] = SessionTable(
            max_sessions=max_sessions, idle_timeout=session_idle_timeout, clock=lambda: self.clock()
        )
        # every kept stream; one forgotten leaves its session's index too
        self.log = EventLog(max_bytes=max_store_bytes, max_events=store_size, on_forget=self._forgotten)
        self.tasks: set[asyncio.Task[None]] = set()  # running producers, held until done
        self.errors: deque[BaseException] = deque(maxlen=MAX_ERRORS)  # what those tasks raised
        self.asked: dict[Any, asyncio.Future[dict[str, Any]]] = {}  # our requests to clients, by id
        self.asking = itertools.count(1)
        self.stateless = _Session("", self.profile.name)  # 2026-07-28: one scope for all
        self.ended: deque[str] = deque(maxlen=1024)  # ids ended by DELETE (bounded)
        self.front = Front(
            path=path,
            handlers={"POST": self._post, "GET": self._get, "DELETE": self._delete},
            name="server",
            max_body=max_body,
            body_timeout=BODY_TIMEOUT,
            shutdown=self.aclose,
            # the faults: a server that trusts any Host and Origin, one that hides its headers
            trusts=(lambda headers, scope: True) if Fault.ORIGIN_IGNORED in self.faults else None,
            expose_headers=Fault.MISSING_EXPOSE_HEADERS not in self.faults,
            before=self._before,
        )
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
        if self.fixture is not None:
            shared = {
                "prompts/list": lambda params: fixture.prompts_list(params, modern=False),
                "prompts/get": fixture.prompts_get,
                "resources/list": fixture.resources_list,
                "resources/templates/list": fixture.templates_list,
                "resources/read": fixture.resources_read,
                "resources/subscribe": fixture.subscribe,
                "resources/unsubscribe": fixture.subscribe,
                "completion/complete": fixture.complete,
            }
            methods.update({name: self._answering(handler) for name, handler in shared.items()})
            methods["logging/setLevel"] = self._set_level
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
        if self.fixture is not None:
            tools.update({tool["name"]: self._fixture_tool for tool in fixture.SESSION_TOOLS})
        return tools

    # -- ASGI ------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.front(scope, receive, send)

    async def _before(self) -> None:
        self._drop_idle_sessions()

    async def aclose(self) -> None:
        """Cancel the tasks this server started and wait for them (the lifespan shutdown
        calls it): nothing outlives the app, and each cancelled producer ends its stream."""
        if self.fixture is not None:
            self.fixture.close()
        running = list(self.tasks)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    # -- the inbound ladder: the protocol layer's rules, a fault replacing one ----------

    def _post_rules(self) -> tuple[inbound.HeaderRule, ...]:
        rules = inbound.POST_HEADERS
        if Fault.STRICT_ACCEPT in self.faults:
            rules = tuple(_exact_post_accept if rule is inbound.post_accept else rule for rule in rules)
        if Fault.STRICT_CONTENT_TYPE in self.faults:
            rules = tuple(
                _exact_content_type if rule is inbound.json_content_type else rule for rule in rules
            )
        return rules

    def _get_rules(self) -> tuple[inbound.HeaderRule, ...]:
        if Fault.STRICT_ACCEPT in self.faults:
            return (*inbound.GET_HEADERS, _exact_stream_accept)
        return inbound.GET_HEADERS

    def _session(self, headers: dict[str, str]) -> _Session:
        """The request's session: 400 without an id or for an unknown MCP-Protocol-Version
        (the ladder's), 404 for an unknown session."""
        climb(inbound.SESSION_HEADERS, headers)
        ident = headers["mcp-session-id"]
        session = self.sessions.use(ident)
        if session is None and Fault.STALE_SESSION_ACCEPTED in self.faults and ident not in self.ended:
            session = self._add_session(ident, self.profile.name)
        if session is None:
            status = 400 if Fault.UNKNOWN_SESSION_400 in self.faults else 404
            raise refuse(status, SESSION_NOT_FOUND, "Session not found")
        return session

    # -- POST ------------------------------------------------------------------------

    async def _post(self, http: _Http) -> None:
        """Climb the ladder in the front's order (its headers; its session, before a byte of
        the body is read; the body and its message), then hand the message to its handler."""
        climb(self._post_rules(), http.headers)
        known = None
        if "mcp-session-id" in http.headers and not (self.profile.request_headers or self.stateless_mode):
            known = self._session(http.headers)  # 404 for an unknown one: its body is never read
        async with http.reading() as (message, _):
            pass  # small (under max_body): what the handlers need of it is the message
        if self.fixture is not None and known is None and is_modern(http.headers, message):
            await self.fixture.post(http, message)  # 2026-07-28 beside the sessions: on its own
            return
        if self.profile.request_headers and "id" in message and "method" in message:
            try:  # the fixture's rules: one set for both ways this server speaks 2026-07-28
                check_request(http.headers, message)
            except fixture.CallError as failed:
                refusal = error_message(message["id"], failed.code, failed.text, failed.data)
                status = error_status(failed.code)
                await http.respond(status, [("content-type", JSON)], json.dumps(refusal).encode())
                return
        session = self._post_session(http.headers, message, known)
        if message.get("method") is None:
            await self._client_response(http, message)
        elif "id" not in message:
            await http.respond(202, [])  # a notification: accepted
        else:
            await self._dispatch(_Call(http, session, message))

    def _post_session(
        self, headers: dict[str, str], message: dict[str, Any], known: _Session | None
    ) -> _Session:
        """The session a POST belongs to (``known``: the one its header named, found before
        its body was read); initialize opens one (2025 revisions with sessions)."""
        if self.profile.request_headers:
            return self.stateless  # its headers and _meta were checked (check_request)
        if self.stateless_mode:
            return self.stateless  # initialize answers the version its own message negotiates
        if message.get("method") == "initialize":
            return self._new_session(message)
        return known or self._session(headers)

    async def _client_response(self, http: _Http, message: dict[str, Any]) -> None:
        """The client's answer to a request of ours (``ask``): it wakes the waiting tool."""
        waiting = self.asked.pop(message.get("id"), None)
        if waiting is None or waiting.done():
            raise Refused(inbound.unasked_answer(None))
        waiting.set_result(message)
        await http.respond(202, [])

    async def _dispatch(self, call: _Call) -> None:
        method = call.message["method"]
        handler = self._methods.get(method) if isinstance(method, str) else None
        if handler is None:
            await self._fail(call, METHOD_NOT_FOUND, f"Method not found: {str(method)[:64]}")
            return
        await handler(call)

    # -- JSON-RPC methods --------------------------------------------------------------

    async def _initialize(self, call: _Call) -> None:
        served = {"tools": {"listChanged": True}}
        if self.fixture is not None:
            served = fixture.capabilities(modern=False)
            call.session.capabilities = as_object(call.params.get("capabilities"))
        result = {
            "protocolVersion": self._negotiate(call.message),  # per request: never shared state
            "capabilities": served,
            "serverInfo": SERVER_INFO,
        }
        await self._answer(call, result)

    def _answering(self, handler: Callable[[dict[str, Any]], dict[str, Any]]) -> _Handler:
        """A method of the conformance surface: its result, or the JSON-RPC error it raised."""

        async def answer(call: _Call) -> None:
            try:
                result = handler(call.params)
            except fixture.CallError as failed:
                await self._call_error(call, failed)
                return
            await self._answer(call, result)

        return answer

    async def _call_error(self, call: _Call, failed: fixture.CallError) -> None:
        await self._fail(call, failed.code, failed.text, failed.data)

    async def _fail(self, call: _Call, code: int, text: str, data: Any = None) -> None:
        """A JSON-RPC error as JSON: 200 in a session, under 2026-07-28 the status of its code."""
        status = error_status(code) if self.profile.request_headers else 200
        body = json.dumps(error_message(call.ident, code, text, data)).encode()
        await call.http.respond(status, [("content-type", JSON), *call.headers], body)

    async def _set_level(self, call: _Call) -> None:
        try:
            call.session.log_level = fixture.log_level(call.params.get("level"))
        except fixture.CallError as failed:
            await self._call_error(call, failed)
            return
        await self._answer(call, {})

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
            raise refuse(429, SERVER_ERROR, "rate limited", ident=call.ident, headers=[("retry-after", "1")])
        tools = TOOLS if self.fixture is None else [*TOOLS, *fixture.SESSION_TOOLS]
        await self._answer(call, {"tools": tools})

    async def _tools_call(self, call: _Call) -> None:
        params = call.params
        name, arguments = params.get("name"), params.get("arguments")
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            await self._answer(call, {**text_result(f"unknown tool {name!r}"), "isError": True})
            return
        try:
            if arguments is None:
                arguments = {}
            if not isinstance(arguments, dict):
                raise InvalidArgument("arguments must be an object")
            await tool(call, arguments)
        except InvalidArgument as invalid:
            await self._fail(call, INVALID_PARAMS, f"Invalid params: {name}: {invalid}")

    # -- sessions: each a bounded claim on the server ------------------------------------

    def _new_session(self, message: dict[str, Any]) -> _Session:
        try:
            return self._add_session(uuid.uuid4().hex, self._negotiate(message))
        except Refused as refusal:
            raise Refused(dataclasses.replace(refusal.refusal, ident=message.get("id"))) from None

    def _add_session(self, ident: str, version: str) -> _Session:
        """A session, room made for it first (the table drops the least recently used one
        that is not working); when all are working the request is refused (503)."""
        session = _Session(ident, version)
        try:
            dropped = self.sessions.add(ident, session)
        except SessionsFull:
            text = f"Server busy: all {self.max_sessions} sessions are in use; retry later"
            raise refuse(503, SERVER_ERROR, text, headers=[("retry-after", str(BUSY_RETRY_AFTER))]) from None
        for each in dropped:
            self._end_session(each)
        return session

    def _drop_idle_sessions(self) -> None:
        for session in self.sessions.expire():
            self._end_session(session)

    def _drop_session(self, session: _Session) -> None:
        """Forget a session (its id is then 404), its kept streams and its running tools."""
        if self.sessions.get(session.ident) is session:
            self.sessions.pop(session.ident)
        self._end_session(session)

    def _end_session(self, session: _Session) -> None:
        """What goes with a session the table no longer holds."""
        self.ended.append(session.ident)
        for stream in session.listeners:
            self.log.finish(stream)  # its GET stream ends: the client learns of the drop at its next request
        for stream in list(session.streams.values()):
            self.log.forget(stream)  # a Last-Event-ID of it is then refused (409)
        for task in session.tasks:
            task.cancel()  # each producer still ends its stream on the way out

    def _negotiate(self, message: dict[str, Any]) -> str:
        """The version initialize agrees on: the client's if initialize exists in it, else ours."""
        wanted = as_object(message.get("params")).get("protocolVersion")
        return wanted if _negotiable(wanted) else self.profile.name

    # -- tools -------------------------------------------------------------------------

    async def _echo(self, call: _Call, arguments: dict[str, Any]) -> None:
        await self._answer(call, text_result(str(arguments.get("text", ""))))

    async def _big(self, call: _Call, arguments: dict[str, Any]) -> None:
        size = integer_argument(arguments, "size", 4 << 20, high=64 << 20)
        await self._answer(call, text_result("x" * size))

    async def _structured(self, call: _Call, arguments: dict[str, Any]) -> None:
        n = integer_argument(arguments, "n", 1)
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
        count = integer_argument(arguments, "count", 20, high=10_000)
        delay = number_argument(arguments, "delay", self.countdown_delay, high=5.0)
        size = integer_argument(arguments, "size", self.result_size, high=64 << 20)
        if self.json_response:
            await asyncio.sleep(count * delay)
            await self._answer(call, text_result(filler(size)))
            return
        token = as_object(call.params.get("_meta")).get("progressToken")
        await self._streamed(
            call, lambda stream: self._countdown(call.session, stream, token, count, delay, size)
        )

    # -- producers: background work that fills a stream ---------------------------------

    async def _streamed(
        self,
        call: _Call,
        produce: Callable[[Stream], Coroutine[Any, Any, dict[str, Any]]],
        cut: _Cut | None = None,
    ) -> None:
        """Answer on a stream that a task of the server's fills: the task goes on whether or
        not anyone reads, so a cut client resumes from the store (as one whose connection the
        tool closed at ``cut`` does). At ``max_tasks`` running, the call is refused (-32000)
        rather than start one more."""
        if len(self.tasks) >= self.max_tasks:
            text = f"Server busy: {self.max_tasks} tool calls are running; retry later"
            await call.http.error(200, call.ident, SERVER_ERROR, text, call.session_header)
            return
        stream = self._open_stream(call.session)
        self._spawn(self._produce(call.session, stream, call.ident, produce(stream)), call.session)
        await self._serve_stream(call.http, call.session, stream, 0, call.headers, cut=cut)

    async def _produce(
        self, session: _Session, stream: Stream, ident: Any, work: Awaitable[dict[str, Any]]
    ) -> None:
        """Run a producer and answer with its result; its stream ends on every path, so a
        reader (or a GET resuming it) never waits on a producer that failed or was cancelled."""
        try:
            result = await work
        except fixture.CallError as failed:  # a JSON-RPC error the tool chose, not a failure
            error = {"code": failed.code, "message": failed.text}
            if failed.data is not None:
                error["data"] = failed.data
            self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "error": error})
        except Exception:
            error = {"code": INTERNAL_ERROR, "message": "Internal error: the tool failed"}
            self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "error": error})
            raise  # kept in self.errors by _reap
        else:
            self._emit(session, stream, {"jsonrpc": "2.0", "id": ident, "result": result})
        finally:
            self.log.finish(stream)

    def _spawn(self, work: Coroutine[Any, Any, None], session: _Session | None = None) -> None:
        """Run ``work`` as a task of the server's (and of ``session``'s, which stays busy,
        so never dropped, while it runs)."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self._reap)
        if session is not None:
            session.tasks.add(task)

            def done(task: asyncio.Task[None]) -> None:
                self.sessions.touch(session.ident)  # idle from now on, not from its last request
                session.tasks.discard(task)

            task.add_done_callback(done)

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
        self, session: _Session, stream: Stream, token: Any, count: int, delay: float, size: int
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
                for listener in list(session.listeners):
                    self._emit(session, listener, note)
        return text_result(filler(size))

    async def _ask(self, session: _Session, stream: Stream, question: str) -> dict[str, Any]:
        """Ask the client (sampling/createMessage on the request's stream), then answer with
        what it said; 10 s at most."""
        sampling = {
            "messages": [{"role": "user", "content": {"type": "text", "text": question}}],
            "maxTokens": 16,
        }
        try:
            answer = await self._request_client(session, stream, "sampling/createMessage", sampling)
            text = json.dumps(answer.get("result", answer.get("error")))
        except asyncio.TimeoutError:
            text = "no answer"
        return text_result(text)

    async def _request_client(
        self, session: _Session, stream: Stream, method: str, params: dict[str, Any], timeout: float = 10.0
    ) -> dict[str, Any]:
        """Send the client a request on the call's stream and wait for its answer (the whole
        JSON-RPC response), ``timeout`` seconds at most (then asyncio.TimeoutError)."""
        asked = f"srv-{next(self.asking)}"
        waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.asked[asked] = waiting
        try:
            self._emit(session, stream, {"jsonrpc": "2.0", "id": asked, "method": method, "params": params})
            return await asyncio.wait_for(waiting, timeout)
        finally:
            self.asked.pop(asked, None)

    async def _fixture_tool(self, call: _Call, arguments: dict[str, Any]) -> None:
        """A tool of the conformance surface, run as a producer of the call's stream."""
        name, params, session = call.params["name"], call.params, call.session
        cut = _Cut()

        async def produce(stream: Stream) -> dict[str, Any]:
            async def notify(note: dict[str, Any]) -> None:
                self._emit(session, stream, note)

            def close() -> None:
                # an id and a retry field, then the connection ends: the client resumes after it
                cut.at = self._emit(session, stream, None)

            async def ask(method: str, request: dict[str, Any]) -> dict[str, Any]:
                try:
                    return await self._request_client(session, stream, method, request, fixture.ASK_TIMEOUT)
                except asyncio.TimeoutError:
                    raise fixture.CallError(
                        INTERNAL_ERROR, f"the client did not answer {method} in time"
                    ) from None

            channel = fixture.Channel(notify, ask, session.capabilities, session.log_level, close)
            if name in fixture.STATIC_TOOLS:
                return fixture.STATIC_TOOLS[name]
            if name == "test_reconnection":
                return await fixture.reconnection(channel)
            if name == "test_tool_with_progress":
                return await fixture.progress(params, channel)
            if name == "test_tool_with_logging":
                return await fixture.logging_tool(params, channel, modern=False)
            if name == "test_sampling":
                return await fixture.sampling_tool(params, channel)
            return await fixture.elicitation_tool(name, params, channel)

        await self._streamed(call, produce, cut)

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
            self.log.finish(stream)
        del reply, result  # its encoded bytes are kept: the result need not live while they are sent
        await self._serve_stream(call.http, call.session, stream, 0, call.headers)

    # -- the event log: streams kept for resumption, bounded in count and bytes ----------

    def _open_stream(self, session: _Session, size: int | None = None) -> Stream:
        number = next(session.numbers)
        stream = self.log.open((session, number), max_events=size)
        session.streams[number] = stream
        while len(session.streams) > self.max_streams:
            kept = session.streams.values()
            finished = next((each for each in kept if each.done), None)
            if finished is not None:  # finished streams go first: their readers lose nothing
                self.log.forget(finished)
                continue
            # every stream runs: the oldest leaves the session's index (a resumption of it is
            # then refused), but stays in the log for its reader, within the byte budget
            del session.streams[next(iter(session.streams))]
        if self.profile.priming:
            self._emit(session, stream, None)
        return stream

    @staticmethod
    def _forgotten(stream: Stream) -> None:
        key: tuple[_Session, int] = stream.key  # type: ignore[assignment]
        session, number = key
        if session.streams.get(number) is stream:
            del session.streams[number]

    def _emit(self, session: _Session, stream: Stream, message: dict[str, Any] | None) -> int:
        """Store one event, as the server core's log holds them: the message's bytes (``None``:
        the priming event, empty); say its number in the stream. A stream no longer kept
        takes nothing: its reader was cut already."""
        seq = stream.next_seq
        data = b"" if message is None else json.dumps(message).encode()
        # the message itself only for the fault that re-encodes it: kept beside its bytes,
        # it would double what the log holds past what max_store_bytes counts
        kept = message if Fault.TORN_REPLAY_AFTER_EVICTION in self.faults else None
        try:
            self.log.append(stream, [(data, kept)])
        except Gap:
            pass
        return seq

    def _event_id(self, stream: Stream, seq: int) -> str | None:
        """The id event ``seq`` of ``stream`` is written with: the server core's one scheme
        (none without resumability; the duplicate-ids fault restarts them on every stream)."""
        if not self.profile.resumability:
            return None
        if Fault.DUPLICATE_EVENT_IDS in self.faults:
            return str(seq)
        return event_id(_stream_number(stream), seq)

    def _cursor(self, session: _Session, cursor: str) -> tuple[Stream, int] | None:
        """The stream and event a Last-Event-ID names, among those this session indexes
        (None: no event this session wrote)."""
        if Fault.DUPLICATE_EVENT_IDS in self.faults:  # one id on every stream: the newest that reached it
            if not (cursor.isascii() and cursor.isdigit() and len(cursor) < 20 and int(cursor) >= 1):
                return None
            reached = [each for each in session.streams.values() if each.next_seq > int(cursor)]
            return (reached[-1], int(cursor)) if reached else None
        place = parse_event_id(cursor)
        stream = session.streams.get(place[0]) if place is not None else None
        if place is None or stream is None or place[1] >= stream.next_seq:
            return None
        return stream, place[1]

    @property
    def _sse_type(self) -> str:
        return "text/plain" if Fault.WRONG_CONTENT_TYPE in self.faults else SSE

    async def _serve_stream(
        self,
        http: _Http,
        session: _Session,
        stream: Stream,
        after: int,
        headers: list[tuple[str, str]],
        *,
        standalone: bool = False,
        cut: _Cut | None = None,
    ) -> None:
        """Write ``stream`` after ``after`` to the client (up to ``cut``, when the tool closes
        the connection); the session is busy meanwhile. The standalone GET stream has
        keep-alive comments; a call's stream has none."""
        source = self._follow(stream, after, cut)
        keepalive = 0.0
        if standalone:
            keepalive = 0.0 if Fault.NO_KEEPALIVES in self.faults else self.keepalive
            if Fault.IDLE_CLOSE in self.faults:
                source = _ended_when_idle(source, 2 * self.keepalive)
        elif Fault.BUFFERED_STREAM in self.faults:
            source = _held_back(source)
        app = EventStreamResponse(
            source, keepalive=keepalive, headers=[("content-type", self._sse_type), *headers]
        )
        session.open_streams += 1
        try:
            await app(http.scope, http.receive, http.send)
        except ConnectionAbortedError:
            pass  # cut: its client resumes and is refused (409) explicitly, never given a gap
        finally:
            self.sessions.touch(session.ident)  # idle from the end of its last stream (touched
            session.open_streams -= 1  # first: not idle for a moment with a stale time)

    async def _follow(self, stream: Stream, after: int, cut: _Cut | None = None) -> AsyncIterator[bytes]:
        """The stream's events after ``after``, as they are stored, ending after the event
        ``cut`` names (the stream goes on, for a resumption to read). A follower the log
        outran ends with a cut connection, so its client sees a broken stream, never a
        silent gap."""
        try:
            async with aclosing(follow(stream, after)) as batches:
                async for batch in batches:
                    for seq, data, _ in batch:
                        # its pieces as they are: the stored bytes are not copied to be framed
                        for piece in written(self._event_id(stream, seq), data, retry_ms=self.retry_ms):
                            yield piece
                        if cut is not None and cut.at is not None and seq >= cut.at:
                            return
        except Gap:
            raise ConnectionAbortedError("the event log outran this stream's reader") from None

    # -- GET and DELETE ----------------------------------------------------------------

    async def _get(self, http: _Http) -> None:
        """The standalone stream, or with Last-Event-ID a resumption of a stream."""
        if not self.profile.get_stream or self.stateless_mode or Fault.NO_GET in self.faults:
            await not_allowed(http.send, [], "POST")
            return
        climb(self._get_rules(), http.headers)
        session = self._session(http.headers)
        headers = [("mcp-session-id", session.ident)]
        cursor = http.headers.get("last-event-id")
        if cursor is None:
            await self._listen(http, session, headers)
        else:
            await self._resume(http, session, cursor, headers)

    async def _listen(self, http: _Http, session: _Session, headers: list[tuple[str, str]]) -> None:
        """The standalone GET stream: a priming event, then what the server sends on its own.

        It is a stream of the store like any other, so it is bounded the same way and a
        reader that falls ``store_size`` events behind is cut, not silently skipped; it ends
        when its reader leaves (a resumption then replays what is kept, and ends)."""
        stream = self._open_stream(session)
        session.listeners.append(stream)
        try:
            await self._serve_stream(http, session, stream, 0, headers, standalone=True)
        finally:
            session.listeners.remove(stream)
            self.log.finish(stream)

    async def _resume(
        self, http: _Http, session: _Session, cursor: str, headers: list[tuple[str, str]]
    ) -> None:
        """Replay the cursor's stream after it, or refuse explicitly when it cannot."""
        found = self._cursor(session, cursor)
        refusal = [("mcp-session-id", session.ident), ("retry-after", "1")]
        if found is None:
            raise refuse(409, SERVER_ERROR, "cannot resume: unknown Last-Event-ID", headers=refusal)
        stream, seq = found
        if stream.evicted > seq:  # events after the cursor were evicted: refuse, never fake it
            if Fault.TORN_REPLAY_AFTER_EVICTION in self.faults:
                await self._torn_replay(http, session, stream, headers)
                return
            text = "cannot resume: events after Last-Event-ID were evicted"
            raise refuse(409, SERVER_ERROR, text, headers=refusal)
        after = seq - 1 if Fault.REPLAY_BEFORE_CURSOR in self.faults else seq
        await self._serve_stream(http, session, stream, after, headers)

    async def _torn_replay(
        self, http: _Http, session: _Session, stream: Stream, headers: list[tuple[str, str]]
    ) -> None:
        """The torn-replay-after-eviction fault: a fresh stream, new ids, a gap."""
        fresh = self._open_stream(session, size=len(stream.events) + 1)  # served whole
        try:
            for _, _, message in list(stream.events):
                if message is not None:
                    self._emit(session, fresh, message)
        finally:
            self.log.finish(fresh)
        await self._serve_stream(http, session, fresh, 0, headers)

    async def _delete(self, http: _Http) -> None:
        if self.stateless_mode:
            await not_allowed(http.send, [], "POST")
            return
        session = self._session(http.headers)
        if Fault.DELETE_NOT_INVALIDATING not in self.faults:
            self._drop_session(session)
        await http.respond(200, [])


def _stream_number(stream: Stream) -> int:
    """A stream's number in its session (its key in the log is ``(session, number)``)."""
    key: tuple[_Session, int] = stream.key  # type: ignore[assignment]
    return key[1]


def _exact_post_accept(headers: inbound.Headers) -> Refusal | None:
    """The strict-accept fault: the exact string, as a naive server compares it."""
    if headers.get("accept") == BOTH:
        return None
    return inbound.post_accept({})


def _exact_content_type(headers: inbound.Headers) -> Refusal | None:
    """The strict-content-type fault: no parameters, no other spelling."""
    return None if headers.get("content-type") == JSON else inbound.json_content_type({})


def _exact_stream_accept(headers: inbound.Headers) -> Refusal | None:
    return None if headers.get("accept") == SSE else inbound.stream_accept({})


def _negotiable(version: Any) -> TypeGuard[str]:
    """A revision initialize can agree on: a known one that still has initialize (the
    revisions with Mcp-Method headers replaced it with discovery)."""
    if not isinstance(version, str) or version not in KNOWN_VERSIONS:
        return False
    profile = PROFILES.get(version)
    return profile is None or not profile.request_headers


async def _ended_when_idle(source: AsyncIterator[bytes], idle: float) -> AsyncIterator[bytes]:
    """The idle-close fault: the body ends (the server's own close) after ``idle`` seconds
    without an event."""
    events = source.__aiter__()
    while True:
        try:
            yield await asyncio.wait_for(events.__anext__(), idle)
        except (StopAsyncIteration, asyncio.TimeoutError):
            return


async def _held_back(source: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The buffered-stream fault: everything at once, at the end."""
    held = [piece async for piece in source]
    yield b"".join(held)
