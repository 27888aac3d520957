"""G1-G3: the gateway beside nginx and beside no relay at all, same upstream, same client.

The upstream is the official Python SDK server (``sdk_upstream.py``), the client the
official SDK client (its 1 MiB event cap lifted), each relay in its own process on
127.0.0.1 (``relays.py``): ``direct`` (no relay), ``nginx`` (a plain reverse proxy, a
byte relay) and ``gateway`` (``ssewire gateway``, its in-memory store). Every relay is
timed in turn, round after round, so a slow minute of the machine falls on all alike.

- G1: one ``tools/call`` answered by a 4 MiB result: time per call, and the relay's CPU
  per relayed message (the time its process ran over the calls, divided by them)
  beside two floors measured here on the same message's bytes: one copy plus one
  validation pass (msgspec, skipping), and one copy plus ``orjson.loads``;
- G2: one call streaming progress notifications: time and the relay's CPU per notification;
- G3: 16 and 64 sessions at once, each making short calls: each call's latency (p50, p99)
  and what a relay adds to the direct p99 measured in the same run.

Peak memory is each relay process's resident high-water mark (``VmHWM``) at the end of
the workload. The client, the relays and the upstream share the machine's cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Iterator

import clients
import msgspec
import orjson
import pytest
import relays
import report
from workloads import MIB, ROUNDS, _scaled

RESULT_SIZE = _scaled(4 * MIB, 64 * 1024)
PROGRESS = _scaled(500, 20)
CALLS = 3  # calls each relay makes in each interleaved round
SESSIONS = (16, 64)
LOAD_CALLS = _scaled(10, 2)  # short calls each session makes, one after the other
CALL_TIMEOUT = 120.0  # seconds: a call that takes longer fails the benchmark
WORKLOADS = {
    "G1": (f"one tools/call answered by a {RESULT_SIZE / MIB:g} MiB result, through each relay", "call"),
    "G2": (
        f"one tools/call streaming {PROGRESS:,} progress notifications, through each relay",
        "notification",
    ),
}
FLOOR_VALIDATE = "floor: copy + validation pass (msgspec)"
FLOOR_PARSE = "floor: copy + orjson.loads"


@pytest.fixture(scope="module")
def ways() -> Iterator[tuple[relays.Relay, list[relays.Relay]]]:
    with relays.upstream() as up, relays.nginx(up.url) as proxy, relays.gateway(up.url) as gateway:
        yield up, [relays.Relay("direct", up.url, None), proxy, gateway]


@pytest.fixture(scope="module")
def sdk_sessions(ways) -> Iterator[dict[str, clients.Session]]:
    _, targets = ways
    opened: dict[str, clients.Session] = {}
    try:
        for target in targets:
            opened[target.name] = clients.Session(clients.SDK_LIFTED, target.url)
        yield opened
    finally:
        for session in opened.values():
            session.close()


def interleave(
    opened: dict[str, clients.Session], targets: list[relays.Relay], work: tuple[int, int, bool], rounds: int
) -> dict[str, dict[str, float]]:
    """Each relay in turn, ``CALLS`` calls each, round after round (each round starts one
    further along): per relay the min and median seconds per call and its CPU per call."""
    times: dict[str, list[float]] = {t.name: [] for t in targets}
    cpu = dict.fromkeys(times, 0.0)
    for r in range(rounds):
        k = r % len(targets)
        for target in targets[k:] + targets[:k]:
            before = target.cpu()
            for _ in range(CALLS):
                gc.collect()
                start = time.perf_counter()
                seen = opened[target.name](work)
                times[target.name].append(time.perf_counter() - start)
                assert seen == work[:2], (target.name, seen)  # every notification and the whole text
            cpu[target.name] += target.cpu() - before
    return {
        name: {"min": min(t), "median": statistics.median(t), "cpu": cpu[name] / len(t)}
        for name, t in times.items()
    }


def message_floors(size: int, repeat: int) -> dict[str, float]:
    """The least a relay that checks what it relays must spend on the answer's bytes: one
    copy, plus one validation pass (or one full parse), timed here on the same message."""
    text = "x" * size
    result = {"content": [{"type": "text", "text": text}], "isError": False}
    data = orjson.dumps({"jsonrpc": "2.0", "id": 2, "result": result})
    validate = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
    best = {FLOOR_VALIDATE: float("inf"), FLOOR_PARSE: float("inf")}
    for _ in range(repeat):
        start = time.perf_counter()
        validate(bytes(bytearray(data)))
        best[FLOOR_VALIDATE] = min(best[FLOOR_VALIDATE], time.perf_counter() - start)
        start = time.perf_counter()
        orjson.loads(bytes(bytearray(data)))
        best[FLOOR_PARSE] = min(best[FLOOR_PARSE], time.perf_counter() - start)
    return best


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_relays_side_by_side(benchmark, ways, sdk_sessions, workload):
    _, targets = ways
    title, unit = WORKLOADS[workload]
    work = (0, RESULT_SIZE, True) if workload == "G1" else (PROGRESS, 10, True)
    units = work[0] or 1
    result: dict[str, dict[str, float]] = {}
    rounds = 1 if benchmark.disabled else ROUNDS
    benchmark.pedantic(
        lambda: result.update(interleave(sdk_sessions, targets, work, rounds)), rounds=1, iterations=1
    )
    rows = [
        {
            "contender": target.name,
            "ours": target.name == "gateway",
            "reference": target.name == "direct",
            "min": result[target.name]["min"],
            "median": result[target.name]["median"],
            "cpu": result[target.name]["cpu"] / units if target.pid is not None else None,
            "peak": target.peak(),
        }
        for target in targets
    ]
    if workload == "G1":
        for name, seconds in message_floors(RESULT_SIZE, 5 if benchmark.disabled else 20).items():
            rows.append({"contender": name, "ours": False, "reference": True, "min": None, "cpu": seconds})
    info = {
        "kind": "gateway",
        "workload": workload,
        "title": title,
        "unit": unit,
        "units": units,
        "rows": rows,
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))


# -- G3: many sessions at once ------------------------------------------------------------


async def _load(url: str, sessions: int, calls: int) -> list[float]:
    """``sessions`` official clients, opened first, then all calling at once, each its
    ``calls`` short calls in turn: every call's latency in seconds."""
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        opened = []
        for _ in range(sessions):
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300)))
            transport = streamable_http_client(url, http_client=http)
            opened.append(await stack.enter_async_context(SDKClient(transport, mode="legacy")))

        async def calling(client) -> None:
            for _ in range(calls):
                start = time.perf_counter()
                answer = await asyncio.wait_for(
                    client.call_tool("countdown", {"count": 0, "size": 10}), CALL_TIMEOUT
                )
                latencies.append(time.perf_counter() - start)
                assert not answer.is_error and answer.content[0].text == "x" * 10

        await asyncio.gather(*(calling(client) for client in opened))
    return latencies


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


