"""The one report writer: findings as text, JSON, Markdown or JUnit XML, for a validated
transcript (`ValidationReport`) and for a probed server (`ProbeReport`).

Both judge a run the same way (`Report.fails`: a detected finding at or above the
``--fail-on`` level that no baseline accepts) and write JUnit through one XML-safe writer.
They differ where their readers do: a validation is grouped by exchange and can carry a
baseline and recovery lines; a probe has one verdict per diagnostic, stream figures and a
release verdict. No secrets: messages and evidence hold statuses and a few response
headers, never credentials, session ids or event ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

from ..streams.ledger import Recovery
from .catalogue import DIAGNOSTICS, Level, Status
from .findings import Finding

FORMATS = ("text", "json", "markdown", "junit")

# The release verdict of a probe, by the most serious detected finding.
BLOCKED = "No: fix blockers first"
REVIEW = "Review: warnings detected"
READY = "Yes: no detected problem"


def gates(level: Level, fail_on: Level) -> bool:
    """Whether a detected finding at ``level`` fails a run gated at ``fail_on``
    (``error``: errors only; ``warning``: errors and warnings; info never does)."""
    return level == Level.ERROR or (level == Level.WARNING and fail_on == Level.WARNING)


def release_verdict(findings: Sequence[Finding]) -> str:
    """Detected errors block; detected warnings ask for review; pass, info, suspected and
    not-checked never lower the verdict."""
    detected = [f for f in findings if f.status == Status.DETECTED]
    if any(f.level == Level.ERROR for f in detected):
        return BLOCKED
    if any(f.level == Level.WARNING for f in detected):
        return REVIEW
    return READY


@dataclass
class Report:
    """Findings and what fails the run; the formats are the subclasses'."""

    findings: list[Finding]
    fail_on: Level = Level.ERROR
    baselined: list[bool] = field(default_factory=list)  # parallel to findings; empty: none baselined

    def is_baselined(self, index: int) -> bool:
        return index < len(self.baselined) and self.baselined[index]

    def fails(self, finding: Finding, fail_on: Level | None = None) -> bool:
        """Whether ``finding`` (if not baselined) fails the run."""
        return finding.status == Status.DETECTED and gates(finding.level, fail_on or self.fail_on)

    def failing(self, fail_on: Level | None = None) -> list[Finding]:
        """The findings that fail the run, baselined ones left out."""
        return [f for i, f in enumerate(self.findings) if self.fails(f, fail_on) and not self.is_baselined(i)]

    def render(self, form: str) -> str:
        """The report in one of `FORMATS`."""
        writers = {
            "text": self.to_text,
            "json": self.to_json,
            "markdown": self.to_markdown,
            "junit": self.to_junit,
        }
        return writers[form]()

    def to_text(self) -> str:
        raise NotImplementedError

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, ensure_ascii=False) + "\n"

    def as_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_markdown(self) -> str:
        raise NotImplementedError

    def to_junit(self) -> str:
        raise NotImplementedError


