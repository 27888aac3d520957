"""An MCP Streamable HTTP client session that never delivers a torn or duplicated message.

The dual-stream session of the 2025 revisions (the standalone GET stream for what the
server sends on its own, one SSE stream per POST) and the 2026-07-28 stateless mode, on
httpx. Every stream goes through one [`ResumptionGuard`][ssewire.mcp.streams.guard.ResumptionGuard]:

- messages are routed by JSON-RPC id whatever stream they arrive on; progress by
  ``progressToken``; server-to-client requests (sampling, roots, elicitation) are answered
  through the handlers the caller registers;
- a broken stream is resumed with GET and ``Last-Event-ID`` (after the server's ``retry``),
  never by re-POSTing the request; an unsafe resumption raises
  [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption]; under 2026-07-28 only a request declared
  idempotent is re-issued, with a new id;
- a 404 for the session re-initializes it (and is counted): the request was never
  processed, so it is sent once more in the new session;
- an idle watchdog counts keep-alive comments as life; nothing waits without a deadline.

    async with Client("http://127.0.0.1:8000/mcp") as client:
        result = await client.call_tool("countdown", {}, on_progress=print)
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import orjson

from ..._envelope import require as require_envelopes
from ...jsonrpc import Body, InvalidMessage, Message, Priming, parsed
from ..protocol import params as mirrored
from ..protocol import requests
from ..protocol.bridging import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LISTEN,
    META_SUBSCRIPTION_ID,
    REQUEST_STATE,
    is_input_required,
)
from ..protocol.codes import INTERNAL_ERROR, METHOD_NOT_FOUND, PARSE_ERROR
from ..protocol.handshake import (
    HandshakeFailed,
    Incoming,
    capabilities,
    client_info,
    handshake,
    supported_versions,
)
from ..protocol.profiles import NEWEST_WITH_SESSIONS, PROFILES, Profile, resolve
from ..protocol.retry import retry_after
from ..protocol.wire import caller_headers
from ..streams.guard import IdParser, ResumptionGuard, UnsafeResumption
from ..streams.ledger import REISSUE, RESUME
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE, Answer, Broken, Idle, NotJSON, send
from ..transport.http import MessageTooLarge as MessageTooLarge  # what a call over the limit raises
from .auth import adapted
from .counters import FIGURES_KEPT as FIGURES_KEPT  # the newest figures kept in each list of statistics
from .counters import ClientStats as ClientStats  # what it counts (``Client.stats``)

CLIENT_INFO = client_info("ssewire")
MAX_RETRY_WAIT = 5.0  # seconds: a server's retry field is honoured up to this
MAX_SERVING = 16  # server-to-client requests handled at once; a flood past it is dropped, not queued
# an answer is read on after its response, to its end, so its connection is reused: for at
# most this long and this many bytes. A server's end of body comes with its last event; one
# that holds an answered stream open (or keeps talking) costs a call no more than this
GRACE, GRACE_BYTES = 0.02, 64 * 1024
TOKEN_PREFIX = "ssewire-p"  # the progress tokens this client hands out: the prefix, then the request id
TRANSIENT = frozenset({409, 425, 429, 500, 502, 503, 504})  # a refused resumption worth one retry
MAX_TOOL_PAGES = 100  # pages of tools/list one list_tools reads
MAX_TOOLS = 10_000  # tools one list_tools keeps: a server listing more is cut there, and logged
MAX_WARNED = 16  # tools set aside that one list_tools names in a log line each; the rest in one
MAX_INPUT_REQUESTS = 32  # input requests one input-required result may carry (2026-07-28)

log = logging.getLogger("ssewire.mcp.client")

# the request whose answer stream carries the message being routed (None: the GET stream);
# set while a batch is routed, so a callback, and a handler's task (which copies the
# context), can tell which call a notification or a server request relates to
_DELIVERING: contextvars.ContextVar[Any] = contextvars.ContextVar("ssewire_delivering", default=None)


def delivering() -> Any:
    """In ``on_notification`` or a handler: the id of the request whose answer stream
    carried the message (a server's request or log relating to that call), or None (the
    GET stream). A relay sends such a message down the stream of the call it relates to."""
    return _DELIVERING.get()


Handler = Callable[[dict[str, Any]], Any]
T = TypeVar("T")


class RPCError(Exception):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.code = error.get("code")
        self.error = error
        super().__init__(f"JSON-RPC error {self.code}: {error.get('message')}")


class StreamBroken(Exception):
    """A stream broke, and neither resumption nor a re-issue is safe: report the failure."""


class Unauthorized(httpx.HTTPStatusError):
    """The server refused the client's credentials (401) or their scope (403): ``challenge``
    is its ``WWW-Authenticate`` header (what it asks for), or None. An HTTP status error
    as any other, with the challenge read out."""

    def __init__(self, response: httpx.Response) -> None:
        self.status, self.challenge = response.status_code, response.headers.get("www-authenticate")
        said = f": {self.challenge}" if self.challenge else " (no WWW-Authenticate challenge)"
        text = f"the server refused the credentials ({self.status}){said}"
        super().__init__(text, request=response.request, response=response)


class RequestTimeout(asyncio.TimeoutError):
    """A request got no answer within its deadline (resumptions included)."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(
            f"{method} got no answer within its {seconds:g} s deadline: it may still be running "
            "on the server; raise timeout= for slow work, or check its effects before sending it again"
        )
        self.method, self.seconds = method, seconds


class InputRequired(Exception):
    """A 2026-07-28 request answered with an input-required result that the client cannot
    satisfy: no handler for an input request, or more rounds than ``max_input_rounds``.
    ``result`` is the last input-required result."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


class _Broken(Exception):
    """A stream ended before its answer (reset, idle timeout, or closed early), after
    ``delivered`` new messages."""

    def __init__(
        self, reason: str, delivered: int = 0, *, clean: bool = False, stream: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.delivered, self.clean = reason, delivered, clean
        self.stream = stream  # a resumption that broke: its name, the chain's now


class _Reissue(Exception):
    """The answer broke and the request is idempotent: send it again with a new id."""


async def _within(work: Awaitable[T], method: str, seconds: float) -> T:
    """``work`` under a request's deadline: past it, `RequestTimeout` naming the method."""
    try:
        return await asyncio.wait_for(work, seconds)
    except asyncio.TimeoutError as exc:
        if isinstance(exc, RequestTimeout):
            raise
        raise RequestTimeout(method, seconds) from None


def _backoff(rounds: int) -> float:
    """Seconds to pause after ``rounds`` fruitless tries in a row: doubling from 50 ms."""
    return min(0.05 * 2.0**rounds, MAX_RETRY_WAIT)


def _lost(what: str) -> StreamBroken:
    """An answer lost for good: say what happened and what the caller can do."""
    return StreamBroken(
        f"{what}; the request may have been processed, so it is not sent again: check its effects, "
        "or pass idempotent=True for a request safe to repeat"
    )


