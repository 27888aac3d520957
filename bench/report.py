"""Turn benchmark records into the tables the suite prints and docs/benchmarks.md shows.

A record is one timed benchmark: ``extra_info`` set by the bench test plus its timing
(``min``, seconds; the least noisy estimate on a shared machine). The terminal summary
and ``render.py`` both call :func:`tables`, so the page matches what a rerun prints.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

Record = dict  # {"kind", "workload", "title", "contender", "ours", "bytes", "events", "min", ...}

# What this run measured, filled by bench/conftest.py and printed at its end.
RECORDS: list[Record] = []


def keep(benchmark) -> None:
    """Record a finished benchmark (its ``extra_info`` and timing) for the summary."""
    if benchmark.stats is not None:  # None under --benchmark-disable
        stats = benchmark.stats.stats
        RECORDS.append({**benchmark.extra_info, "min": stats.min, "median": stats.median})


def side_by_side_records(info: dict) -> list[Record]:
    """One record per contender of an interleaved benchmark (test_side_by_side.py)."""
    common = {k: v for k, v in info.items() if k not in ("rows", "missing")}
    return [{**common, **row} for row in info["rows"]]


def records_from_json(data: dict) -> list[Record]:
    """Records from a ``--benchmark-json`` file."""
    out = []
    for bench in data.get("benchmarks", []):
        info = dict(bench.get("extra_info") or {})
        if "kind" not in info:
            continue
        if "rows" in info:
            out.extend(side_by_side_records(info))
            continue
        timing = {"min": bench["stats"]["min"], "median": bench["stats"]["median"]}
        orjson_peak = info.pop("orjson_alone_peak", None)
        out.append({**info, **timing})
        if orjson_peak is not None:  # the reference row measured beside MessageDecoder
            out.append({**info, **timing, "contender": "orjson.loads alone (same JSON)", "peak": orjson_peak})
    return out


def _by(records: Iterable[Record], kind: str) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record["kind"] == kind:
            groups[record["workload"]].append(record)
    return dict(sorted(groups.items()))


def throughput_rows(records: Iterable[Record], kind: str = "throughput") -> list[list[str]]:
    rows = []
    for workload, group in _by(records, kind).items():
        peers = [r["min"] for r in group if not r["ours"] and not r.get("reference")]
        best_peer = min(peers) if peers else None
        for r in sorted(group, key=lambda r: r["min"]):
            ratio = f"{best_peer / r['min']:.1f}x" if best_peer else "n/a"
            rows.append(
                [
                    workload,
                    r["contender"],
                    f"{r['bytes'] / r['min'] / 1e6:,.0f}",
                    f"{r['events'] / r['min']:,.0f}",
                    ratio,
                ]
            )
    return rows


def end_to_end_rows(records: Iterable[Record], kind: str = "e2e") -> list[list[str]]:
    rows = []
    for workload, group in _by(records, kind).items():
        base = [r["min"] for r in group if r.get("baseline") in (True, r["contender"])]
        for r in sorted(group, key=lambda r: r["min"]):
            ratio = f"{r['min'] / base[0]:.2f}x" if base else "n/a"
            rows.append([workload, r["contender"], f"{r['bytes'] / r['min'] / 1e6:,.0f}", ratio])
    return rows


def growth_rows(records: Iterable[Record]) -> list[list[str]]:
    """Each contender's time against its own smallest size, and against the floor (one
    copy of the same bytes) at the same size: the memory hierarchy makes even the floor
    grow faster than the bytes, so a flat "x floor" is what linear looks like."""
    groups = _by_contender(records, "growth")
    floor = {r["bytes"]: r["min"] for group in groups.values() for r in group if r.get("reference")}
    rows = []
    for contender, group in groups.items():
        group.sort(key=lambda r: r["bytes"])
        first = group[0]
        for r in group:
            rows.append(
                [
                    contender,
                    r["workload"],
                    f"{r['min'] * 1e3:,.2f}",
                    f"{r['min'] / first['min']:.1f}x (bytes {r['bytes'] / first['bytes']:.0f}x)",
                    f"{r['min'] / floor[r['bytes']]:.1f}x" if r["bytes"] in floor else "n/a",
                ]
            )
    return rows


def memory_rows(records: Iterable[Record]) -> list[list[str]]:
    return [
        [r["contender"], r["workload"], f"{r['peak'] / 2**20:,.1f}", f"{r['peak'] / r['event_size']:.2f}x"]
        for r in records
        if r["kind"] == "memory"
    ]


def client_rows(records: Iterable[Record]) -> list[list[str]]:
    rows = []
    for workload, group in _by(records, "client").items():
        ours = [r["min"] for r in group if r["ours"]]
        for r in sorted(group, key=lambda r: r["min"]):
            per_unit = r["min"] / r["units"]
            shown = f"{per_unit * 1e3:,.2f} ms" if per_unit >= 1e-3 else f"{per_unit * 1e6:,.1f} µs"
            ratio = f"{r['min'] / ours[0]:.2f}x" if ours else "-"
            rows.append(
                [workload, r["contender"], f"{shown} per {r['unit']}", ratio, f"{r['peak'] / 2**20:,.1f}"]
            )
    return rows


def _per_unit(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:,.2f} µs"


def client_side_by_side_rows(records: Iterable[Record]) -> list[list[str]]:
    """Each contender against the floor "read + parse" (the least a client must do with the
    same bytes on the same HTTP stack) and against the official client, with its peak and
    the connections each sequential call opened."""
    rows = []
    for workload, group in _by(records, "client-side-by-side").items():
        floor = [r["min"] for r in group if r["contender"] == "floor: read + parse"]
        floor_peak = [r["peak"] for r in group if r["contender"] == "floor: read + parse"]
        official = [r["min"] for r in group if r["contender"].startswith("mcp SDK")]
        for r in sorted(group, key=lambda r: r["min"]):
            rows.append(
                [
                    workload,
                    r["contender"],
                    f"{_per_unit(r['min'] / r['units'])} per {r['unit']}",
                    f"{r['min'] / floor[0]:.2f}x" if floor else "n/a",
                    f"{official[0] / r['min']:.1f}x" if official else "n/a",
                    f"{r['peak'] / 2**20:,.1f}"
                    + (
                        f" ({r['peak'] / floor_peak[0]:.2f}x)" if floor_peak and floor_peak[0] > 2**20 else ""
                    ),
                    f"{r['connections']:g}",
                ]
            )
    return rows


def parser_rows(records: Iterable[Record]) -> list[list[str]]:
    """Each parser's time over orjson.loads's (what ssewire.jsonrpc calls) on the same
    payload, and its peak: the RSS high-water of one parse in a fresh process above the
    input, so what a Rust or C parser allocates outside Python's allocator counts too."""
    groups: dict[str, list[Record]] = defaultdict(list)
    shapes: list[str] = []
    for record in records:
        if record["kind"] == "parser":
            groups[record["workload"]].append(record)
            if record["shape"] not in shapes:
                shapes.append(record["shape"])
    rows = []
    for group in sorted(groups.values(), key=lambda g: (shapes.index(g[0]["shape"]), g[0]["size"])):
        orjson = [r["min"] for r in group if r["contender"] == "orjson.loads"]
        for r in sorted(group, key=lambda r: r["min"]):
            size, peak = r["bytes"], r.get("peak")
            rows.append(
                [
                    r["title"],
                    f"{size / 2**20:,.1f} MiB" if size >= 1000 * 2**10 else f"{size / 2**10:,.1f} KiB",
                    r["contender"],
                    f"{size / r['min'] / 1e6:,.0f}",
                    f"{r['min'] / orjson[0]:.2f}x" if orjson else "n/a",
                    f"{peak / 2**20:,.1f}" if peak is not None else "-",
                    f"{peak / size:.2f}x" if peak is not None else "-",
                ]
            )
    return rows


