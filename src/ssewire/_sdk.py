"""A drop-in for the pluggable SSE decoder hook of the openai / anthropic Python SDKs.

Those SDKs build their decoder in ``client._make_sse_decoder`` and only need an object
with ``iter_bytes`` / ``aiter_bytes`` yielding events with ``.event``, ``.data``, ``.id``,
``.retry`` and ``.json()``. anthropic passes the request's options, openai nothing, so
one override with an optional ``options`` fits both::

    class Client(anthropic.Anthropic):  # or openai.OpenAI
        def _make_sse_decoder(self, options=None):
            return ssewire.SSEBytesDecoder()
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._adapt import aevents_from, events_from
from ._events import Event
from ._select import Decoder


class SDKEvent(Event):
    """An [`Event`][ssewire.Event] with the attribute names SDK stream classes read."""

    __slots__ = ()

    @property
    def event(self) -> str | None:
        """The event type, None for the default ``message`` (as the SDKs' decoder has it)."""
        return None if self.type == "message" else self.type

    def json(self) -> Any:
        return json.loads(self.data)


_new = tuple.__new__


class SSEBytesDecoder:
    """Exact SSE decoding behind the SDKs' ``SSEBytesDecoder`` protocol."""

    def __init__(self, **decoder_options: Any) -> None:
        self._options = decoder_options

    def _decoder(self) -> Any:
        return Decoder(**self._options)

    def iter_bytes(self, iterator: Any) -> Iterator[SDKEvent]:
        for event in events_from(iterator, self._decoder()):
            yield _new(SDKEvent, event)

    async def aiter_bytes(self, iterator: Any) -> AsyncIterator[SDKEvent]:
        async for event in aevents_from(iterator, self._decoder()):
            yield _new(SDKEvent, event)