class _SessionGone(Exception):
    """The server answered 404 for the session: the request was never processed."""


@dataclass(eq=False)
class _Pending:
    """One request in flight and all its books: where its response goes, where its answer's
    stream stands, where its progress goes. It lives in one table, ``Client._requests``,
    under its JSON-RPC id (and its progress token), from its sending to its end
    (``Client._booked``), so nothing of a request can outlive it in one table but not another."""

    ident: Any  # its JSON-RPC id on the wire now (a re-issue gives it a new one)
    future: asyncio.Future[dict[str, Any]]  # its response message
    on_progress: Callable[[dict[str, Any]], Any] | None = None
    token: str | None = None  # the progress token it was sent with (the id it was first sent under)
    cursor: str | None = None  # the cursor of its answer so far, while unanswered (``Client.position``)
    times: list[float] = field(default_factory=list)  # when each progress notification came


async def _stop(tasks: list[asyncio.Task[Any]], within: float = 5.0) -> None:
    """Cancel ``tasks`` and wait (bounded) until they end. Cancelled again and again:
    before Python 3.12, ``asyncio.wait_for`` swallows a cancellation that meets the end of
    what it waits for, and a stream that keeps talking would then never stop."""
    deadline = time.monotonic() + within
    while tasks and time.monotonic() < deadline:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=0.05)
        tasks = [task for task in tasks if not task.done()]


