"""What a client session counts: its stream health as numbers (``Client.statistics``).

One small object, [`ClientStats`][ssewire.mcp.client.ClientStats], counted where things
happen (a reset absorbed, a re-issue, a re-initialization, a keep-alive...) and read whole
beside the resumption guard's own counts (resumptions, duplicates, torn events, unsafe
resumptions). Its lists keep the newest `FIGURES_KEPT` figures, so a long session's books
stay bounded. It does no I/O and keeps no clock of its own (the time is an argument, the
monotonic clock by default), so it is tested alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..streams.guard import ResumptionGuard

FIGURES_KEPT = 1024  # the newest figures a session keeps in each list of its statistics


def _keep(figures: list[float], new: list[float]) -> None:
    """Add ``new`` to a list of figures that keeps the newest `FIGURES_KEPT` (trimmed in
    bulk, past twice that, so an append costs no copy)."""
    figures += new
    if len(figures) > 2 * FIGURES_KEPT:
        del figures[:-FIGURES_KEPT]


@dataclass
class ClientStats:
    """Stream health as numbers (see ``Client.statistics``): the client's counters and
    figures, and how they read beside the guard's."""

    ttfb_s: list[float] = field(default_factory=list)  # time to first byte of each SSE answer (the newest)
    get_uptime_s: float = 0.0  # the GET streams closed so far; `get_uptime` adds the one open now
    progress_gaps_s: list[float] = field(default_factory=list)  # between progress notifications (the newest)
    resets: int = 0  # streams and answers that broke before their end (absorbed or reported)
    reinitializations: int = 0  # sessions re-opened after a 404
    reissues: int = 0  # requests safe to repeat sent again with a new id after a broken answer
    reissue_reasons: dict[str, int] = field(default_factory=dict)  # the same, by why (reissue.REASONS)
    repeated_progress: int = 0  # progress of a re-issued request at or below what was delivered: dropped
    idle_timeouts: int = 0
    keepalives: int = 0
    get_failures: int = 0  # GET streams that broke or could not be (re)opened
    callback_errors: int = 0  # on_notification / on_progress raised (logged; the stream goes on)
    server_requests_dropped: int = 0  # past MAX_SERVING at once (logged; the server times them out)
    late_progress: int = 0  # progress for a call that had ended (a copy, or a server's straggler): dropped
    drained: int = 0  # answers read to their end after their response (their connection is reused)
    _get_since: float | None = field(default=None, init=False, repr=False)  # the GET stream open now

    def first_byte(self, seconds: float) -> None:
        """An SSE answer's time to first byte."""
        _keep(self.ttfb_s, [round(seconds, 4)])

    def progressed(self, times: Iterable[float]) -> None:
        """One call's progress notifications came at ``times`` (monotonic seconds): the
        gaps between them, the newest kept."""
        times = list(times)[-FIGURES_KEPT - 1 :]
        # to 0.1 ms in float arithmetic: round(gap, 4) goes through decimal digits (2.6x the cost)
        _keep(self.progress_gaps_s, [round((b - a) * 1e4) / 1e4 for a, b in itertools.pairwise(times)])

    def dropped_request(self) -> bool:
        """A server's request dropped (a flood past ``MAX_SERVING``): counted; True when it
        is worth a log line (the 1st, 2nd, 4th, 8th...), so a flood logs little."""
        self.server_requests_dropped += 1
        dropped = self.server_requests_dropped
        return dropped & (dropped - 1) == 0

    def get_opened(self, at: float | None = None) -> None:
        """The standalone GET stream is open from ``at`` (now by default)."""
        self._get_since = time.monotonic() if at is None else at

    def get_closed(self, at: float | None = None) -> None:
        """The GET stream open now ended at ``at``: its time joins ``get_uptime_s``."""
        self.get_uptime_s = self.get_uptime(at)
        self._get_since = None

    @property
    def get_open(self) -> bool:
        """Whether a GET stream is open now (between `get_opened` and `get_closed`)."""
        return self._get_since is not None

    def get_uptime(self, now: float | None = None) -> float:
        """The GET streams' time open so far, the one open now included (seconds, to ms)."""
        if self._get_since is None:
            return round(self.get_uptime_s, 3)
        return round(self.get_uptime_s + (time.monotonic() if now is None else now) - self._get_since, 3)

    def as_dict(self, guard: ResumptionGuard, now: float | None = None) -> dict[str, Any]:
        """What ``Client.statistics`` returns: these counters (the lists are this object's
        own, not copies: read them, do not change them), the GET uptime up to ``now``, and
        the guard's resumption counts under the names the statistics use."""
        figures = {name: value for name, value in self.__dict__.items() if name[0] != "_"}
        figures["reissue_reasons"] = dict(self.reissue_reasons)
        return {
            **figures,
            "get_uptime_s": self.get_uptime(now),
            "resumptions": guard.stats.resumptions,
            "duplicates_dropped": guard.stats.duplicates,
            "torn_discarded": guard.stats.torn,
            "unsafe_resumptions": guard.stats.unsafe,
        }
