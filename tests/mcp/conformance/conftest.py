"""The official conformance suite's verdicts, gathered while the tests run and printed as
tables at the end (the docs' tables, docs/conformance.md, are these). Under pytest-xdist
each worker gathers its own and hands them to the controller, which prints them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.conformance import REVISIONS, Scenario, tally

# (target, kind, revision) -> the verdicts, filled by the tests of this folder
VERDICTS: dict[tuple[str, str, str], dict[str, Scenario]] = {}
_OUTPUT = "ssewire_conformance_verdicts"


def pytest_sessionfinish(session: Any) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: plain data only crosses to the controller
        workeroutput[_OUTPUT] = [
            [*key, {name: list(s.checks) for name, s in results.items()}] for key, results in VERDICTS.items()
        ]


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, never called
def pytest_testnodedown(node: Any, error: Any) -> None:
    for target, kind, revision, results in getattr(node, "workeroutput", {}).get(_OUTPUT, []):
        VERDICTS.setdefault((target, kind, revision), {}).update(
            {name: Scenario(name, tuple(checks)) for name, checks in results.items()}
        )


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
