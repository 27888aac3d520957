"""The gateway's lifecycle, on its writer: the drain of a stopping process (a replica hands
its calls over, one process lets them finish, then ends those left explicitly), and
readiness (draining, the store answering a ping, the upstream answering lately or now)."""

from __future__ import annotations

import asyncio
import logging
import time

from ..transport.http import answers
from .relay import Relay
from .writer import Writer

log = logging.getLogger("ssewire.mcp.gateway")

HEARD_WINDOW = 10.0  # seconds an upstream that answered anything counts as reachable
PROBE_TIMEOUT = 2.0  # seconds a readiness probe of the upstream (or a ping of the store) may take
PROBE_KEPT = 1.0  # seconds a probe's verdict is reused: /readyz never floods the upstream
SETTLE = 2.0  # seconds a draining replica gives a call with no cursor to have one, or to end
DRAINING = "the gateway is stopping (draining)"


class Lifecycle(Writer):
    """Stopping and readiness (the base of `Gateway`)."""

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
        if self.replica and self.hand_over:
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
        if not await answers(self._upstream_http(), self.upstream, PROBE_TIMEOUT):
            return False
        self._heard = time.monotonic()
        return True
