"""Shared pieces of the benchmark suite: the ``measure`` fixture and the summary.

Every timed benchmark goes through ``measure``, which tags it (workload, contender,
bytes, events) and keeps its timing, so the end of the run can print the same ratio
tables that ``render.py`` writes to docs/benchmarks.md.
"""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import relays
import report


@pytest.fixture
def measure(benchmark):
    def run(function, argument, **info):
        benchmark.extra_info.update(info)
        result = benchmark(function, argument)
        report.keep(benchmark)
        return result

    return run


# Throughput first, then end to end, then the multi-megabyte growth and memory cases,
# whatever the file names. (Run after those, CDecoder's W1 once measured 40% slower than
# alone, every round; not reproduced since, but the small-object workloads need not
# inherit the allocator state that hundreds of MiB of large events leave behind.)
_ORDER = ("test_throughput.py", "test_end_to_end.py", "test_side_by_side.py", "test_growth.py")


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return _ORDER.index(name) if name in _ORDER else len(_ORDER)

    items.sort(key=rank)  # stable: each file keeps its own order
    if items and items[0].config.pluginmanager.hasplugin("timeout"):
        for item in items:  # the tests' per-test timeout is not for minutes-long benchmarks
            item.add_marker(pytest.mark.timeout(0))


def pytest_benchmark_update_machine_info(config, machine_info):
    import ssewire

    machine_info["ssewire"] = {"version": ssewire.__version__, "implementation": ssewire.IMPLEMENTATION}
    machine_info["platform_detail"] = platform.platform()
    machine_info["nginx"] = relays.nginx_version()  # the relays' bench's byte relay
    packages = {}
    for name in (
        "httpx-sse",
        "httpx",
        "httpx2",
        "sseclient-py",
        "orjson",
        "msgspec",
        "jiter",
        "mcp",
        "Cython",
        # the HTTP stacks of the gateway, of its bench's SDK upstream and of the lean client
        "aiohttp",
        "uvloop",
        "uvicorn",
        "httptools",
        "starlette",
        "sse-starlette",
    ):
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = "not installed"
    machine_info["packages"] = packages


def pytest_terminal_summary(terminalreporter):
    if report.RECORDS:
        terminalreporter.write_sep("=", "ssewire benchmark summary (min of rounds)")
        terminalreporter.write(report.tables(report.RECORDS) + "\n")
