"""A minimal SSE relay, the seed of a gateway: read an upstream event stream with
ssewire, enforce size limits, keep the downstream connection alive while upstream is
silent, and re-emit every event unchanged.

    UPSTREAM=http://127.0.0.1:8000/events uvicorn --factory examples.gateway:from_env --host 127.0.0.1 --port 8080

An event over the limits is dropped (and logged) without ending the stream; blocks that
only set the last event ID or the reconnection time are passed on; a client's
``Last-Event-ID`` is passed upstream so resumption works through the relay.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ssewire import Decoder, Event, EventTooLarge
from ssewire.asgi import EventStreamResponse
from ssewire.httpx import check_content_type

log = logging.getLogger("ssewire.gateway")


def make_app(
    upstream: str,
    *,
    max_event_size: int = 4 * 1024 * 1024,
    max_line_size: int = 4 * 1024 * 1024,
    keepalive: float = 15.0,
) -> Any:
    async def relay(last_event_id: str | None) -> AsyncIterator[Event]:
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(10.0, read=None)  # a stream may be silent for long
        async with httpx.AsyncClient(timeout=timeout) as client:
            async with client.stream("GET", upstream, headers=headers) as response:
                check_content_type(response.headers.get("content-type"))
                decoder = Decoder(max_event_size=max_event_size, max_line_size=max_line_size)
                relayed_id, relayed_retry = "", None
                async for chunk in response.aiter_bytes():
                    try:
                        events = decoder.feed(chunk)
                    except EventTooLarge as error:
                        log.warning("dropped an upstream event: %s", error)
                        events = error.events
                    for event in events:
                        yield event
                        relayed_id = event.id
                        relayed_retry = event.retry if event.retry is not None else relayed_retry
                    # Blocks without data dispatch no event but still set the stream's last
                    # event ID or reconnection time: pass that state on as such a block.
                    state = ""
                    if decoder.retry != relayed_retry:
                        state += f"retry: {decoder.retry}\n"
                        relayed_retry = decoder.retry
                    if decoder.last_event_id != relayed_id:
                        state += f"id: {decoder.last_event_id}\n"
                        relayed_id = decoder.last_event_id
                    if state:
                        yield (state + "\n").encode("utf-8")
                decoder.close()
                if decoder.discarded:
                    log.warning("upstream ended inside an event (%d bytes)", decoder.discarded)

    async def app(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        last = dict(scope["headers"]).get(b"last-event-id")
        events = relay(last.decode("latin-1") if last else None)
        await EventStreamResponse(events, keepalive=keepalive)(scope, receive, send)

    return app


def from_env() -> Any:
    return make_app(os.environ["UPSTREAM"], keepalive=float(os.environ.get("KEEPALIVE", "15")))
