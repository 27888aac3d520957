"""A validation seen through a baseline of expected findings; the report itself is written
by the one writer (`ssewire.mcp.checks.report.ValidationReport`).

A baseline lists findings a team expects and accepts for now (like a conformance suite's
expected-failures file). A baselined finding does not fail the run; a baseline entry that
no longer matches any finding is *stale* and does fail it, so the file cannot rot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._errors import InputError
from ..checks.catalogue import CODES
from ..checks.findings import Finding, Level
from ..checks.report import ValidationReport
from ..transcript import Transcript, TranscriptError, load_document
from .validate import Result

BASELINE_FORMAT = "ssewire-baseline/1"


class BaselineError(InputError):
    """The baseline file is unreadable or not a ``ssewire-baseline/1`` document."""


@dataclass(frozen=True)
class Expectation:
    code: str
    exchange: str | None = None  # None: any exchange
    path: str | None = None  # None: any path

    def matches(self, finding: Finding) -> bool:
        return (
            finding.code == self.code
            and (self.exchange is None or finding.exchange == self.exchange)
            and (self.path is None or finding.path == self.path)
        )

    def as_dict(self) -> dict[str, str]:
        entry = {"code": self.code}
        if self.exchange is not None:
            entry["exchange"] = self.exchange
        if self.path is not None:
            entry["path"] = self.path
        return entry


def load_baseline(path: str) -> list[Expectation]:
    """Read a baseline: ``{"format": "ssewire-baseline/1", "expected": [{"code", "exchange"?, "path"?}]}``."""
    try:
        document = load_document(path)  # the transcript's strict JSON rules
    except TranscriptError as exc:
        raise BaselineError(f"baseline: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != BASELINE_FORMAT:
        raise BaselineError(f"baseline {path}: expected an object with format {BASELINE_FORMAT!r}")
    entries = document.get("expected")
    if not isinstance(entries, list):
        raise BaselineError(f"baseline {path}: 'expected' must be an array")
    expectations = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("code"), str):
            raise BaselineError(f"baseline {path}: expected[{index}] needs a string 'code'")
        if entry["code"] not in CODES:
            raise BaselineError(f"baseline {path}: expected[{index}]: unknown code {entry['code']!r}")
        for key in ("exchange", "path"):
            if key in entry and not isinstance(entry[key], str):
                raise BaselineError(f"baseline {path}: expected[{index}].{key} must be a string")
        expectations.append(Expectation(entry["code"], entry.get("exchange"), entry.get("path")))
    return expectations


def baseline_document(result: Result) -> dict[str, Any]:
    """A baseline that accepts every error and warning of ``result`` (``--write-baseline``)."""
    seen: dict[tuple[str, str | None], None] = {}  # ordered, unique
    for finding in result.findings:
        if finding.level != Level.INFO:
            seen[(finding.code, finding.exchange)] = None
    expected = [Expectation(code, exchange).as_dict() for code, exchange in seen]
    return {"format": BASELINE_FORMAT, "expected": expected}


def outcome(
    result: Result,
    baseline: list[Expectation] | None = None,
    *,
    fail_on: Level = Level.ERROR,
    source: str = "",
    transcript: Transcript | None = None,
) -> ValidationReport:
    """``result`` through ``baseline``: which findings it accepts, which of its entries are stale."""
    baseline = baseline or []
    used = [False] * len(baseline)
    baselined = []
    for finding in result.findings:
        hit = False
        for index, expectation in enumerate(baseline):
            if expectation.matches(finding):
                used[index] = hit = True
        baselined.append(hit)
    stale = [e.as_dict() for e, was_used in zip(baseline, used, strict=True) if not was_used]
    return ValidationReport(
        result.findings,
        fail_on,
        baselined,
        profile=result.profile,
        source=source,
        exchanges=[ex.id for ex in transcript.exchanges] if transcript else [],
        recovery=result.recovery,
        stale=stale,
    )
