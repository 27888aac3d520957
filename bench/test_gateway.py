"""G1-G4: the gateway beside nginx and beside no relay at all, each workload with the same
upstream and client through every relay.

Each relay runs in its own process on 127.0.0.1 (``relays.py``): ``direct`` (no relay),
``nginx`` (a plain reverse proxy, a byte relay) and ``gateway`` (``ssewire gateway``, its
in-memory store). Every relay is timed in turn, round after round (or level after level),
so a slow minute of the machine falls on all alike. Peak memory is each relay process's
resident high-water mark (``VmHWM``) at the end of the workload.

G1-G3 have the official Python SDK server upstream (``sdk_upstream.py``), and the client,
the relays and the upstream share the machine's cores:

- G1: one ``tools/call`` answered by a 4 MiB result, through the official SDK client (its
  1 MiB event cap lifted): time per call, and the relay's CPU per relayed message (the
  time its process ran over the calls, divided by them) beside two floors measured here
  on the same message's bytes: one copy plus one validation pass (msgspec, skipping), and
  one copy plus ``orjson.loads``;
- G2: one call streaming progress notifications, the same client: time and the relay's
  CPU per notification;
- G3: 16 and 64 sessions of the lean client (``lean_client.py``: raw JSON-RPC over
  aiohttp, every answer checked) at once, each making short calls in turn (closed loop):
  each call's latency (p50, p99), what a relay adds to the direct p99 of the same run,
  and the CPU per call of the relay, the upstream and the client, with how busy the two
  cores were. The official client spends about eight times the lean one's CPU on a short
  call, which would go missing from the relays' share of the two cores.
  Beside them, G3's floor (``floor_relay.py``): the least a relay written in Python costs
  a call, doing per message only what a gateway cannot skip.

G4 asks what one core carries: each relay (nginx's worker; every thread of the gateway)
pinned to one core, the upstream and the load generator (``lean_client.py --cpu``, a
process of its own) to the other. The upstream is ``cheap_server.py`` (pre-rendered
answers), so the ceiling of that second core, direct's own figure, lies far above what the
gateway carries. Open loop: calls start at a set rate whatever the answers do, each
on the next idle session of a pool, and a call's latency runs from when it was due. A
closed loop (N sessions calling in turn) would slow its own calls down to what the relay
carries, so its latency says how many sessions were waiting, not what a given rate of
calls costs; the open loop shows the queue a relay builds once it falls behind, which is
the question "how many calls a second, with p99 under 50 ms". The rates climb a ladder,
a few seconds a level, each relay until a level breaks: p99 at or over the limit, or a
call refused or still unanswered well after the level; a level that breaks is run once
more, and one that other work on the machine disturbed is run again. The figure is the
last level that held.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import cheap_server
import clients
import httpx
import msgspec
import orjson
import pytest
import relays
import report
from workloads import MIB, ROUNDS, SCALE, _scaled

from ssewire import RawDecoder

try:
    import lean_client
except ImportError:  # aiohttp: the mcp and test extras bring it, the bench extra alone does not
    lean_client = None
needs_lean_client = pytest.mark.skipif(
    lean_client is None, reason="G3 and G4's lean client needs aiohttp: pip install '.[mcp]'"
)

RESULT_SIZE = _scaled(4 * MIB, 64 * 1024)
PROGRESS = _scaled(500, 20)
CALLS = 3  # calls each relay makes in each interleaved round
SESSIONS = (16, 64)
LOAD_CALLS = _scaled(25, 2)  # short calls each G3 session makes, one after the other, in a round
LOAD_ROUNDS = 3
LATENCY_LIMIT = 0.050  # seconds: G4's p99 bound
# G4's ladder (calls a second), steps of 25% at most; bounded by direct's own ceiling
RATES = (200, 250, 320, 400, 500, 640, 800, 1000, 1250, 1600, 2000, 2500, 3200, 4000, 5000, 6400, 8000)
LEVEL_SECONDS = max(0.5, 3 * SCALE)
LEVEL_SESSIONS = 128  # G4's pool: more than any level that holds keeps busy at once
DISTURBED_RUNS = 3  # G4 runs a level this many times at most while other work disturbs it
CORES = sorted(os.sched_getaffinity(0))
RELAY_CORE, LOAD_CORE = CORES[0], CORES[-1]  # G4's: 0 and 1 on two cores
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


def answered_message(url: str, size: int) -> bytes:
    """The bytes of the message the upstream answers a G1 call with, as every relay gets
    it: the official SDK server puts the text in the result twice (``content`` and
    ``structuredContent``), so a result of ``size`` bytes is a message of twice that."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "floor", "version": "0"},
    }
    call = {"name": "countdown", "arguments": {"count": 0, "size": size}}
    with httpx.Client(timeout=60) as http:
        opened = http.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers
        )
        headers = {
            **headers,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        answer = http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}, headers=headers
        )
        http.delete(url, headers=headers)
    if answer.headers["content-type"].startswith("application/json"):
        return answer.content
    return next(event.data for event in RawDecoder().feed(answer.content + b"\n\n") if event.data)


