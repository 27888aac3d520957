"""The ratios, measured side by side: each workload's contenders timed in turn, round
after round, in one benchmark.

The other bench files time each contender in its own benchmark, one after the other:
right for tracking one decoder across commits (``--benchmark-compare``), but on a shared
machine a slow minute can land on one contender and not on its peer, and a ratio of two
timings taken minutes apart has moved by 40% between runs here. Interleaved rounds
spread such minutes over every contender alike; each keeps its minimum.
"""

from __future__ import annotations

import gc
import statistics
import time

import floors
import pytest
import report
from peers import contenders
from test_end_to_end import parsed_text_size, pipelines
from workloads import MIB, ROUNDS, THROUGHPUT, workload

CONTENDERS = contenders()


def interleave(runners: dict, rounds: int) -> dict[str, tuple[float, float]]:
    """``{name: (run, argument, expected result)}`` -> ``{name: (min, median)}``
    in seconds. Each round starts one further along, so no contender always follows
    the same one."""
    names = list(runners)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            run, argument, expected = runners[name]
            gc.collect()
            start = time.perf_counter()
            seen = run(argument)
            times[name].append(time.perf_counter() - start)
            assert seen == expected, (name, seen, expected)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def _measure(benchmark, runners, info, ours, references):
    result: dict[str, tuple[float, float]] = {}
    rounds = 1 if benchmark.disabled else ROUNDS
    benchmark.pedantic(lambda: result.update(interleave(runners, rounds)), rounds=1, iterations=1)
    info["rows"] = [
        {"contender": name, "ours": name in ours, "reference": name in references, "min": low, "median": mid}
        for name, (low, mid) in result.items()
    ]
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))


@pytest.mark.parametrize("name", THROUGHPUT)
def test_side_by_side(benchmark, name):
    work = workload(name)
    expected = (work.events, work.data_size)
    runners = {c.name: (c.run, work.chunks, expected) for c in CONTENDERS if c.run is not None}
    if name == "W2":
        runners[floors.NAME] = (floors.copy_through(4 * MIB), work.chunks, work.nbytes)
    info = {
        "kind": "side-by-side",
        "workload": name,
        "title": work.title,
        "bytes": work.nbytes,
        "events": work.events,
        "missing": [f"{c.name}: {c.missing}" for c in CONTENDERS if c.run is None],
    }
    _measure(benchmark, runners, info, {c.name for c in CONTENDERS if c.ours}, {floors.NAME})


def test_w6_side_by_side(benchmark):
    work = workload("W2")
    runners = {
        name: (run, work.payloads if baseline else work.chunks, (work.events, parsed_text_size()))
        for name, run, baseline in pipelines()
    }
    info = {
        "kind": "e2e-side-by-side",
        "workload": "W6",
        "title": "W2 decoded, then orjson.loads per event",
        "bytes": work.nbytes,
        "events": work.events,
        "baseline": "orjson.loads alone",
    }
    _measure(benchmark, runners, info, set(runners) - {"orjson.loads alone"}, set())
