"""Reports of a validation: text, JSON and JUnit XML, and the baseline of expected findings.

A baseline lists findings a team expects and accepts for now (like a conformance suite's
expected-failures file). A baselined finding does not fail the run; a baseline entry that
no longer matches any finding is *stale* and does fail it, so the file cannot rot.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree

from ..._errors import InputError
from ..checks.findings import Finding, Level
from ..transcript import TranscriptError, load_document
from .rules import CATALOGUE as RULES
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
        if entry["code"] not in RULES:
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


@dataclass
class Outcome:
    """A result seen through a baseline: what fails the run and what is stale.

    ``fail_on``: the lowest level that fails the run (``warning`` gates on every finding
    but info, e.g. 2026-07-28 migration leftovers or an event torn by a disconnect).
    """

    result: Result
    baselined: list[bool]  # parallel to result.findings
    stale: list[Expectation] = field(default_factory=list)
    fail_on: Level = Level.ERROR

    @classmethod
    def of(
        cls, result: Result, baseline: list[Expectation] | None = None, *, fail_on: Level = Level.ERROR
    ) -> Outcome:
        baseline = baseline or []
        used = [False] * len(baseline)
        baselined = []
        for finding in result.findings:
            hit = False
            for index, expectation in enumerate(baseline):
                if expectation.matches(finding):
                    used[index] = hit = True
            baselined.append(hit)
        stale = [expectation for expectation, was_used in zip(baseline, used, strict=True) if not was_used]
        return cls(result, baselined, stale, fail_on)

    def fails(self, finding: Finding) -> bool:
        """Whether ``finding`` (not baselined) is at a level that fails the run."""
        return finding.level == Level.ERROR or (
            finding.level == Level.WARNING and self.fail_on == Level.WARNING
        )

    @property
    def failing(self) -> list[Finding]:
        return [
            f for f, b in zip(self.result.findings, self.baselined, strict=True) if self.fails(f) and not b
        ]

    @property
    def passed(self) -> bool:
        return not self.failing and not self.stale

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(tuple(Level), 0)
        for finding in self.result.findings:
            counts[finding.level] += 1
        return {
            "errors": counts[Level.ERROR],
            "warnings": counts[Level.WARNING],
            "info": counts[Level.INFO],
            "failing": len(self.failing),
            "baselined": sum(self.baselined),
            "stale_baseline": len(self.stale),
            "recovery": len(self.result.recovery),
        }


def to_json(outcome: Outcome, exchanges: int) -> dict[str, Any]:
    result = outcome.result
    return {
        "valid": outcome.passed,
        "profile": result.profile,
        "findings": [
            dict(f.as_dict(), baselined=b) for f, b in zip(result.findings, outcome.baselined, strict=True)
        ],
        "recovery": [r.as_dict() for r in result.recovery],
        "stale_baseline": [e.as_dict() for e in outcome.stale],
        "summary": dict(outcome.summary(), exchanges=exchanges),
    }


def to_text(outcome: Outcome, source: str, exchanges: int) -> str:
    result = outcome.result
    lines = [f"{source}: profile {result.profile}, {exchanges} exchange(s)"]
    for finding, baselined in zip(result.findings, outcome.baselined, strict=True):
        where = " ".join(part for part in (finding.exchange, finding.path) if part)
        tag = " (baselined)" if baselined else ""
        lines.append(f"{finding.level.upper():7} {finding.code} {where}{tag}")
        lines.append(f"        {finding.message}")
        lines.append(f"        requirement: {finding.requirement}")
        lines.append(f"        fix: {finding.hint}")
    for expectation in outcome.stale:
        lines.append(f"STALE   baseline entry {json.dumps(expectation.as_dict())} matched no finding")
    for recovery in result.recovery:
        lines.append(f"recovery {recovery.exchange}: {recovery.action} ({recovery.reason})")
    counts = outcome.summary()
    verdict = "PASS" if outcome.passed else "FAIL"
    lines.append(
        f"{verdict}: {counts['errors']} error(s), {counts['warnings']} warning(s), {counts['info']} info; "
        f"{counts['baselined']} baselined, {counts['stale_baseline']} stale baseline entr(y/ies)"
    )
    return "\n".join(lines) + "\n"


def to_junit(outcome: Outcome, source: str, exchange_ids: list[str]) -> str:
    """One test case per exchange (plus the transcript and the baseline); errors fail."""
    result = outcome.result
    cases: dict[str, list[tuple[Finding, bool]]] = {"transcript": []}
    for exchange in exchange_ids:
        cases[exchange] = []
    for finding, baselined in zip(result.findings, outcome.baselined, strict=True):
        cases[finding.exchange or "transcript"].append((finding, baselined))
    suite = ElementTree.Element("testsuite", name=f"ssewire.validate {source}")
    failures = 0
    for name, found in cases.items():
        case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{result.profile}", name=name)
        failing = [f for f, b in found if outcome.fails(f) and not b]
        if failing:
            failures += 1
            failure = ElementTree.SubElement(
                case, "failure", type=failing[0].code, message=failing[0].message
            )
            failure.text = "\n".join(f"{f.code} {f.path}: {f.message} [{f.requirement}]" for f in failing)
        others = [(f, b) for f, b in found if not outcome.fails(f) or b]
        if others:
            out = ElementTree.SubElement(case, "system-out")
            out.text = "\n".join(
                f"{f.level} {f.code} {f.path}: {f.message}" + (" (baselined)" if b else "") for f, b in others
            )
    if outcome.stale:
        failures += 1
        case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{result.profile}", name="baseline")
        failure = ElementTree.SubElement(
            case, "failure", type="stale_baseline", message="baseline entries matched no finding"
        )
        failure.text = "\n".join(json.dumps(e.as_dict()) for e in outcome.stale)
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suites = ElementTree.Element("testsuites")
    suites.append(suite)
    for element in suites.iter():  # XML 1.0 cannot carry every character a message may hold
        element.text = element.text and _xml_safe(element.text)
        for key, value in element.attrib.items():
            element.set(key, _xml_safe(value))
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)
