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
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import httpx
import orjson

from ..._encoder import raw_event_pieces
from ..._envelope import AVAILABLE as ENVELOPES
from ..._secrets import public_url, scrub_urls
from ...asgi import EventStreamResponse
from ..client import Client, RPCError, StreamBroken, Unauthorized
from ..protocol import inbound
from ..protocol.codes import INTERNAL_ERROR, SERVER_ERROR, SESSION_NOT_FOUND, UNSUPPORTED_VERSION
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import KNOWN_VERSIONS, NEWEST, NEWEST_WITH_SESSIONS, PROFILES, named
from ..protocol.wire import JSON, SSE, caller_headers
from ..server.asgi import (
    Refused,
    climb,
    error_message,
    not_allowed,
    plain,
    refuse,
    respond,
)
from ..server.auth import Authenticator
from ..server.budget import ByteBudget
from ..server.front import Front, Request
from ..server.quotas import Limits, QuotaExceeded, Quotas
from ..server.sessions import SessionsFull, SessionTable
from ..server.tools import ToolPolicy, tool_refused
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE
from .errors import gateway_error, unauthorized_error
from .health import HEALTH_PATHS, health
from .metrics import Metrics, expose, metrics_app
from .observe import Telemetry, current, session_hash
from .passthrough import LISTEN, Exchange, Passthrough
from .relay import Relay
from .stores import (
    SESSION_TTL,
    Abandoned,
    CallRecord,
    Gap,
    MemoryStore,
    SessionRecord,
    Store,
    StoreFailed,
    parse_event_id,
    redacted,
)

log = logging.getLogger("ssewire.mcp.gateway")

LARGE = 64 * 1024  # bytes: a message past this is read for its envelope only, written with no joining copy
SLICE = 256 * 1024  # bytes: a large event is written downstream in pieces of this size
RETRY_MS = 500  # the retry field of the gateway's streams: a client resumes from it soon
MAX_SESSIONS = 1024  # relayed at once; past it the least recently used idle one goes, else 503
BUSY_RETRY_AFTER = 5  # seconds a client refused for want of room waits: a session frees when a call ends
MAX_BYTES_IN_FLIGHT = 256 << 20  # request bodies being read and parsed, over all clients
BODY_TIMEOUT = 30.0  # seconds a request body may take to arrive: a stalled upload holds nothing longer
MAX_FORWARDING = 16  # notifications of one session waiting to go upstream; past it 429
STORE_RETRY_AFTER = 2  # seconds a client refused because the store failed waits
HEARD_WINDOW = 10.0  # seconds an upstream that answered anything counts as reachable
PROBE_TIMEOUT = 2.0  # seconds a readiness probe of the upstream (or a ping of the store) may take
PROBE_KEPT = 1.0  # seconds a probe's verdict is reused: /readyz never floods the upstream
SETTLE = 2.0  # seconds a draining replica gives a call with no cursor to have one, or to end
DRAINING = "the gateway is stopping (draining)"


