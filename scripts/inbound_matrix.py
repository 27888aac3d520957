"""What the reference server and the gateway answer to one matrix of bad (and a few good)
requests (``tests/support/inbound_matrix.py``), captured to compare across a change.

    python scripts/inbound_matrix.py capture OUT.json [--checkout DIR]   # run both servers, record
    python scripts/inbound_matrix.py table OUT.json          # a Markdown table, "same" per case
    python scripts/inbound_matrix.py diff OLD.json NEW.json  # (status, code) changes; exit 1 if any

``capture`` runs the ssewire of the running interpreter with the matrix of the checkout
(default: this script's own), so an old checkout is captured with its venv and
``--checkout``. Everything binds 127.0.0.1 and every request is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

FORMAT = "ssewire-inbound-matrix/1"
HERE = Path(__file__).resolve().parent.parent


def capture(out: Path, checkout: Path) -> None:
    sys.path.insert(0, str(checkout))
    from tests.support.inbound_matrix import CASES, run_all, serve_both

    with serve_both() as (reference, gateway):
        answers = {"reference": run_all(reference), "gateway": run_all(gateway)}
    cases = {case.name: {server: answers[server][case.name] for server in answers} for case in CASES}
    out.write_text(json.dumps({"format": FORMAT, "cases": cases}, indent=1, ensure_ascii=False) + "\n")


def load(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise SystemExit(f"{path}: not a {FORMAT} file")
    cases: dict[str, dict[str, Any]] = data["cases"]
    return cases


def key(answer: dict[str, Any] | None) -> tuple[Any, Any]:
    return (None, None) if answer is None else (answer.get("status"), answer.get("code"))


def cell(answer: dict[str, Any] | None) -> str:
    status, code = key(answer)
    return f"{status} / {'-' if code is None else code}"


def table(path: Path) -> None:
    print("| case | reference | gateway | same |")
    print("|---|---|---|---|")
    for name, answers in load(path).items():
        ref, gw = answers.get("reference"), answers.get("gateway")
        print(f"| {name} | {cell(ref)} | {cell(gw)} | {'yes' if key(ref) == key(gw) else 'no'} |")


def diff(old_path: Path, new_path: Path) -> int:
    old, new = load(old_path), load(new_path)
    changed = 0
    for name in sorted(old.keys() | new.keys()):
        for server in ("reference", "gateway"):
            before, after = old.get(name, {}).get(server), new.get(name, {}).get(server)
            if key(before) != key(after):
                changed += 1
                print(f"{name} [{server}]: {cell(before)} -> {cell(after)}")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    taking = commands.add_parser("capture")
    taking.add_argument("out", type=Path)
    taking.add_argument("--checkout", type=Path, default=HERE)
    commands.add_parser("table").add_argument("path", type=Path)
    comparing = commands.add_parser("diff")
    comparing.add_argument("old", type=Path)
    comparing.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "capture":
        capture(args.out, args.checkout)
        return 0
    if args.command == "table":
        table(args.path)
        return 0
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
