"""An MCP Streamable HTTP client session that never delivers a torn or duplicated message.

The dual-stream session of the 2025 revisions (the standalone GET stream for what the
server sends on its own, one SSE stream per POST) and the 2026-07-28 stateless mode, on
httpx. Every stream goes through one [`ResumptionGuard`][ssewire.mcp.streams.guard.ResumptionGuard]:

- messages are routed by JSON-RPC id whatever stream they arrive on; progress by
  ``progressToken``; server-to-client requests (sampling, roots, elicitation) are answered
  through the handlers the caller registers;
- a broken stream is resumed with GET and ``Last-Event-ID`` (after the server's ``retry``),
  never by re-POSTing the request; an unsafe resumption raises
  [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption]; an answer that cannot be
  resumed (2026-07-28, a JSON answer) is re-issued, with a new id, only for a request safe
  to repeat: a list or a read, a request declared idempotent, or a tool call the
  ``reissue`` policy admits (by the tool's annotations, or by name);
- a 404 for the session re-initializes it (and is counted): the request was never
  processed, so it is sent once more in the new session;
- an idle watchdog counts keep-alive comments as life; nothing waits without a deadline.

    async with Client("http://127.0.0.1:8000/mcp") as client:
        result = await client.call_tool("countdown", {}, on_progress=print)
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import httpx
import orjson

from ..._envelope import require as require_envelopes
from ...jsonrpc import Body, Priming, parsed
from ..protocol import params as mirrored
from ..protocol import requests
from ..protocol.bridging import (
    INPUT_REQUESTS,
    INPUT_RESPONSES,
    LISTEN,
    REQUEST_STATE,
    is_input_required,
)
from ..protocol.codes import PARSE_ERROR
from ..protocol.handshake import (
    HandshakeFailed,
    Incoming,
    client_info,
    handshake,
)
from ..protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, Profile, resolve
from ..protocol.reissue import (
    HINTS_FETCH,
    MAX_REISSUES,
    SAFE_TOOLS,
    ReissuePolicy,
    ToolHints,
    learn_tools,
    needs_hints,
    reason,
)
from ..protocol.wire import caller_headers
from ..streams.guard import IdParser, ResumptionGuard
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE, new_client
from ..transport.http import MessageTooLarge as MessageTooLarge  # what a call over the limit raises
from .auth import adapted
from .counters import FIGURES_KEPT as FIGURES_KEPT  # the newest figures kept in each list of statistics
from .counters import ClientStats as ClientStats  # what it counts (``Client.stats``)
from .engine import MAX_RETRY_WAIT as MAX_RETRY_WAIT
from .engine import _stop, _within
from .errors import InputRequired, RequestTimeout, RPCError, StreamBroken, Unauthorized
from .listener import Listener
from .routing import Handler, _Pending, delivering

__all__ = [
    "CLIENT_INFO",
    "Client",
    "InputRequired",
    "MessageTooLarge",
    "RPCError",
    "RequestTimeout",
    "StreamBroken",
    "Unauthorized",
    "delivering",
]

CLIENT_INFO = client_info("ssewire")
MAX_TOOL_PAGES = 100  # pages of tools/list one list_tools reads
MAX_TOOLS = 10_000  # tools one list_tools keeps: a server listing more is cut there, and logged
MAX_WARNED = 16  # tools set aside that one list_tools names in a log line each; the rest in one
MAX_INPUT_REQUESTS = 32  # input requests one input-required result may carry (2026-07-28)

log = logging.getLogger("ssewire.mcp.client")


class Client(Listener):
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
    :param reissue: which tool calls are sent again when their answer broke beyond
        resumption (`ReissuePolicy`: by default a tool the server lists as read-only, or
        idempotent and not destructive; ``ssewire.mcp.protocol.reissue.OFF``: none). Lists
        and reads are re-issued whatever it says; a request's ``idempotent`` overrides it.
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
        max_resumptions: int = MAX_REISSUES,  # in a row without progress: 90% cuts end all but 1 call in 37,000
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
        reissue: ReissuePolicy | None = SAFE_TOOLS,
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
        self.http = http or new_client(
            timeout=httpx.Timeout(timeout, read=None), headers=extra, auth=adapted(auth)
        )
        self.max_input_rounds, self.meta_client_info = max_input_rounds, meta_client_info
        self.on_transport_event = on_transport_event
        self.raw_above = raw_above
        self.reissue = reissue
        self.hints = ToolHints()  # the tools' annotations, as list_tools last saw them
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
        self._get_answered: asyncio.Future[None] | None = None
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

    async def connect(self) -> None:
        """Negotiate (2026-07-28 ``server/discover`` first, unless a profile is given), open
        the session and, in a 2025 session, the standalone GET stream."""
        try:
            await self._open(self.wanted)
        except BaseException:  # (cancelled while it waited for the GET's answer, say)
            await self._unlisten()
            raise

    async def _open(self, wanted: Profile | None) -> None:
        """Drive the protocol layer's handshake over this client's requests."""
        self.profile, self.session = None, None
        opening = handshake(
            wanted, ids=lambda: next(self._ids), client=self.info, answers=self._capabilities()
        )
        came: Incoming | None = None
        record: _Pending | None = None  # the last request's (its answer's Retry-After)
        while True:
            try:
                out = opening.send(came) if came is not None else next(opening)
            except StopIteration as done:
                agreement = done.value
                break
            except HandshakeFailed as failed:
                reply, status = failed.incoming.reply, failed.incoming.status
                if reply is not None and isinstance(reply.get("error"), dict):
                    refused = status if status is not None and status >= 400 else None
                    said = record.retry_after if refused is not None and record is not None else None
                    raise RPCError(reply["error"], status=refused, retry_after=said) from None
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
            await self._start_listening()

    async def attach(self, profile: str, session: str | None) -> None:
        """Take up a session opened before, by this client or another process (a gateway
        replica): no handshake, since the server would open a new session; the standalone
        GET stream opens as ``connect`` would. ``profile`` is the revision agreed then
        (``version``). Under 2026-07-28 (no sessions: ``session`` None) it speaks that
        revision to a server known to, with no ``server/discover`` first."""
        self.profile, self.session = resolve(profile)[0], session
        if self.guard.profile != self.profile:
            self.guard = ResumptionGuard(self.profile, parse_id=self.parse_id)
        if self.listen and self._listener is None and not self.modern:
            try:
                await self._start_listening()
            except BaseException:
                await self._unlisten()
                raise

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
            self.hints.learn(page)  # parsed here, even where reply kept a large result as its bytes
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
        idempotent: bool | None = None,
        timeout: float | None = None,
        on_sent: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request and return its result, or raise
        [`RPCError`][ssewire.mcp.client.RPCError] for a JSON-RPC error.

        :param on_progress: called with each progress notification's params (a progress
            token is added to the request).
        :param idempotent: a broken answer that cannot be resumed (2026-07-28, a JSON
            answer, a cut before any event id) is re-issued with a new id (True) or not
            (False); None: as the method and the ``reissue`` policy say (a tool's annotations
            are those `list_tools` saw, listed first if need be).
        :param timeout: this request's deadline (the client's ``timeout`` by default); past
            it, `RequestTimeout` (an ``asyncio.TimeoutError``).
        :param on_sent: told each id the request is sent under (as for `reply`): what a
            relay cancels it by.
        """
        reply = await self.reply(
            method, params, on_progress=on_progress, idempotent=idempotent, timeout=timeout, on_sent=on_sent
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
                method,
                again,
                on_progress=on_progress,
                idempotent=idempotent,
                timeout=timeout,
                on_sent=on_sent,
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
        idempotent: bool | None = None,
        timeout: float | None = None,
        on_sent: Callable[[Any], None] | None = None,
    ) -> dict[str, Any]:
        """Like ``request``, but the whole response message, a JSON-RPC error as it came
        (what a relay forwards); its ``id`` is this client's own. ``on_sent`` is told the
        id each time the request is sent (a re-issue has a new one): the id a relay cancels
        it by (`notify`), and, with `position`, what another process needs to take the
        answer up (`resume_call`)."""
        if idempotent is not None and not isinstance(idempotent, bool):
            raise TypeError(f"idempotent is True, False or None, not {idempotent!r}")
        repeat: bool | str = idempotent if idempotent is not None else self._repeatable(method, params)
        work = self._call(method, params, on_progress=on_progress, idempotent=repeat, on_sent=on_sent)
        reply = await _within(work, method, timeout or self.timeout)
        if method == "tools/list":  # a relay's listings teach the annotations as list_tools does
            self.hints.learn(reply.get("result"))
        return reply

    def _repeatable(self, method: str, params: dict[str, Any] | None) -> str | bool:
        """Why the policy lets ``method`` be re-issued, `ASK` when that needs the tools'
        annotations (fetched only if its answer breaks), or False."""
        return reason(method, params, self.reissue, self.hints, ask=True) or False

    async def _why_repeat(self, method: str, params: dict[str, Any] | None) -> str | None:
        """The policy's verdict once a call's answer broke: a tool whose annotations are not
        known (fresh) is listed first (`learn_hints`); one the listing does not name, or a
        listing that fails, is not repeated."""
        if needs_hints(method, params, self.reissue, self.hints):
            try:
                await self.learn_hints()
            except Exception as why:  # whatever it was, unknown is unsafe: the call's own error stands
                log.info("could not list the tools to learn their annotations (%s)", type(why).__name__)
        return reason(method, params, self.reissue, self.hints)

    async def learn_hints(self, into: ToolHints | None = None) -> None:
        """Learn the tools' annotations (what the ``reissue`` policy reads) from a listing of
        this client's own, into ``into`` (its own table by default): each page learnt and let
        go, bounded in pages and time (``protocol.reissue.learn_tools``); what `list_tools`
        remembers is left as it was."""

        async def page(cursor: str | None) -> Any:
            return await self.request("tools/list", {"cursor": cursor} if cursor else None)

        await asyncio.wait_for(learn_tools(self.hints if into is None else into, page), HINTS_FETCH)

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


async def learn_tool_hints(
    url: str, into: ToolHints, *, http: httpx.AsyncClient, max_message_size: int | None
) -> None:
    """A 2026-07-28 server's tool annotations, learnt into ``into`` by a listing of a
    relay's own (`Client.learn_hints`, bounded): no handshake, since the revision needs none
    and a cut ``server/discover`` would cost the listing; ``http`` carries the relay's
    credentials."""
    client = Client(url, http=http, listen=False, timeout=HINTS_FETCH, max_message_size=max_message_size)
    try:
        await client.attach(NEWEST.name, None)
        await client.learn_hints(into=into)
    finally:
        await client.close(end_session=False)
