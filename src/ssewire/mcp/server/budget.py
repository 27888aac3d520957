"""One budget of bytes in flight for a whole server, with admission control: a request
reserves the bytes it will hold (its body as it is read, what it buffers for an answer),
and one that does not fit is refused at once with 503 and Retry-After (`BudgetFull`), and one
that could never fit, however idle the server, with 413 (`NeverFits`): telling it to retry
would have it retry for ever.

There is no waiting queue, on purpose. A request that waited for room would still hold
its connection, the part of its body already read and a task; under load the queue is
one more thing that grows without bound, and the clients it keeps waiting time out
anyway. Answering at once keeps what the server holds bounded by the budget, and tells
the client, through Retry-After, when to come back.

Synchronous: the servers run on one asyncio event loop, so a reservation is taken and
given back between two awaits, with no lock."""

from __future__ import annotations

from types import TracebackType

from ..protocol.codes import INVALID_REQUEST, SERVER_ERROR
from ..protocol.inbound import Refusal
from .asgi import Refused


class BudgetFull(Refused):
    """A reservation that does not fit the budget: 503, a JSON-RPC server error and
    Retry-After (seconds)."""

    def __init__(self, in_use: int, max_bytes: int, retry_after: int) -> None:
        text = f"server busy: {in_use} bytes in flight (the budget is {max_bytes}); retry later"
        super().__init__(Refusal(503, SERVER_ERROR, text, None, (("retry-after", str(retry_after)),)))
        self.in_use = in_use
        self.max_bytes = max_bytes
        self.retry_after = retry_after


class NeverFits(Refused):
    """A reservation larger than the whole budget: 413 and the connection closes (a body
    refused as it is read is left unread). No Retry-After: an idle server refuses it too."""

    def __init__(self, size: int, max_bytes: int) -> None:
        text = f"request too large: it would hold {size} bytes, more than this server's budget of {max_bytes}"
        super().__init__(Refusal(413, INVALID_REQUEST, text, None, (("connection", "close"),)))
        self.size = size
        self.max_bytes = max_bytes


class ByteBudget:
    """Bytes in flight across a server, at most ``max_bytes`` (None: unbounded, still
    counted). ``in_use``, ``peak`` and ``refused`` (reservations refused, by `reserve`,
    `try_reserve` or `Reservation.grow`) are figures for /metrics."""

    def __init__(self, max_bytes: int | None, *, retry_after: int = 2) -> None:
        if max_bytes is not None and (isinstance(max_bytes, bool) or max_bytes < 0):
            raise ValueError(f"max_bytes must be a number of bytes or None, not {max_bytes!r}")
        if isinstance(retry_after, bool) or retry_after < 0:
            raise ValueError(f"retry_after must be a number of seconds, not {retry_after!r}")
        self.max_bytes = max_bytes
        self.retry_after = retry_after
        self.in_use = 0
        self.peak = 0
        self.refused = 0

    def reserve(self, size: int) -> Reservation:
        """Reserve ``size`` bytes; `BudgetFull` when they do not fit now, `NeverFits` when
        they are more than the whole budget (refused, not waited for)."""
        self._take(size, size)
        return Reservation(self, size)

    def try_reserve(self, size: int) -> Reservation | None:
        """`reserve`, or None when the bytes do not fit (counted in ``refused`` too)."""
        try:
            return self.reserve(size)
        except (BudgetFull, NeverFits):
            return None

    def _take(self, size: int, held: int) -> None:
        """Take ``size`` more bytes for a reservation that would then hold ``held``."""
        if size < 0:
            raise ValueError(f"a reservation is a number of bytes, not {size}")
        if self.max_bytes is not None and self.in_use + size > self.max_bytes:
            self.refused += 1
            if held > self.max_bytes:
                raise NeverFits(held, self.max_bytes)
            raise BudgetFull(self.in_use, self.max_bytes, self.retry_after)
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def _give(self, size: int) -> None:
        self.in_use -= size


class Reservation:
    """Bytes held under a `ByteBudget` until released (``with``, or `release`, which is
    idempotent). `grow` adds more under the same rule; `shrink_to` gives some back."""

    def __init__(self, budget: ByteBudget, size: int) -> None:
        self.budget = budget
        self.size = size
        self.released = False

    def grow(self, n: int) -> None:
        """Hold ``n`` more bytes; `BudgetFull` or `NeverFits` (as `ByteBudget.reserve`) when
        they do not fit (the reservation then keeps what it held)."""
        if self.released:
            raise RuntimeError("a released reservation cannot grow")
        self.budget._take(n, self.size + n)
        self.size += n

    def shrink_to(self, n: int) -> None:
        """Hold ``n`` bytes, no more (0 <= n <= size): the rest goes back to the budget."""
        if not 0 <= n <= self.size:
            raise ValueError(f"a reservation of {self.size} bytes cannot shrink to {n}")
        if not self.released:
            self.budget._give(self.size - n)
        self.size = n

    def release(self) -> None:
        """Give all of it back; a second release does nothing."""
        if not self.released:
            self.released = True
            self.budget._give(self.size)

    def __enter__(self) -> Reservation:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.release()
