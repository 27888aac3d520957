"""What a client session counts (``ClientStats``), alone: counting, the bounded lists, the
GET uptime, and what ``Client.statistics`` returns from it beside the guard's counts."""

from __future__ import annotations

import asyncio

import pytest

from ssewire.mcp.client import Client, ClientStats
from ssewire.mcp.client.counters import FIGURES_KEPT
from ssewire.mcp.client.session import FIGURES_KEPT as SESSION_FIGURES_KEPT
from ssewire.mcp.streams.guard import ResumptionGuard

# the keys of statistics(), in their order: what a dashboard or the gateway's figures read
KEYS = [
    "ttfb_s",
    "get_uptime_s",
    "progress_gaps_s",
    "resets",
    "reinitializations",
    "reissues",
    "reissue_reasons",
    "repeated_progress",
    "idle_timeouts",
    "keepalives",
    "get_failures",
    "callback_errors",
    "server_requests_dropped",
    "late_progress",
    "drained",
    "resumptions",
    "duplicates_dropped",
    "torn_discarded",
    "unsafe_resumptions",
]
COUNTERS = [key for key in KEYS[3:15] if key != "reissue_reasons"]  # the client's own counts


@pytest.fixture
def guard() -> ResumptionGuard:
    return ResumptionGuard("2025-11-25")


def test_a_fresh_session_counts_nothing_under_the_statistics_keys(guard):
    figures = ClientStats().as_dict(guard, now=0.0)
    assert list(figures) == KEYS
    assert all(
        figures[key] == 0 for key in KEYS if key not in ("ttfb_s", "progress_gaps_s", "reissue_reasons")
    )
    assert figures["ttfb_s"] == [] and figures["progress_gaps_s"] == [] and figures["reissue_reasons"] == {}
    assert FIGURES_KEPT == SESSION_FIGURES_KEPT == 1024  # one constant, still importable where it was


@pytest.mark.parametrize("name", COUNTERS)
def test_each_counter_reads_back_under_its_own_name(guard, name):
    stats = ClientStats()
    setattr(stats, name, getattr(stats, name) + 3)
    figures = stats.as_dict(guard, now=0.0)
    assert figures[name] == 3
    assert all(figures[other] == 0 for other in COUNTERS if other != name)


def test_the_guards_counts_appear_under_the_statistics_names(guard):
    guard.stats.resumptions, guard.stats.duplicates, guard.stats.torn, guard.stats.unsafe = 4, 3, 2, 1
    figures = ClientStats().as_dict(guard, now=0.0)
    assert (
        figures["resumptions"],
        figures["duplicates_dropped"],
        figures["torn_discarded"],
        figures["unsafe_resumptions"],
    ) == (4, 3, 2, 1)


def test_time_to_first_byte_is_rounded_and_only_the_newest_are_kept():
    stats = ClientStats()
    stats.first_byte(0.123456)
    assert stats.ttfb_s == [0.1235]
    for n in range(3 * FIGURES_KEPT):
        stats.first_byte(float(n))
    assert FIGURES_KEPT <= len(stats.ttfb_s) <= 2 * FIGURES_KEPT  # trimmed in bulk, never past twice
    assert stats.ttfb_s[-FIGURES_KEPT:] == [float(n) for n in range(2 * FIGURES_KEPT, 3 * FIGURES_KEPT)]


def test_progress_gaps_are_between_one_calls_notifications():
    stats = ClientStats()
    stats.progressed([])
    stats.progressed([5.0])  # one notification: no gap
    assert stats.progress_gaps_s == []
    stats.progressed([1.0, 1.5, 1.75])
    stats.progressed([10.0, 10.00001])  # another call: no gap across calls
    assert stats.progress_gaps_s == [0.5, 0.25, 0.0]


def test_a_long_call_keeps_only_its_newest_gaps():
    stats = ClientStats()
    stats.progressed([float(n) for n in range(5 * FIGURES_KEPT)])
    assert stats.progress_gaps_s == [1.0] * FIGURES_KEPT
    stats.progressed([2.0 * n for n in range(2 * FIGURES_KEPT)])  # a second long call
    assert stats.progress_gaps_s == [1.0] * FIGURES_KEPT + [2.0] * FIGURES_KEPT
    stats.progressed([0.0, 3.0])  # past twice the bound: the newest FIGURES_KEPT remain
    assert stats.progress_gaps_s == [2.0] * (FIGURES_KEPT - 1) + [3.0]


def test_dropped_server_requests_are_counted_and_logged_at_powers_of_two():
    stats = ClientStats()
    logged = [n for n in range(1, 101) if stats.dropped_request()]
    assert stats.server_requests_dropped == 100
    assert logged == [1, 2, 4, 8, 16, 32, 64]


def test_the_get_uptime_counts_closed_streams_and_the_one_open_now(guard):
    stats = ClientStats()
    assert not stats.get_open and stats.get_uptime(now=100.0) == 0.0
    stats.get_opened(at=10.0)
    assert stats.get_open and stats.get_uptime(now=12.5) == 2.5
    assert stats.get_uptime_s == 0.0  # the field holds the closed streams only
    stats.get_closed(at=13.0)
    assert not stats.get_open and stats.get_uptime_s == 3.0 and stats.get_uptime(now=99.0) == 3.0
    stats.get_opened(at=20.0)
    figures = stats.as_dict(guard, now=21.0004)
    assert figures["get_uptime_s"] == 4.0  # to the millisecond
    assert "_get_since" not in figures and "_get_since" not in repr(stats)


def test_statistics_is_what_the_counters_say_beside_the_guard():
    async def main():
        client = Client("http://127.0.0.1:9/mcp")  # never connected: nothing is sent
        try:
            client.stats.resets, client.stats.reissues = 2, 1
            client.stats.first_byte(0.01)
            client.guard.stats.resumptions = 5
            return client.statistics(), client.stats.as_dict(client.guard)
        finally:
            await client.http.aclose()

    statistics, counted = asyncio.run(main())
    assert statistics == counted and list(statistics) == KEYS
    assert (statistics["resets"], statistics["reissues"], statistics["resumptions"]) == (2, 1, 5)
    assert statistics["ttfb_s"] == [0.01]


def test_idempotent_is_a_boolean_or_none_and_nothing_is_sent_otherwise():
    async def main():
        client = Client("http://127.0.0.1:9/mcp")  # never connected: nothing may be sent
        try:
            for wrong in ("false", "no", 1, "ask"):
                with pytest.raises(TypeError):
                    await client.request("ping", idempotent=wrong)  # type: ignore[arg-type]
        finally:
            await client.http.aclose()
        return client.statistics()

    figures = asyncio.run(main())
    assert figures["resets"] == 0 and figures["reissues"] == 0
