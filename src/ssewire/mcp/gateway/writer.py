"""The gateway's stream writer, on its sessions: a stream of the store written downstream
after a cursor, framed by the one encoder with the gateway's ``<stream>-<seq>`` ids, keep-
alive comments while it is silent, large events in slices; a write that waits past the
write deadline cuts the connection (the client resumes from the store); a stream whose
writer stopped at another replica is adopted (its answer resumed upstream) or ended with an
explicit error; `cut_streams` ends them cleanly for a stopping process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..._deadline import within
from ..._envelope import dumps
from ...asgi import EventStreamResponse
from ..protocol.wire import SSE
from ..server.asgi import (
    Refused,
    plain,
)
from ..server.log import written
from .errors import gateway_error
from .observe import session_hash
from .passthrough import LARGE
from .relay import Relay
from .sessions import _ANYONE, Sessions
from .stores import (
    Abandoned,
    CallRecord,
    Gap,
    StoreFailed,
)

log = logging.getLogger("ssewire.mcp.gateway")

SLICE = 256 * 1024  # bytes: a large event is written downstream in pieces of this size


def _sliced(pieces: list[bytes]) -> Iterator[bytes | memoryview]:
    """A batch holding a large event, in writes the socket takes as it drains (one write of
    megabytes is copied whole by the HTTP layer and again by the transport's buffer, into
    fresh memory): the large ones in `SLICE`s viewed in place, not copied; the small pieces
    around them (field names, ids, line ends) joined to the next write, not one write each."""
    small: list[bytes | memoryview] = []
    for piece in pieces:
        if len(piece) < SLICE:
            small.append(piece)
            continue
        view = memoryview(piece)
        yield b"".join([*small, view[:SLICE]]) if small else view[:SLICE]
        small = []
        for at in range(SLICE, len(view), SLICE):
            yield view[at : at + SLICE]
    if small:
        yield b"".join(small)


class Writer(Sessions):
    """Streams of the store written downstream (the base of `Lifecycle` and `Gateway`)."""

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
        # (the response reads the source in this task: `cut_streams` cancels it)
        writer = asyncio.current_task()
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
                await within(send(message), self.write_timeout)
            except asyncio.TimeoutError:
                self.metrics.add("stalled_readers_total")
                raise self._cut_off(sid, f"the client read nothing for {self.write_timeout:g} s") from None

        self.metrics.gauges["streams_open"] += 1
        if relay is not None:
            relay.serving += 1
        self._writers[writer] = after > 0  # a client resuming has an id already
        try:
            await app(scope, receive, bounded)
        except ConnectionAbortedError:
            pass  # the connection is cut (`_cut_off`): the client resumes from the store when it reads again
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
    ) -> AsyncIterator[bytes | memoryview]:
        sent = after
        while True:
            try:
                async for batch in self.store.follow(sid, stream, sent):
                    now = time.time()
                    pieces: list[bytes] = []
                    waited: list[float] = []  # each message's time in the gateway (not the priming event)
                    for ident, data, arrived in batch:
                        pieces += written(ident, data, retry_ms=self.retry_ms)
                        if data:
                            waited.append(now - arrived)
                    self.metrics.observe(waited)
                    self.metrics.add("messages_total", len(waited))
                    self.metrics.add("downstream_bytes_total", sum(map(len, pieces)))
                    sent += len(batch)
                    if max(map(len, pieces)) < LARGE:
                        yield b"".join(pieces)  # small events: one write
                    else:
                        for write in _sliced(pieces):
                            yield write
                    if writer in self._writers:
                        self._writers[writer] = True  # its client has an event id now
                    if writer in self._cut_after:
                        return  # `cut_streams` ends it, now that its client can resume it
                return
            except (Gap, StoreFailed):
                # cut, never a silent gap: the client resumes, and is served or refused explicitly
                raise self._cut_off(sid, "the store no longer holds what this stream needs") from None
            except Abandoned as abandoned:
                if self.draining:  # this replica takes nothing up: the stream ends, resumed at another
                    return
                # shielded: a reader that leaves mid-adoption must not leave the stream adopted
                # by no one (its lease renewed, never finished)
                try:
                    await asyncio.shield(self._adopt(sid, stream, abandoned.call))
                except StoreFailed:  # the store cannot say who takes it: the client resumes later
                    raise self._cut_off(sid, "the store failed while this stream was adopted") from None

    def _cut_off(self, sid: str, why: str) -> ConnectionAbortedError:
        """What ends a stream's connection unfinished, so its client resumes it; said, with
        why (uvicorn's own line for it, "ASGI callable returned without completing
        response", names no reason)."""
        text = f"a stream to a client was cut ({why}); its client resumes it"
        self.telemetry.notice("cut", text, session=session_hash(sid, self.telemetry.key))
        return ConnectionAbortedError(why)

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
            error_event = dumps(gateway_error(call.id, "replica-lost", text))
            await self.store.append(sid, stream, [(error_event, time.time())], final=True)
            return
        await self.store.finish(sid, stream)