def gateway_rows(records: Iterable[Record]) -> list[list[str]]:
    """Each relay's time per unit against no relay (direct) and its process's CPU per
    relayed message against nginx's, beside the CPU floors of the same message."""
    rows = []
    for workload, group in _by(records, "gateway").items():
        direct = [r["min"] for r in group if r["contender"] == "direct"]
        nginx = [r["cpu"] for r in group if r["contender"] == "nginx" and r["cpu"]]
        floors = [
            r["cpu"]
            for r in group
            if r["contender"].startswith("floor") and r["contender"].endswith("(msgspec)")
        ]
        for r in group:
            timed = r["min"] is not None
            rows.append(
                [
                    workload,
                    r["contender"],
                    f"{_per_unit(r['min'] / r['units'])} per {r['unit']}" if timed else "-",
                    f"{r['min'] / direct[0]:.3f}x" if timed and direct else "-",
                    _per_unit(r["cpu"]) if r["cpu"] is not None else "-",
                    f"{r['cpu'] / nginx[0]:.2f}x" if r["cpu"] is not None and nginx else "-",
                    f"{r['cpu'] / floors[0]:.2f}x" if r["cpu"] is not None and floors else "-",
                    f"{r['peak'] / 2**20:,.0f}" if r.get("peak") else "-",
                ]
            )
    return rows


