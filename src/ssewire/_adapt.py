"""What every client adapter shares: the content-type check and the decode loop.

Adapters only move bytes from their client into `events_from` / the async twin;
they never parse.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

from ._errors import EventTooLarge, UnexpectedContentType
from ._events import Event
from ._http import EVENT_STREAM, media_type
from ._select import Decoder


def check_content_type(content_type: str | None) -> None:
    """The media type must be text/event-stream (case-insensitive; parameters such as a
    declared charset are ignored: SSE is always UTF-8)."""
    if media_type(content_type) != EVENT_STREAM:
        raise UnexpectedContentType(content_type or "")


def events_from(chunks: Iterable[bytes], decoder: Any = None) -> Iterator[Event]:
    """Events from byte chunks. An oversized event: the events completed before and after
    it in the same chunk are yielded first, then ``EventTooLarge`` is raised."""
    decoder = Decoder() if decoder is None else decoder
    for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as error:
            yield from error.events
            raise
        yield from events
    yield from decoder.close()


async def aevents_from(chunks: AsyncIterable[bytes], decoder: Any = None) -> AsyncIterator[Event]:
    """The async twin of `events_from`."""
    decoder = Decoder() if decoder is None else decoder
    async for chunk in chunks:
        try:
            events = decoder.feed(chunk)
        except EventTooLarge as error:
            for event in error.events:
                yield event
            raise
        for event in events:
            yield event
    for event in decoder.close():
        yield event


def with_accept(headers: Any, client_headers: Any = None) -> Any:
    """``headers`` plus ``Accept: text/event-stream`` only if the caller set no Accept,
    neither on this request nor on the client (beyond httpx's default ``*/*``).

    Never overwrites: MCP clients must send ``Accept: application/json, text/event-stream``.
    """
    if client_headers is not None and client_headers.get("accept", "*/*") != "*/*":
        return headers
    if headers is None:
        return {"Accept": EVENT_STREAM}
    items = list(headers.items()) if hasattr(headers, "items") else list(headers)
    if any(_name(name) == "accept" for name, _ in items):
        return headers
    return [*items, ("Accept", EVENT_STREAM)]


def _name(name: Any) -> str:
    return (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