def message_floors(data: bytes, repeat: int) -> dict[str, float]:
    """The least a relay that checks what it relays must spend on the answer's bytes
    (``data``, the message itself): one copy, plus one validation pass (or one full parse)."""
    validate = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
    best = {FLOOR_VALIDATE: float("inf"), FLOOR_PARSE: float("inf")}
    for _ in range(repeat):
        start = time.perf_counter()
        validate(bytearray(data))  # (one copy: bytes(bytearray(...)) was two, and their page faults)
        best[FLOOR_VALIDATE] = min(best[FLOOR_VALIDATE], time.perf_counter() - start)
        start = time.perf_counter()
        orjson.loads(bytearray(data))
        best[FLOOR_PARSE] = min(best[FLOOR_PARSE], time.perf_counter() - start)
    return best


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_relays_side_by_side(benchmark, ways, sdk_sessions, workload):
    up, targets = ways
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
        message = answered_message(up.url, RESULT_SIZE)
        assert len(message) > RESULT_SIZE  # (the text, at least once, and the envelope)
        for name, seconds in message_floors(message, 5 if benchmark.disabled else 20).items():
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


# -- G3: many sessions of the lean client at once -----------------------------------------


async def _sessions_at_once(
    target: relays.Relay, upstream: relays.Relay, sessions: int, calls: int
) -> tuple[list[float], dict[str, float]]:
    """``sessions`` lean sessions, opened first, then all calling at once, each its
    ``calls`` calls in turn: every call's latency in seconds, and what ran meanwhile
    (opening and closing the sessions outside it)."""
    opened = await lean_client.open_sessions(target.url, sessions)
    try:
        window = relays.Window(target, upstream)
        latencies = await lean_client.calls_in_turn(opened, calls)
        return latencies, window.close()
    finally:
        await lean_client.close_sessions(opened)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


@pytest.fixture(scope="module")
def load_ways(ways) -> Iterator[tuple[relays.Relay, list[relays.Relay]]]:
    """G3's relays, and its floor: the least a relay written in Python costs a call."""
    up, targets = ways
    with relays.floor_relay(up.url) as floor:
        yield up, [*targets, floor]


