"""A deadline on one await, in the awaiting task: ``asyncio.timeout`` from Python 3.11, where
``asyncio.wait_for`` would wrap the awaitable in a task of its own (a task and a hop on every
message of a relay's hot path); ``asyncio.wait_for`` before 3.11, which has no other way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

_timeout: Any = getattr(asyncio, "timeout", None)  # Python 3.11+


async def within(work: Awaitable[T], seconds: float | None) -> T:
    """``await work``, or ``TimeoutError`` (``asyncio.TimeoutError``) past ``seconds`` (None:
    no deadline); ``work`` is cancelled then, as ``asyncio.wait_for`` cancels it."""
    if _timeout is None:
        return await asyncio.wait_for(work, seconds)
    async with _timeout(seconds):
        return await work
