"""Serving events over ASGI: a response that streams an (async) iterator of events.

    app = EventStreamResponse(events(), keepalive=15)   # an ASGI app, e.g. for uvicorn

Items may be [`Event`][ssewire.Event] / [`RawEvent`][ssewire.RawEvent] (written with
[`encode_event`][ssewire.encode_event]; ``id`` is the last event ID, written when it changes),
``str`` (one event's data) or bytes-like (already encoded, sent as is: a ``memoryview`` of a large
buffer is not copied). A sync iterable is
pulled in a worker thread. After ``keepalive`` idle seconds a comment is sent so proxies
keep the connection open (0 turns it off). When the client disconnects, the iterator is
closed and the response ends.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from typing import Any

from ._deadline import within
from ._encoder import encode_comment, encode_event
from ._events import Event, RawEvent

__all__ = ["EventStreamResponse"]

_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
)


_DONE = object()


async def _aiter(items: AsyncIterable[Any] | Iterable[Any]) -> AsyncGenerator[Any, None]:
    """Items of an async iterable, or of a sync one pulled in a worker thread (so a slow
    or blocking generator never stalls the event loop, keep-alives or disconnects)."""
    if hasattr(items, "__aiter__"):
        async for item in items:
            yield item
        return
    iterator = iter(items)
    try:
        while (item := await asyncio.to_thread(next, iterator, _DONE)) is not _DONE:
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            try:
                close()
            except ValueError:  # still running in its thread: it ends with that item
                pass


class _Watch:
    """How the watcher of a response stops its pump: once, with why."""

    def __init__(self, host: asyncio.Task[Any]) -> None:
        self.host = host
        self.stopped = False
        self.failed: Exception | None = None

    def stop(self) -> None:
        self.stopped = True
        self.host.cancel()


class _Pace:
    """When a response last wrote, and the lock that keeps a keep-alive out of an item."""

    def __init__(self, now: float) -> None:
        self.now = asyncio.get_running_loop().time
        self.last = now
        self.writing = asyncio.Lock()


class EventStreamResponse:
    """An ASGI application sending ``events`` as ``text/event-stream``."""

    def __init__(
        self,
        events: AsyncIterable[Any] | Iterable[Any],
        *,
        keepalive: float = 15.0,
        keepalive_text: str = "keep-alive",
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
    ) -> None:
        if keepalive < 0:
            raise ValueError("keepalive must be >= 0 seconds (0 turns it off)")
        self.events = events
        self.keepalive = keepalive
        self._ping = encode_comment(keepalive_text)
        self.status = status
        merged = dict(_HEADERS)  # a caller's header replaces the default of the same name
        merged.update((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers)
        self.headers = list(merged.items())
        self._last_id: str | None = ""  # None: unknown, after raw bytes were sent

    def _encode(self, item: Any) -> bytes | bytearray | memoryview:
        if isinstance(item, (bytes, bytearray, memoryview)):
            self._last_id = None  # they may have set an id: write the next event's id
            return item
        if isinstance(item, str):
            return encode_event(item)
        if isinstance(item, (Event, RawEvent)):
            data = item.data.decode("utf-8", "replace") if isinstance(item.data, bytes) else item.data
            ident = None if item.id == self._last_id else item.id  # the last event ID persists
            self._last_id = item.id
            event_type = None if item.type == "message" else item.type
            return encode_event(data, event=event_type, id=ident, retry=item.retry)
        raise TypeError(f"cannot send {type(item).__name__} as an event")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Two tasks for the whole response, none per item: this one pumps the items and
        writes each (one hop from whoever produces an item to its write); a watcher waits
        for the client's disconnect (then stops this one) and, while the pump waits for an
        item, writes the keep-alives."""
        if scope["type"] != "http":
            raise RuntimeError(f"EventStreamResponse serves http, not {scope['type']}")
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        iterator = _aiter(self.events)
        pace = _Pace(asyncio.get_running_loop().time())
        host = asyncio.current_task()
        assert host is not None
        watch = _Watch(host)
        watcher = asyncio.ensure_future(self._watch(receive, send, pace, watch))
        try:
            try:
                await self._pump(iterator, send, pace)
            except asyncio.CancelledError:
                if not watch.stopped:
                    raise  # the caller's cancellation
                if sys.version_info >= (3, 11) and host.uncancel() > 0:
                    raise  # the caller's too, in the same step as the watcher's
                if watch.failed is not None:
                    raise watch.failed from None
        finally:
            watcher.cancel()  # (before any await: a watcher stops this task only while it pumps)
            await asyncio.gather(watcher, return_exceptions=True)
            await iterator.aclose()
            closer = getattr(self.events, "aclose", None)
            if closer is not None:
                await closer()

    async def _pump(self, iterator: AsyncGenerator[Any, None], send: Any, pace: _Pace) -> None:
        """Each item written as it comes, then the body's end (unless a write failed: the
        client is gone)."""
        async for item in iterator:
            body = self._encode(item)
            async with pace.writing:
                if not await self._send(send, body, more=True):
                    return
            pace.last = pace.now()
        async with pace.writing:
            await self._send(send, b"", more=False)

    async def _watch(self, receive: Any, send: Any, pace: _Pace, watch: _Watch) -> None:
        """Until the client disconnects (or its receive fails), then the pump is stopped;
        while nothing is written for `keepalive` seconds, a comment (never inside an item)."""
        while True:
            if not self.keepalive:
                wait = None
            elif pace.writing.locked():  # an item is being written: its end resets the pace
                wait = self.keepalive
            else:
                wait = max(pace.last + self.keepalive - pace.now(), 0.0)
            try:
                message = await within(receive(), wait)
            except asyncio.TimeoutError:
                if pace.now() - pace.last < self.keepalive or pace.writing.locked():
                    continue
                try:
                    async with pace.writing:
                        sent = await self._send(send, self._ping, more=True)
                except Exception as failed:  # a write that failed its caller's way: the pump raises it
                    watch.failed = failed
                    break
                if not sent:
                    break  # the client is gone
                pace.last = pace.now()
                continue
            except Exception:  # nothing more to receive: the client is as good as gone
                break
            if message["type"] == "http.disconnect":
                break
        watch.stop()

    @staticmethod
    async def _send(send: Any, body: bytes | bytearray | memoryview, *, more: bool) -> bool:
        try:
            await send({"type": "http.response.body", "body": body, "more_body": more})
        except OSError:  # the peer went away between two events
            return False
        return True