@needs_lean_client
@pytest.mark.parametrize("sessions", SESSIONS)
def test_relays_under_load(benchmark, load_ways, sessions):
    up, targets = load_ways
    calls, rounds = (1, 1) if benchmark.disabled else (LOAD_CALLS, LOAD_ROUNDS)
    latencies: dict[str, list[float]] = {t.name: [] for t in targets}
    spent: dict[str, dict[str, float]] = {t.name: {} for t in targets}

    def run() -> None:
        for r in range(rounds):  # each relay once in each round, in turn
            k = r % len(targets)
            for target in targets[k:] + targets[:k]:
                measured, window = lean_client.run(_sessions_at_once(target, up, sessions, calls))
                latencies[target.name] += measured
                for key, value in window.items():  # shares of a window weighted by its length
                    weight = window["wall"] if key.startswith("core") or key == "others" else 1.0
                    spent[target.name][key] = spent[target.name].get(key, 0.0) + value * weight

    benchmark.pedantic(run, rounds=1, iterations=1)
    direct = _p99(latencies["direct"])
    rows = []
    for target in targets:
        done, used = len(latencies[target.name]), spent[target.name]
        cores = [used[key] / used["wall"] for key in used if key.startswith("core")]
        rows.append(
            {
                "contender": target.name,
                "ours": target.name == "gateway",
                "reference": target.name == "direct",
                "calls": done,
                "p50": statistics.median(latencies[target.name]),
                "p99": _p99(latencies[target.name]),
                "added_p99": _p99(latencies[target.name]) - direct,
                "cpu": used["relay"] / done if target.pid is not None else None,
                "upstream_cpu": used["upstream"] / done,
                "client_cpu": used["client"] / done,
                "busy": sum(cores) / len(cores),  # of the machine's cores, over the calls
                # of one core: what a process whose Python runs on one core at a time can use
                "relay_busy": used["relay"] / used["wall"],
                "upstream_busy": used["upstream"] / used["wall"],
                "client_busy": used["client"] / used["wall"],
                "others": used["others"] / used["wall"],  # other work on the machine, of one core
                "peak": target.peak(),
            }
        )
    info = {
        "kind": "gateway-load",
        "workload": f"G3-{sessions}",
        "title": f"{sessions} sessions of a lean client at once, each making {calls} short tools/call "
        f"({lean_client.PROGRESS} progress notifications, a {lean_client.SIZE}-byte result) in turn, "
        f"through each relay, {rounds} interleaved rounds",
        "unit": "call",
        "units": 1,
        "sessions": sessions,
        "rows": rows,
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))


# -- G4: calls per second on one core -----------------------------------------------------


@pytest.fixture(scope="module")
def one_core_ways() -> Iterator[tuple[relays.Relay, list[relays.Relay]]]:
    """The cheap upstream and the load generator's core, and the relays' core: each relay
    (nginx's worker, every thread of the gateway) pinned to the one, the upstream to the
    other."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("G4 needs two cores: one for the relay, one for the load and the upstream")
    with relays.cheap_upstream() as up, relays.nginx(up.url) as proxy, relays.gateway(up.url) as gateway:
        relays.pin(up.pid, {LOAD_CORE})
        for relay in (proxy, gateway):
            relays.pin(relay.pid, {RELAY_CORE})
        yield up, [relays.Relay("direct", up.url, None), proxy, gateway]


def _level(
    load: lean_client.Generator, target: relays.Relay, up: relays.Relay, rate: float, seconds: float
) -> dict[str, Any]:
    """One level of the ladder: ``rate`` calls a second for ``seconds`` through ``target``,
    and what it cost each core."""
    window = relays.Window(target, up)
    answer = load.ask(do="level", url=target.url, rate=rate, seconds=seconds)
    spent = window.close(ours=answer["cpu"])
    latencies = answer["latencies"]
    done = max(1, len(latencies))
    p99 = _p99(latencies) if latencies else None
    return {
        "rate": rate,
        "calls": len(latencies),
        "p50": statistics.median(latencies) if latencies else None,
        "p99": p99,
        "refused": len(answer["refused"]),
        "refusals": answer["refused"][:3],  # what the first ones said
        "late": answer["late"],
        "passed": p99 is not None and p99 < LATENCY_LIMIT and not answer["refused"] and not answer["late"],
        "cpu": spent["relay"] / done,
        "relay_busy": spent["relay"] / spent["wall"],
        "upstream_cpu": spent["upstream"] / done,
        "load_cpu": answer["cpu"] / done,
        "relay_core": spent[f"core{RELAY_CORE}"],
        "load_core": spent[f"core{LOAD_CORE}"],
        "others": spent["others"],
    }


def _undisturbed_level(
    load: lean_client.Generator, target: relays.Relay, up: relays.Relay, rate: float, seconds: float
) -> dict[str, Any]:
    """`_level`, run again (``DISTURBED_RUNS`` times at most) while other work on the
    machine took a tenth of a core or more: what another tenant did is not the relay's."""
    for _ in range(DISTURBED_RUNS):
        level = _level(load, target, up, rate, seconds)
        if level["others"] < report.DISTURBED:
            break
    return level


