"""The reset table of docs/client.md: the ssewire ``Client`` and the official MCP Python SDK
client, side by side, through the same cuts.

Each row runs the same seeded plan through the fault proxy (``tests/faultproxy.py``) in
front of the reference server (a store that keeps every event): tool calls answered by
4 progress notifications and a 4 MiB result, their answers and resumptions cut at random
offsets until the given number of resets was planned (``tests/mcp/resets.py`` counts).

    python scripts/reset_table.py                 # 500 resets a row; rewrite the table
    python scripts/reset_table.py --resets 50 --print   # print only

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

from tests.mcp.resets import ROWS, calls_for, random_cuts, through_proxy  # noqa: E402

PAGE = ROOT / "docs" / "client.md"
START, END = "<!-- reset-table:start -->", "<!-- reset-table:end -->"


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
    parser.add_argument("--print", action="store_true", help="print the table, leave the page alone")
    args = parser.parse_args()
    rendered = table(args.resets)
    if args.print:
        print(rendered)
        return 0
    text = PAGE.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    PAGE.write_text(f"{head}{START}\n{rendered}\n{END}{tail}", encoding="utf-8")
    print(rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
