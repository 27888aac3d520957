"""Adapter for aiohttp: events from a ``ClientResponse``.

async with session.get(url) as response:
    async for event in aiter_sse(response):
        ...
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ._adapt import aevents_from, check_content_type
from ._events import Event
from ._select import Decoder

__all__ = ["aiter_sse"]


def aiter_sse(response: Any, **decoder_options: Any) -> AsyncIterator[Event]:
    """Events of the response body, fed to the decoder as bytes arrive (``iter_any()``)."""
    check_content_type(response.headers.get("Content-Type"))
    return aevents_from(response.content.iter_any(), Decoder(**decoder_options))
