"""The gateway's downstream sessions, the lowest of its layers: each a `Relay` to one
upstream session, in the server core's one table (bounded; the least recently used idle
one makes room; work in flight never cut to make it), bound to the principal that opened it
(to anyone else it does not exist), taken up from the store when another replica opened it
(once, however many requests for it come at once), expired when idle. The gateway's state
is declared here (``Gateway.__init__`` sets it)."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

import httpx

from ..client import Client, StreamBroken
from ..protocol import inbound
from ..protocol.codes import SERVER_ERROR, SESSION_NOT_FOUND
from ..protocol.reissue import ReissuePolicy
from ..protocol.wire import UNAVAILABLE
from ..server.asgi import (
    climb,
    refuse,
)
from ..server.budget import ByteBudget
from ..server.quotas import QuotaExceeded, Quotas
from ..server.sessions import SessionsFull, SessionTable
from ..server.tools import ToolPolicy
from ..transport.http import new_client
from .metrics import Metrics
from .observe import Telemetry, current
from .passthrough import RAW_ABOVE, Passthrough
from .relay import Relay
from .stores import (
    SessionRecord,
    Store,
)

log = logging.getLogger("ssewire.mcp.gateway")

MAX_SESSIONS = 1024  # relayed at once; past it the least recently used idle one goes, else 503
BUSY_RETRY_AFTER = 5  # seconds a client refused for want of room waits: a session frees when a call ends


class Sessions:
    """The session table's operations (the base of `Writer`, `Lifecycle` and `Gateway`)."""

    # the gateway's state, set by Gateway.__init__ (declared here for the layers above)
    upstream: str
    path: str
    telemetry: Telemetry
    store: Store
    max_message_size: int | None
    keepalive: float
    timeout: float
    idle_timeout: float
    retry_ms: int
    write_timeout: float
    max_sessions: int
    session_ttl: float
    replica: bool
    hand_over: bool
    extra: dict[str, str]
    tools: ToolPolicy | None
    reissue: ReissuePolicy | None
    quotas: Quotas
    budget: ByteBudget
    upstream_label: str
    metrics: Metrics
    relays: SessionTable[Relay]
    _closed_figures: dict[str, float]
    _http: httpx.AsyncClient | None
    _own_http: bool
    passthrough: Passthrough
    draining: bool
    _writers: dict[asyncio.Task[Any], bool]
    _cut: set[asyncio.Task[Any]]
    _cut_after: set[asyncio.Task[Any]]
    _heard: float
    _probe: tuple[float, asyncio.Future[bool]] | None
    _attaching: dict[str, tuple[asyncio.Lock, int]]
    _touched: float

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
            self._http = new_client(
                shared=True,
                max_connections=4 * self.max_sessions,
                timeout=httpx.Timeout(self.timeout, read=None),
                headers=self.extra,
                event_hooks={"request": [self.telemetry.upstream_hook], "response": [self._upstream_heard]},
            )
        return self._http

    async def _upstream_heard(self, response: httpx.Response) -> None:
        """The pool's response hook: the upstream answered (readiness reads it), unless the
        answer says it is not there (a proxy's 502 in front of it, its own 503)."""
        if response.status_code not in UNAVAILABLE:
            self._heard = time.monotonic()

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
            raw_above=RAW_ABOVE,
            reissue=self.reissue,  # a tool call whose answer cannot be resumed: by the route's policy
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


def _noted(**fields: Any) -> None:
    """Note ``fields`` on the trace of the request being relayed (if any)."""
    trace = current()
    if trace is not None:
        trace.note(**fields)


_ANYONE = object()  # the principal of the gateway's own lookups (a takeover): bound to none


def _bound_to(record: SessionRecord, principal: str | object | None) -> bool:
    return principal is _ANYONE or record.principal == principal
