"""Per-principal quotas: what one client may hold at once, so no client can take another's
share (sessions, calls in flight, open GET streams, bytes in flight).

A quota is a count per (principal, kind) with a ceiling; a request over it is refused at
once with 429 and ``Retry-After`` (RFC 6585), never queued: a waiting request would still
hold its connection. With authentication off every client is the one principal ``None``,
and the quotas bound the whole server instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from ..protocol.codes import SERVER_ERROR
from ..protocol.inbound import Refusal
from .asgi import Refused

KINDS = ("sessions", "calls", "streams", "bytes")


@dataclass(frozen=True)
class Limits:
    """The ceilings of one principal (``None``: no ceiling of that kind)."""

    sessions: int | None = 256
    calls: int | None = 256  # requests in flight, across its sessions
    streams: int | None = 64  # downstream GET streams open
    bytes: int | None = 64 << 20  # request bodies being read (answers are the store's budget)


class QuotaExceeded(Refused):
    """429 with ``Retry-After``: the principal holds its whole share of one kind."""

    def __init__(self, kind: str, limit: int, retry_after: int) -> None:
        text = f"too many {kind}: this client holds its limit ({limit}); retry later"
        super().__init__(Refusal(429, SERVER_ERROR, text, None, (("retry-after", str(retry_after)),)))
        self.kind, self.limit = kind, limit


class Quotas:
    """Counts per principal and kind; `hold` takes a share, its exit gives it back."""

    def __init__(self, limits: Limits | None = None, *, retry_after: int = 2) -> None:
        self.limits = limits or Limits()
        self.retry_after = retry_after
        self._held: dict[tuple[str | None, str], int] = {}

    def held(self, principal: str | None, kind: str) -> int:
        return self._held.get((principal, kind), 0)

    def take(self, principal: str | None, kind: str, amount: int = 1) -> None:
        """Take ``amount`` of ``kind`` for ``principal``, or raise `QuotaExceeded`."""
        limit: int | None = getattr(self.limits, kind)
        key = (principal, kind)
        now = self._held.get(key, 0)
        if limit is not None and now + amount > limit:
            raise QuotaExceeded(kind, limit, self.retry_after)
        self._held[key] = now + amount

    def give(self, principal: str | None, kind: str, amount: int = 1) -> None:
        key = (principal, kind)
        left = self._held.get(key, 0) - amount
        if left > 0:
            self._held[key] = left
        else:
            self._held.pop(key, None)  # no entry for who holds nothing: the table stays bounded

    def body_share(self, content_length: str, max_body: int) -> int:
        """The request bytes a body is charged before it is read: its declared length, or
        without one the whole share it may take (up to the message limit, never more than the
        share, or it could never be served); a larger one is refused before it is read."""
        limit = self.limits.bytes
        unknown = max_body if limit is None else min(max_body, limit)
        share = int(content_length) if content_length.isascii() and content_length.isdigit() else unknown
        return min(share, max_body)

    @contextmanager
    def hold(self, principal: str | None, kind: str, amount: int = 1) -> Iterator[None]:
        self.take(principal, kind, amount)
        try:
            yield
        finally:
            self.give(principal, kind, amount)

    def figures(self) -> Mapping[str, int]:
        """What is held now, per kind, over all principals (for /metrics: no names)."""
        totals = dict.fromkeys(KINDS, 0)
        for (_, kind), amount in self._held.items():
            totals[kind] += amount
        return totals