class Gateway:
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
    :param principals: only these principals are served (403 for the others; needs ``auth``).
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
        principals: Iterable[str] | None = None,
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
        self.extra = caller_headers(headers)
        if http is not None and self.extra:
            raise ValueError("give headers to your own httpx.AsyncClient, not beside it")
        self.auth, self.body_timeout, self.serve_metrics = auth, body_timeout, serve_metrics
        self.tools = tools
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
            trace=self._trace,
            before=self._expire,
        )
        self.upstream_label = public_url(upstream)  # what texts and logs name: never its query
        self.metrics = Metrics()
        self.metrics.collect.append(self._relay_figures)
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

    def _trace(self, method: str, headers: dict[str, str]) -> contextlib.AbstractContextManager[Any]:
        return _tracing(self.telemetry, method, headers)

    def _count(self, kind: str) -> None:
        self.metrics.add(f"{kind}_total")
        if kind == "refused":
            _noted(outcome="refused")

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
        relays = list(self.relays.values())
        for sid in self.relays:
            self.relays.pop(sid)
        if self.replica:
            await asyncio.gather(*(self._hand_over(relay) for relay in relays))
        else:
            for relay in relays:
                await self._close_relay(relay, end_upstream=True)
        if self._http is not None and self._own_http:
            await self._http.aclose()
        await self.store.aclose()

    # -- stopping and readiness --------------------------------------------------------

    async def drain(self, seconds: float) -> None:
        """Stop taking new sessions (readiness fails at once), then: a replica hands each
        call over to another at once (its lease let go: a follower there adopts it) and
        ends its downstream streams, so their clients resume elsewhere; one process lets
        its calls finish for up to ``seconds``, then ends those left with an explicit error.
        The server stops after (the command line's SIGTERM)."""
        self.draining = True
        deadline = time.monotonic() + seconds
        busy = sum(len(relay.calls) for relay in self.relays.values())
        self.telemetry.notice(
            "drain", f"draining: {busy} calls in flight, {seconds:g} s to finish or hand them over"
        )
        if self.replica:
            relays = list(self.relays.values())
            for relay in relays:
                self.relays.pop(relay.record.ident)
            settle = min(SETTLE, seconds / 2)
            await asyncio.gather(*(self._hand_over(relay, settle) for relay in relays))
            self.cut_streams()
            self.telemetry.notice(
                "drained", f"drained: {len(relays)} sessions' calls handed over to the other replicas"
            )
            return
        while time.monotonic() < deadline and (
            any(relay.calls for relay in self.relays.values()) or self.passthrough.in_flight
        ):
            await asyncio.sleep(0.05)
        left = [relay for relay in self.relays.values() if relay.calls]
        for relay in left:
            relay.end_calls(f"{DRAINING}: this call did not end within the drain deadline ({seconds:g} s)")
        calls = [task for relay in left for task in relay.calls.values()]
        if calls:
            await asyncio.wait(calls, timeout=1.0)
        while time.monotonic() < deadline + 1.0 and any(
            relay.serving > len(relay.listeners) for relay in self.relays.values()
        ):
            await asyncio.sleep(0.02)  # the ends of the calls' streams written down
        self.cut_streams()
        self.telemetry.notice("drained", f"drained: {len(calls)} calls ended with an explicit error")

    async def _hand_over(self, relay: Relay, settle: float = SETTLE) -> None:
        for name, value in relay.figures().items():  # its figures outlive it
            self._closed_figures[name] = self._closed_figures.get(name, 0.0) + value
        try:
            text = f"{DRAINING}: this call had no upstream cursor to be taken up from"
            await relay.hand_over(text, settle)
        except Exception as failed:  # best effort: its leases lapse, and the calls are adopted later
            log.warning("handing a session's calls over failed (%s)", type(failed).__name__)

    def cut_streams(self) -> None:
        """End every stream of the store being written down, cleanly, so its client resumes
        it with Last-Event-ID (at another replica when this one stops); a stream that has
        not yet written an event id (its priming event) ends right after one, since its
        client could not resume without it."""
        for task, spoken in self._writers.items():
            if task in self._cut:
                continue
            if spoken:
                self._cut.add(task)
                task.cancel()
            else:
                self._cut_after.add(task)

    async def failing(self) -> list[str]:
        """What keeps this gateway from being ready: ``draining``, ``store`` (no answer to a
        ping), ``upstream`` (no answer of any kind lately, nor to a probe now)."""
        store, upstream = await asyncio.gather(self.store_answers(), self.upstream_answers())
        return [
            name
            for name, bad in (("draining", self.draining), ("store", not store), ("upstream", not upstream))
            if bad
        ]

    async def store_answers(self) -> bool:
        try:
            await asyncio.wait_for(self.store.ping(), PROBE_TIMEOUT)
        except Exception:  # what failed is not readiness's to say: never a text in its body
            return False
        return True

    async def upstream_answers(self) -> bool:
        """The upstream answered anything within `HEARD_WINDOW`, or answers a probe now: one
        probe at a time, its verdict kept `PROBE_KEPT` (so /readyz cannot flood it)."""
        now = time.monotonic()
        if now - self._heard < HEARD_WINDOW:
            return True
        if self._probe is None or (self._probe[1].done() and now - self._probe[0] > PROBE_KEPT):
            self._probe = (now, asyncio.ensure_future(self._probed()))
        return await asyncio.shield(self._probe[1])

    async def _probed(self) -> bool:
        try:
            async with self._upstream_http().stream(
                "GET", self.upstream, headers={"accept": JSON}, timeout=PROBE_TIMEOUT
            ):
                pass  # its head is enough: any answer says the upstream is there
        except (httpx.HTTPError, OSError):
            return False
        self._heard = time.monotonic()
        return True

    async def _upstream_heard(self, response: httpx.Response) -> None:
        self._heard = time.monotonic()

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
        refused = self.tools.refused(message) if self.tools is not None else None
        if refused is not None:  # never sent upstream (a notification of it neither: 400)
            status = 200 if "id" in message else 400
            body = orjson.dumps(tool_refused(message.get("id"), refused))
            await respond(send, status, body, [("content-type", JSON)])
            return None
        if "id" not in message:
            await self._notification(relay, message)
            await respond(send, 202, b"", [])
            return None
        self.quotas.take(principal, "calls")  # given back when the call ends, not the request
        stream = await relay.start_call(message, on_done=lambda: self.quotas.give(principal, "calls"))

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
        except RPCError as upstream_error:  # the upstream's own answer: passed on as it is
            await self._forget(record.ident, relay)
            body = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": upstream_error.error})
            await respond(send, 200, body, [("content-type", JSON)])
            return
        except Unauthorized as refused_us:  # the operator's upstream credentials: never the client's
            await self._forget(record.ident, relay)
            text = f"the upstream {self.upstream_label} refused the gateway's credentials"
            body = orjson.dumps(unauthorized_error(message.get("id"), text, refused_us))
            await respond(send, 502, body, [("content-type", JSON)])
            return
        except Exception as failed:  # any failure of the upstream: this one request's 502
            await self._forget(record.ident, relay)
            text = f"gateway: the upstream did not open a session ({type(failed).__name__}: {failed})"
            raise refuse(502, INTERNAL_ERROR, scrub_urls(text), ident=message.get("id")) from None
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
        refused = self.tools.refused(message) if self.tools is not None else None
        if refused is not None:  # never sent upstream (-32602 is 400 in this revision)
            await respond(send, 400, orjson.dumps(tool_refused(ident, refused)), [("content-type", JSON)])
            return
        exchange = Exchange(body, ident, method if isinstance(method, str) else None, request)
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

    # -- sessions ----------------------------------------------------------------------

    async def _session(self, headers: dict[str, str], principal: str | None) -> tuple[str, Relay]:
        """The request's session: the ladder's header rules (400), then its relay (404) if
        ``principal`` opened it: to anyone else it does not exist (the same 404, so a session
        id learnt by another client is worth nothing and says nothing)."""
        climb(inbound.SESSION_HEADERS, headers)
        sid = headers["mcp-session-id"]
        _noted(session=sid)
        relay = await self._relay_for(sid, principal)
        return sid, relay

    async def _relay_for(self, sid: str, principal: str | object | None) -> Relay:
        """The session's relay here: kept, or taken up from the store's record (once, however
        many requests for it come at the same time); 404 unless ``principal`` opened it
        (`_ANYONE`: the gateway's own lookups), checked before it counts as used."""
        known = self.relays.get(sid)
        if known is not None and not known.opening and not _bound_to(known.record, principal):
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        relay = self.relays.use(sid)
        if relay is None or relay.opening:  # taken up by a request now: wait for it, once
            lock, waiting = self._attaching.get(sid, (asyncio.Lock(), 0))
            self._attaching[sid] = (lock, waiting + 1)  # counted: the last one out lets it go
            try:
                async with lock:
                    relay = self.relays.use(sid) or await self._take_up(sid, principal)
            finally:
                lock, waiting = self._attaching[sid]
                if waiting > 1:
                    self._attaching[sid] = (lock, waiting - 1)
                else:
                    del self._attaching[sid]
        elif await self.store.load(sid) is None:  # (the load keeps it from expiring)
            # ended (DELETE) or expired in the store, at another replica perhaps: gone here too
            gone = self.relays.pop(sid)
            if gone is not None:
                await self._close_relay(gone, end_upstream=False)
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        if not _bound_to(relay.record, principal):  # (one that was being taken up meanwhile)
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        return relay

    async def _take_up(self, sid: str, principal: str | object | None) -> Relay:
        record = await self.store.load(sid)
        if record is None or not _bound_to(record, principal):  # never attached for a stranger
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        relay = await self._keep(record, None)
        try:
            await relay.attach()  # a session another replica opened
        except StreamBroken as failed:
            await self._forget(sid, relay, end_upstream=False)
            raise refuse(404, SESSION_NOT_FOUND, f"Session not found ({failed})") from None
        finally:
            relay.opening = False
        return relay

    async def _keep(self, record: SessionRecord, ident: Any) -> Relay:
        """A relay for ``record``, in the table before it opens (so concurrent ones cannot
        all pass a room check): the least recently used idle sessions make room (closed, and
        their records dropped when this store is this process's alone), or 503."""
        limit = self.quotas.limits.sessions
        if (
            limit is not None
            and sum(1 for r in self.relays.values() if r.record.principal == record.principal) >= limit
        ):
            raise QuotaExceeded("sessions", limit, BUSY_RETRY_AFTER)  # counted from the table: never astray
        relay = self._relay(record)
        relay.opening = True
        try:
            dropped = self.relays.add(record.ident, relay)
        except SessionsFull:
            await self._close_relay(relay, end_upstream=False)
            text = f"gateway busy: all {self.max_sessions} sessions are working; retry later"
            retry = [("retry-after", str(BUSY_RETRY_AFTER))]
            raise refuse(503, SERVER_ERROR, text, ident=ident, headers=retry) from None
        for gone in dropped:
            await self._end(gone)  # best effort: it never raises
        return relay

    async def _forget(self, sid: str, relay: Relay, *, end_upstream: bool = False) -> None:
        if self.relays.get(sid) is relay:
            self.relays.pop(sid)
        await self._close_relay(relay, end_upstream=end_upstream)

    async def _end(self, relay: Relay) -> None:
        """A session the table let go (room made, or idle): its relay closed; in one process,
        its upstream session and its record too (replicas keep both for each other)."""
        await self._close_relay(relay, end_upstream=not self.replica)
        if not self.replica:
            try:
                await self.store.drop(relay.record.ident)
            except Exception as failed:  # letting a session go is best effort: it never fails a request
                log.warning("dropping a session's record failed (%s)", type(failed).__name__)

    def _upstream_http(self) -> httpx.AsyncClient:
        """The one upstream connection pool (the operator's headers on every request)."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, read=None),
                headers=self.extra,
                event_hooks={"request": [self.telemetry.upstream_hook], "response": [self._upstream_heard]},
                limits=httpx.Limits(max_connections=4 * self.max_sessions, max_keepalive_connections=64),
            )
        return self._http

    def _client(self, **options: Any) -> Client:
        return Client(
            self.upstream,
            first_id=secrets.randbits(32) << 20,  # replicas share upstream sessions: ids far apart
            http=self._upstream_http(),
            listen=False,
            timeout=self.timeout,
            idle_timeout=self.idle_timeout,
            max_message_size=self.max_message_size,
            on_transport_event=self.telemetry.transport_event,
            # a large answer is relayed as its bytes, its envelope read alone (with msgspec)
            raw_above=LARGE if ENVELOPES else None,
            **options,
        )

    def _relay(self, record: SessionRecord) -> Relay:
        return Relay(
            record,
            store=self.store,
            metrics=self.metrics,
            client=self._client,
            timeout=self.timeout,
            tools=self.tools,
        )

    async def _expire(self) -> None:
        """Sessions unused past ``session_ttl`` and doing nothing are let go; the busy ones
        (a stream open, a call running) are kept alive in the store."""
        for relay in self.relays.expire():
            await self._end(relay)
        now = time.monotonic()
        if now - self._touched > self.session_ttl / 4:  # a session only streaming sends no requests
            self._touched = now
            for relay in [relay for relay in self.relays.values() if relay.busy]:
                await self.store.load(relay.record.ident)

    async def _close_relay(self, relay: Relay, *, end_upstream: bool) -> None:
        for name, value in relay.figures().items():  # its figures outlive it
            self._closed_figures[name] = self._closed_figures.get(name, 0.0) + value
        try:
            await relay.close(end_upstream=end_upstream)
        except Exception as failed:  # closing is best effort: never a reason to fail a request
            log.warning("closing a relay failed (%s)", type(failed).__name__)

    def _relay_figures(self) -> dict[str, float]:
        figures = dict(self._closed_figures)
        for relay in self.relays.values():
            for name, value in relay.figures().items():
                figures[name] = figures.get(name, 0.0) + value
        figures["sessions_open"] = float(len(self.relays))
        figures["bytes_in_flight"] = float(self.budget.in_use)
        figures["bytes_in_flight_peak"] = float(self.budget.peak)
        figures["budget_refusals_total"] = float(self.budget.refused)
        for kind, held in self.quotas.figures().items():
            figures[f"held_{kind}"] = float(held)
        figures["held_sessions"] = float(len(self.relays))  # the table counts sessions, not the quotas
        return figures

    # -- writing a stream downstream ---------------------------------------------------

    async def _serve(
        self,
        scope: dict[str, Any],
        receive: Any,
        send: Any,
        sid: str,
        stream: int,
        after: int,
        headers: list[tuple[str, str]],
        *,
        relay: Relay | None = None,
    ) -> None:
        """Write a stream of the store after ``after``; keep-alive comments while it is silent.
        ``relay``'s session is busy meanwhile (never expired, and working when the stream
        is not its GET stream)."""
        writer = asyncio.current_task()  # (the response reads the source in tasks of its own)
        assert writer is not None
        source = self._events(sid, stream, after, writer)
        app = EventStreamResponse(
            source,
            keepalive=self.keepalive,
            headers=[("content-type", SSE), ("cache-control", "no-cache"), *headers],
        )

        opened = False

        async def bounded(message: dict[str, Any]) -> None:
            nonlocal opened
            opened = opened or message["type"] == "http.response.start"
            try:
                await asyncio.wait_for(send(message), self.write_timeout)
            except asyncio.TimeoutError:
                self.metrics.add("stalled_readers_total")
                raise ConnectionAbortedError(
                    f"the client read nothing for {self.write_timeout:g} s"
                ) from None

        self.metrics.gauges["streams_open"] += 1
        if relay is not None:
            relay.serving += 1
        self._writers[writer] = after > 0  # a client resuming has an id already
        try:
            await app(scope, receive, bounded)
        except ConnectionAbortedError:
            pass  # the connection is cut: the client resumes from the store when it reads again
        except asyncio.CancelledError:
            if writer not in self._cut:
                raise
            if sys.version_info >= (3, 11):
                writer.uncancel()
            # ended by `cut_streams`: the stream ends cleanly, and its client resumes it
            with contextlib.suppress(Exception):
                if opened:
                    await asyncio.wait_for(send({"type": "http.response.body", "body": b""}), 1.0)
                else:
                    await plain(send, 503, "the gateway is stopping; resume at another replica")
        finally:
            self._writers.pop(writer, None)
            self._cut.discard(writer)
            self._cut_after.discard(writer)
            self.metrics.gauges["streams_open"] -= 1
            if relay is not None:
                relay.serving -= 1
                self.relays.touch(relay.record.ident)  # idle from the end of its last stream

    async def _events(
        self, sid: str, stream: int, after: int, writer: asyncio.Task[Any]
    ) -> AsyncIterator[bytes]:
        sent = after
        while True:
            try:
                async for batch in self.store.follow(sid, stream, sent):
                    now = time.time()
                    pieces: list[bytes] = []
                    for stored in batch:
                        if not stored.data:  # the priming event: an id to resume from, and when
                            pieces += raw_event_pieces(b"", id=stored.event_id, retry=self.retry_ms)
                        else:
                            pieces += raw_event_pieces(stored.data, event="message", id=stored.event_id)
                    self.metrics.observe(now - stored.arrived for stored in batch if stored.data)
                    self.metrics.add("messages_total", sum(1 for stored in batch if stored.data))
                    self.metrics.add("downstream_bytes_total", sum(map(len, pieces)))
                    sent += len(batch)
                    if max(map(len, pieces)) < LARGE:
                        yield b"".join(pieces)  # small events: one write
                    else:
                        for piece in pieces:  # a large one: written as stored, in slices the
                            # socket takes as it drains (one write of megabytes is copied whole
                            # by h11 and again by the transport's buffer, into fresh memory)
                            for at in range(0, len(piece), SLICE):
                                yield piece[at : at + SLICE] if len(piece) > SLICE else piece
                    if writer in self._writers:
                        self._writers[writer] = True  # its client has an event id now
                    if writer in self._cut_after:
                        return  # `cut_streams` ends it, now that its client can resume it
                return
            except (Gap, StoreFailed):
                # cut, never a silent gap: the client resumes, and is served or refused explicitly
                raise ConnectionAbortedError("the store no longer holds what this stream needs") from None
            except Abandoned as abandoned:
                if self.draining:  # this replica takes nothing up: the stream ends, resumed at another
                    return
                # shielded: a reader that leaves mid-adoption must not leave the stream adopted
                # by no one (its lease renewed, never finished)
                try:
                    await asyncio.shield(self._adopt(sid, stream, abandoned.call))
                except StoreFailed:  # the store cannot say who takes it: the client resumes later
                    raise ConnectionAbortedError("the store failed while this stream was adopted") from None

    async def _adopt(self, sid: str, stream: int, call: CallRecord | None) -> None:
        """The replica writing a call's stream stopped, once, whichever replica comes first:
        resume its upstream answer from where the stored events end (the stored position)
        and write the rest; without a position (no event id upstream yet), end the stream
        with an explicit error, since the call's outcome upstream is unknown."""
        if await self.store.adopt(sid, stream) is None:
            return  # another follower took it, or it ended meanwhile: follow on
        state = await self.store.state(sid, stream)
        position = state.position if state is not None else None
        if call is not None and position is not None and position.cursor:
            try:
                relay = await self._relay_for(sid, _ANYONE)
            except Refused:
                relay = None
            if relay is not None:
                relay.take_over(stream, call, position)
                self.metrics.add("takeovers_total")
                self.telemetry.notice(
                    "takeover",
                    "a call of a stopped replica was taken over: its answer is resumed upstream",
                    session=session_hash(sid, self.telemetry.key),
                )
                return
        if call is not None:
            self.metrics.add("calls_failed_total")
            text = (
                f"the gateway replica relaying {call.method} stopped before its answer; "
                "the request may have been processed: check its effects before sending it again"
            )
            error_event = orjson.dumps(gateway_error(call.id, "replica-lost", text))
            await self.store.append(sid, stream, [(error_event, time.time())], final=True)
            return
        await self.store.finish(sid, stream)


def _noted(**fields: Any) -> None:
    """Note ``fields`` on the trace of the request being relayed (if any)."""
    trace = current()
    if trace is not None:
        trace.note(**fields)


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
_ANYONE = object()  # the principal of the gateway's own lookups (a takeover): bound to none


def _bound_to(record: SessionRecord, principal: str | object | None) -> bool:
    return principal is _ANYONE or record.principal == principal


@contextlib.contextmanager
def _tracing(telemetry: Telemetry, method: str, headers: dict[str, str]) -> Iterator[Callable[[Any], Any]]:
    with telemetry.request(method, headers) as trace:
        yield trace.sending
