"""Serving events over ASGI: a response that streams an (async) iterator of events.

    app = EventStreamResponse(events(), keepalive=15)   # an ASGI app, e.g. for uvicorn

Items may be [`Event`][ssewire.Event] / [`RawEvent`][ssewire.RawEvent] (written with
[`encode_event`][ssewire.encode_event]; ``id`` is the last event ID, written when it changes),
``str`` (one event's data) or bytes-like (already encoded, sent as is: a ``memoryview`` of a large
buffer is not copied). A sync iterable is
pulled in a worker thread. After ``keepalive`` idle seconds a comment is sent so proxies
keep the connection open (0 turns it off). When the client disconnects, the iterator is
closed and the response ends (noticed from `WATCH_AFTER` seconds into a response on: one
over sooner makes no task of its own).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Iterator
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


WATCH_AFTER = 0.25  # seconds: a response over by then is served without a watcher task


def _iterator(items: AsyncIterable[Any] | Iterable[Any]) -> AsyncIterator[Any]:
    """The items as an async iterator: an async iterable's own (no layer of ours per item),
    or a sync one's pulled in a worker thread (so a slow or blocking generator never stalls
    the event loop, keep-alives or disconnects)."""
    if hasattr(items, "__aiter__"):
        return items.__aiter__()
    return _pulled(iter(items))


async def _pulled(iterator: Iterator[Any]) -> AsyncGenerator[Any, None]:
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
    """How the watcher of a response stops its pump: once, with why; never once the
    response is over (before 3.11 the watcher's cancellation can be lost in
    ``asyncio.wait_for``, which then goes on as if none came)."""

    def __init__(self, host: asyncio.Task[Any]) -> None:
        self.host = host
        self.stopped = False
        self.over = False  # the response ended: nothing is left to watch or stop
        self.failed: Exception | None = None

    def stop(self) -> None:
        if self.over:
            return
        self.stopped = True
        self.host.cancel()


class _Pace:
    """When a response last wrote, and what it is writing: an item (a keep-alive waits
    for its end) or a keep-alive (the next item waits for it), never one inside the other.
    Two flags, not a lock: most responses never have a keep-alive to keep out."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.now = loop.time
        self.last = loop.time()
        self.writing = False  # an item is being written
        self.pinging: asyncio.Future[None] | None = None  # a keep-alive is: done at its end


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
        """This task pumps the items and writes each (one hop from whoever produces an item
        to its write, no task per item). A response still going after `WATCH_AFTER` seconds
        gets a watcher task, which waits for the client's disconnect (then stops this one)
        and, while the pump waits for an item, writes the keep-alives; one over sooner (a
        relayed call's, mostly) costs a timer instead, and a client that left meanwhile is
        noticed that much later at most."""
        if scope["type"] != "http":
            raise RuntimeError(f"EventStreamResponse serves http, not {scope['type']}")
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        iterator: AsyncIterator[Any] | None = None
        loop = asyncio.get_running_loop()
        pace = _Pace(loop)
        host = asyncio.current_task()
        assert host is not None
        watch = _Watch(host)
        watchers: list[asyncio.Future[None]] = []

        def start_watching() -> None:
            watchers.append(asyncio.ensure_future(self._watch(receive, send, pace, watch)))

        timer = loop.call_later(min(self.keepalive or WATCH_AFTER, WATCH_AFTER), start_watching)
        try:
            try:
                iterator = _iterator(self.events)
                await self._pump(iterator, send, pace)
            except asyncio.CancelledError:
                if not watch.stopped:
                    raise  # the caller's cancellation
                if sys.version_info >= (3, 11) and host.uncancel() > 0:
                    raise  # the caller's too, in the same step as the watcher's
                if watch.failed is not None:
                    raise watch.failed from None
        finally:
            watch.over = True  # (before any await: a watcher stops this task only while it pumps)
            timer.cancel()
            for watcher in watchers:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            for closing in (iterator, self.events) if iterator is not self.events else (iterator,):
                closer = getattr(closing, "aclose", None)
                if closer is not None:
                    await closer()

    async def _pump(self, iterator: AsyncIterator[Any], send: Any, pace: _Pace) -> None:
        """Each item written as it comes, then the body's end (unless a write failed: the
        client is gone)."""
        while True:
            try:  # (not `async for`: an iterator need not have an __aiter__ of its own)
                item = await iterator.__anext__()
            except StopAsyncIteration:
                break
            body = self._encode(item)
            while pace.pinging is not None:
                await pace.pinging
            pace.writing = True
            try:
                sent = await self._send(send, body, more=True)
            finally:
                pace.writing = False
            if not sent:
                return
            pace.last = pace.now()
        while pace.pinging is not None:
            await pace.pinging
        pace.writing = True  # (the end too: no keep-alive after it)
        await self._send(send, b"", more=False)

    async def _watch(self, receive: Any, send: Any, pace: _Pace, watch: _Watch) -> None:
        """Until the client disconnects (or its receive fails), then the pump is stopped;
        while nothing is written for `keepalive` seconds, a comment (never inside an item)."""
        while not watch.over:
            if not self.keepalive:
                wait = None
            elif pace.writing:  # an item is being written: its end resets the pace
                wait = self.keepalive
            else:
                wait = max(pace.last + self.keepalive - pace.now(), 0.0)
            try:
                message = await within(receive(), wait)
            except asyncio.TimeoutError:
                if watch.over:
                    break
                if pace.now() - pace.last < self.keepalive or pace.writing:
                    continue
                pinging = pace.pinging = asyncio.get_running_loop().create_future()
                try:
                    sent = await self._send(send, self._ping, more=True)
                except Exception as failed:  # a write that failed its caller's way: the pump raises it
                    watch.failed = failed
                    break
                finally:
                    pace.pinging = None
                    if not pinging.done():  # (an item waiting for it may have been cancelled)
                        pinging.set_result(None)
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
