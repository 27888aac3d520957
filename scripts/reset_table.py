"""The reset table of docs/client.md: the ssewire ``Client`` and the official MCP Python SDK
client, side by side, through the same cuts.

Each row runs the same seeded plan through the fault proxy (``tests/support/faultproxy.py``) in
front of the reference server (a store that keeps every event): tool calls answered by
4 progress notifications and a 4 MiB result, their answers and resumptions cut at random
offsets until the given number of resets was planned (``tests/support/resets.py`` counts).

    python scripts/reset_table.py                 # 500 resets a row; rewrite the table
    python scripts/reset_table.py --resets 50 --print   # print only
    python scripts/reset_table.py --share 0.9 --calls 20  # the 90% tables (the SDK server)

The ``--share`` tables cut that share of every tool-call connection (answers and
resumptions alike) in front of the official Python SDK server, once with a store that
replays and once with one that cannot (it answers 200 and an empty stream, as the SDK does
for a stream its store no longer has).

Needs the ``test`` extra (``pip install '.[test]'``: the ``mcp`` SDK, uvicorn, httpx).
The SDK client fails a resumption it cannot finish with an error, so a row may see fewer
cuts than planned: a cut falls only on a connection the client opened.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from scripts.pages import splice  # noqa: E402
from tests.support.resets import (  # noqa: E402
    MIB,
    PROGRESS,
    ROWS,
    Tally,
    calls_for,
    cut_share,
    random_cuts,
    sdk_client,
    ssewire_client,
    through_proxy,
)

PAGE = ROOT / "docs" / "client.md"
START, END = "<!-- reset-table:start -->", "<!-- reset-table:end -->"
SHARE_START, SHARE_END = "<!-- share-table:start -->", "<!-- share-table:end -->"


MEASURES = (
    "calls",
    "cuts",
    "intact",
    "torn",
    "duplicated",
    "progress lost",
    "explicit error",
    "hung",
    "seconds",
)


def _column(tally: Tally, cuts: int, seconds: float) -> dict[str, str]:
    errors = tally.unsafe + tally.failed + tally.no_answer
    figures = (tally.calls, cuts, tally.intact, tally.torn, tally.duplicated, tally.lost, errors, tally.hung)
    return {**dict(zip(MEASURES, map(str, figures), strict=False)), "seconds": f"{seconds:.1f}"}


def _render(columns: dict[str, dict[str, str]]) -> list[str]:
    return [
        "| | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
        *(
            f"| {measure} | " + " | ".join(c[measure] for c in columns.values()) + " |"
            for measure in MEASURES
        ),
    ]


def share_tables(share: float, calls: int) -> str:
    """``share`` of the connections cut, before the SDK server with a store that replays and
    with one that cannot: one table each."""
    import hashlib

    from ssewire.mcp.transport.serving import running
    from tests.support.sdk_servers import probe_app, text_of_size

    size = 4 * MIB
    arguments = {"count": PROGRESS, "size": size, "delay": 0.005}
    expected = hashlib.sha256(text_of_size(size).encode()).hexdigest()
    rows = {
        "ssewire `Client`": lambda: ssewire_client(arguments=arguments, expected=expected),
        "`mcp` SDK client, event cap lifted": lambda: sdk_client(
            None, arguments=arguments, expected=expected
        ),
    }
    out: list[str] = []
    for replays, title in ((True, "a store that replays"), (False, "a store that cannot replay")):
        columns: dict[str, dict[str, str]] = {}
        said: list[str] = []
        for name, caller in rows.items():
            serve = _mcp(running(probe_app(store=True, replays=replays)))
            start = time.perf_counter()
            # the UTF-8 of the multi-byte text is 1.4 times as long: offsets cover all of it
            plan = cut_share(share, high=int(size * 1.6))
            tally, proxied = through_proxy(caller(), plan, calls, serve=serve, deadline=20)
            columns[name] = _column(tally, proxied.cuts, time.perf_counter() - start)
            said += [f"- {name}: {count} × {reason}" for reason, count in tally.reasons.most_common(3)]
        out += [f"**{share:.0%} of the connections cut, {title}** (the official Python SDK server):", ""]
        out += [*_render(columns), ""]
        if said:
            out += ["What the explicit errors said:", "", *said, ""]
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("ssewire", "mcp", "httpx"))
    out.append(f"{calls} calls a column, 4 MiB results after 4 progress notifications; {versions}.")
    return "\n".join(out)


def _mcp(base: Any) -> Any:
    import contextlib

    @contextlib.contextmanager
    def url() -> Any:
        with base as root:
            yield root + "/mcp"

    return url()


def table(resets: int) -> str:
    """One column per client, one row per outcome: narrow enough to read on any screen."""
    calls = calls_for(resets)
    columns: dict[str, dict[str, str]] = {}
    said: list[str] = []
    for name, caller in ROWS.items():
        start = time.perf_counter()
        tally, proxied = through_proxy(caller(), random_cuts(resets), calls)
        seconds = time.perf_counter() - start
        errors = tally.unsafe + tally.failed + tally.no_answer
        figures = (tally.calls, proxied.cuts, tally.intact, tally.torn, tally.duplicated, tally.lost, errors)
        columns[name] = {
            **dict(zip(MEASURES, map(str, figures), strict=False)),
            "hung": str(tally.hung),
            "seconds": f"{seconds:.1f}",
        }
        said += [f"- {name}: {count} × {reason}" for reason, count in tally.reasons.most_common()]
    lines = [
        "| | " + " | ".join(columns) + " |",
        "|---" * (len(columns) + 1) + "|",
        *(
            f"| {measure} | " + " | ".join(c[measure] for c in columns.values()) + " |"
            for measure in MEASURES
        ),
    ]
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("ssewire", "mcp", "httpx", "httpx2")
    )
    lines += [
        "",
        f"{resets} planned resets a column, seed 2026; {versions}; Python {platform.python_version()}.",
    ]
    if said:
        lines += ["", "What the explicit errors said:", "", *said]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, default=500)
    parser.add_argument("--share", type=float, help="cut this share of connections (the SDK server tables)")
    parser.add_argument("--calls", type=int, default=20, help="calls a column of the --share tables")
    parser.add_argument("--print", action="store_true", help="print the table, leave the page alone")
    args = parser.parse_args()
    start, end = (SHARE_START, SHARE_END) if args.share else (START, END)
    rendered = share_tables(args.share, args.calls) if args.share else table(args.resets)
    if args.print:
        print(rendered)
        return 0
    splice(PAGE, start, end, rendered)
    print(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
