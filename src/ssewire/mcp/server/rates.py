"""Rate limits per principal and per tool: token buckets, refused with 429 and ``Retry-After``.

A `Rate` is "``count`` per ``unit``" with a burst (``count`` by default): a bucket of ``burst``
tokens that refills at ``count / unit`` a second. Without tools it is taken by every request
of a principal (one bucket each); with tool patterns, by each call of a matching tool (one
bucket per principal and tool). Notifications and answers take none: they ask nothing of the
upstream. With authentication off every client is the one principal ``None``, so a rate
bounds the whole route.

The buckets are a `Buckets`' to keep: `LocalBuckets` in the process, or the gateway's store
(with Redis, one bucket per key for every replica: a replica added never adds a share). The
keys hold a digest of the principal, never its name.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol.codes import SERVER_ERROR
from ..protocol.inbound import Refusal
from .asgi import Refused
from .tools import CALL, _patterns

UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600}
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*([a-z]+)\s*")
MAX_BUCKETS = 100_000  # in one process: beyond it, the buckets that are full again are let go


@dataclass(frozen=True)
class Rate:
    """``per_second`` tokens a second into a bucket of ``burst``; for ``tools`` (patterns)
    alone, or every request when None. ``said`` is how the file said it (for texts)."""

    per_second: float
    burst: int
    said: str
    tools: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, text: str, *, burst: int | None = None, tools: Iterable[str] | None = None) -> Rate:
        """``"10/second"``, ``"600/minute"``, ``"5/h"``...; ValueError otherwise."""
        found = _RATE.fullmatch(text)
        if found is None or found.group(2) not in UNITS or float(found.group(1)) <= 0:
            raise ValueError("a rate is COUNT/UNIT: a number > 0, then second, minute or hour (10/second)")
        count = float(found.group(1))
        if burst is not None and burst < 1:
            raise ValueError("a burst is a whole number >= 1")
        return cls(
            count / UNITS[found.group(2)],
            burst if burst is not None else max(1, math.ceil(count)),
            text.strip(),
            tuple(tools) if tools is not None else None,
        )


class Buckets(Protocol):
    """Where the buckets are kept (the gateway's stores are Buckets too)."""

    async def take(self, key: str, per_second: float, burst: int) -> float:
        """Take a token from bucket ``key``: 0 when taken, else the seconds until one is there."""
        ...


class LocalBuckets:
    """The buckets of one process, at most `MAX_BUCKETS`: past it, those full again are let go
    (the same as none), then the least recently used down to nine tenths of it (tool names are
    the client's to choose: never an unbounded table, and a sweep once per tenth, not per take)."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, *, max_buckets: int = MAX_BUCKETS
    ) -> None:
        self._clock, self.max_buckets = clock, max_buckets
        # key -> (tokens, when, per_second, burst), least recently used first
        self._held: dict[str, tuple[float, float, float, int]] = {}

    async def take(self, key: str, per_second: float, burst: int) -> float:
        return self.take_now(key, per_second, burst)

    def take_now(self, key: str, per_second: float, burst: int) -> float:
        now = self._clock()
        held = self._held.pop(key, None)
        tokens = float(burst) if held is None else min(float(burst), held[0] + (now - held[1]) * per_second)
        if held is None and len(self._held) >= self.max_buckets:
            self._sweep(now)
        if tokens >= 1:
            self._held[key] = (tokens - 1, now, per_second, burst)
            return 0.0
        self._held[key] = (tokens, now, per_second, burst)
        return (1 - tokens) / per_second

    def __len__(self) -> int:
        return len(self._held)

    def _sweep(self, now: float) -> None:
        """Let go of the buckets full by now, each by its own rate; then of the least
        recently used, down to nine tenths of the bound."""
        for key, (tokens, then, per_second, burst) in list(self._held.items()):
            if tokens + (now - then) * per_second >= burst:
                del self._held[key]
        excess = len(self._held) - self.max_buckets * 9 // 10
        for key in list(itertools.islice(self._held, max(0, excess))):
            del self._held[key]


class RateLimited(Refused):
    """429 with ``Retry-After``: the principal's bucket for this rate is empty."""

    def __init__(self, rate: Rate, retry_after: float, ident: Any, tool: str | None) -> None:
        what = f"calls of {tool!r}" if tool is not None else "requests"
        text = f"rate limited: {what} are limited to {rate.said} for this client; retry later"
        wait = str(max(1, math.ceil(retry_after)))
        super().__init__(Refusal(429, SERVER_ERROR, text, ident, (("retry-after", wait),)))
        self.retry_after = retry_after


class StoreUnavailable(Refused):
    """503: the buckets could not be read (the store failed): refused, never let through unmetered."""

    def __init__(self, ident: Any) -> None:
        text = "the gateway cannot check its rate limits now (its store failed); retry later"
        super().__init__(Refusal(503, SERVER_ERROR, text, ident, (("retry-after", "1"),)))


class RateLimits:
    """The rates of one route, kept in ``buckets``; `admit` each downstream message."""

    def __init__(self, rates: Sequence[Rate], buckets: Buckets | None = None, *, scope: str = "") -> None:
        self.rates = tuple(rates)
        self.buckets: Buckets = buckets if buckets is not None else LocalBuckets()
        self.scope = scope  # what tells this route's buckets apart from another's in a shared store
        self._matchers = [None if rate.tools is None else _patterns(rate.tools) for rate in self.rates]
        self.refused = 0

    async def admit(self, principal: str | None, message: dict[str, Any]) -> None:
        """Take a token of each rate ``message`` falls under; `RateLimited` (or
        `StoreUnavailable`) when one is empty. Only requests are metered."""
        if "id" not in message or not isinstance(message.get("method"), str):
            return
        params = message.get("params")
        tool = params.get("name") if message["method"] == CALL and isinstance(params, dict) else None
        who = _digest(principal)
        for n, (rate, matcher) in enumerate(zip(self.rates, self._matchers, strict=True)):
            key = f"{self.scope}{who}:{n}"
            if matcher is not None:
                if not isinstance(tool, str) or not matcher.match(tool):
                    continue
                key = f"{key}:{hashlib.sha256(tool.encode()).hexdigest()[:16]}"
            try:
                wait = await self.buckets.take(key, rate.per_second, rate.burst)
            except Exception:  # the store's failure is the store's to log; the request is refused
                raise StoreUnavailable(message.get("id")) from None
            if wait > 0:
                self.refused += 1
                raise RateLimited(rate, wait, message.get("id"), tool if rate.tools is not None else None)


def _digest(principal: str | None) -> str:
    """A principal as a key may hold it: a digest, never its name."""
    name = "" if principal is None else f"p:{principal}"
    return hashlib.sha256(name.encode()).hexdigest()[:24]
