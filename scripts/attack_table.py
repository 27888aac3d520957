"""The gateway's attack suite as a Markdown table: each attack's outcome, its time, the
gateway's peak resident memory (its VmRSS at the attack's start, then its VmHWM) and whether
the victim's probe session was served whole meanwhile.

    python scripts/attack_table.py                   # runs tests/mcp/gateway/test_attacks.py
    python scripts/attack_table.py --from rows.json  # the rows a run already wrote

The rows come from the tests themselves: pytest runs with ``SSEWIRE_ATTACK_REPORT`` naming
a file, and each attack writes its row there (``tests/support/attacks.py``). A failed
attack's row says FAILED; the exit status is pytest's. Linux (VmHWM); needs the ``test``
extra.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = "tests/mcp/gateway/test_attacks.py"
REPORT_ENV = "SSEWIRE_ATTACK_REPORT"  # as tests/support/attacks.py reads it


def run_suite(report: Path, extra: list[str]) -> int:
    env = {**os.environ, REPORT_ENV: str(report)}
    # one process (-n 0): the suite's groups would take two workers, each writing its own rows
    command = [sys.executable, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider", "-n", "0", *extra]
    return subprocess.run(command, cwd=ROOT, env=env, stdout=sys.stderr, check=False).returncode


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict]) -> str:
    lines = [
        "| attack | outcome | time s | gateway peak RSS MiB (baseline → peak) | probe session served |",
        "|---|---|---:|---:|:---:|",
    ]
    for row in rows:
        memory = (
            f"{row['rss_baseline_mib']:.1f} → {row['rss_peak_mib']:.1f}"
            if row.get("rss_peak_mib")
            else "n/a (no gateway process of its own)"
        )
        served = {True: "yes", False: "**no**", None: "n/a"}[row.get("probe_served")]
        lines.append(
            f"| {cell(row['attack'])} | {cell(row['outcome'])} | {row['seconds']:.1f} | {memory} | {served} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, help="print the rows of this JSON file")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args()
    status = 0
    if args.source is not None:
        rows = json.loads(args.source.read_text())
    else:
        with tempfile.TemporaryDirectory() as scratch:
            report = Path(scratch) / "attacks.json"
            status = run_suite(report, args.pytest_args)
            rows = json.loads(report.read_text()) if report.exists() else []
    print(table(rows))
    return status


if __name__ == "__main__":
    sys.exit(main())
