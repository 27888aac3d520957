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
import json
import os
import shutil
import statistics
import struct
import subprocess
import time
from pathlib import Path

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
    if name == "W1":  # the least any decoder handing out these events as objects must do
        floors_w1 = {
            floors.PYTHON_OBJECTS: floors.python_objects(work.chunks),
            floors.OBJECTS: floors.compiled_objects(work.chunks),
            floors.RAW_OBJECTS: floors.compiled_objects(work.chunks, raw=True),
        }
        for floor, built in floors_w1.items():
            if built is not None:
                runners[floor] = (built[0], built[1], expected)
    info = {
        "kind": "side-by-side",
        "workload": name,
        "title": work.title,
        "bytes": work.nbytes,
        "events": work.events,
        "missing": [f"{c.name}: {c.missing}" for c in CONTENDERS if c.run is None],
    }
    references = {floors.NAME, *floors.OBJECT_FLOORS}
    _measure(benchmark, runners, info, {c.name for c in CONTENDERS if c.ours}, references)


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


NODE_PEER = Path(__file__).resolve().parent / "node_peer" / "w1.mjs"
EVENTSOURCE_PARSER = Path(__file__).resolve().parents[1] / "tests/ts_server/node_modules/eventsource-parser"


def write_chunks(chunks, path: Path) -> None:
    """The chunks for node_peer/w1.mjs: each a little-endian u32 length, then its bytes."""
    with path.open("wb") as out:
        for chunk in chunks:
            out.write(struct.pack("<I", len(chunk)))
            out.write(chunk)


def test_w1_node_peer(benchmark, tmp_path):
    """node's eventsource-parser on W1's very chunks, beside our compiled twins' best in
    the same test. Not in the tables (another runtime, timed in its own process)."""
    node = shutil.which("node")
    if node is None:
        _unavailable("node is not on PATH (needed for eventsource-parser's W1 figures)")
    if not (EVENTSOURCE_PARSER / "dist" / "index.js").exists():
        _unavailable(
            f"eventsource-parser is not installed at {EVENTSOURCE_PARSER} (npm ci in tests/ts_server, "
            "as the TypeScript SDK tests do)"
        )
    work = workload("W1")
    expected = (work.events, work.data_size)
    compiled = [c for c in CONTENDERS if c.name.startswith("ssewire C") and c.run is not None]
    if not compiled:
        pytest.skip("compiled twin not built: nothing of ours to set beside eventsource-parser")
    runners = {c.name: (c.run, work.chunks, expected) for c in compiled}
    write_chunks(work.chunks, tmp_path / "w1.chunks")
    rounds = 1 if benchmark.disabled else ROUNDS
    ours: dict[str, tuple[float, float]] = {}
    benchmark.pedantic(lambda: ours.update(interleave(runners, rounds)), rounds=1, iterations=1)
    done = subprocess.run(
        [node, str(NODE_PEER), str(tmp_path / "w1.chunks"), str(rounds), str(EVENTSOURCE_PARSER)],
        capture_output=True,
        text=True,
        check=True,
    )
    peer = json.loads(done.stdout)
    assert (peer["events"], peer["data_size"]) == expected  # JS lengths are UTF-16 units; W1 is ASCII
    best_ours = min(low for low, _ in ours.values())
    parser = peer["parser"]
    rows = [{"contender": name, "ours": True, "min": low, "median": mid} for name, (low, mid) in ours.items()]
    rows += [
        {
            "contender": f"{parser}, {mode} in",
            "ours": False,
            "min": peer[f"{mode}_in"]["best"],
            "median": peer[f"{mode}_in"]["median"],
        }
        for mode in ("bytes", "text")
    ]
    benchmark.extra_info.update(
        {
            "kind": "node-peer",
            "title": "W1 through node's eventsource-parser (its own process) beside the compiled twins",
            "node": peer["node"],
            "rows": rows,
            "workload": "W1",
            "ours": {name: {"min": low, "median": mid} for name, (low, mid) in ours.items()},
            "eventsource-parser": peer,
            "speedup vs bytes in": peer["bytes_in"]["best"] / best_ours,
            "speedup vs text in": peer["text_in"]["best"] / best_ours,
        }
    )
    report.RECORDS.extend(report.side_by_side_records(benchmark.extra_info))


def _unavailable(reason: str) -> None:
    """Skipped naming what is missing; a failure under SSEWIRE_REQUIRE_NODE=1 (as .ci/run sets)."""
    if os.environ.get("SSEWIRE_REQUIRE_NODE") == "1":
        pytest.fail(f"SSEWIRE_REQUIRE_NODE=1 but {reason}")
    pytest.skip(reason)