class Client:
    """One MCP session over Streamable HTTP, used as an async context manager.

    ``async with Client(url) as client`` negotiates the revision, opens the session and (in
    a 2025 session) the standalone GET stream; leaving the block ends the session (DELETE)
    and closes what the client opened.

    A session can outlive one client: a relay (the gateway) opens it with ``listen=False``
    and the downstream client's ``capabilities`` and ``info``, tells each request's id from
    ``reply(on_sent=)`` and its answer's `position`, so that another process can `attach`
    to the session and `resume_call` the answer; it closes with ``close(end_session=False)``
    when others still hold the session (docs/client.md, "Taking up and handing over a
    session"). ``session`` is the session id now: a 404 re-initializes, and changes it.

    :param url: the MCP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
    :param profile: the revision to speak (``"2025-11-25"``, ``"2026-07-28"``, an alias such as
        ``"stable-2025-11-25"``). None: try 2026-07-28 ``server/discover`` first, then
        initialize under 2025-11-25. An unknown name is an ``UnknownProfile`` (a ``ValueError``).
    :param handlers: answers to the server's own requests, by method
        (``"sampling/createMessage"``, ``"roots/list"``, ``"elicitation/create"``): a function
        of the request's params returning the result (or an awaitable of it). The matching
        capabilities are declared at initialize; a request without a handler is refused with
        a JSON-RPC error.
    :param on_notification: called with every notification that is not a call's progress
        (log messages, list changes), from whichever stream it came on.
    :param idle_timeout: seconds a stream may stay silent (keep-alive comments count as life)
        before it is taken as broken and resumed; keep it above the server's keep-alive
        interval (15 s for both official SDKs).
    :param timeout: the deadline of one request, resumptions included, in seconds.
    :param parse_id: reads an event id as ``(stream, position)``, so that a resumed stream
        that steps back or restarts is caught even before a copy arrives; None trusts
        nothing about the ids' shape.
    :param max_resumptions: resumptions in a row that bring no new message before a call
        fails with ``StreamBroken`` (a resumption that delivers one starts the count again;
        the request's deadline bounds them all); the re-issues of an idempotent request
        count the same way.
    :param listen: open the standalone GET stream (2025 revisions) for what the server
        sends on its own.
    :param headers: extra headers for every request, e.g. ``{"Authorization": "Bearer ..."}``;
        a header the transport sets itself (Accept, Content-Type, Mcp-Session-Id, ...) is a
        ``ValueError``.
    :param auth: the authentication of every request, as you have it: an ``httpx.Auth``
        (``httpx.BasicAuth``, authlib's ``OAuth2Auth``...), an ``httpx2.Auth`` (the MCP SDK's
        ``OAuthClientProvider``: its flow is driven over this client's connections), or a
        (user, password) pair.
    :param http: an ``httpx.AsyncClient`` of your own (proxies, TLS, transports); then give
        headers and auth to it rather than here. Its read timeout should be None: the client
        keeps its own deadlines.
    :param max_message_size: bytes one message may take (an SSE event's data, a JSON answer);
        a call whose answer goes over it raises ``MessageTooLarge`` (the session goes on); on
        the GET stream such an event is dropped. None: no limit.
    :param capabilities: the client capabilities to declare, in place of those the
        ``handlers`` imply (a gateway declares its downstream client's).
    :param info: the ``clientInfo`` to send at initialize (ssewire's by default; a gateway
        sends its downstream client's).
    :param first_id: the first JSON-RPC id this client sends; clients sharing a session
        (gateway replicas) start far apart, so their ids never meet.
    :param max_input_rounds: under 2026-07-28, the input-required results one `request` answers
        (through ``handlers``) before it gives up with `InputRequired`.
    :param meta_client_info: under 2026-07-28, put ``info`` in every request's ``_meta``
        (``io.modelcontextprotocol/clientInfo``); a relay that forwards its client's ``_meta``
        as it came turns it off.
    :param on_transport_event: told ``(kind, details)`` where the statistics count a
        ``"reset"`` (a stream or answer broke), a ``"resumption"`` (a broken stream resumed
        with Last-Event-ID), a ``"reissue"`` (an idempotent request sent again under a new
        id) or a ``"reinitialization"`` (a new session after a 404); details name the
        request id (``"request"``), the attempt or the stream (``"stream": "get"``), never a
        payload or a URL. What it raises is logged, never the client's failure.
    :param raw_above: a relay's option (needs msgspec): a message (an SSE event or a JSON
        answer) of more bytes than this keeps its ``result`` / ``params`` object as a
        [`Body`][ssewire.jsonrpc.Body], checked as JSON but never built, so `reply` and the
        handlers and callbacks hand it on as its bytes (``ssewire.jsonrpc.encoded`` writes
        them verbatim); a handler returns plain values. `request` and the calls built on it
        parse it for you (valid JSON orjson cannot read is an `RPCError` -32700 there).
    """

    def __init__(
        self,
        url: str,
        *,
        profile: str | None = None,
        handlers: dict[str, Handler] | None = None,
        on_notification: Callable[[dict[str, Any]], None] | None = None,
        idle_timeout: float = 30.0,  # below the request deadline: keep-alives come every 15 s
        timeout: float = 60.0,
        parse_id: IdParser | None = None,
        max_resumptions: int = 64,  # in a row without progress: 90% cuts still end 99.9% of calls
        listen: bool = True,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        http: httpx.AsyncClient | None = None,
        max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
        capabilities: dict[str, Any] | None = None,
        info: dict[str, Any] | None = None,
        first_id: int = 1,
        max_input_rounds: int = 8,
        meta_client_info: bool = True,
        on_transport_event: Callable[[str, dict[str, Any]], None] | None = None,
        raw_above: int | None = None,
    ) -> None:
        if raw_above is not None:
            require_envelopes()  # before any request goes out
        extra = caller_headers(headers)  # ValueError for a header the transport sets itself
        if http is not None and (extra or auth is not None):
            raise ValueError("give headers and auth to your own httpx.AsyncClient, not beside it")
        self.url = url
        self.wanted: Profile | None = resolve(profile)[0] if profile is not None else None  # aliases too
        self.handlers = dict(handlers or {})
        self.on_notification = on_notification
        self.idle_timeout, self.timeout = idle_timeout, timeout
        self.parse_id, self.max_resumptions, self.listen = parse_id, max_resumptions, listen
        self.max_message_size = max_message_size
        self.declared, self.info = capabilities, info or CLIENT_INFO
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, read=None), headers=extra, auth=adapted(auth)
        )
        self.max_input_rounds, self.meta_client_info = max_input_rounds, meta_client_info
        self.on_transport_event = on_transport_event
        self.raw_above = raw_above
        # what list_tools learnt: each tool's x-mcp-header parameters, and the tools set
        # aside for invalid annotations (name -> why)
        self.tool_headers: dict[str, tuple[mirrored.Binding, ...]] = {}
        self.set_aside: dict[str, str] = {}
        self._subscriptions: dict[Any, Callable[[dict[str, Any]], Any]] = {}
        # 2026-07-28 counts, beside the statistics (whose keys a relay exports as they are):
        # input-required results answered by a retry; requests sent again under a version a
        # -32022 refusal named
        self.input_rounds = self.version_retries = 0
        self.profile: Profile | None = None  # the revision agreed with the server
        self.session: str | None = None
        self.server_info: dict[str, Any] = {}
        self.guard = ResumptionGuard(self.wanted or NEWEST_WITH_SESSIONS, parse_id=parse_id)
        self.stats = ClientStats()
        self._ids = itertools.count(first_id)
        # the requests in flight, one record each: by JSON-RPC id, and by progress token (a
        # re-issued call's token names the id it was first sent under); see _booked
        self._requests: dict[Any, _Pending] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._retry_ms: int | None = None  # the server's last retry field, honoured on resuming
        self._closed = False
        self.listen_error: Exception | None = None  # what last broke the GET stream (also logged)

    # -- the session ---------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def version(self) -> str:
        """The revision agreed with the server ("" before ``connect``)."""
        return self.profile.name if self.profile is not None else ""

    @property
    def modern(self) -> bool:
        """The session is per-request (2026-07-28): no session id, no GET stream, no resumption."""
        return self.profile is not None and self.profile.request_headers

    async def connect(self) -> None:
        """Negotiate (2026-07-28 ``server/discover`` first, unless a profile is given), open
        the session and, in a 2025 session, the standalone GET stream."""
        await self._open(self.wanted)

    async def _open(self, wanted: Profile | None) -> None:
        """Drive the protocol layer's handshake over this client's requests."""
        self.profile, self.session = None, None
        opening = handshake(
            wanted, ids=lambda: next(self._ids), client=self.info, answers=self._capabilities()
        )
        came: Incoming | None = None
        while True:
            try:
                out = opening.send(came) if came is not None else next(opening)
            except StopIteration as done:
                agreement = done.value
                break
            except HandshakeFailed as failed:
                reply = failed.incoming.reply
                if reply is not None and isinstance(reply.get("error"), dict):
                    raise RPCError(reply["error"]) from None
                raise StreamBroken(str(failed)) from None
            if "id" not in out.body:  # notifications/initialized
                await self._post(out.body, out.headers)
                came = Incoming(202)
                continue
            deadline = min(self.timeout, 10.0) if out.optional else self.timeout
            try:
                with self._booked(out.body["id"]) as record:
                    status, reply = await asyncio.wait_for(
                        self._exchange(record, out.body, out.headers, fresh_session=out.name == "initialize"),
                        deadline,
                    )
            except (RPCError, StreamBroken, httpx.HTTPStatusError, asyncio.TimeoutError) as failed:
                if out.optional:
                    came = Incoming(None)  # discover found no 2026-07-28 server: initialize
                    continue
                if isinstance(failed, asyncio.TimeoutError) and not isinstance(failed, RequestTimeout):
                    raise RequestTimeout(out.name, deadline) from None
                raise
            came = Incoming(status, _whole(reply), self.session)  # the handshake reads its results
        self.profile, self.session, self.server_info = agreement.profile, agreement.session, agreement.server
        if self.guard.profile != agreement.profile:
            self.guard = ResumptionGuard(agreement.profile, parse_id=self.parse_id)
        if self.listen and self.session is not None and self._listener is None:
            self._listener = asyncio.ensure_future(self._listen())

    def _capabilities(self) -> dict[str, Any]:
        return capabilities(self.handlers) if self.declared is None else self.declared

    async def attach(self, profile: str, session: str) -> None:
        """Take up a session opened before, by this client or another process (a gateway
        replica): no handshake, since the server would open a new session; the standalone
        GET stream opens as ``connect`` would. ``profile`` is the revision agreed then
        (``version``)."""
        self.profile, self.session = resolve(profile)[0], session
        if self.guard.profile != self.profile:
            self.guard = ResumptionGuard(self.profile, parse_id=self.parse_id)
        if self.listen and self._listener is None:
            self._listener = asyncio.ensure_future(self._listen())

    async def close(self, *, end_session: bool = True) -> None:
        """Stop listening and serving, end the session (DELETE), close the connections the
        client opened.

        :param end_session: False hands the session over instead of ending it: no DELETE,
            so whoever else holds it (a gateway replica, a process that will `attach`) goes
            on using it. The client itself is closed either way.
        """
        self._closed = True
        await _stop([self._listener] if self._listener else [])
        await _stop(list(self._tasks))
        if end_session and self.session is not None and not self.modern:
            try:
                headers = requests.delete_headers(self.profile, self.session)
                answer = await self._send("DELETE", headers, head=5.0)
                await answer.aclose()
            except (httpx.HTTPError, asyncio.TimeoutError):
                pass
        if self._own_http:
            await self.http.aclose()

    def statistics(self) -> dict[str, Any]:
        """Stream health as numbers: TTFB, GET uptime, progress gaps, resets, resumptions...
        (`ClientStats.as_dict`; a gateway exports the resets absorbed, resumptions, unsafe
        resumptions, re-issues and re-initializations as its upstream figures)."""
        return self.stats.as_dict(self.guard)

    # -- requests ------------------------------------------------------------------------

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Call a tool and return its result; ``options`` as for ``request`` (``on_progress``...).
        Under 2026-07-28 the arguments its schema marks with ``x-mcp-header`` go as
        ``Mcp-Param-*`` headers too (once `list_tools` has seen the tool); a tool that
        `list_tools` set aside for invalid annotations is a ValueError."""
        if name in self.set_aside:
            raise ValueError(f"the tool {name!r} was set aside: {self.set_aside[name]}")
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **options)

    async def list_tools(self, **options: Any) -> list[dict[str, Any]]:
        """Every tool the server lists (its pages followed, at most `MAX_TOOL_PAGES` pages and
        `MAX_TOOLS` tools). Under
        2026-07-28 a tool whose ``x-mcp-header`` annotations break the rules is set aside
        with a warning (``set_aside`` says why) and left out; the others' annotated
        parameters are remembered, so `call_tool` mirrors them into headers. ``options`` as
        for ``request``."""
        tools: list[dict[str, Any]] = []
        cursor: Any = None
        seen = 0  # tools listed so far, kept or set aside
        bound: dict[str, tuple[mirrored.Binding, ...]] = {}  # this listing's, replacing the last one's
        aside: dict[str, str] = {}
        for _ in range(MAX_TOOL_PAGES):
            page = await self.request("tools/list", {"cursor": cursor} if cursor else None, **options)
            listed = page.get("tools")
            listed = listed if isinstance(listed, list) else []
            full = seen + len(listed) >= MAX_TOOLS
            if seen + len(listed) > MAX_TOOLS:
                log.warning("the server lists over %d tools: the rest are left out", MAX_TOOLS)
                listed = listed[: MAX_TOOLS - seen]
            seen += len(listed)
            for tool in listed:
                name = tool.get("name") if isinstance(tool, dict) else None
                if not isinstance(name, str):
                    continue
                if self.modern:
                    try:
                        bound[name] = mirrored.bindings(tool.get("inputSchema"))
                    except mirrored.InvalidAnnotation as why:
                        aside[name] = str(why)
                        if len(aside) <= MAX_WARNED:
                            log.warning("set aside the tool %r: %s", name[:200], why)
                        continue
                tools.append(tool)
            cursor = page.get("nextCursor")
            if full or not isinstance(cursor, str) or not cursor:
                break
        if len(aside) > MAX_WARNED:
            log.warning(
                "set aside %d more tools for invalid x-mcp-header annotations", len(aside) - MAX_WARNED
            )
        self.tool_headers, self.set_aside = bound, aside
        return tools

    async def subscribe(
        self,
        notifications: Mapping[str, Any],
        on_notification: Callable[[dict[str, Any]], Any],
        *,
        duration: float,
    ) -> dict[str, Any] | None:
        """Listen to what the server sends on its own, under 2026-07-28 (``subscriptions/listen``,
        which replaced the GET stream and ``resources/subscribe``), for ``duration`` seconds.

        :param notifications: the filter, e.g. ``{"toolsListChanged": True,
            "resourceSubscriptions": ["file:///a"]}``.
        :param on_notification: called with each notification of this subscription, its
            acknowledgement (``notifications/subscriptions/acknowledged``) first.
        :returns: the result if the server ended the subscription, or None when ``duration``
            ran out (the subscription is then cancelled with ``notifications/cancelled``).
        """
        if not self.modern:
            raise ValueError(
                "subscriptions/listen is a 2026-07-28 request; this session speaks " + self.version
            )
        sent: list[Any] = []

        def opened(ident: Any) -> None:
            sent.append(ident)
            self._subscriptions[ident] = on_notification

        try:
            reply = await self.reply(
                LISTEN, {"notifications": dict(notifications)}, timeout=duration, on_sent=opened
            )
        except RequestTimeout:
            if sent:
                await self.notify("notifications/cancelled", {"requestId": sent[-1], "reason": "ended"})
            return None
        finally:
            for ident in sent:
                self._subscriptions.pop(ident, None)
        if "error" in reply:
            raise RPCError(reply["error"])
        value = _parsed_result(reply)
        return value if isinstance(value, dict) else {}

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no answer is awaited beyond the HTTP status), e.g. a
        relay's ``notifications/cancelled`` under the id ``on_sent`` gave; a 404 re-initializes
        the session."""
        status = await self._post(requests.notification(method, params), self._post_headers(method))
        if status == 404 and self.session is not None:
            await self._reinitialize()

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its result, or raise
        [`RPCError`][ssewire.mcp.client.RPCError] for a JSON-RPC error.

        :param on_progress: called with each progress notification's params (a progress
            token is added to the request).
        :param idempotent: a broken answer that cannot be resumed (2026-07-28, a JSON
            answer, a cut before any event id) is re-issued with a new id.
        :param timeout: this request's deadline (the client's ``timeout`` by default); past
            it, `RequestTimeout` (an ``asyncio.TimeoutError``).
        """
        reply = await self.reply(
            method, params, on_progress=on_progress, idempotent=idempotent, timeout=timeout
        )
        for rounds in itertools.count():  # bounded: max_input_rounds
            if "error" in reply:
                raise RPCError(reply["error"])
            value = _parsed_result(reply)
            value = value if isinstance(value, dict) else {}
            if not self.modern or not is_input_required(value):
                return value  # no resultType: complete
            if rounds >= self.max_input_rounds:
                raise InputRequired(
                    f"{method}: still input-required after {rounds} rounds (max_input_rounds)", value
                )
            again = {k: v for k, v in (params or {}).items() if k not in (INPUT_RESPONSES, REQUEST_STATE)}
            again[INPUT_RESPONSES] = await self._inputs(method, value)
            if REQUEST_STATE in value:  # echoed as it came, never read
                again[REQUEST_STATE] = value[REQUEST_STATE]
            self.input_rounds += 1
            reply = await self.reply(
                method, again, on_progress=on_progress, idempotent=idempotent, timeout=timeout
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _inputs(self, method: str, value: dict[str, Any]) -> dict[str, Any]:
        """The answers to an input-required result's requests, each through the handler of
        its method (as the server's own requests are answered)."""
        asks = value.get(INPUT_REQUESTS)
        if not isinstance(asks, dict) or not asks or len(asks) > MAX_INPUT_REQUESTS:
            raise InputRequired(
                f"{method}: an input-required result needs 1 to {MAX_INPUT_REQUESTS} input requests", value
            )
        answers: dict[str, Any] = {}
        for key, ask in asks.items():
            wanted = ask.get("method") if isinstance(ask, dict) else None
            handler = self.handlers.get(wanted) if isinstance(wanted, str) else None
            if handler is None:
                raise InputRequired(f"{method}: no handler for the input request {wanted!r} ({key!r})", value)
            given = ask.get("params") if isinstance(ask.get("params"), dict) else {}
            answer = handler(given)
            if isinstance(answer, Awaitable):
                answer = await _within(answer, f"the handler for {wanted}", self.timeout)
            answers[key] = answer
        return answers

    async def reply(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
        idempotent: bool = False,
        timeout: float | None = None,
        on_sent: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """Like ``request``, but the whole response message, a JSON-RPC error as it came
        (what a relay forwards); its ``id`` is this client's own. ``on_sent`` is told the
        id each time the request is sent (a re-issue has a new one): the id a relay cancels
        it by (`notify`), and, with `position`, what another process needs to take the
        answer up (`resume_call`)."""
        work = self._call(method, params, on_progress=on_progress, idempotent=idempotent, on_sent=on_sent)
        return await _within(work, method, timeout or self.timeout)

    def position(self, ident: Any) -> str | None:
        """The cursor of request ``ident``'s answer so far, while it is unanswered (None
        before any event id, or once its call ended). With the id ``on_sent`` gave, it is
        what another process needs to take the answer up (`resume_call`): a gateway stores
        it beside the events it relayed."""
        record = self._requests.get(ident)
        return record.cursor if record is not None and record.ident == ident else None

    async def resume_call(
        self,
        ident: Any,
        cursor: str,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Take up the answer to request ``ident``, sent in this session by another process
        (a gateway replica that stopped): its stream resumed from ``cursor`` through the
        guard, progress to ``on_progress``; the whole response message, as ``reply``. The
        sender is taken to be an ssewire client too: its progress token for ``ident`` is
        this client's formula."""
        with self._booked(ident, on_progress) as record:
            stream = self.guard.open_post(ident, self.session)
            self.guard.feed(stream, [Priming(cursor)])  # where the sender's reading stopped
            self.guard.broken(stream)
            try:
                await _within(
                    self._read_answer(stream, None, record, False), "a resumed call", timeout or self.timeout
                )
                return await record.future
            finally:
                self.guard.finish(stream)  # answered or given up: never read again (as _answered)

    @contextmanager
    def _booked(
        self, ident: Any, on_progress: Callable[[dict[str, Any]], Any] | None = None
    ) -> Iterator[_Pending]:
        """A request in flight for as long as the block runs: its record in `_requests`
        under its id (and its progress token, given ``on_progress``). The one place a
        request's books begin and end; a re-issue moves them (`_reissued`)."""
        token = f"{TOKEN_PREFIX}{ident}" if on_progress is not None else None
        record = _Pending(ident, asyncio.get_running_loop().create_future(), on_progress, token)
        self._requests[ident] = record
        if token is not None:
            self._requests[token] = record
        try:
            yield record
        finally:
            for key in (record.ident, record.token):
                if key is not None and self._requests.get(key) is record:
                    del self._requests[key]

    def _reissued(self, record: _Pending, ident: Any) -> None:
        """``record``'s request goes on under a new id: the broken one may still be answered,
        and is no longer listened to. Its progress token stays (it is in the params sent)."""
        if self._requests.get(record.ident) is record:
            del self._requests[record.ident]
        record.ident, record.cursor = ident, None
        self._requests[ident] = record

    async def _call(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        on_progress: Callable[[dict[str, Any]], Any] | None = None,
        idempotent: bool = False,
        on_sent: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """The response message to one request (session loss, re-issues and, under
        2026-07-28, one retry under a version a -32022 refusal names handled)."""
        reply = await self._once(method, params, on_progress, idempotent, on_sent)
        if self.modern:  # supported_versions names none unless the reply is a -32022
            stateless = [v for v in supported_versions(reply) if PROFILES[v].request_headers]
            if stateless:  # never processed: send it once more, under the newest it names
                self.profile = PROFILES[max(stateless)]
                self.version_retries += 1
                reply = await self._once(method, params, on_progress, idempotent, on_sent)
        return reply

    async def _once(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_progress: Callable[[dict[str, Any]], Any] | None,
        idempotent: bool,
        on_sent: Callable[[Any], None] | None,
    ) -> dict[str, Any]:
        try:
            return await self._sent(method, params, on_progress, idempotent, on_sent, retry_gone=True)
        except _SessionGone:
            await self._reinitialize()  # the request was never processed: send it once more
        return await self._sent(method, params, on_progress, idempotent, on_sent, retry_gone=False)

    async def _sent(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_progress: Callable[[dict[str, Any]], Any] | None,
        idempotent: bool,
        on_sent: Callable[[Any], None] | None,
        *,
        retry_gone: bool,
    ) -> dict[str, Any]:
        """One request under a new id, re-issued (idempotent) until its response message;
        ``retry_gone``: a 404 for the session raises `_SessionGone`."""
        with self._booked(next(self._ids), on_progress) as record:
            params = dict(params or {})
            if record.token is not None:
                params["_meta"] = {**(params.get("_meta") or {}), "progressToken": record.token}
            headers = self._post_headers(method, requests.name_of(method, params))
            if self.modern and method == "tools/call":
                bound = self.tool_headers.get(params.get("name"))  # type: ignore[arg-type]
                if bound:
                    arguments = params.get("arguments")
                    headers.update(
                        mirrored.headers(bound, arguments if isinstance(arguments, dict) else None)
                    )
            info = self.info if self.meta_client_info else None
            try:
                for reissues in itertools.count():  # bounded: each pass spends one of max_resumptions
                    body = requests.request(
                        record.ident,
                        method,
                        params,
                        self.profile,
                        capabilities=self._capabilities(),
                        client_info=info,
                    )
                    if on_sent is not None:
                        on_sent(record.ident)
                    try:
                        _, reply = await self._exchange(
                            record, body, headers, idempotent=idempotent, retry_gone=retry_gone
                        )
                        break
                    except _Reissue as broke:
                        if reissues >= self.max_resumptions:
                            raise StreamBroken(
                                f"{method}: the answer broke {reissues + 1} times ({broke}); the request "
                                f"was re-issued {reissues} times (max_resumptions): give up or try later"
                            ) from None
                        self.stats.reissues += 1
                        previous = record.ident
                        self._reissued(record, next(self._ids))
                        self._told(
                            "reissue",
                            {"request": record.ident, "previous": previous, "attempt": reissues + 1},
                        )
            finally:
                self.stats.progressed(record.times)
        return reply

    async def _exchange(
        self,
        record: _Pending,
        body: dict[str, Any],
        headers: dict[str, str],
        *,
        idempotent: bool = False,
        fresh_session: bool = False,
        retry_gone: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """POST one request (``record``'s, booked) and wait for its response, on whatever
        stream it comes: the answer's status and the response message. ``fresh_session``:
        initialize (the answer names the session); ``retry_gone``: a 404 for the session
        raises `_SessionGone`."""
        try:  # the answer must start within idle_timeout, like any stream
            answer = await self._send("POST", headers, orjson.dumps(body))
        except httpx.ConnectError as exc:  # nothing was sent
            raise StreamBroken(
                f"could not connect to {self.url} ({exc or 'ConnectError'}): nothing was sent"
            ) from None
        except (httpx.TransportError, asyncio.TimeoutError) as exc:  # processed or not: never re-sent
            self.stats.resets += 1
            self._told("reset", {"request": record.ident, "stage": "head"})
            if idempotent:
                raise _Reissue(f"no answer: {type(exc).__name__}") from None
            raise _lost(
                f"{body.get('method')}: the connection broke before an answer ({type(exc).__name__})"
            ) from None
        if answer.status == 404 and self.session is not None and retry_gone:
            await answer.aclose()
            raise _SessionGone
        if fresh_session and answer.headers.get("mcp-session-id"):
            self.session = answer.headers["mcp-session-id"]
        await self._answered(answer, record, idempotent)
        return answer.status, await record.future

    async def _answered(self, answer: Answer, record: _Pending, idempotent: bool) -> None:
        """Read a POST's answer (JSON or SSE), resuming its stream until the response came."""
        if answer.status in (401, 403):  # credentials refused: no retry, no resumption helps
            await answer.aclose()
            raise Unauthorized(answer.response)
        if not answer.is_sse:
            await self._answered_json(answer, record, idempotent)
            return
        stream = self.guard.open_post(record.ident, self.session)
        try:
            await self._read_answer(stream, answer, record, idempotent)
        finally:
            self.guard.finish(stream)  # answered or given up: never read again

    async def _answered_json(self, answer: Answer, record: _Pending, idempotent: bool) -> None:
        """A JSON answer (or an error status): read whole, under the message size limit."""
        try:
            message = await answer.json(idle=self.idle_timeout, raw_above=self.raw_above)
        except (Idle, Broken) as exc:  # a JSON answer cannot be resumed: re-issue, or report
            self.stats.resets += 1
            self._told("reset", {"request": record.ident, "stage": "json"})
            if idempotent:
                raise _Reissue(f"the JSON answer broke: {exc}") from None
            raise _lost(
                f"the JSON answer to request {record.ident} broke before its end ({exc}), and cannot be resumed"
            ) from None
        except NotJSON:
            raise httpx.HTTPStatusError(
                f"{answer.status}: not JSON-RPC", request=answer.response.request, response=answer.response
            ) from None
        finally:
            await answer.aclose()
        if message is None and answer.status >= 400:
            raise httpx.HTTPStatusError(
                f"{answer.status}", request=answer.response.request, response=answer.response
            )
        self._route(message)
        if not record.future.done():
            raise StreamBroken(f"the answer ({answer.status}) carries no response to request {record.ident}")

    async def _read_answer(
        self, stream: str, answer: Answer | None, record: _Pending, idempotent: bool
    ) -> None:
        """An SSE answer, resumed through the guard until the response came or it is unsafe.

        The budget is resumptions in a row without a new message: a stream cut again and
        again while it makes progress goes on (the request's deadline bounds it); one that
        brings nothing ``max_resumptions`` times in a row is given up."""
        future = record.future
        stalled = 0  # resumptions in a row that brought no new message
        empty = 0  # resumptions answered with an empty stream (the store lost it?)
        quiet = 0  # clean ends in a row without a new message (a polling server)
        current: Answer | None = answer
        while True:
            resumed = current is None
            try:
                if current is None:
                    stream, current = await self._resume(stream)
                    self._told("resumption", {"request": record.ident, "attempt": stalled})
                delivered = await self._consume(stream, current, record)
                if future.done():
                    self.guard.ended(stream)
                    return
                if resumed and delivered == 0 and current.events_seen == 0 and current.comments == 0:
                    empty += 1  # 200 and nothing at all: a store that no longer has the stream
                    if empty > 1:
                        self.guard.cannot_resume(
                            stream, "it answered the resumption twice with an empty stream"
                        )
                raise _Broken("the stream ended before the response", delivered, clean=True)
            except _Broken as broke:
                stream = broke.stream or stream
                if future.done():
                    return
                if broke.delivered:
                    stalled = empty = 0
                if not broke.clean:  # a clean end is the server's polling (retry): only cuts stall
                    stalled += 1
                quiet = 0 if broke.delivered or not broke.clean else quiet + 1
                if quiet and self._retry_ms is None:  # a server polled without a retry: not a busy loop
                    await asyncio.sleep(_backoff(quiet))
                self.stats.resets += 1
                self._told("reset", {"request": record.ident, "stage": "stream", "attempt": stalled})
                recovery = self.guard.broken(stream, idempotent=idempotent)
                if recovery.action == RESUME and stalled <= self.max_resumptions:
                    current = None  # resume with GET and Last-Event-ID
                    continue
                if recovery.action == REISSUE:
                    raise _Reissue(f"the stream broke ({broke.reason}) before any event id") from None
                if recovery.action == RESUME:
                    raise StreamBroken(
                        f"the answer's stream broke {stalled} times in a row "
                        f"without a new message (last: {broke.reason}; max_resumptions={self.max_resumptions}): "
                        "the server is not getting the answer through; it may have been processed: "
                        "check its effects before sending it again"
                    ) from None
                why = (
                    "before any event id to resume from"
                    if self.guard.profile.resumability
                    else "(no resumption in this revision)"
                )
                raise _lost(f"the answer's stream broke ({broke.reason}) {why}") from None

    async def _resume(self, broken: str) -> tuple[str, Answer]:
        """GET with Last-Event-ID after the server's retry. An error status is a refusal: a
        transient one (409, 429, 5xx) is retried once after its Retry-After, then the
        server cannot resume the stream (`UnsafeResumption`)."""
        for attempt in range(2):
            resumed, cursor = self.guard.reopen(broken, self.session)
            wait = min((self._retry_ms or 0) / 1000, MAX_RETRY_WAIT)
            if wait:
                await asyncio.sleep(wait)
            try:
                answer = await self._send("GET", requests.get_headers(self._speaking, self.session, cursor))
            except (httpx.TransportError, asyncio.TimeoutError) as exc:
                # try again, from the new leg: reopen forgot the one it resumed
                raise _Broken(f"the resumption failed: {type(exc).__name__}", stream=resumed) from None
            if answer.status == 200:
                return resumed, answer
            await answer.aclose()
            later = retry_after(answer.headers.get("retry-after"))
            if attempt == 0 and answer.status in TRANSIENT and (later or 0) <= MAX_RETRY_WAIT:
                self.guard.ended(resumed)  # refused: the next attempt reopens the same chain
                broken = resumed
                await asyncio.sleep(later or 0.1)
                continue
            self.guard.refused(resumed, answer.status, later)
        raise AssertionError("unreachable: the second refusal raised")  # pragma: no cover

    async def _consume(self, stream: str, answer: Answer, record: _Pending | None) -> int:
        """Decode one SSE answer (``record``'s, or the GET stream's: None) through the
        guard, routing what it delivers; returns the new messages it delivered when the
        stream ends cleanly (or the request is answered), raises _Broken (with that count)
        otherwise."""
        future, ident = (record.future, record.ident) if record is not None else (None, None)
        comments, first, delivered, draining, drain_limit = 0, True, 0, False, 0
        try:
            async with aclosing(answer.events(idle=self.idle_timeout, raw_above=self.raw_above)) as batches:
                async for items in batches:
                    if first and answer.first_byte is not None:
                        self.stats.first_byte(answer.first_byte)
                        first = False
                    routing = _DELIVERING.set(ident)
                    try:
                        for item in self.guard.feed(stream, items, answer_to=ident):
                            if item.__class__ is Message:
                                delivered += 1
                                self._deliver(item)
                            # an event the decoder dropped for the limit
                            elif (
                                isinstance(item, InvalidMessage)
                                and item.reason.startswith("too large")
                                and future is not None
                                and not future.done()
                            ):
                                # on a POST's own stream: its answer, most likely; never resume into it again
                                future.set_exception(
                                    MessageTooLarge(self.max_message_size or 0, item.size, "an SSE event")
                                )
                    finally:
                        _DELIVERING.reset(routing)
                    if record is not None and not record.future.done():
                        # the cursor of what was delivered, while the answer has not come: a
                        # taker resuming from it gets nothing twice but progress (dropped by
                        # its value) and never misses the answer
                        record.cursor = self.guard.cursor(stream)
                    if answer.comments != comments:
                        self.stats.keepalives += answer.comments - comments
                        comments = answer.comments
                    if answer.retry is not None:
                        self._retry_ms = answer.retry
                    if future is not None and future.done():
                        if draining and answer.received > drain_limit:
                            break  # it keeps talking: not worth its connection
                        if not draining:
                            if future.cancelled() or future.exception() is not None:
                                break  # the call failed (an answer over the limit): read no further
                            # answered: read on to the end (briefly), so the connection goes back to the pool
                            draining, drain_limit = True, answer.received + GRACE_BYTES
                            answer.hurry(time.monotonic() + GRACE)
            if draining and answer.ended:
                self.stats.drained += 1
        except Idle as exc:
            self.stats.idle_timeouts += 1
            raise _Broken(f"idle: no event and no keep-alive for {exc.seconds:g} s", delivered) from None
        except Broken as exc:
            self.guard.feed(stream, answer.tail())  # count the torn tail; deliver nothing of it
            if draining:
                return delivered  # answered already: only the connection is lost
            raise _Broken(f"the connection broke: {exc}", delivered) from None
        finally:
            await answer.aclose()
        return delivered

    # -- routing -------------------------------------------------------------------------

    def _deliver(self, item: Message) -> None:
        """A message the guard let through: progress straight to its call (most of what a
        long call receives, so its envelope is not looked at again), anything else routed by
        `_route`."""
        if item.method == "notifications/progress" and self._progressed(item.payload.get("params")):
            return
        self._route(item.payload)

    def _progressed(self, params: Any) -> bool:
        """Progress for one of this client's calls: handed to its callback, or, the call
        having ended, dropped and counted (``late_progress``). False when the token is not
        one this client handed out (such progress is a notification like any other)."""
        token = params.get("progressToken") if type(params) is dict else None
        if type(token) is not str:
            return False  # not a token of this client's
        record = self._requests.get(token)
        if record is None or record.on_progress is None or record.token != token:
            if token.startswith(TOKEN_PREFIX):  # one of ours: its call ended
                self.stats.late_progress += 1
                return True
            return False  # not a token of this client's
        record.times.append(time.monotonic())
        try:
            record.on_progress(params)
        except Exception:  # the caller's callback failed: its bug, not the stream's; say so
            self.stats.callback_errors += 1
            log.exception("a progress callback raised")
        return True

    def _route(self, message: Any) -> None:
        """A message goes where its id or progressToken says, whatever stream it came on."""
        if not isinstance(message, dict):
            return
        if "method" not in message:
            ident = message.get("id")
            record = self._requests.get(ident)
            if record is not None and record.ident == ident and not record.future.done():
                record.future.set_result(message)
            return
        if "id" in message:
            if len(self._tasks) >= MAX_SERVING:  # a flood: bounded, never queued without end
                if self.stats.dropped_request():  # the 1st, 2nd, 4th, 8th...: a flood logs little
                    log.warning(
                        "dropped %d of the server's requests: %d are being handled",
                        self.stats.server_requests_dropped,
                        MAX_SERVING,
                    )
                return
            task = asyncio.ensure_future(self._serve(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        if message["method"] == "notifications/progress" and self._progressed(message.get("params")):
            return
        sink = self._subscription_of(message) if self._subscriptions else None
        try:
            if sink is not None:
                sink(message)
            elif self.on_notification is not None:
                self.on_notification(message)
        except Exception:  # the caller's callback failed: its bug, not the stream's; say so
            self.stats.callback_errors += 1
            log.exception("a notification callback raised on %s", message["method"])

    def _subscription_of(self, message: dict[str, Any]) -> Callable[[dict[str, Any]], Any] | None:
        """The callback of the subscription a notification names in its ``_meta``, if any."""
        try:
            params = parsed(message.get("params"))
        except orjson.JSONDecodeError:  # kept as bytes orjson cannot read: names no subscription
            return None
        meta = params.get("_meta") if isinstance(params, dict) else None
        ident = meta.get(META_SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        return self._subscriptions.get(ident) if isinstance(ident, (str, int)) else None

    async def _serve(self, request: dict[str, Any]) -> None:
        """Answer a server-to-client request through the caller's handler."""
        handler = self.handlers.get(request["method"])
        ident = request["id"]
        if handler is None:
            reply = requests.error(ident, METHOD_NOT_FOUND, f"Method not found: {request['method']}")
        else:
            try:
                value = handler(request.get("params") or {})
                if isinstance(value, Awaitable):
                    value = await asyncio.wait_for(value, self.timeout)
                reply = requests.result(ident, value)
            except asyncio.TimeoutError:
                reply = requests.error(ident, INTERNAL_ERROR, f"the handler took over {self.timeout} s")
            except RPCError as refused:  # the handler's own JSON-RPC error (a relay's client's): as given
                reply = {"jsonrpc": "2.0", "id": ident, "error": refused.error}
            except Exception:  # its text may hold anything of the caller's: logged here, not sent
                log.exception("the handler for the server's %s raised", request["method"])
                reply = requests.error(
                    ident, INTERNAL_ERROR, f"the client's handler for {request['method']} failed"
                )
        try:
            await self._post(reply, self._post_headers())
        except StreamBroken:
            pass  # the server's request then times out on its side; nothing here waits for it

    # -- the GET stream ------------------------------------------------------------------

    async def _listen(self) -> None:
        """The standalone GET stream, resumed (or reopened) when it breaks, with a growing
        pause; it stops when the server has none (405) or the session is gone (404: the next
        request re-initializes), or after ``max_resumptions`` failures in a row. What broke
        it last is ``listen_error``, and logged; an unexpected error ends it, kept the same."""
        try:
            await self._listening()
        except Exception as exc:  # a defect, not a peer's fault: never a silent end
            self.listen_error = exc
            log.exception("the GET stream's listener failed")

    async def _listening(self) -> None:
        stream: str | None = None
        failures = 0  # in a row: the listener gives up past max_resumptions
        quiet = 0  # clean ends in a row that brought nothing: a growing pause, not a failure
        while not self._closed and failures <= self.max_resumptions:
            resuming = False
            try:
                if stream is not None and self.guard.cursor(stream) is not None:
                    stream, answer = await self._resume(stream)
                    resuming = True
                    self._told("resumption", {"stream": "get", "attempt": failures})
                else:
                    try:
                        answer = await self._send("GET", requests.get_headers(self._speaking, self.session))
                    except asyncio.TimeoutError:
                        raise _Broken("no answer to the GET") from None
                    if answer.status in (404, 405):
                        await answer.aclose()
                        return
                    if answer.status != 200:  # 409 (a GET stream still open), 5xx: later
                        await answer.aclose()
                        raise _Broken(f"GET answered {answer.status}")
                    if stream is not None:
                        self.guard.finish(stream)  # the previous chain had nothing to resume from
                    stream = self.guard.open_get(self.session)
                self.stats.get_opened()
                leg = stream
                try:
                    delivered = await self._consume(leg, answer, None)
                    failures = 0
                    quiet = 0 if delivered else quiet + 1
                    if resuming and not delivered:  # the server has no more on this chain: a fresh GET
                        self.guard.finish(leg)
                        stream = None
                except _Broken as broke:
                    self.stats.resets += 1
                    self._told("reset", {"stream": "get", "attempt": failures + 1})
                    self.guard.broken(leg)
                    self._get_failed(broke)
                    failures += 1
                finally:
                    self.stats.get_closed()
            except _Broken as broke:
                stream = broke.stream or stream
                self._get_failed(broke)
                failures += 1  # the resumption itself broke: try again from the same cursor
            except (UnsafeResumption, httpx.HTTPError) as exc:  # start a fresh GET stream
                self._get_failed(exc)
                if stream is not None:
                    self.guard.finish(stream)
                stream = None
                failures += 1
            if failures:
                self.stats.get_failures += 1
            await asyncio.sleep(_backoff(failures + quiet))
        if failures:
            log.error("gave up the GET stream after %d failures in a row: %s", failures, self.listen_error)

    def listen_now(self) -> None:
        """Open the standalone GET stream now, in a session opened with ``listen=False``: a
        relay does when its own client opens one, so the server's own messages have
        somewhere to go, and no GET is held open for nobody."""
        self.listen = True
        if self.session is not None and self._listener is None and not self._closed and not self.modern:
            self._listener = asyncio.ensure_future(self._listen())

    async def listened(self) -> None:
        """`listen_now`, then wait until the GET stream ends for good: the server has none
        (405), the session is gone (404: the next request opens another), or it broke
        ``max_resumptions`` times in a row (``listen_error`` says why). A relay ends its
        listeners' streams then."""
        self.listen_now()
        if self._listener is not None:
            await asyncio.shield(self._listener)

    async def stop_listening(self) -> None:
        """Close the standalone GET stream (`listen_now` opens it again)."""
        self.listen = False
        listener, self._listener = self._listener, None
        if listener is not None:
            await _stop([listener])

    def _told(self, kind: str, details: dict[str, Any]) -> None:
        """Tell ``on_transport_event`` (if any) what the statistics just counted; what it
        raises is counted and logged (its class name only), never the client's failure."""
        if self.on_transport_event is None:
            return
        try:
            self.on_transport_event(kind, details)
        except Exception as exc:
            self.stats.callback_errors += 1
            log.warning("the transport event callback raised on %s (%s)", kind, type(exc).__name__)

    def _get_failed(self, error: Exception) -> None:
        self.listen_error = error
        log.warning("the GET stream failed: %s", error)

    @property
    def listening(self) -> bool:
        """Whether the standalone GET stream is open now."""
        return self.stats.get_open

    # -- sending -------------------------------------------------------------------------

    async def _send(
        self, method: str, headers: dict[str, str], content: bytes | None = None, *, head: float | None = None
    ) -> Answer:
        """A request on the transport path; its answer's head must come within ``head``
        seconds (``idle_timeout`` by default, like any silence on a stream)."""
        return await send(
            self.http,
            method,
            self.url,
            headers,
            content,
            head_timeout=self.idle_timeout if head is None else head,
            max_message_size=self.max_message_size,
        )

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        """A POST whose answer is not a stream (a notification, an answer to the server): its
        status, the body read to its end (and dropped) within the request deadline."""
        try:
            answer = await self._send("POST", headers, orjson.dumps(body), head=self.timeout)
        except (httpx.TransportError, asyncio.TimeoutError) as exc:
            what = body.get("method") or f"the answer to the server's request {body.get('id')}"
            raise StreamBroken(f"{what}: no answer from {self.url} ({type(exc).__name__})") from None
        try:
            async for _ in answer.chunks(until=time.monotonic() + self.timeout):
                pass
        except (Idle, Broken):
            pass  # the status is all a notification gets back
        finally:
            await answer.aclose()
        return answer.status

    @property
    def _speaking(self) -> Profile:
        """The revision agreed, or during the handshake the one asked for (the guard's): a
        resumption of an initialize answer carries the session and version headers too."""
        return self.profile or self.guard.profile

    def _post_headers(self, method: str | None = None, name: object = None) -> dict[str, str]:
        return requests.post_headers(self._speaking, self.session, method, name)

    async def _reinitialize(self) -> None:
        """The session expired (404): open a new one, and say so (``stats.reinitializations``)."""
        self.stats.reinitializations += 1
        self._told("reinitialization", {})
        if self._listener is not None:
            await _stop([self._listener])
            self._listener = None
        await self._open(self.profile or NEWEST_WITH_SESSIONS)


def _whole(reply: dict[str, Any] | None) -> dict[str, Any] | None:
    """A reply with its result parsed, if it was kept as bytes (``raw_above``)."""
    result = reply.get("result") if reply is not None else None
    return (
        {**reply, "result": _parsed_result(reply)}
        if reply is not None and isinstance(result, Body)
        else reply
    )


def _parsed_result(reply: dict[str, Any]) -> Any:
    """A reply's result, parsed if it was kept as bytes; valid JSON orjson cannot read (a
    number past a float's range, nesting past 1024) is a JSON-RPC parse error, raised."""
    try:
        return parsed(reply.get("result"))
    except orjson.JSONDecodeError as exc:
        raise RPCError({"code": PARSE_ERROR, "message": f"the result cannot be read: {exc}"}) from None
