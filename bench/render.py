"""Render a saved pytest-benchmark JSON into docs/benchmarks.md, a PNG bar chart, and the
MCP clients table of docs/client.md: one saved run is the one source of every figure the
docs quote from the benchmarks.

python bench/render.py bench/results.json           # writes docs/benchmarks.md, docs/benchmarks.png, docs/client.md's table
python bench/render.py bench/results.json --check   # exit 1 if those pages do not quote this run (CI)
python bench/render.py bench/results.json --merge PART.json   # PART's workloads into the run, then render

``--merge`` is for re-running some bench files rather than all (the relays' take minutes,
the whole suite much longer): every benchmark of PART (a ``--benchmark-json`` file)
replaces the saved run's of the same workload (same kind of record, same name), the
saved run's file is rewritten with them, and the page says which workloads come from
which run (the saved file's ``merged``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report

ROOT = Path(__file__).resolve().parent.parent
CLIENT_PAGE = ROOT / "docs" / "client.md"
CLIENT_START, CLIENT_END = "<!-- client-bench:start -->", "<!-- client-bench:end -->"
COMMAND = (
    "pip install '.[bench]' && python -m pytest bench --benchmark-only "
    "--benchmark-min-rounds=5 --benchmark-json=bench/results.json && "
    "python bench/render.py bench/results.json"
)
RELAYS_MINUTES = 3  # what the relays' bench takes on a quiet machine of the page's kind
RELAYS_COMMAND = (
    "$ python -m pytest bench/test_gateway.py --benchmark-only --benchmark-json=/tmp/relays.json\n"
    "$ python bench/render.py bench/results.json --merge /tmp/relays.json"
)


def machine(data: dict) -> str:
    info = data.get("machine_info", {})
    cpu = info.get("cpu", {})
    ours = info.get("ssewire", {})
    packages = info.get("packages", {})
    lines = [
        f"- machine: {cpu.get('brand_raw', info.get('processor', '?'))}, "
        f"{cpu.get('count', '?')} logical CPUs, {info.get('platform_detail', info.get('system', '?'))}",
        f"- Python {info.get('python_version', '?')} ({info.get('python_implementation', '?')})",
        f"- ssewire {ours.get('version', '?')} (`Decoder` = {ours.get('implementation', '?')})",
    ]
    if packages:
        lines.append("- peers: " + ", ".join(f"{k} {v}" for k, v in sorted(packages.items())))
    commit = data.get("commit_info", {})
    if commit.get("id"):
        state = " (with uncommitted changes)" if commit.get("dirty") else ""
        lines.append(f"- measured commit: `{commit['id'][:12]}`{state}, {commit.get('time', '?')}")
    lines.append(f"- run at {data.get('datetime', '?')}; timings are the minimum over rounds")
    for part in data.get("merged", []):
        lines.append(f"- {', '.join(part['workloads'])}: re-run on their own, {_part(part)}")
    return "\n".join(lines)


def _part(part: dict) -> str:
    """Where a merged part's figures come from: its commit, time and versions."""
    commit, info = part.get("commit_info", {}), part.get("machine_info", {})
    state = " (with uncommitted changes)" if commit.get("dirty") else ""
    versions = {**info.get("packages", {}), "nginx": info.get("nginx", "?")}
    cpu = info.get("cpu", {})
    return (
        f"measured commit `{str(commit.get('id', '?'))[:12]}`{state}, run at {part.get('datetime', '?')}; "
        f"{cpu.get('brand_raw', '?')}, {cpu.get('count', '?')} logical CPUs, "
        f"Python {info.get('python_version', '?')}, ssewire {info.get('ssewire', {}).get('version', '?')}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    )


def merge(saved: dict, part: dict) -> dict:
    """``saved`` with ``part``'s benchmarks in place of those of the same workloads, and
    under ``merged`` the run each re-run workload comes from."""

    def workload(bench: dict) -> tuple[str | None, str | None]:
        info = bench.get("extra_info") or {}
        return info.get("kind"), info.get("workload")

    fresh = [bench for bench in part.get("benchmarks", []) if workload(bench)[0]]
    if not fresh:
        raise SystemExit("nothing to merge: no benchmark records (was it run with --benchmark-disable?)")
    replaced = {workload(bench) for bench in fresh}
    names = sorted({name for _, name in replaced if name})
    earlier = [
        {**m, "workloads": [name for name in m["workloads"] if name not in names]}
        for m in saved.get("merged", [])
    ]
    source = {key: part.get(key, {}) for key in ("datetime", "commit_info", "machine_info")}
    return {
        **saved,
        "benchmarks": [b for b in saved.get("benchmarks", []) if workload(b) not in replaced] + fresh,
        "merged": [m for m in earlier if m["workloads"]] + [{"workloads": names, **source}],
    }


def measured(data: dict) -> str:
    """Which commit a run measured, and when: printed under every figure taken from it."""
    commit = data.get("commit_info", {})
    state = " + uncommitted changes" if commit.get("dirty") else ""
    return f"commit {str(commit.get('id', '?'))[:12]}{state}, run {str(data.get('datetime', '?'))[:10]}"


def chart(records: list[report.Record], path: Path, caption: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    # the side-by-side figures, which the ratios are read from (per-benchmark ones if absent)
    rows = [r for r in records if r["kind"] == "side-by-side"] or [
        r for r in records if r["kind"] == "throughput"
    ]
    workloads = sorted({r["workload"] for r in rows})
    contenders = list(dict.fromkeys(r["contender"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 4.8))
    width = 0.8 / max(1, len(contenders))
    for i, contender in enumerate(contenders):
        values = []
        for workload in workloads:
            match = [r for r in rows if r["workload"] == workload and r["contender"] == contender]
            values.append(match[0]["bytes"] / match[0]["min"] / 1e6 if match else 0)
        ax.bar([w + i * width for w in range(len(workloads))], values, width, label=contender)
    ax.set_xticks([w + width * (len(contenders) - 1) / 2 for w in range(len(workloads))], workloads)
    ax.set_yscale("log")
    ax.set_ylabel("MB/s (log scale, higher is better)")
    ax.set_title(f"SSE decoding throughput, same chunks for every decoder, timed side by side\n{caption}")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def render(data: dict, records: list[report.Record], *, draw: bool = True) -> str:
    """The page; ``draw=False`` renders it without redrawing the chart (for --check)."""
    png = ROOT / "docs" / "benchmarks.png"
    has_chart = chart(records, png, measured(data)) if draw else png.is_file()
    titles = {r["workload"]: r.get("title", "") for r in records if r.get("title")}
    parts = [
        "# Benchmarks",
        "",
        "Generated by `bench/render.py` from a saved pytest-benchmark run; do not edit by hand.",
        "Every decoder gets the same pre-built chunk lists in the same run. The side-by-side",
        "tables time every contender of a workload in turn, round after round, so a slow",
        "minute of this shared machine falls on all of them alike: read the ratios there.",
        "The per-benchmark tables time each contender on its own (for `--benchmark-compare`);",
        "the floor rows are one copy of the same bytes with no parsing (bench/README.md).",
        "",
        "## Reproduce",
        "",
        f"```sh\n{COMMAND}\n```",
        "",
        "The MCP relays alone (bench/test_gateway.py, G1 to G4: nginx installed, about "
        f"{RELAYS_MINUTES} minutes), their figures merged into the saved run:",
        "",
        f"```console\n{RELAYS_COMMAND}\n```",
        "",
        "## Environment",
        "",
        machine(data),
        "",
        "## Workloads",
        "",
        *(f"- **{name}**: {title}" for name, title in sorted(titles.items())),
        "",
    ]
    if has_chart:
        parts += ["![throughput](benchmarks.png)", ""]
    parts += ["## Results", "", report.tables(records)]
    return "\n".join(parts)


def client_table(data: dict, records: list[report.Record]) -> str:
    """The MCP clients rows of the run, for docs/client.md, with the run they come from:
    what each client costs (the server that costs nothing), then end to end."""
    cheap = report.client_side_by_side_rows(records)
    cheap_headers = [
        "workload",
        "client",
        "time",
        "x floor",
        "official / this",
        "peak MiB",
        "connections per call",
    ]
    rows = report.client_rows(records)
    headers = ["workload", "client", "time", "vs ssewire", "peak MiB, one call"]
    return (
        "Against a server whose answers cost nothing (`bench/cheap_server.py`), side by side with "
        "the floors:\n\n"
        f"{report.markdown(cheap_headers, cheap)}\n\n"
        "End to end against the reference server (`ssewire serve`), whose own cost is in every row:\n\n"
        f"{report.markdown(headers, rows)}\n\nFrom [the benchmarks page](benchmarks.md)'s run: {measured(data)}."
    )


def pages(json_path: Path, *, draw: bool = True) -> dict[Path, str]:
    """Every page the run renders, whole: docs/benchmarks.md, and docs/client.md with its table."""
    data = json.loads(json_path.read_text())
    records = report.records_from_json(data)
    text = CLIENT_PAGE.read_text(encoding="utf-8")
    head, rest = text.split(CLIENT_START, 1)
    _, tail = rest.split(CLIENT_END, 1)
    return {
        ROOT / "docs" / "benchmarks.md": render(data, records, draw=draw) + "\n",
        CLIENT_PAGE: f"{head}{CLIENT_START}\n{client_table(data, records)}\n{CLIENT_END}{tail}",
    }


def main(argv: list[str]) -> int:
    if argv[2:3] == ["--merge"] and len(argv) == 4:
        saved = Path(argv[1])
        merged = merge(json.loads(saved.read_text()), json.loads(Path(argv[3]).read_text()))
        saved.write_text(json.dumps(merged, indent=4))  # as pytest-benchmark writes it
        print(f"merged {argv[3]} into {argv[1]}")
        argv = argv[:2]
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--check"):
        print(__doc__, file=sys.stderr)
        return 2
    if len(argv) == 3:  # the docs quote exactly the saved run
        stale = [
            p for p, text in pages(Path(argv[1]), draw=False).items() if p.read_text(encoding="utf-8") != text
        ]
        for path in stale:
            print(f"{path.relative_to(ROOT)} does not match {argv[1]}: run python bench/render.py {argv[1]}")
        return 1 if stale else 0
    for path, text in pages(Path(argv[1])).items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
