"""The gateway as an ASGI app: MCP Streamable HTTP downstream, one upstream server.

    app = Gateway("http://127.0.0.1:9000/mcp")          # uvicorn.run(app, host="127.0.0.1")

Downstream it answers like a server (POST, GET, DELETE on ``path``; ``/metrics`` in the
Prometheus text format) and checks what a server checks: Host and Origin (DNS rebinding),
Accept and Content-Type, the body under the message limit, one JSON-RPC message per POST,
the session. Upstream it is a client ([`Relay`][ssewire.mcp.gateway.relay.Relay], one per
downstream session). Under 2026-07-28 there are no sessions: each request is relayed on its
own and transparently ([`Passthrough`][ssewire.mcp.gateway.passthrough.Passthrough]: the
body and named headers up as sent, the status, named headers and body back as they came),
and a broken answer is re-issued upstream only for a request that lists or reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import httpx
import orjson

from ..._secrets import public_url, scrub_urls
from ..client import Unauthorized, open_refused
from ..protocol import inbound
from ..protocol.codes import INTERNAL_ERROR, SERVER_ERROR, SESSION_NOT_FOUND, UNSUPPORTED_VERSION
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import KNOWN_VERSIONS, NEWEST, NEWEST_WITH_SESSIONS, PROFILES, named
from ..protocol.reissue import SAFE_TOOLS, ReissuePolicy
from ..protocol.wire import JSON, caller_headers
from ..server.asgi import (
    Refused,
    climb,
    error_message,
    not_allowed,
    refuse,
    respond,
)
from ..server.auth import Authenticator
from ..server.budget import ByteBudget
from ..server.front import Front, Request
from ..server.quotas import Limits, Quotas
from ..server.rates import RateLimits
from ..server.sessions import SessionTable
from ..server.tools import ToolPolicy, tool_refused
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE
from .errors import unauthorized_error
from .health import HEALTH_PATHS, health
from .lifecycle import DRAINING as DRAINING
from .lifecycle import HEARD_WINDOW, Lifecycle
from .metrics import Metrics, expose, metrics_app
from .observe import Telemetry
from .passthrough import LISTEN, Exchange, Passthrough
from .relay import Relay
from .sessions import BUSY_RETRY_AFTER, MAX_SESSIONS, _noted
from .stores import (
    SESSION_TTL,
    MemoryStore,
    SessionRecord,
    Store,
    StoreFailed,
    parse_event_id,
    redacted,
)

log = logging.getLogger("ssewire.mcp.gateway")

RETRY_MS = 500  # the retry field of the gateway's streams: a client resumes from it soon
MAX_BYTES_IN_FLIGHT = 256 << 20  # request bodies being read and parsed, over all clients
BODY_TIMEOUT = 30.0  # seconds a request body may take to arrive: a stalled upload holds nothing longer
MAX_FORWARDING = 16  # notifications of one session waiting to go upstream; past it 429
STORE_RETRY_AFTER = 2  # seconds a client refused because the store failed waits


class Gateway(Lifecycle):
    """An ASGI application relaying MCP between downstream clients and ``upstream``.

    :param upstream: the upstream server's MCP endpoint.
    :param store: where downstream sessions and streams are kept (a `MemoryStore` by
        default; a ``RedisStore`` shares them between replicas).
    :param max_message_size: bytes one message may take, either way (a downstream body;
        an upstream event or answer: that call gets an explicit error, the session goes on).
    :param keepalive: seconds of silence after which a downstream stream gets a comment.
    :param allowed_hosts: Host names accepted besides loopback (the names clients use).
    :param allowed_origins: Origins accepted besides loopback ones (browsers send one).
    :param timeout: the deadline of one relayed call, upstream resumptions included.
    :param idle_timeout: seconds an upstream stream may stay silent before it is resumed.
    :param write_timeout: seconds one write to a downstream client may wait for it to
        read; past it the stream is cut (the client resumes when it reads again), so a
        client that never reads holds nothing but what the store bounds.
    :param headers: extra headers for every upstream request (credentials).
    :param http: an ``httpx.AsyncClient`` of your own for the upstream (proxies, TLS, pool
        limits; its read timeout None); the gateway does not close it.
    :param replica: this process shares its store with others (a stopping replica leaves
        the upstream sessions open for them).
    :param auth: how downstream clients prove who they are (`TokenAuth`, `JwtAuth`); each
        session is bound to the principal that opened it. None: every client is trusted
        alike (only for a gateway on loopback: the command line refuses it elsewhere).
    :param limits: what one principal may hold at once (sessions, calls, GET streams, bytes
        of request bodies); past it 429 with ``Retry-After``.
    :param max_bytes_in_flight: bytes of request bodies being read and parsed over all
        clients (the parse counted at its cost in objects); past it 503 with ``Retry-After``.
    :param body_timeout: seconds a request body may take to arrive (then 408).
    :param serve_metrics: answer ``/metrics`` here (behind ``auth`` when it is on); False
        when they are served on a loopback port of their own (`metrics_app`).
    :param serve_health: answer ``/healthz`` and ``/readyz`` here (a `Router` answers them
        for all its routes instead).
    :param tools: which of the upstream's tools this gateway offers (`ToolPolicy`).
    :param reissue: which tool calls are sent upstream again when their answer broke beyond
        resumption (`ReissuePolicy`; by default those the upstream lists as read-only, or
        idempotent and not destructive; ``reissue.OFF``: none). Lists and reads always are.
    :param principals: only these principals are served (403 for the others; needs ``auth``).
    :param rates: rate limits per principal and per tool (`RateLimits`: 429 with
        ``Retry-After``; its buckets in this gateway's store, so replicas share them).
    :param telemetry: its logs and traces (a `Telemetry` of its route; logs only by default).
    """

    def __init__(
        self,
        upstream: str,
        *,
        store: Store | None = None,
        path: str = "/mcp",
        max_message_size: int | None = DEFAULT_MAX_MESSAGE_SIZE,
        keepalive: float = 15.0,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        timeout: float = 300.0,
        idle_timeout: float = 30.0,
        write_timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        http: httpx.AsyncClient | None = None,
        max_sessions: int = MAX_SESSIONS,
        session_ttl: float = SESSION_TTL,
        replica: bool = False,
        retry_ms: int = RETRY_MS,
        auth: Authenticator | None = None,
        limits: Limits | None = None,
        max_bytes_in_flight: int | None = MAX_BYTES_IN_FLIGHT,
        body_timeout: float = BODY_TIMEOUT,
        serve_metrics: bool = True,
        serve_health: bool = True,
        tools: ToolPolicy | None = None,
        reissue: ReissuePolicy | None = SAFE_TOOLS,
        principals: Iterable[str] | None = None,
        rates: RateLimits | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.upstream, self.path = upstream, path
        self.telemetry = telemetry if telemetry is not None else Telemetry("default")
        if replica and store is None:
            raise ValueError("replicas share a store: give replica=True a shared one (a RedisStore)")
        self.store: Store = store or MemoryStore()
        self.max_message_size, self.keepalive = max_message_size, keepalive
        self.max_body = max_message_size or 1 << 30
        self.timeout, self.idle_timeout, self.retry_ms = timeout, idle_timeout, retry_ms
        self.write_timeout = write_timeout
        self.max_sessions, self.session_ttl, self.replica = max_sessions, session_ttl, replica
        # a replica hands its calls over to the others as it stops; not one whose upstream is
        # in its own process (a stdio or a virtual server: no other replica can take a call
        # up there), whose calls finish within the drain deadline as one process's do
        self.hand_over = replica
        self.extra = caller_headers(headers)
        if http is not None and self.extra:
            raise ValueError("give headers to your own httpx.AsyncClient, not beside it")
        self.auth, self.body_timeout, self.serve_metrics = auth, body_timeout, serve_metrics
        self.tools, self.reissue, self.rates = tools, reissue, rates
        self.quotas = Quotas(limits)
        self.budget = ByteBudget(max_bytes_in_flight, retry_after=BUSY_RETRY_AFTER)
        self.front = Front(
            path=path,
            handlers={"POST": self._post, "GET": self._get, "DELETE": self._delete},
            name="gateway",
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            auth=auth,
            principals=principals,
            quotas=self.quotas,
            budget=self.budget,
            max_body=self.max_body,
            body_timeout=body_timeout,
            shutdown=self.aclose,
            open_paths=dict.fromkeys(HEALTH_PATHS, self._health) if serve_health else None,
            guarded_paths={"/metrics": self._metrics} if serve_metrics else None,
            failure=self._failure,
            count=self._count,
            trace=self.trace_request,
            before=self._expire,
        )
        self.upstream_label = public_url(upstream)  # what texts and logs name: never its query
        self.metrics = Metrics()
        self.metrics.collect.append(self._relay_figures)
        if rates is not None:  # (the bridge beside it takes from the same rates)
            self.metrics.collect.append(lambda: {"rate_limited_total": float(rates.refused)})
        # the one table of sessions this process relays: its store keeps none of its own
        self.relays: SessionTable[Relay] = SessionTable(max_sessions=max_sessions, idle_timeout=session_ttl)
        self._closed_figures: dict[str, float] = {}
        self._http, self._own_http = http, http is None
        if http is not None and self.telemetry.tracing:  # the operator's client: traced too
            hooks = http.event_hooks
            http.event_hooks = {**hooks, "request": [*hooks["request"], self.telemetry.upstream_hook]}
        self.passthrough = Passthrough(
            upstream,
            http=self._upstream_http,
            timeout=timeout,
            keepalive=keepalive,
            max_message_size=max_message_size,
            budget=self.budget,
            metrics=self.metrics,
            tools=tools,
            reissue=reissue,
        )
        self.draining = False  # stopping: no new session, readiness fails
        # the tasks writing a stream of the store down, and whether their client has an event id yet
        self._writers: dict[asyncio.Task[Any], bool] = {}
        self._cut: set[asyncio.Task[Any]] = set()  # those of them ended by `cut_streams`
        self._cut_after: set[asyncio.Task[Any]] = set()  # those to end once they wrote an id
        self._heard = -HEARD_WINDOW  # when the upstream last answered anything (monotonic)
        self._probe: tuple[float, asyncio.Future[bool]] | None = None  # the last probe: when, its verdict
        # sessions being taken up from the store: one lock each, and how many wait on it
        self._attaching: dict[str, tuple[asyncio.Lock, int]] = {}
        self._touched = time.monotonic()  # when the busy sessions were last kept alive

    # -- ASGI: the server core's front, then the handlers below --------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.front(scope, receive, send)

    @property
    def metadata_paths(self) -> frozenset[str]:
        """Where its protected resource metadata is served (RFC 9728), beside ``path``."""
        return self.front.metadata_paths

    async def _health(self, scope: dict[str, Any], send: Any) -> None:
        await health(send, scope["path"], self.failing)  # before Host and auth: it tells nothing

    async def _metrics(self, scope: dict[str, Any], send: Any) -> None:
        await expose(send, self.metrics.render())

    def trace_request(self, method: str, headers: dict[str, str]) -> contextlib.AbstractContextManager[Any]:
        """The access line and span of one request (what the front opens around it; a bridge
        serving this route's other revision opens them too)."""
        return _tracing(self.telemetry, method, headers)

    def _count(self, kind: str) -> None:
        self.metrics.add(f"{kind}_total")  # (the access line's outcome follows the refusal's status)

    def _failure(self, failed: Exception) -> Refused:
        """Never a traceback: a store's may name keys, which hold session ids."""
        store = isinstance(failed, StoreFailed)
        _noted(outcome="failed")
        log.warning("a request failed: %s", redacted(failed) if store else type(failed).__name__)
        return _store_unavailable() if store else refuse(500, INTERNAL_ERROR, "gateway: internal error")

    def metrics_app(self) -> Any:
        """An ASGI app answering only ``GET /metrics``, for a loopback port of its own."""
        return metrics_app(self.metrics.render)

    async def aclose(self) -> None:
        """Stop every relay (ending the upstream sessions; a replica hands its calls over to
        the others), close the rest."""
        self.cut_streams()
        await self.passthrough.reissuer.aclose()
        relays = list(self.relays.values())
        for sid in self.relays:
            self.relays.pop(sid)
        if self.replica and self.hand_over:
            await asyncio.gather(*(self._hand_over(relay) for relay in relays))
        else:
            for relay in relays:
                await self._close_relay(relay, end_upstream=True)
        if self._http is not None and self._own_http:
            await self._http.aclose()
        await self.store.aclose()

    # -- POST --------------------------------------------------------------------------

    async def _post(self, request: Request) -> None:
        """Climb the ladder: the headers, the session (both before a byte of the body is read,
        so no one unknown makes the gateway hold or parse anything), the body, the message;
        then dispatch it, the body's share and budget held until the message is handed on
        (a call's stream is written after they are given back)."""
        scope, receive, send = request.scope, request.receive, request.send
        headers, principal = request.headers, request.principal
        climb(inbound.POST_HEADERS, headers)
        version = _version(headers)
        sessionless = "mcp-session-id" not in headers
        # 2026-07-28, or a version no revision has with no session: not a session's request
        # (but an initialize, whose body says which revision it asks for)
        modern = version == NEWEST.name or (sessionless and bool(version) and version not in KNOWN_VERSIONS)
        session = None if modern or sessionless else await self._session(headers, principal)
        async with request.reading() as (message, body):
            method = message.get("method")
            _noted(mcp_method=method if isinstance(method, str) else None)
            unknown = modern and version != NEWEST.name
            if (modern and not (unknown and method == "initialize")) or method == "server/discover":
                await self._post_modern(scope, receive, send, headers, message, body, principal)
                return
            del body  # the body goes no further: the message is re-sent by the client upstream
            if method == "initialize":
                await self._initialize(send, message, principal)
                return
            serve = await self._post_session(send, headers, message, principal, session)
            del message  # what the call needs is the relay's now: the stream is written without it
        if serve is not None:
            await serve(scope, receive)

    async def _post_session(
        self,
        send: Any,
        headers: dict[str, str],
        message: dict[str, Any],
        principal: str | None,
        session: tuple[str, Relay] | None,
    ) -> _Serving | None:
        """A message of a session (2025 revisions): answered here, or a call whose stream
        the returned function writes."""
        sid, relay = session or await self._session(headers, principal)
        if self.relays.get(sid) is not relay and self.draining and self.replica:
            # handed over while its body was read: taken up again (and handed over as it ends)
            sid, relay = await self._session(headers, principal)
        if self.relays.get(sid) is not relay:  # ended (DELETE) while its body was read
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        method = message.get("method")
        if method is None:
            if not await relay.answered(message):  # the answer to a request the upstream sent down
                raise Refused(inbound.unasked_answer(None))
            await respond(send, 202, b"", [])
            return None
        tools = self.tools.of(principal) if self.tools is not None else None
        refused = tools.refused(message) if tools is not None else None
        if refused is not None:  # never sent upstream (a notification of it neither: 400)
            status = 200 if "id" in message else 400
            body = orjson.dumps(tool_refused(message.get("id"), refused))
            await respond(send, status, body, [("content-type", JSON)])
            return None
        if "id" not in message:
            await self._notification(relay, message)
            await respond(send, 202, b"", [])
            return None
        if self.rates is not None:
            await self.rates.admit(principal, message)
        self.quotas.take(principal, "calls")  # given back when the call ends, not the request
        stream = await relay.start_call(
            message, on_done=lambda: self.quotas.give(principal, "calls"), principal=principal
        )

        async def serve(scope: dict[str, Any], receive: Any) -> None:
            await self._serve(scope, receive, send, sid, stream, 0, [("mcp-session-id", sid)], relay=relay)

        return serve

    async def _initialize(self, send: Any, message: dict[str, Any], principal: str | None) -> None:
        if self.draining:  # its session would die with this process, or be handed over at once
            text = "gateway: this replica is stopping; open the session again (at another replica)"
            retry = [("retry-after", "1"), ("connection", "close")]
            raise refuse(503, SERVER_ERROR, text, ident=message.get("id"), headers=retry)
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        asked = named(params.get("protocolVersion"))
        version = asked.name if asked is not None and asked.sessions else NEWEST_WITH_SESSIONS.name
        capabilities = params.get("capabilities")
        info = params.get("clientInfo")
        record = SessionRecord(
            secrets.token_hex(16),
            version,
            None,
            capabilities if isinstance(capabilities, dict) else {},
            info if isinstance(info, dict) else {},
            principal,
        )
        _noted(session=record.ident)
        relay = await self._keep(record, message.get("id"))  # its place taken before it opens
        try:
            result = await relay.open()
        except asyncio.CancelledError:  # its client left: nothing half made stays
            await asyncio.shield(self._forget(record.ident, relay, end_upstream=True))
            raise
        except Unauthorized as refused_us:  # the operator's upstream credentials: never the client's
            await self._forget(record.ident, relay)
            text = f"the upstream {self.upstream_label} refused the gateway's credentials"
            body = orjson.dumps(unauthorized_error(message.get("id"), text, refused_us))
            await respond(send, 502, body, [("content-type", JSON)])
            return
        except Exception as failed:  # the upstream's refusal, passed on, or this one request's 502 / 503
            await self._forget(record.ident, relay)
            ident, refused = message.get("id"), open_refused(failed)
            later, come_back = refused.retry_after, refused.headers
            if refused.error is not None:  # the upstream's own answer: passed on as it is
                body = orjson.dumps({"jsonrpc": "2.0", "id": ident, "error": refused.error})
                await respond(send, refused.status, body, [("content-type", JSON), *come_back])
                return
            if later is not None:
                text = f"gateway: the upstream cannot open a session now; try again in {later} s"
                kind = {"gateway": "unavailable"}
                raise refuse(503, SERVER_ERROR, text, ident=ident, headers=come_back, data=kind) from None
            text = f"gateway: the upstream did not open a session ({type(failed).__name__}: {failed})"
            kind = {"gateway": "upstream"}
            raise refuse(502, INTERNAL_ERROR, scrub_urls(text), ident=ident, data=kind) from None
        try:
            await self.store.create(record)
        except Exception as failed:  # the store is down: nothing half made stays, upstream either
            relay.opening = False
            await self._forget(record.ident, relay, end_upstream=True)
            log.warning("storing a new session failed (%s)", type(failed).__name__)
            raise _store_unavailable(message.get("id")) from None
        relay.opening = False  # only once its record exists: never evicted half made
        self.metrics.add("sessions_opened_total")
        body = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
        await respond(send, 200, body, [("content-type", JSON), ("mcp-session-id", record.ident)])

    async def _notification(self, relay: Relay, message: dict[str, Any]) -> None:
        """A downstream notification, sent up before its POST is answered: in order, one at a
        time per session, at most `MAX_FORWARDING` waiting (then 429), each within the
        deadline (a slow upstream holds the POSTs, never an unbounded heap of tasks)."""
        method = message.get("method")
        params = message.get("params")
        if method == "notifications/initialized":
            return  # the upstream got the gateway's own at initialize
        if method == "notifications/cancelled" and isinstance(params, dict):
            # here, or at the replica relaying it (through the store)
            await relay.cancel_anywhere(params.get("requestId"), params.get("reason"))
            return
        if relay.forwarding >= MAX_FORWARDING:
            text = f"{MAX_FORWARDING} notifications of this session wait to go upstream; retry later"
            raise refuse(429, SERVER_ERROR, text, headers=[("retry-after", "1")])
        relay.forwarding += 1
        try:
            async with relay.forward_lock:
                await self._send_up(relay, message)
        finally:
            relay.forwarding -= 1

    async def _send_up(self, relay: Relay, message: dict[str, Any]) -> None:
        """One downstream notification sent upstream within the call deadline; it has no
        answer, so its loss is logged, not raised."""
        params = message.get("params")
        try:
            await asyncio.wait_for(
                relay.client.notify(str(message.get("method")), params if isinstance(params, dict) else None),
                self.timeout,
            )
        except Exception as failed:
            log.warning("forwarding a notification upstream failed (%s)", type(failed).__name__)

    async def _post_modern(
        self,
        scope: dict[str, Any],
        receive: Any,
        send: Any,
        headers: dict[str, str],
        message: dict[str, Any],
        body: bytes | bytearray,
        principal: str | None,
    ) -> None:
        """2026-07-28: each request relayed on its own, transparently (`Passthrough`): its
        body and the headers the transport names go up as they came, and the upstream's
        status, headers and body come back (a stream one complete event at a time). The
        gateway answers itself only what it owns: a version no revision has (-32022, with
        the versions it relays), headers that disagree with the body (-32020: an intermediary
        routes on them), its quotas, its budget and its upstream's failures. A
        `notifications/cancelled` is not sent up: the upstream sees every client's requests
        as one client's, so one client could name another's; closing a stream cancels."""
        version = _version(headers)
        method = message.get("method")
        ident = message.get("id")
        request = "id" in message and isinstance(method, str)
        if version and version not in KNOWN_VERSIONS and method != "server/discover":
            await _unsupported(send, ident, version)
            return
        if request and version == NEWEST.name:
            problem = ModernHeaders.of(headers, message).rejection()
            if problem is not None:
                raise refuse(400, problem[0], problem[1], ident=ident)
        if method == "notifications/cancelled":
            await respond(send, 202, b"", [])
            return
        refused = self.tools.of(principal).refused(message) if self.tools is not None else None
        if refused is not None:  # never sent upstream (-32602 is 400 in this revision)
            await respond(send, 400, orjson.dumps(tool_refused(ident, refused)), [("content-type", JSON)])
            return
        if self.rates is not None:
            await self.rates.admit(principal, message)
        exchange = Exchange(
            body,
            ident,
            method if isinstance(method, str) else None,
            request,
            message.get("params"),
            principal,
        )
        kind = "streams" if method == LISTEN else "calls"
        with self.quotas.hold(principal, kind) if request else contextlib.nullcontext():
            await self.passthrough.relay(scope, receive, send, headers, exchange)

    # -- GET and DELETE ----------------------------------------------------------------

    async def _get(self, request: Request) -> None:
        scope, receive, send, headers = request.scope, request.receive, request.send, request.headers
        principal = request.principal
        if _version(headers) == NEWEST.name:
            await not_allowed(send, [], "POST")  # no GET stream in this revision
            return
        climb(inbound.GET_HEADERS, headers)
        sid, relay = await self._session(headers, principal)
        with self.quotas.hold(principal, "streams"):  # a GET stream holds a connection: counted
            await self._stream(scope, receive, send, headers, sid, relay)

    async def _stream(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str], sid: str, relay: Relay
    ) -> None:
        """A GET: the session's standalone stream, or a stream resumed from Last-Event-ID."""
        cursor = headers.get("last-event-id")
        if cursor is None:
            stream = await relay.listen()
            try:
                await self._serve(
                    scope, receive, send, sid, stream, 0, [("mcp-session-id", sid)], relay=relay
                )
            finally:
                await relay.unlisten(stream)
            return
        place = parse_event_id(cursor)
        state = await self.store.state(sid, place[0]) if place is not None else None
        if place is None or state is None or not state.holds(place[1]):
            text = "cannot resume: the Last-Event-ID is unknown or its events were evicted"
            raise refuse(409, SERVER_ERROR, text, headers=[("mcp-session-id", sid), ("retry-after", "1")])
        self.metrics.add("downstream_resumptions_total")
        await self._serve(
            scope, receive, send, sid, place[0], place[1], [("mcp-session-id", sid)], relay=relay
        )

    async def _delete(self, request: Request) -> None:
        send, headers, principal = request.send, request.headers, request.principal
        if _version(headers) == NEWEST.name:
            await not_allowed(send, [], "POST")  # no session to end in this revision
            return
        sid, relay = await self._session(headers, principal)
        self.relays.pop(sid)
        await self._close_relay(relay, end_upstream=True)
        try:
            await self.store.drop(sid)
        except StoreFailed as failed:  # ended here and upstream; its keys expire with their TTL
            log.warning("dropping a deleted session's keys failed (%s)", redacted(failed, sid))
        await respond(send, 200, b"", [])


def _version(headers: dict[str, str]) -> str:
    """The revision a request names in ``MCP-Protocol-Version`` ("" for none), OWS trimmed."""
    return headers.get("mcp-protocol-version", "").strip(" \t")


async def _unsupported(send: Any, ident: Any, version: str) -> None:
    """400 / -32022 for a version no revision has, naming the ones this gateway relays and
    the one asked (as the transport's error for it carries them)."""
    data = {"supported": sorted(PROFILES, reverse=True), "requested": version[:64]}
    text = f"Unsupported protocol version: {version[:64]}"
    body = orjson.dumps(error_message(ident, UNSUPPORTED_VERSION, text, data))
    await respond(send, 400, body, [("content-type", JSON)])


def _store_unavailable(ident: Any = None) -> Refused:
    """503 with ``Retry-After``: the store failed (Redis refusing or gone); the client retries."""
    text = "gateway: its session store is unavailable; retry later"
    return refuse(503, SERVER_ERROR, text, ident=ident, headers=[("retry-after", str(STORE_RETRY_AFTER))])


_Serving = Callable[[dict[str, Any], Any], Awaitable[None]]  # writes a call's stream (scope, receive)


@contextlib.contextmanager
def _tracing(telemetry: Telemetry, method: str, headers: dict[str, str]) -> Iterator[Callable[[Any], Any]]:
    with telemetry.request(method, headers) as trace:
        yield trace.sending
