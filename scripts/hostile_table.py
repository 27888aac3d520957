"""The hostile-server table of docs/client.md: what each client does against a server built
to exhaust it, side by side.

Each hostile server (``tests/support/hostile_servers.py``: an endless event, an endless line, an endless
JSON answer, a drip of one byte a second, a flood of server-to-client requests) answers one
client at a time; each client runs alone in a child process (``tests/support/hostile_child.py``)
that reports its outcome, the seconds to it and its peak RSS above what its imports took.

    python scripts/hostile_table.py            # rewrite the table in docs/client.md
    python scripts/hostile_table.py --print    # print only

Needs the ``test`` extra (the official ``mcp`` SDK client for its column).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the hostile servers live with the tests

from scripts.pages import splice  # noqa: E402
from tests.mcp.client.test_hostile import run_child  # noqa: E402
from tests.support.hostile_servers import MODES, hostile_server  # noqa: E402

PAGE = ROOT / "docs" / "client.md"
START, END = "<!-- hostile-table:start -->", "<!-- hostile-table:end -->"
CLIENTS = {
    "ssewire `Client`": "ssewire",
    "`ssewire probe`": "probe",
    "`mcp` SDK client as shipped": "sdk",
}
DEADLINE = 10.0  # the request deadline given to the clients that take one
WITHIN = 60.0  # the harness stops a client still running after this: "hung"


def cell(seen: dict) -> str:
    what = seen["error"] or ("a report" if seen["outcome"].startswith("report") else "a result")
    if what == "hung":
        return f"hung (stopped at {WITHIN:g} s)"
    grown = seen["peak_mib"] - seen["base_mib"]
    return f"{what}, {seen['seconds']:.1f} s, +{grown:.0f} MiB"


def table() -> str:
    rows = []
    for mode in MODES:
        cells = []
        for client in CLIENTS.values():
            with hostile_server(mode) as (url, _):
                cells.append(cell(run_child(client, url, DEADLINE, within=WITHIN)))
        rows.append(f"| {mode} | " + " | ".join(cells) + " |")
    versions = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("ssewire", "mcp", "httpx"))
    return "\n".join(
        [
            "| hostile server | " + " | ".join(CLIENTS) + " |",
            "|---" * (len(CLIENTS) + 1) + "|",
            *rows,
            "",
            f"Each cell: the outcome, the seconds to it, the peak RSS above the imports'. Request deadline "
            f"{DEADLINE:g} s where a client takes one; {versions}; Python {platform.python_version()}; "
            "`python scripts/hostile_table.py`.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the table, leave the page alone")
    args = parser.parse_args()
    rendered = table()
    print(rendered)
    if not args.print:
        splice(PAGE, START, END, rendered)
    return 0


if __name__ == "__main__":
    sys.exit(main())
