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


def gateway_load_rows(records: Iterable[Record]) -> list[list[str]]:
    rows = []
    for workload, group in _by(records, "gateway-load").items():
        for r in group:
            rows.append(
                [
                    workload,
                    r["contender"],
                    _per_unit(r["min"]),
                    _per_unit(r["p99"]),
                    "-" if r["contender"] == "direct" else f"{r['added_p99'] * 1e3:+,.1f} ms",
                    _per_unit(r["cpu"]) if r["cpu"] is not None else "-",
                    f"{r['peak'] / 2**20:,.0f}" if r.get("peak") else "-",
                ]
            )
    return rows


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
        "MCP relays under load: sessions calling at once (p99 added = this p99 - direct p99, same run)",
        ["workload", "relay", "p50", "p99", "p99 added", "relay CPU per call", "relay peak RSS MiB"],
        gateway_load_rows,
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
    for title, headers, build in TABLES:
        rows = build(records)
        if rows:
            parts.append(f"### {title}\n\n{markdown(headers, rows)}\n")
    return "\n".join(parts)