def node_rows(records: Iterable[Record]) -> list[list[str]]:
    """W1 through node's eventsource-parser beside our compiled twins, timed in one test:
    each time over our best (above 1: ours is faster)."""
    rows = []
    for workload, group in _by(records, "node-peer").items():
        best = min(r["min"] for r in group if r["ours"])
        for r in sorted(group, key=lambda r: r["min"]):
            rows.append([workload, r["contender"], f"{r['min'] * 1e3:,.1f} ms", f"{r['min'] / best:.2f}x"])
    return rows


SATURATED = 0.9  # a core busy this share of a window or more bounds what ran on it
DISTURBED = 0.1  # other work on the machine, of one core, that makes a figure suspect


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def _load_groups(records: Iterable[Record]) -> list[tuple[str, list[Record]]]:
    """G3's workloads, fewest sessions first."""
    return sorted(_by(records, "gateway-load").items(), key=lambda item: item[1][0].get("sessions", 0))


def gateway_load_rows(records: Iterable[Record]) -> list[list[str]]:
    """Latency under load, what a relay adds to direct's p99, the CPU a call costs the
    relay (against nginx's, and against its own at the fewest sessions: flat as sessions
    grow), how busy the machine's cores were meanwhile and what bounds the row."""
    rows = []
    fewest: dict[str, float] = {}  # each relay's CPU per call at the fewest sessions
    for workload, group in _load_groups(records):
        nginx = [r["cpu"] for r in group if r["contender"] == "nginx" and r["cpu"]]
        for r in group:
            cpu = r["cpu"]
            if cpu is not None:
                fewest.setdefault(r["contender"], cpu)
            rows.append(
                [
                    workload,
                    r["contender"],
                    _per_unit(r["p50"]),
                    _per_unit(r["p99"]),
                    "-" if r["reference"] else f"{r['added_p99'] * 1e3:+,.1f} ms",
                    _per_unit(cpu) if cpu is not None else "-",
                    f"{cpu / nginx[0]:.2f}x" if cpu is not None and nginx else "-",
                    f"{cpu / fewest[r['contender']]:.2f}x" if cpu is not None else "-",
                    _percent(r["busy"]),
                    _load_bound(r),
                    f"{r['peak'] / 2**20:,.0f}" if r.get("peak") else "-",
                ]
            )
    return rows


def _load_bound(r: Record) -> str:
    """What bounds a G3 row: other work on the machine, if there was any to speak of;
    else its busiest process at a whole core (the upstream, the relay or the client,
    each Python on one core at a time); else the two cores they share; else nothing."""
    if r.get("others", 0.0) >= DISTURBED:
        return f"other work on the machine, {_percent(r['others'])} of a core: re-run"
    processes = {"upstream": r["upstream_busy"], "relay": r["relay_busy"], "client": r["client_busy"]}
    name, busiest = max(processes.items(), key=lambda item: item[1])
    if busiest >= SATURATED:
        return f"the {name}, {_percent(busiest)} of a core"
    if r["busy"] >= SATURATED:
        return f"the two cores, {_percent(r['busy'])} busy"
    return f"nothing saturated (the {name} busiest, {_percent(busiest)} of a core)"


