"""Adapters for httpx and httpx2 (duck-typed: any response with ``iter_bytes()``).

Shaped like httpx-sse, so switching is an import change::

    from ssewire.httpx import connect_sse
    with httpx.Client() as client, connect_sse(client, "GET", url) as source:
        for event in source.iter_sse():
            ...

Unlike httpx-sse, the caller's ``Accept`` header is kept when there is one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from ._adapt import aevents_from, check_content_type, events_from, with_accept
from ._events import Event
from ._select import Decoder

__all__ = ["EventSource", "aconnect_sse", "aiter_sse", "check_content_type", "connect_sse", "iter_sse"]


def iter_sse(response: Any, **decoder_options: Any) -> Iterator[Event]:
    """Events of a streamed response (``iter_bytes()``: content-encoding already undone)."""
    check_content_type(response.headers.get("content-type"))
    return events_from(response.iter_bytes(), Decoder(**decoder_options))


def aiter_sse(response: Any, **decoder_options: Any) -> AsyncIterator[Event]:
    """The async form of ``iter_sse``."""
    check_content_type(response.headers.get("content-type"))
    return aevents_from(response.aiter_bytes(), Decoder(**decoder_options))


class EventSource:
    """A streamed response and its decoder (``decoder.discarded`` after the end tells a
    clean end from a stream cut inside an event)."""

    def __init__(self, response: Any, **decoder_options: Any) -> None:
        self.response = response
        self.decoder = Decoder(**decoder_options)

    def iter_sse(self) -> Iterator[Event]:
        """The response's events (``UnexpectedContentType`` unless it is ``text/event-stream``)."""
        check_content_type(self.response.headers.get("content-type"))
        return events_from(self.response.iter_bytes(), self.decoder)

    def aiter_sse(self) -> AsyncIterator[Event]:
        """The async form of ``iter_sse``."""
        check_content_type(self.response.headers.get("content-type"))
        return aevents_from(self.response.aiter_bytes(), self.decoder)


@contextmanager
def connect_sse(client: Any, method: str, url: Any, **kwargs: Any) -> Iterator[EventSource]:
    """Open a streamed request (httpx-sse's call shape): ``Accept: text/event-stream`` is added
    unless the caller set an Accept; ``kwargs`` go to ``client.stream``."""
    kwargs["headers"] = with_accept(kwargs.get("headers"), getattr(client, "headers", None))
    with client.stream(method, url, **kwargs) as response:
        yield EventSource(response)


@asynccontextmanager
async def aconnect_sse(client: Any, method: str, url: Any, **kwargs: Any) -> AsyncIterator[EventSource]:
    """The async form of ``connect_sse`` (an ``httpx.AsyncClient``)."""
    kwargs["headers"] = with_accept(kwargs.get("headers"), getattr(client, "headers", None))
    async with client.stream(method, url, **kwargs) as response:
        yield EventSource(response)