@dataclass
class ValidationReport(Report):
    """What ``ssewire validate`` says about one transcript."""

    profile: str = ""
    source: str = ""
    exchanges: list[str] = field(default_factory=list)  # the transcript's exchange ids, in order
    recovery: list[Recovery] = field(default_factory=list)
    stale: list[dict[str, str]] = field(default_factory=list)  # baseline entries that matched nothing

    @property
    def passed(self) -> bool:
        return not self.failing() and not self.stale

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(tuple(Level), 0)
        for finding in self.findings:
            counts[finding.level] += 1
        return {
            "errors": counts[Level.ERROR],
            "warnings": counts[Level.WARNING],
            "info": counts[Level.INFO],
            "failing": len(self.failing()),
            "baselined": sum(self.baselined),
            "stale_baseline": len(self.stale),
            "recovery": len(self.recovery),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.passed,
            "profile": self.profile,
            "findings": [
                dict(f.as_dict(), baselined=self.is_baselined(i)) for i, f in enumerate(self.findings)
            ],
            "recovery": [r.as_dict() for r in self.recovery],
            "stale_baseline": list(self.stale),
            "summary": dict(self.summary(), exchanges=len(self.exchanges)),
        }

    def to_text(self) -> str:
        lines = [f"{self.source}: profile {self.profile}, {len(self.exchanges)} exchange(s)"]
        for index, finding in enumerate(self.findings):
            where = " ".join(part for part in (finding.exchange, finding.path) if part)
            tag = " (baselined)" if self.is_baselined(index) else ""
            lines.append(f"{finding.level.upper():7} {finding.code} {where}{tag}")
            lines.append(f"        {finding.message}")
            lines.append(f"        requirement: {finding.rests_on()}")
            lines.append(f"        fix: {finding.hint}")
        for entry in self.stale:
            lines.append(f"STALE   baseline entry {json.dumps(entry)} matched no finding")
        for recovery in self.recovery:
            lines.append(f"recovery {recovery.exchange}: {recovery.action} ({recovery.reason})")
        counts = self.summary()
        verdict = "PASS" if self.passed else "FAIL"
        lines.append(
            f"{verdict}: {counts['errors']} error(s), {counts['warnings']} warning(s), {counts['info']} info; "
            f"{counts['baselined']} baselined, {counts['stale_baseline']} stale baseline entr(y/ies)"
        )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        counts = self.summary()
        lines = [
            f"## MCP transcript validation: `{self.source}` (profile {self.profile})",
            "",
            f"**{verdict}**: {counts['errors']} error(s), {counts['warnings']} warning(s), {counts['info']} info",
            "",
            "| code | level | where | what was seen |",
            "|---|---|---|---|",
        ]
        for index, f in enumerate(self.findings):
            where = " ".join(part for part in (f.exchange, f.path) if part)
            tag = " (baselined)" if self.is_baselined(index) else ""
            lines.append(f"| `{f.code}` | {f.level}{tag} | `{where}` | {_cell(f.message)} |")
        for entry in self.stale:
            lines.append(f"| stale baseline entry | error | `{json.dumps(entry)}` | matched no finding |")
        for r in self.recovery:
            lines.append(f"| recovery | info | `{r.exchange}` | {_cell(f'{r.action} ({r.reason})')} |")
        return "\n".join(lines) + "\n"

    def to_junit(self) -> str:
        """One test case per exchange (plus the transcript and the baseline); failing findings fail."""
        cases: dict[str, list[tuple[Finding, bool]]] = {"transcript": []}
        for exchange in self.exchanges:
            cases[exchange] = []
        for index, finding in enumerate(self.findings):
            cases[finding.exchange or "transcript"].append((finding, self.is_baselined(index)))
        suite = ElementTree.Element("testsuite", name=f"ssewire.validate {self.source}")
        failures = 0
        for name, found in cases.items():
            case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{self.profile}", name=name)
            failing = [f for f, b in found if self.fails(f) and not b]
            if failing:
                failures += 1
                failure = ElementTree.SubElement(
                    case, "failure", type=failing[0].code, message=failing[0].message
                )
                failure.text = "\n".join(f"{f.code} {f.path}: {f.message} [{f.rests_on()}]" for f in failing)
            others = [(f, b) for f, b in found if not self.fails(f) or b]
            if others:
                out = ElementTree.SubElement(case, "system-out")
                out.text = "\n".join(
                    f"{f.level} {f.code} {f.path}: {f.message}" + (" (baselined)" if b else "")
                    for f, b in others
                )
        if self.stale:
            failures += 1
            case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{self.profile}", name="baseline")
            failure = ElementTree.SubElement(
                case, "failure", type="stale_baseline", message="baseline entries matched no finding"
            )
            failure.text = "\n".join(json.dumps(entry) for entry in self.stale)
        return _junit(suite, failures)