@pytest.mark.parametrize("sessions", SESSIONS)
def test_relays_under_load(benchmark, ways, sessions):
    _, targets = ways
    calls = 1 if benchmark.disabled else LOAD_CALLS
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    cpu = dict.fromkeys(latencies, 0.0)

    def run() -> None:
        for r in range(1 if benchmark.disabled else 2):  # each relay once in each round, in turn
            k = r % len(targets)
            for target in targets[k:] + targets[:k]:
                before = target.cpu()
                latencies[target.name] += asyncio.run(_load(target.url, sessions, calls))
                cpu[target.name] += target.cpu() - before

    benchmark.pedantic(run, rounds=1, iterations=1)
    direct = _p99(latencies["direct"])
    rows = [
        {
            "contender": target.name,
            "ours": target.name == "gateway",
            "reference": target.name == "direct",
            "min": statistics.median(latencies[target.name]),
            "p99": _p99(latencies[target.name]),
            "added_p99": _p99(latencies[target.name]) - direct,
            "cpu": cpu[target.name] / len(latencies[target.name]) if target.pid is not None else None,
            "peak": target.peak(),
        }
        for target in targets
    ]
    info = {
        "kind": "gateway-load",
        "workload": f"G3-{sessions}",
        "title": f"{sessions} sessions at once, each making {calls} short tools/call in turn, through each relay",
        "unit": "call",
        "units": 1,
        "rows": rows,
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))
