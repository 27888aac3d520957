"""C1, C2: MCP clients end to end, each server in its own process on 127.0.0.1.

Two servers, two questions:

- **What a client costs** (``test_clients_side_by_side``): against ``cheap_server.py``,
  whose answers are pre-rendered bytes, the contenders are timed in turn over interleaved
  rounds, beside two floors on the same HTTP stack (``clients.py``: read the bytes; read
  them and parse every message). Time, peak memory and connections per call.
- **End to end against a real server** (``test_client``): the reference server
  (``ssewire serve``), one benchmark per contender; the server's own cost is in these
  figures, so they say little of the clients' difference.

Workloads (one ``tools/call`` a unit of work):

- C1: a 4 MiB tool result, one SSE event (with an event id);
- C2: 10,000 progress notifications, then a short result, every event with an id (as a
  resumable server sends them); C2-noid: the same without ids.

As shipped, the SDK client cannot read C1's event: ``test_as_shipped_the_sdk_client_fails_c1``
states it instead of timing a failure. Peak memory is tracemalloc over one more call after
the timed ones (tracemalloc slows what it traces, so it never runs while timing).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Iterator

import clients
import pytest
import report
from workloads import MIB, ROUNDS, _scaled

RESULT_SIZE = _scaled(4 * MIB, 64 * 1024)
PROGRESS = _scaled(10_000, 20)
CALLS = 3  # calls a contender makes in each interleaved round; its minimum is kept
WORKLOADS = {
    # name: (title, unit, (progress notifications, result size, event ids))
    "C1": (
        f"one tools/call answered by a {RESULT_SIZE / MIB:g} MiB result (one SSE event)",
        "result",
        (0, RESULT_SIZE, True),
    ),
    "C2": (
        f"one tools/call streaming {PROGRESS:,} progress notifications with event ids, then a 10-byte result",
        "notification",
        (PROGRESS, 10, True),
    ),
    "C2-noid": (
        f"the same {PROGRESS:,} progress notifications without event ids",
        "notification",
        (PROGRESS, 10, False),
    ),
}
SIDE_BY_SIDE = [clients.FLOOR_READ, clients.FLOOR_PARSE, clients.SSEWIRE, clients.SDK_LIFTED]
# the reference server: keep-alives out of the way; a store that holds all of C2, so it never cuts a reader
SERVE_OPTIONS = ["--keepalive", "60", "--store-size", "20000"]
END_TO_END = [clients.SSEWIRE, clients.SDK_LIFTED, clients.SDK_SHIPPED]


@pytest.fixture(scope="module")
def cheap_sessions() -> Iterator[tuple[str, dict[str, clients.Session]]]:
    with clients.cheap_server() as url, clients.sessions(url, SIDE_BY_SIDE) as opened:
        yield url, opened


@pytest.fixture(scope="module")
def reference_sessions() -> Iterator[dict[str, clients.Session]]:
    with clients.reference_server(SERVE_OPTIONS) as url, clients.sessions(url, END_TO_END) as opened:
        yield opened


def interleave(
    opened: dict[str, clients.Session], work: tuple[int, int, bool], rounds: int, calls: int
) -> dict[str, tuple[float, float]]:
    """Every contender in turn, ``calls`` calls each, round after round (each round starts
    one further along); ``{contender: (min, median)}`` in seconds per call."""
    names = list(opened)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            for _ in range(calls):
                gc.collect()
                start = time.perf_counter()
                seen = opened[name](work)
                times[name].append(time.perf_counter() - start)
                assert seen == work[:2], (name, seen)  # every notification and the whole text arrived
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def connections_per_call(url: str, session: clients.Session, work: tuple[int, int, bool]) -> float:
    before = clients.connections(url)
    for _ in range(CALLS):
        session(work)
    return (clients.connections(url) - before) / CALLS


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_clients_side_by_side(benchmark, cheap_sessions, workload):
    url, opened = cheap_sessions
    title, unit, work = WORKLOADS[workload]
    result: dict[str, tuple[float, float]] = {}
    rounds, calls = (1, 1) if benchmark.disabled else (ROUNDS, CALLS)
    benchmark.pedantic(lambda: result.update(interleave(opened, work, rounds, calls)), rounds=1, iterations=1)
    info = {
        "kind": "client-side-by-side",
        "workload": workload,
        "title": title,
        "unit": unit,
        "units": work[0] or 1,
        "rows": [
            {
                "contender": name,
                "ours": name == clients.SSEWIRE,
                "reference": name.startswith("floor"),
                "min": low,
                "median": middle,
                "peak": opened[name].peak(work),
                "connections": connections_per_call(url, opened[name], work),
            }
            for name, (low, middle) in result.items()
        ],
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))
    ours = next(row for row in info["rows"] if row["ours"])
    assert ours["connections"] == 0, "sequential calls reuse the session's connection"


@pytest.mark.parametrize(
    ("workload", "contender"),
    [
        (workload, contender)
        for workload in ("C1", "C2")
        for contender in END_TO_END
        if not (workload == "C1" and contender == clients.SDK_SHIPPED)
    ],
)
def test_client(benchmark, reference_sessions, workload, contender):
    title, unit, work = WORKLOADS[workload]
    session = reference_sessions[contender]
    seen = benchmark.pedantic(session, args=(work,), rounds=ROUNDS, warmup_rounds=1)
    assert seen == work[:2]  # every notification and the whole text arrived
    benchmark.extra_info.update(
        kind="client",
        workload=workload,
        title=title,
        contender=contender,
        ours=contender == clients.SSEWIRE,
        units=work[0] or 1,
        unit=unit,
        peak=session.peak(work),
    )
    report.keep(benchmark)


def test_as_shipped_the_sdk_client_fails_c1(reference_sessions):
    """Not timed: as shipped, the SDK client refuses an SSE event over 1 MiB."""
    with pytest.raises(Exception, match="1048576 byte limit"):
        reference_sessions[clients.SDK_SHIPPED]((0, max(RESULT_SIZE, MIB + 1), True))
