"""The gateway as an ASGI app: MCP Streamable HTTP downstream, one upstream server.

    app = Gateway("http://127.0.0.1:9000/mcp")          # uvicorn.run(app, host="127.0.0.1")

Downstream it answers like a server (POST, GET, DELETE on ``path``; ``/metrics`` in the
Prometheus text format) and checks what a server checks: Host and Origin (DNS rebinding),
Accept and Content-Type, the body under the message limit, one JSON-RPC message per POST,
the session. Upstream it is a client ([`Relay`][ssewire.mcp.gateway.relay.Relay], one per
downstream session). Under 2026-07-28 there are no sessions: each request is relayed on its
own, and a broken answer is re-issued upstream only for a request that lists or reads.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx
import orjson

from ...asgi import EventStreamResponse
from ..client import Client, RPCError, StreamBroken
from ..protocol import inbound
from ..protocol.codes import INTERNAL_ERROR, SERVER_ERROR, SESSION_NOT_FOUND
from ..protocol.headers import ModernHeaders
from ..protocol.profiles import NEWEST, NEWEST_WITH_SESSIONS, named
from ..protocol.wire import JSON, SSE, caller_headers
from ..server.asgi import (
    LOOPBACK,
    Refused,
    climb,
    cors,
    headers_of,
    host_name,
    lifespan,
    loopback_origin,
    message_of,
    not_allowed,
    plain,
    preflight,
    read_body,
    refuse,
    refused,
    respond,
    with_headers,
)
from ..server.sessions import SessionsFull, SessionTable
from ..transport.http import DEFAULT_MAX_MESSAGE_SIZE
from .metrics import Metrics
from .relay import Relay, gateway_error
from .stores import SESSION_TTL, Abandoned, CallRecord, Gap, MemoryStore, SessionRecord, Store, parse_event_id

log = logging.getLogger("ssewire.mcp.gateway")

LARGE = 64 * 1024  # bytes: an event's payload past this is written without a joining copy
RETRY_MS = 500  # the retry field of the gateway's streams: a client resumes from it soon
MODERN = "-stateless-"  # the private store's one session: 2026-07-28 requests, not resumable
MAX_SESSIONS = 1024  # relayed at once; past it the least recently used idle one goes, else 503
BUSY_RETRY_AFTER = 5  # seconds a client refused for want of room waits: a session frees when a call ends


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
    ) -> None:
        self.upstream, self.path = upstream, path
        if replica and store is None:
            raise ValueError("replicas share a store: give replica=True a shared one (a RedisStore)")
        self.store: Store = store or MemoryStore()
        self.max_message_size, self.keepalive = max_message_size, keepalive
        self.max_body = max_message_size or 1 << 30
        self.allowed_hosts = frozenset(host.lower() for host in allowed_hosts)
        self.allowed_origins = frozenset(origin.rstrip("/").lower() for origin in allowed_origins)
        self.timeout, self.idle_timeout, self.retry_ms = timeout, idle_timeout, retry_ms
        self.write_timeout = write_timeout
        self.max_sessions, self.session_ttl, self.replica = max_sessions, session_ttl, replica
        self.extra = caller_headers(headers)
        if http is not None and self.extra:
            raise ValueError("give headers to your own httpx.AsyncClient, not beside it")
        self.metrics = Metrics()
        self.metrics.collect.append(self._relay_figures)
        # the one table of sessions this process relays: its store keeps none of its own
        self.relays: SessionTable[Relay] = SessionTable(max_sessions=max_sessions, idle_timeout=session_ttl)
        self._closed_figures: dict[str, float] = {}
        self._modern: Relay | None = None
        self._modern_lock = asyncio.Lock()
        self._passing = MemoryStore(max_bytes=4 * self.max_body)
        self._http, self._own_http = http, http is None
        self._attaching: dict[str, asyncio.Lock] = {}  # sessions being taken up from the store
        self._touched = time.monotonic()  # when the busy sessions were last kept alive

    # -- ASGI --------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        if scope["type"] != "http":
            return
        headers = headers_of(scope)
        if not self._trusted(headers):
            self.metrics.add("refused_total")
            await plain(send, 403, "forbidden: Origin or Host is not one this gateway serves")
            return
        if scope["path"] == "/metrics" and scope["method"] == "GET":
            await respond(send, 200, self.metrics.render(), [("content-type", "text/plain; version=0.0.4")])
            return
        if scope["path"] != self.path:
            await plain(send, 404, "not found")
            return
        send = with_headers(send, cors(headers.get("origin")))  # every answer to a trusted Origin
        handler = {"POST": self._post, "GET": self._get, "DELETE": self._delete}.get(scope["method"])
        try:
            if scope["method"] == "OPTIONS":
                await preflight(send, [])
            elif handler is None:
                await not_allowed(send, [])
            else:
                await self._expire()
                await handler(scope, receive, send, headers)
        except Refused as refusal:
            self.metrics.add("refused_total")
            await refused(send, refusal.refusal)

    async def aclose(self) -> None:
        """Stop every relay (ending the upstream sessions unless a replica), close the rest."""
        relays = [*self.relays.values(), *([self._modern] if self._modern else [])]
        for sid in self.relays:
            self.relays.pop(sid)
        for relay in relays:
            await self._close_relay(relay, end_upstream=not self.replica)
        if self._http is not None and self._own_http:
            await self._http.aclose()
        await self.store.aclose()

    def _trusted(self, headers: dict[str, str]) -> bool:
        name = host_name(headers.get("host"))
        if name is None or not (name in LOOPBACK or name in self.allowed_hosts):
            return False
        origin = headers.get("origin")
        return origin is None or loopback_origin(origin) or origin.rstrip("/").lower() in self.allowed_origins

    # -- POST --------------------------------------------------------------------------

    async def _post(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        """Climb the ladder (the body, its headers, the message), then relay."""
        body = await read_body(receive, headers, self.max_body)
        climb(inbound.POST_HEADERS, headers)
        message = message_of(body)
        method = message.get("method")
        if headers.get("mcp-protocol-version", "").strip() == NEWEST.name or method == "server/discover":
            await self._post_modern(scope, receive, send, headers, message)
            return
        if method == "initialize":
            await self._initialize(send, message)
            return
        sid, relay = await self._session(headers)
        if method is None:
            await relay.answered(message)  # the answer to a request the upstream sent down
            await respond(send, 202, b"", [])
        elif "id" not in message:
            self._notification(relay, message)
            await respond(send, 202, b"", [])
        else:
            stream = await relay.start_call(message)
            await self._serve(scope, receive, send, sid, stream, 0, [("mcp-session-id", sid)], relay=relay)

    async def _initialize(self, send: Any, message: dict[str, Any]) -> None:
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
        )
        relay = await self._keep(record, message.get("id"))  # its place taken before it opens
        try:
            result = await relay.open()
        except RPCError as upstream_error:  # the upstream's own answer: passed on as it is
            await self._forget(record.ident, relay)
            body = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), "error": upstream_error.error})
            await respond(send, 200, body, [("content-type", JSON)])
            return
        except Exception as failed:  # any failure of the upstream: this one request's 502
            await self._forget(record.ident, relay)
            text = f"gateway: the upstream did not open a session ({type(failed).__name__}: {failed})"
            raise refuse(502, INTERNAL_ERROR, text, ident=message.get("id")) from None
        try:
            await self.store.create(record)
        finally:
            relay.opening = False  # only once its record exists: never evicted half made
        self.metrics.add("sessions_opened_total")
        body = orjson.dumps({"jsonrpc": "2.0", "id": message.get("id"), "result": result})
        await respond(send, 200, body, [("content-type", JSON), ("mcp-session-id", record.ident)])

    def _notification(self, relay: Relay, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params")
        if method == "notifications/initialized":
            return  # the upstream got the gateway's own at initialize
        if method == "notifications/cancelled" and isinstance(params, dict):
            relay.cancel(params.get("requestId"), params.get("reason"))
            return
        task = asyncio.ensure_future(
            relay.client.notify(str(method), params if isinstance(params, dict) else None)
        )
        task.add_done_callback(_logged)

    async def _post_modern(
        self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str], message: dict[str, Any]
    ) -> None:
        """2026-07-28: each request on its own; its answer streamed without ids (no resumption)."""
        if "id" in message and "method" in message:
            problem = ModernHeaders.of(headers, message).rejection()
            if problem is not None:
                raise refuse(400, problem[0], problem[1], ident=message.get("id"))
        relay = await self._modern_relay(message.get("id"))
        if "method" not in message:
            await respond(send, 202, b"", [])  # no server-to-client requests are relayed here
            return
        if "id" not in message:
            self._notification(relay, message)
            await respond(send, 202, b"", [])
            return
        stream = await relay.start_call(message)
        await self._serve(scope, receive, send, MODERN, stream, 0, [], store=self._passing)

    async def _modern_relay(self, ident: Any) -> Relay:
        async with self._modern_lock:
            if self._modern is None:
                relay = Relay(
                    SessionRecord(MODERN, NEWEST.name, None),
                    store=self._passing,
                    metrics=self.metrics,
                    client=self._client,
                    timeout=self.timeout,
                )
                try:
                    await relay.open()
                except (RPCError, StreamBroken, httpx.HTTPError, asyncio.TimeoutError) as failed:
                    await self._close_relay(relay, end_upstream=False)
                    text = f"gateway: the upstream does not answer {NEWEST.name} ({failed})"
                    raise refuse(502, INTERNAL_ERROR, text, ident=ident) from None
                self._modern = relay
            return self._modern

    # -- GET and DELETE ----------------------------------------------------------------

    async def _get(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        climb(inbound.GET_HEADERS, headers)
        if headers.get("mcp-protocol-version", "").strip() == NEWEST.name:
            await not_allowed(send, [], "POST")
            return
        sid, relay = await self._session(headers)
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

    async def _delete(self, scope: dict[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        sid, relay = await self._session(headers)
        self.relays.pop(sid)
        await self._close_relay(relay, end_upstream=True)
        await self.store.drop(sid)
        await respond(send, 200, b"", [])

    # -- sessions ----------------------------------------------------------------------

    async def _session(self, headers: dict[str, str]) -> tuple[str, Relay]:
        """The request's session: the ladder's header rules (400), then its relay (404)."""
        climb(inbound.SESSION_HEADERS, headers)
        sid = headers["mcp-session-id"]
        return sid, await self._relay_for(sid)

    async def _relay_for(self, sid: str) -> Relay:
        """The session's relay here: kept, or taken up from the store's record (once, however
        many requests for it come at the same time)."""
        relay = self.relays.use(sid)
        if relay is None or relay.opening:  # taken up by a request now: wait for it, once
            lock = self._attaching.setdefault(sid, asyncio.Lock())
            try:
                async with lock:
                    relay = self.relays.use(sid) or await self._take_up(sid)
            finally:
                if not lock.locked():
                    self._attaching.pop(sid, None)
        elif await self.store.load(sid) is None:  # (the load keeps it from expiring)
            # ended (DELETE) or expired in the store, at another replica perhaps: gone here too
            gone = self.relays.pop(sid)
            if gone is not None:
                await self._close_relay(gone, end_upstream=False)
            raise refuse(404, SESSION_NOT_FOUND, "Session not found")
        return relay

    async def _take_up(self, sid: str) -> Relay:
        record = await self.store.load(sid)
        if record is None:
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
            except Exception:  # letting a session go is best effort: never a reason to fail a request
                log.exception("dropping a session's record failed")

    def _client(self, **options: Any) -> Client:
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, read=None),
                headers=self.extra,
                limits=httpx.Limits(max_connections=4 * self.max_sessions, max_keepalive_connections=64),
            )
        return Client(
            self.upstream,
            first_id=secrets.randbits(32) << 20,  # replicas share upstream sessions: ids far apart
            http=self._http,
            listen=False,
            timeout=self.timeout,
            idle_timeout=self.idle_timeout,
            max_message_size=self.max_message_size,
            **options,
        )

    def _relay(self, record: SessionRecord) -> Relay:
        return Relay(
            record, store=self.store, metrics=self.metrics, client=self._client, timeout=self.timeout
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
        except Exception:  # closing is best effort: never a reason to fail a request
            log.exception("closing a relay failed")

    def _relay_figures(self) -> dict[str, float]:
        figures = dict(self._closed_figures)
        relays = [*self.relays.values(), *([self._modern] if self._modern else [])]
        for relay in relays:
            for name, value in relay.figures().items():
                figures[name] = figures.get(name, 0.0) + value
        figures["sessions_open"] = float(len(self.relays))
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
        store: Store | None = None,
        relay: Relay | None = None,
    ) -> None:
        """Write a stream of the store after ``after``; keep-alive comments while it is silent.
        ``relay``'s session is busy meanwhile (never expired, and working when the stream
        is not its GET stream)."""
        source = self._events(store or self.store, sid, stream, after, ids=store is None)
        app = EventStreamResponse(
            source,
            keepalive=self.keepalive,
            headers=[("content-type", SSE), ("cache-control", "no-cache"), *headers],
        )

        async def bounded(message: dict[str, Any]) -> None:
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
        try:
            await app(scope, receive, bounded)
        except ConnectionAbortedError:
            pass  # the connection is cut: the client resumes from the store when it reads again
        finally:
            self.metrics.gauges["streams_open"] -= 1
            if relay is not None:
                relay.serving -= 1
                self.relays.touch(relay.record.ident)  # idle from the end of its last stream

    async def _events(
        self, store: Store, sid: str, stream: int, after: int, *, ids: bool
    ) -> AsyncIterator[bytes]:
        retry = f"retry: {self.retry_ms}\n".encode()
        sent = after
        while True:
            try:
                async for batch in store.follow(sid, stream, sent):
                    now = time.time()
                    pieces: list[bytes] = []
                    for stored in batch:
                        head = b"id: " + stored.event_id.encode() + b"\n" if ids else b""
                        if not stored.data:  # the priming event: an id to resume from, and when
                            pieces.append(head + retry + b"data: \n\n")
                            continue
                        # orjson writes no CR or LF (it escapes them): the message is one data line
                        pieces += (head, b"event: message\ndata: ", stored.data, b"\n\n")
                    self.metrics.observe(now - stored.arrived for stored in batch if stored.data)
                    self.metrics.add("messages_total", sum(1 for stored in batch if stored.data))
                    self.metrics.add("downstream_bytes_total", sum(map(len, pieces)))
                    sent += len(batch)
                    if max(map(len, pieces)) < LARGE:
                        yield b"".join(pieces)  # small events: one write
                    else:
                        for piece in pieces:  # a large one: written as stored, never copied
                            yield piece
                return
            except Gap:
                # cut, never a silent gap: the client resumes and is refused (409) explicitly
                raise ConnectionAbortedError("the store no longer holds what this stream needs") from None
            except Abandoned as abandoned:
                # shielded: a reader that leaves mid-adoption must not leave the stream adopted
                # by no one (its lease renewed, never finished)
                await asyncio.shield(self._adopt(store, sid, stream, abandoned.call))

    async def _adopt(self, store: Store, sid: str, stream: int, call: CallRecord | None) -> None:
        """The replica writing a call's stream stopped, once, whichever replica comes first:
        resume its upstream answer from where the stored events end (the stored position)
        and write the rest; without a position (no event id upstream yet), end the stream
        with an explicit error, since the call's outcome upstream is unknown."""
        if await store.adopt(sid, stream) is None:
            return  # another follower took it, or it ended meanwhile: follow on
        state = await store.state(sid, stream)
        position = state.position if state is not None else None
        if call is not None and position is not None and position.cursor:
            try:
                relay = await self._relay_for(sid)
            except Refused:
                relay = None
            if relay is not None:
                relay.take_over(stream, call, position)
                self.metrics.add("takeovers_total")
                return
        if call is not None:
            self.metrics.add("calls_failed_total")
            text = (
                f"the gateway replica relaying {call.method} stopped before its answer; "
                "the request may have been processed: check its effects before sending it again"
            )
            error_event = orjson.dumps(gateway_error(call.id, "replica-lost", text))
            await store.append(sid, stream, [(error_event, time.time())], final=True)
            return
        await store.finish(sid, stream)


def _logged(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("forwarding a notification upstream failed: %s", task.exception())