def gateway_load_notes(records: Iterable[Record]) -> list[str]:
    """Under G3's table, from the run: what a call cost the upstream and the client beside
    the relay, and how each relay's CPU per call moved as the sessions grew."""
    lines = []
    cpu: dict[str, dict[int, float]] = defaultdict(dict)
    for workload, group in _load_groups(records):
        upstream = [r["upstream_cpu"] for r in group]
        client = [r["client_cpu"] for r in group]
        lines.append(
            f"- **{workload}**: the client, the upstream and the relay share the two cores. A call "
            f"cost the SDK upstream {_per_unit(min(upstream))} to {_per_unit(max(upstream))} of CPU "
            f"and the lean client {_per_unit(min(client))} to {_per_unit(max(client))}, beside the "
            "relay's own column."
        )
        for r in group:
            if r["cpu"] is not None:
                cpu[r["contender"]][r["sessions"]] = r["cpu"]
    growth = [
        f"{relay} {by[max(by)] / by[min(by)]:.2f}x"
        for relay, by in cpu.items()
        if len(by) > 1 and by[min(by)]
    ]
    if growth:
        counts = sorted({n for by in cpu.values() for n in by})
        lines.append(
            f"- As sessions grow from {counts[0]} to {counts[-1]}, CPU per call: "
            + ", ".join(growth)
            + " (1.00x: flat)."
        )
    rows = [
        (f"{r['workload']} through {r['contender']}", r) for _, group in _load_groups(records) for r in group
    ]
    return lines + _disturbed(rows)


def _disturbed(measured: list[tuple[str, Record]]) -> list[str]:
    """A warning where other work ran on the machine beside the bench's own processes."""
    worst = max(measured, key=lambda pair: pair[1].get("others", 0.0), default=None)
    if worst is None or worst[1].get("others", 0.0) < DISTURBED:
        return []
    return [
        f"- **Disturbed**: other work on the machine took {_percent(worst[1]['others'])} of a core "
        f"during {worst[0]}; re-run these figures on a quiet machine."
    ]


def _capacity(records: Iterable[Record]) -> list[Record]:
    return [r for group in _by(records, "gateway-capacity").values() for r in group]


def _first_rate(r: Record) -> float:
    return r["ladder"][0][0] if r["ladder"] else 0


def _bound(r: Record) -> str:
    """What ended a relay's climb, read from the level that broke: a saturated core (the
    relay's, or the one the load and the upstream share), or its latency alone."""
    broke, cores = r["broke"], r["cores"]
    if broke is None:
        return "the ladder's top"
    if broke.get("others", 0.0) >= DISTURBED:
        return f"other work on the machine, {_percent(broke['others'])} of a core: re-run"
    if broke["load_core"] >= SATURATED:
        return f"core {cores['load']} (load + upstream), {_percent(broke['load_core'])} busy"
    if broke["relay_core"] >= SATURATED:
        return f"its core, {_percent(broke['relay_core'])} busy"
    return (
        f"its latency: no core saturated (core {cores['relay']} {_percent(broke['relay_core'])}, "
        f"core {cores['load']} {_percent(broke['load_core'])})"
    )


def gateway_capacity_rows(records: Iterable[Record]) -> list[list[str]]:
    """G4: the last level of the ladder each relay held, what it cost there, the level
    that broke and what bounded it."""
    rows = []
    group = _capacity(records)
    nginx = [r["rate"] for r in group if r["contender"] == "nginx" and r["rate"]]
    nginx_cpu = [r["top"]["cpu"] for r in group if r["contender"] == "nginx" and r["top"]]
    for r in group:
        top, broke = r["top"], r["broke"]
        relayed = r["contender"] != "direct"
        rows.append(
            [
                r["contender"],
                f"{r['rate']:,}" if top else f"< {_first_rate(r):,}",
                f"{r['rate'] / nginx[0]:.2f}x" if nginx and top else "-",
                f"{_per_unit(top['p50'])} / {_per_unit(top['p99'])}" if top else "-",
                _per_unit(top["cpu"]) if top and relayed else "-",
                f"{top['cpu'] / nginx_cpu[0]:.2f}x" if top and relayed and nginx_cpu else "-",
                _percent(top["relay_busy"]) if top and relayed else "-",
                (
                    f"{broke['rate']:,}: "
                    + (_per_unit(broke["p99"]) if broke["p99"] is not None else "no answer")
                    + (f", {broke['refused']} refused" if broke["refused"] else "")
                    + (f", {broke['late']} unanswered" if broke["late"] else "")
                )
                if broke
                else "-",
                _bound(r),
                f"{r['peak'] / 2**20:,.0f}" if r.get("peak") else "-",
            ]
        )
    return rows


