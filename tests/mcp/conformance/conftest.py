"""The official conformance suite's verdicts, gathered while the tests run and printed as
tables at the end (the docs' tables, docs/conformance.md, are these)."""

from __future__ import annotations

from typing import Any

from tests.support.conformance import REVISIONS, Scenario, tally

# (target, kind, revision) -> the verdicts, filled by the tests of this folder
VERDICTS: dict[tuple[str, str, str], dict[str, Scenario]] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not VERDICTS:
        return
    write = terminalreporter.write_line
    for kind in ("server", "client"):
        targets = list(dict.fromkeys(t for t, k, _ in VERDICTS if k == kind))
        if not targets:
            continue
        write("")
        write(
            f"official MCP conformance suite, {kind} scenarios passed (scored ones; --requirements REVISION;"
            " the rows marked unscored: those the suite runs but does not score)"
        )
        write("| target | " + " | ".join(REVISIONS) + " |")
        write("|---|" + "---|" * len(REVISIONS))
        for target in targets:
            cells = [
                tally(VERDICTS[(target, kind, r)]) if (target, kind, r) in VERDICTS else "-"
                for r in REVISIONS
            ]
            write(f"| {target} | " + " | ".join(cells) + " |")
