"""What waits for one reader of a local upstream's stream, bounded in bytes."""

from __future__ import annotations

import asyncio
from collections import deque


class Inbox:
    """Messages waiting for one reader (a call's answer stream, a session's listening
    stream), at most ``budget`` bytes of them: a reader that falls that far behind loses
    its stream, explicitly."""

    def __init__(self, budget: int) -> None:
        self.budget, self.size, self.closed = budget, 0, False
        self._items: deque[bytes] = deque()
        self._ready = asyncio.Event()

    def put(self, data: bytes) -> bool:
        """Queue ``data``; False when closed or over the budget."""
        if self.closed or self.size + len(data) > self.budget:
            return False
        self._items.append(data)
        self.size += len(data)
        self._ready.set()
        return True

    def close(self, last: bytes | None = None) -> None:
        """No more after ``last`` (queued past the budget: the one message that says why)."""
        if not self.closed and last is not None:
            self._items.append(last)
        self.closed = True
        self._ready.set()

    async def get(self, timeout: float | None) -> bytes | None:
        """The next message; ``b""`` when ``timeout`` passed first, None once closed and empty."""
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except asyncio.TimeoutError:
                return b""
        data = self._items.popleft()
        self.size -= len(data)
        return data