LADDER = ("direct", "nginx", "gateway")  # the ladder table's columns


def gateway_ladder_rows(records: Iterable[Record]) -> list[list[str]]:
    """G4's whole climb: each relay's p99 at each rate it ran (a level that broke was run
    once more, and this is the second try)."""
    p99 = {
        r["contender"]: {rate: (value, held) for rate, value, held in r["ladder"]} for r in _capacity(records)
    }
    rows = []
    for rate in sorted({rate for climbed in p99.values() for rate in climbed}):
        cells = []
        for relay in LADDER:
            value, held = p99.get(relay, {}).get(rate, (None, None))
            shown = _per_unit(value) if value is not None else "no answer"
            cells.append("" if held is None else shown if held else f"**{shown}** (broke)")
        rows.append([f"{rate:,}", *cells])
    return rows


def gateway_capacity_notes(records: Iterable[Record]) -> list[str]:
    """What bounds G4's figures, read from the run: direct's figure is the ceiling of the
    core the load and the upstream share, which bounds every row."""
    by = {r["contender"]: r for r in _capacity(records)}
    if not {"direct", "nginx", "gateway"} <= set(by) or not by["direct"]["top"]:
        return []
    direct, nginx, gateway = (by[name]["rate"] for name in ("direct", "nginx", "gateway"))
    load, top = by["direct"]["cores"]["load"], by["direct"]["top"]
    spent = (
        f"the load generator spent {_per_unit(top['load_cpu'])} of CPU a call there and the upstream "
        f"{_per_unit(top['upstream_cpu'])}"
    )
    ceiling = by["direct"]["broke"] is not None
    lines = [
        f"- **direct** carries {direct:,} calls/s"
        + (
            f", then broke with core {load} {_percent(by['direct']['broke']['load_core'])} busy: the "
            f"ceiling of that core, where the load generator and the upstream run for every row "
            f"({spent}), bounds every figure here, within a step of the ladder (each level is one try "
            "at it)."
            if ceiling
            else f", the ladder's top ({spent})."
        )
    ]
    if gateway:
        lines.append(
            f"- **gateway**: {gateway:,} calls/s, {gateway / direct:.0%} of direct's"
            + (
                ", so neither the upstream nor the load generator bounds it."
                if gateway <= 0.5 * direct
                else ": near it, so the gateway's own bound may lie above."
            )
        )
    if nginx and gateway:
        broke, nginx_top = by["nginx"]["broke"], by["nginx"]["top"]
        own = f"it ran {_percent(nginx_top['relay_busy'])} of its own core there"
        why = (
            f"nginx held the ladder's top ({own})"
            if broke is None
            else f"nginx's figure is bound by core {load}, not by nginx ({own})"
            if broke["load_core"] >= SATURATED
            else ""
        )
        lines.append(
            f"- **gateway / nginx**: {gateway / nginx:.2f}x the calls a second with p99 under "
            f"{by['gateway']['limit'] * 1e3:g} ms"
            + (f". {why}: its own capacity is higher, and the ratio to it lower." if why else ".")
        )
    levels = [
        (f"{r['contender']}'s level at {level['rate']:,} calls/s", level)
        for r in by.values()
        for level in (r["top"], r["broke"])
        if level
    ]
    return lines + _disturbed(levels)


def _by_contender(records: Iterable[Record], kind: str) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        if record["kind"] == kind:
            groups[record["contender"]].append(record)
    return groups


