"""The one report writer: findings as text, JSON, Markdown or JUnit XML, for a validated
transcript (`ValidationReport`) and for a probed server (`ProbeReport`).

Both judge a run the same way (`Report.fails`: a detected finding at or above the
``--fail-on`` level that no baseline accepts) and write JUnit through one XML-safe writer.
They differ where their readers do: a validation is grouped by exchange and can carry a
baseline and recovery lines; a probe has a run per revision the server speaks, each a
verdict per diagnostic with stream figures, and a release verdict (the worst of the runs). No secrets: messages and evidence hold statuses and a few response
headers, never credentials, session ids or event ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
        return _junit((suite, failures))


def rank(verdict: Finding) -> int:
    """How bad a verdict is: by status (detected over suspected over pass over not-checked),
    then by level; the worse of two verdicts on one diagnostic is the one to keep."""
    statuses = {Status.NOT_CHECKED: 0, Status.PASS: 1, Status.SUSPECTED: 2, Status.DETECTED: 3}
    return statuses[verdict.status] * 3 + {Level.INFO: 0, Level.WARNING: 1, Level.ERROR: 2}[verdict.level]


@dataclass
class RevisionRun:
    """The probe's run under one revision: a verdict per diagnostic (catalogue order, each
    stamped with the revision), its figures, its request count and its own recording."""

    revision: str
    verdicts: list[Finding]
    figures: dict[str, Any] = field(default_factory=dict)
    requests: int = 0
    transcript: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        revision: str,
        verdicts: Mapping[str, Finding],
        *,
        figures: Mapping[str, Any],
        requests: int,
        transcript: dict[str, Any],
    ) -> RevisionRun:
        """Verdicts in catalogue order; a diagnostic no check reached is not-checked."""
        ordered = [
            replace(
                verdicts.get(ident) or Finding(ident, Status.NOT_CHECKED, entry.level, "no check reached it"),
                revision=revision,
            )
            for ident, entry in DIAGNOSTICS.items()
        ]
        shown = {k: v for k, v in figures.items() if _plain(v)}
        return cls(revision, ordered, shown, requests, transcript)

    @property
    def release(self) -> str:
        return release_verdict(self.verdicts)

    def counts(self) -> dict[str, int]:
        return _counts(self.verdicts)


@dataclass(frozen=True)
class NotSpoken:
    """A revision the probe tried and the server did not accept: information, not a failure."""

    revision: str
    reason: str  # what the server answered to the revision's opening request

    def as_dict(self) -> dict[str, Any]:
        return {"revision": self.revision, "spoken": False, "reason": self.reason}

    def line(self) -> str:
        return f"MCP {self.revision} is not spoken ({self.reason}): not judged, info only"


@dataclass
class ProbeReport(Report):
    """What ``ssewire probe`` says about one server: a run per revision it speaks (newest
    first), each a verdict per diagnostic in catalogue order, and the revisions it refused.

    ``findings`` (``verdicts``) is one verdict per diagnostic, the worst across the runs
    (each names its revision), so the release verdict, ``failing`` and the exit code are
    the worst of the runs; ``version``, ``figures`` and ``transcript`` are the first run's,
    for callers that read one revision; ``runs`` has them all."""

    target: str = ""
    runs: list[RevisionRun] = field(default_factory=list)
    not_spoken: list[NotSpoken] = field(default_factory=list)

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
        """A report of one run under ``version``."""
        run = RevisionRun.of(version, verdicts, figures=figures, requests=requests, transcript=transcript)
        return cls.of_runs(url, [run])

    @classmethod
    def of_runs(
        cls, url: str, runs: Sequence[RevisionRun], not_spoken: Sequence[NotSpoken] = ()
    ) -> ProbeReport:
        """The report of these runs: per diagnostic, the worst verdict of any run (the first
        run's on a tie)."""
        worst: dict[str, Finding] = {}
        for run in runs:
            for verdict in run.verdicts:
                kept = worst.get(verdict.id)
                if kept is None or rank(verdict) > rank(kept):
                    worst[verdict.id] = verdict
        return cls(list(worst.values()), target=_shown_url(url), runs=list(runs), not_spoken=list(not_spoken))

    # -- one revision's view, for callers that read one --------------------------------

    @property
    def version(self) -> str:
        """The first revision judged (the newest the server speaks, or the one forced)."""
        return self.runs[0].revision if self.runs else ""

    @property
    def versions(self) -> list[str]:
        return [run.revision for run in self.runs]

    @property
    def figures(self) -> dict[str, Any]:
        return self.runs[0].figures if self.runs else {}

    @property
    def transcript(self) -> dict[str, Any]:
        return self.runs[0].transcript if self.runs else {}

    @property
    def transcripts(self) -> dict[str, dict[str, Any]]:
        """Each run's recording, by revision: one ``ssewire-transcript/1`` document each."""
        return {run.revision: run.transcript for run in self.runs}

    @property
    def requests(self) -> int:
        return sum(run.requests for run in self.runs)

    def run(self, revision: str) -> RevisionRun:
        """The run under ``revision``; KeyError when it was not judged."""
        for run in self.runs:
            if run.revision == revision:
                return run
        raise KeyError(f"MCP {revision} was not judged (judged: {', '.join(self.versions) or 'none'})")

    @property
    def verdicts(self) -> list[Finding]:
        return self.findings

    @property
    def release(self) -> str:
        return release_verdict(self.findings)

    def detected(self) -> set[str]:
        """Ids of the verdicts that found a problem (detected or suspected) in any run."""
        return {v.id for v in self.findings if v.status in (Status.DETECTED, Status.SUSPECTED)}

    # -- writers -------------------------------------------------------------------------

    def as_dict(self, fail_on: Level | None = None) -> dict[str, Any]:
        """Every run's verdicts in one list, each with its ``revision``; ``revisions`` says
        per revision whether it was spoken and, if so, its release verdict and figures."""
        every = [v for run in self.runs for v in run.verdicts]
        counts = _counts(every)
        revisions: list[dict[str, Any]] = [
            {
                "revision": run.revision,
                "spoken": True,
                "release": run.release,
                "valid": not [v for v in run.verdicts if self.fails(v, fail_on)],
                "requests": run.requests,
                "figures": run.figures,
                "summary": run.counts(),
            }
            for run in self.runs
        ]
        revisions += [n.as_dict() for n in self.not_spoken]
        return {
            "target": self.target,
            "protocol_version": self.version,
            "protocol_versions": self.versions,
            "release": self.release,
            "valid": not self.failing(fail_on),
            "verdicts": [v.as_dict() for v in every],
            "figures": self.figures,
            "revisions": revisions,
            "summary": {**counts, "requests": self.requests},
        }

    def to_json(self, fail_on: Level | None = None) -> str:
        return json.dumps(self.as_dict(fail_on), indent=2, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        """One run: its verdicts as they are. Several: a section per revision, each with its
        own release line, and the overall (worst) release last."""
        several = len(self.runs) > 1
        lines = [f"{self.target}: MCP {' and '.join(self.versions) or '-'}, {self.requests} request(s)"]
        for run in self.runs:
            if several:
                lines += ["", f"== MCP {run.revision}: {run.requests} request(s) =="]
            for v in run.verdicts:
                found = v.status in (Status.DETECTED, Status.SUSPECTED)
                tag = _SYMBOL[v.status] + (f" {v.level}" if found else "")
                lines.append(f"{tag:15} {v.id}: {v.message}")
                if found:
                    lines.append(f"{'':15} requirement: {v.rests_on()}")
                    for stack, hint in v.entry.hints().items():
                        lines.append(f"{'':15} fix ({stack}): {hint}")
            if run.figures:
                lines.append("figures: " + json.dumps(run.figures, ensure_ascii=False))
            if several:
                lines.append(f"Release under MCP {run.revision}: {run.release}")
        if several:
            lines.append("")
        lines += [f"{'info':15} {n.line()}" for n in self.not_spoken]
        lines.append(f"Release: {self.release}")
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        lines = [
            f"## MCP transport probe: `{self.target}` (MCP {', '.join(self.versions)})",
            "",
            f"**Release: {self.release}**",
            "",
        ]
        lines += [f"- MCP {run.revision}: {run.release} ({run.requests} requests)" for run in self.runs]
        lines += [f"- {_cell(n.line())}" for n in self.not_spoken]
        lines += [
            "",
            "| diagnostic | revision | status | level | what was seen |",
            "|---|---|---|---|---|",
        ]
        for run in self.runs:
            for v in run.verdicts:
                lines.append(f"| `{v.id}` | {run.revision} | {v.status} | {v.level} | {_cell(v.message)} |")
        for run in self.runs:
            if run.figures:
                shown = json.dumps(run.figures, ensure_ascii=False)
                lines += ["", f"Figures ({run.revision}): `{shown}`"]
        return "\n".join(lines) + "\n"

    def to_junit(self, fail_on: Level | None = None) -> str:
        """A test suite per revision: a test case per diagnostic (class ``mcp.<revision>``);
        a revision not spoken is one skipped case."""
        suites = []
        for run in self.runs:
            suite = ElementTree.Element("testsuite", name=f"ssewire.probe {self.target} (MCP {run.revision})")
            failures = 0
            for v in run.verdicts:
                case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{run.revision}", name=v.id)
                if self.fails(v, fail_on):
                    failures += 1
                    failure = ElementTree.SubElement(case, "failure", type=v.id, message=v.message)
                    failure.text = json.dumps(v.as_dict(), ensure_ascii=False)
                elif v.status == Status.NOT_CHECKED:
                    ElementTree.SubElement(case, "skipped", message=v.message)
                else:
                    out = ElementTree.SubElement(case, "system-out")
                    out.text = f"{v.status} {v.level}: {v.message}"
            suites.append((suite, failures))
        for absent in self.not_spoken:
            suite = ElementTree.Element(
                "testsuite", name=f"ssewire.probe {self.target} (MCP {absent.revision})"
            )
            case = ElementTree.SubElement(
                suite, "testcase", classname=f"mcp.{absent.revision}", name="revision-spoken"
            )
            ElementTree.SubElement(case, "skipped", message=absent.line())
            suites.append((suite, 0))
        return _junit(*suites)


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


def _junit(*suites: tuple[ElementTree.Element, int]) -> str:
    """The document around the suites (each with its failure count), every text and
    attribute made XML-safe."""
    root = ElementTree.Element("testsuites")
    for suite, failures in suites:
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(failures))
        root.append(suite)
    for element in root.iter():
        element.text = element.text and xml_safe(element.text)
        for key, value in element.attrib.items():
            element.set(key, xml_safe(value))
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _counts(verdicts: Sequence[Finding]) -> dict[str, int]:
    """How many verdicts have each status."""
    return {str(s): sum(v.status == s for v in verdicts) for s in Status}


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