@dataclass
class ProbeReport(Report):
    """What ``ssewire probe`` says about one server: a verdict per diagnostic, in catalogue order."""

    target: str = ""
    version: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    requests: int = 0
    transcript: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        url: str,
        verdicts: Mapping[str, Finding],
        *,
        version: str,
        figures: Mapping[str, Any],
        requests: int,
        transcript: dict[str, Any],
    ) -> ProbeReport:
        """Verdicts in catalogue order; a diagnostic no check reached is not-checked."""
        ordered = [
            verdicts.get(ident) or Finding(ident, Status.NOT_CHECKED, entry.level, "no check reached it")
            for ident, entry in DIAGNOSTICS.items()
        ]
        shown = {k: v for k, v in figures.items() if _plain(v)}
        return cls(
            ordered,
            target=_shown_url(url),
            version=version,
            figures=shown,
            requests=requests,
            transcript=transcript,
        )

    @property
    def verdicts(self) -> list[Finding]:
        return self.findings

    @property
    def release(self) -> str:
        return release_verdict(self.findings)

    def detected(self) -> set[str]:
        """Ids of the verdicts that found a problem (detected or suspected)."""
        return {v.id for v in self.findings if v.status in (Status.DETECTED, Status.SUSPECTED)}

    def as_dict(self, fail_on: Level | None = None) -> dict[str, Any]:
        counts = {str(s): sum(v.status == s for v in self.findings) for s in Status}
        return {
            "target": self.target,
            "protocol_version": self.version,
            "release": self.release,
            "valid": not self.failing(fail_on),
            "verdicts": [v.as_dict() for v in self.findings],
            "figures": self.figures,
            "summary": {**counts, "requests": self.requests},
        }

    def to_json(self, fail_on: Level | None = None) -> str:
        return json.dumps(self.as_dict(fail_on), indent=2, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        lines = [f"{self.target}: MCP {self.version}, {self.requests} request(s)"]
        for v in self.findings:
            found = v.status in (Status.DETECTED, Status.SUSPECTED)
            tag = _SYMBOL[v.status] + (f" {v.level}" if found else "")
            lines.append(f"{tag:15} {v.id}: {v.message}")
            if found:
                lines.append(f"{'':15} requirement: {v.rests_on()}")
                for stack, hint in v.entry.hints().items():
                    lines.append(f"{'':15} fix ({stack}): {hint}")
        if self.figures:
            lines.append("figures: " + json.dumps(self.figures, ensure_ascii=False))
        lines.append(f"Release: {self.release}")
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        lines = [
            f"## MCP transport probe: `{self.target}` (MCP {self.version})",
            "",
            f"**Release: {self.release}**",
            "",
            "| diagnostic | status | level | what was seen |",
            "|---|---|---|---|",
        ]
        for v in self.findings:
            lines.append(f"| `{v.id}` | {v.status} | {v.level} | {_cell(v.message)} |")
        if self.figures:
            lines += ["", "Figures: `" + json.dumps(self.figures, ensure_ascii=False) + "`"]
        return "\n".join(lines) + "\n"

    def to_junit(self, fail_on: Level | None = None) -> str:
        suite = ElementTree.Element("testsuite", name=f"ssewire.probe {self.target}")
        failing = {v.id for v in self.failing(fail_on)}
        for v in self.findings:
            case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{self.version}", name=v.id)
            if v.id in failing:
                failure = ElementTree.SubElement(case, "failure", type=v.id, message=v.message)
                failure.text = json.dumps(v.as_dict(), ensure_ascii=False)
            elif v.status == Status.NOT_CHECKED:
                ElementTree.SubElement(case, "skipped", message=v.message)
            else:
                out = ElementTree.SubElement(case, "system-out")
                out.text = f"{v.status} {v.level}: {v.message}"
        return _junit(suite, len(failing))


_SYMBOL = {
    Status.DETECTED: "FAIL",
    Status.SUSPECTED: "SUSPECT",
    Status.NOT_CHECKED: "SKIP",
    Status.PASS: "ok",
}

# XML 1.0 cannot carry every character a message may hold (controls, lone surrogates, U+FFFE)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot carry replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _junit(suite: ElementTree.Element, failures: int) -> str:
    """The document around one suite, every text and attribute made XML-safe."""
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suites = ElementTree.Element("testsuites")
    suites.append(suite)
    for element in suites.iter():
        element.text = element.text and xml_safe(element.text)
        for key, value in element.attrib.items():
            element.set(key, xml_safe(value))
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: str) -> str:
    """Text for one Markdown table cell."""
    return text.replace("|", "\\|")


def _plain(value: Any) -> bool:
    """Figures a report can carry (numbers, strings, lists of them)."""
    if isinstance(value, (int, float, str, bool)) or value is None:
        return True
    return isinstance(value, list) and all(isinstance(x, (int, float, str)) for x in value)


def _shown_url(url: str) -> str:
    """The target without userinfo, query or fragment (tokens travel there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