def _ladder(
    load: lean_client.Generator,
    targets: list[relays.Relay],
    up: relays.Relay,
    rates: tuple[int, ...],
    seconds: float,
    retry: bool,
) -> dict[str, list[dict[str, Any]]]:
    """Each relay up the rates until one breaks, the relays in turn at each rate (each
    rate's turn starting one further along). With ``retry``, a level that breaks is run
    once more and breaks only if it breaks again, so one slow second of a shared machine
    does not end a relay's climb, and a level disturbed by other work is run again."""
    measure = _undisturbed_level if retry else _level
    levels: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
    climbing = list(targets)
    for n, rate in enumerate(rates):
        k = n % len(climbing)
        for target in climbing[k:] + climbing[:k]:
            level = measure(load, target, up, rate, seconds)
            if not level["passed"] and retry:
                level = {**measure(load, target, up, rate, seconds), "first_p99": level["p99"]}
            levels[target.name].append(level)
        climbing = [t for t in climbing if levels[t.name][-1]["passed"]]
        if not climbing:
            break
    return levels


@needs_lean_client
def test_relays_on_one_core(benchmark, one_core_ways):
    up, targets = one_core_ways
    quick = benchmark.disabled
    rates = RATES[:1] if quick else RATES
    seconds = 0.2 if quick else LEVEL_SECONDS
    sessions = 4 if quick else LEVEL_SESSIONS
    levels: dict[str, list[dict[str, Any]]] = {}
    text = cheap_server.text(lean_client.SIZE).decode()

    def run() -> None:
        with lean_client.generator(LOAD_CORE) as load:
            for target in targets:
                load.ask(do="open", url=target.url, sessions=sessions, text=text)
                if not quick:  # warm: connections, the relay's pools and caches (not kept)
                    _level(load, target, up, rates[0], 1.0)
            levels.update(_ladder(load, targets, up, rates, seconds, retry=not quick))

    benchmark.pedantic(run, rounds=1, iterations=1)
    rows = []
    for target in targets:
        climbed = levels[target.name]
        passed = [level for level in climbed if level["passed"]]
        top = passed[-1] if passed else None
        rows.append(
            {
                "contender": target.name,
                "ours": target.name == "gateway",
                "reference": target.name == "direct",
                "rate": top["rate"] if top else 0,
                "top": top,
                "broke": None if climbed[-1]["passed"] else climbed[-1],
                "ladder": [[level["rate"], level["p99"], level["passed"]] for level in climbed],
                "peak": target.peak(),
            }
        )
    info = {
        "kind": "gateway-capacity",
        "workload": "G4",
        "title": f"the calls a second each relay carries on one core with p99 under "
        f"{LATENCY_LIMIT * 1e3:g} ms: short tools/call started at a set rate (open loop) on "
        f"{sessions} lean sessions, {seconds:g} s a level, up a ladder of rates; "
        "the cheap upstream and the load on the other core",
        "unit": "call",
        "units": 1,
        "limit": LATENCY_LIMIT,
        "cores": {"relay": RELAY_CORE, "load": LOAD_CORE},
        "rows": rows,
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))
