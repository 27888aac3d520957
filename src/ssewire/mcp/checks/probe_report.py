"""The probe's report: verdicts in catalogue order, stream figures, the release verdict,
as text, JSON, Markdown or JUnit. No secrets: evidence holds statuses and a few
response headers, never credentials, session ids or event ids."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

from .diagnostics import CATALOGUE, Verdict, release_verdict
from .findings import Level, Status

_SYMBOL = {
    Status.DETECTED: "FAIL",
    Status.SUSPECTED: "SUSPECT",
    Status.NOT_CHECKED: "SKIP",
    Status.PASS: "ok",
}


@dataclass
class ProbeReport:
    target: str
    version: str
    verdicts: list[Verdict]
    figures: dict[str, Any] = field(default_factory=dict)
    requests: int = 0
    transcript: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, url: str, ctx: Any, *, requests: int, transcript: dict[str, Any]) -> ProbeReport:
        order = list(CATALOGUE)
        verdicts = sorted(ctx.verdicts.values(), key=lambda v: order.index(v.id))
        missing = [ident for ident in order if ident not in ctx.verdicts]
        verdicts += [
            Verdict(ident, Status.NOT_CHECKED, CATALOGUE[ident].level, "no check reached it")
            for ident in missing
        ]
        figures = {k: v for k, v in ctx.figures.items() if _plain(v)}
        return cls(_shown_url(url), ctx.version, verdicts, figures, requests, transcript)

    @property
    def release(self) -> str:
        return release_verdict(self.verdicts)

    def failing(self, fail_on: Level = Level.ERROR) -> list[Verdict]:
        levels = {Level.ERROR} | ({Level.WARNING} if fail_on == Level.WARNING else set())
        return [v for v in self.verdicts if v.status == Status.DETECTED and v.level in levels]

    def detected(self) -> set[str]:
        """Ids of the verdicts that found a problem (detected or suspected)."""
        return {v.id for v in self.verdicts if v.status in (Status.DETECTED, Status.SUSPECTED)}

    # -- formats -----------------------------------------------------------------------

    def as_dict(self, fail_on: Level = Level.ERROR) -> dict[str, Any]:
        counts = {str(s): sum(v.status == s for v in self.verdicts) for s in Status}
        return {
            "target": self.target,
            "protocol_version": self.version,
            "release": self.release,
            "valid": not self.failing(fail_on),
            "verdicts": [v.as_dict() for v in self.verdicts],
            "figures": self.figures,
            "summary": {**counts, "requests": self.requests},
        }

    def to_json(self, fail_on: Level = Level.ERROR) -> str:
        return json.dumps(self.as_dict(fail_on), indent=2, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        lines = [f"{self.target}: MCP {self.version}, {self.requests} request(s)"]
        for v in self.verdicts:
            tag = _SYMBOL[v.status] + (
                f" {v.level}" if v.status in (Status.DETECTED, Status.SUSPECTED) else ""
            )
            lines.append(f"{tag:15} {v.id}: {v.message}")
            if v.status in (Status.DETECTED, Status.SUSPECTED):
                entry = CATALOGUE[v.id]
                lines.append(f"{'':15} requirement: {entry.requirement}")
                for stack, hint in entry.hints().items():
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
        for v in self.verdicts:
            message = v.message.replace("|", "\\|")
            lines.append(f"| `{v.id}` | {v.status} | {v.level} | {message} |")
        if self.figures:
            lines += ["", "Figures: `" + json.dumps(self.figures, ensure_ascii=False) + "`"]
        return "\n".join(lines) + "\n"

    def to_junit(self, fail_on: Level = Level.ERROR) -> str:
        suite = ElementTree.Element("testsuite", name=f"ssewire.probe {self.target}")
        failing = {v.id for v in self.failing(fail_on)}
        for v in self.verdicts:
            case = ElementTree.SubElement(suite, "testcase", classname=f"mcp.{self.version}", name=v.id)
            if v.id in failing:
                failure = ElementTree.SubElement(case, "failure", type=v.id, message=v.message)
                failure.text = json.dumps(v.as_dict(), ensure_ascii=False)
            elif v.status == Status.NOT_CHECKED:
                ElementTree.SubElement(case, "skipped", message=v.message)
            else:
                out = ElementTree.SubElement(case, "system-out")
                out.text = f"{v.status} {v.level}: {v.message}"
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(len(failing)))
        root = ElementTree.Element("testsuites")
        root.append(suite)
        return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


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