TABLES = (
    (
        "Throughput, side by side: interleaved rounds (ratio = fastest peer's time / this decoder's time)",
        ["workload", "decoder", "MB/s", "events/s", "vs fastest peer"],
        lambda records: throughput_rows(records, "side-by-side"),
    ),
    (
        "End to end, side by side: decode + orjson.loads, interleaved rounds (ratio = time / orjson.loads alone)",
        ["workload", "pipeline", "MB/s", "vs orjson alone"],
        lambda records: end_to_end_rows(records, "e2e-side-by-side"),
    ),
    (
        "Throughput, one benchmark per decoder (timed apart; for --benchmark-compare)",
        ["workload", "decoder", "MB/s", "events/s", "vs fastest peer"],
        throughput_rows,
    ),
    (
        "End to end, one benchmark per pipeline (timed apart)",
        ["workload", "pipeline", "MB/s", "vs orjson alone"],
        end_to_end_rows,
    ),
    (
        "Growth: one event fed in 1 KiB chunks (linear = time grows like bytes)",
        ["decoder", "event", "ms", "growth", "x floor"],
        growth_rows,
    ),
    (
        "W1 against node's eventsource-parser (node_peer/w1.mjs in its own process; bytes in: "
        "TextDecoder then the parser, text in: the parser alone on decoded chunks)",
        ["workload", "parser", "time (min of rounds)", "time / our best"],
        node_rows,
    ),
    (
        "MCP clients against a server whose answers cost nothing (bench/cheap_server.py, its own process), "
        "side by side: interleaved rounds, time = min over calls",
        [
            "workload",
            "client",
            "time",
            "x floor read + parse",
            "official client's time / this",
            "peak MiB (tracemalloc, one call; x floor's)",
            "connections per call",
        ],
        client_side_by_side_rows,
    ),
    (
        "MCP clients end to end against the reference server in its own process (time = min over rounds)",
        ["workload", "client", "time", "time vs ssewire Client", "peak MiB (tracemalloc, one call)"],
        client_rows,
    ),
    (
        "MCP relays, side by side (bench/test_gateway.py): the official SDK client and server, direct, "
        "through nginx (a byte relay) and through the gateway, interleaved rounds, time = min over calls",
        [
            "workload",
            "relay",
            "time",
            "x direct",
            "relay CPU per unit",
            "CPU x nginx's",
            "CPU x copy + validation",
            "relay peak RSS MiB",
        ],
        gateway_rows,
    ),
    (
        "MCP relays under load: sessions of a lean client calling at once, the official SDK server "
        "upstream (p99 added = this p99 - direct p99, same run; CPU per call over every call of the "
        "workload)",
        [
            "workload",
            "relay",
            "p50",
            "p99",
            "p99 added",
            "relay CPU per call",
            "CPU x nginx's",
            "CPU x its own at the fewest sessions",
            "cores busy",
            "what bounds it",
            "relay peak RSS MiB",
        ],
        gateway_load_rows,
        gateway_load_notes,
    ),
    (
        "MCP relays on one core: the calls a second each carries with p99 under 50 ms (the relay "
        "pinned to one core, the cheap upstream and the load generator to the other; open loop, "
        "a ladder of rates)",
        [
            "relay",
            "calls/s, p99 < 50 ms",
            "x nginx's",
            "p50 / p99 there",
            "relay CPU per call there",
            "CPU x nginx's",
            "its core used there",
            "next level, calls/s: p99",
            "what bounds it",
            "relay peak RSS MiB",
        ],
        gateway_capacity_rows,
        gateway_capacity_notes,
    ),
    (
        "MCP relays on one core, the whole ladder: p99 at each rate (calls/s)",
        ["calls/s", *LADDER],
        gateway_ladder_rows,
    ),
    (
        "Peak memory decoding one event (tracemalloc)",
        ["decoder", "event", "peak MiB", "peak / event size"],
        memory_rows,
    ),
    (
        "JSON-RPC payload parsing, side by side: time and peak per parser, by shape and size "
        "(time = min over interleaved rounds; peak = RSS high-water of one parse in a fresh process)",
        [
            "shape",
            "size",
            "parser",
            "MB/s",
            "time vs orjson",
            "peak MiB (RSS high-water above input)",
            "peak / size",
        ],
        parser_rows,
    ),
)


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def tables(records: list[Record]) -> str:
    parts = []
    for title, headers, build, *notes in TABLES:
        rows = build(records)
        if rows:
            lines = notes[0](records) if notes else []
            below = "\n" + "\n".join(lines) + "\n" if lines else ""
            parts.append(f"### {title}\n\n{markdown(headers, rows)}\n{below}")
    return "\n".join(parts)
