"""Write docs/mcp-codes.md from the one catalogue: every validator finding code (level,
requirement, the rule functions that report it, the fix), every probe diagnostic (level,
requirement, the checks that ask it, the validator code that judges it, the fix per
stack), and every reference-server fault with the diagnostic it must trigger.

    python scripts/mcp_codes.py           # rewrite the page
    python scripts/mcp_codes.py --check   # exit 1 if the page is out of date (CI)
"""

from __future__ import annotations

import sys
from pathlib import Path

from ssewire.mcp.checks.catalogue import CODES, DIAGNOSTICS
from ssewire.mcp.probe import checks as probe_checks
from ssewire.mcp.reference.faults import FAULTS
from ssewire.mcp.validator.rules import CHECKS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "mcp-codes.md"

HEAD = """# MCP finding codes and probe diagnostics

Generated from the one catalogue (`ssewire.mcp.checks.catalogue`: the entries the validator's
rules and the probe's checks define beside their code) and the reference server's faults
(`ssewire.mcp.reference.faults`) by `scripts/mcp_codes.py`; do not edit by hand.

## Validator finding codes (`ssewire validate`)

[The validator page](validator.md) explains each code in prose, with the
cases where one check raises or lowers the usual level given here (a torn event at a
disconnect is a warning, not an error).

| code | level | rests on | reported by | fix |
|---|---|---|---|---|
"""


def render() -> str:
    rows = []
    for code, entry in CODES.items():
        where = ", ".join(
            f"`{check.func.__module__.removeprefix('ssewire.mcp.validator.rules.')}.{check.func.__name__}`"
            for check in CHECKS
            if check.code == code
        )
        rests = entry.keyword if not entry.section else f"{entry.keyword}, {entry.section}"
        hint = entry.hint.replace("|", "\\|")
        rows.append(f"| `{code}` | {entry.level} | {rests} | {where} | {hint} |")
    probe = [
        "",
        "## Probe diagnostics (`ssewire probe`)",
        "",
        "One entry a diagnostic (a table of six long columns could not be read), in report order: its",
        "level, the requirement it rests on, the checks that ask it, and the fix on each stack.",
    ]
    for d in DIAGNOSTICS.values():
        asked = ", ".join(
            f"`{check.func.__module__.removeprefix('ssewire.mcp.probe.checks.')}.{check.func.__name__}`"
            for check in probe_checks.CHECKS
            if d.id in check.ids
        )
        judged = f"; judged on the recording by the validator code `{d.judged_by}`" if d.judged_by else ""
        probe += [
            "",
            f"### `{d.id}`",
            "",
            f"**{d.level}**: {d.requirement()}",
            "",
            f"Asked by {asked}{judged}.",
            "",
            f"- TypeScript SDK: {d.fixes['typescript-sdk']}",
            f"- Python SDK: {d.fixes['python-sdk']}",
            f"- plain handler: {d.fixes['plain-handler']}",
        ]
    faults = [
        "",
        "## Reference server faults (`ssewire serve --fault NAME`)",
        "",
        "| fault | what the server does wrong | the diagnostic that must find it |",
        "|---|---|---|",
    ]
    faults += [f"| `{f.value}` | {f.breaks} | `{f.diagnostic}` |" for f in FAULTS.values()]
    return HEAD + "\n".join(rows) + "\n" + "\n".join(probe + faults) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print("docs/mcp-codes.md is out of date: run python scripts/mcp_codes.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print("wrote docs/mcp-codes.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
