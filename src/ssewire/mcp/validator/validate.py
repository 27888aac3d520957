"""Check a transcript against one MCP revision: which side broke which transport rule.

Offline and deterministic. [`validate`][ssewire.mcp.validator.validate.validate] reads the transcript once into a
`Model` (bodies decoded by ssewire's own decoder from the chunks
exactly as recorded, streams fed to the stream ledger), then runs every registered rule
(`ssewire.mcp.validator.rules`) over it. The result is a list of [`Finding`][ssewire.mcp.checks.findings.Finding]s, in
transcript order (whole-transcript notes first, then exchange by exchange, rules in
registry order), and, for every disconnected SSE exchange, one [`Recovery`][ssewire.mcp.streams.ledger.Recovery] line.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks.findings import Finding, Level, Status
from ..streams.ledger import Recovery
from ..transcript import Transcript
from .model import Model, build
from .rules import CATALOGUE, CHECKS, TRANSCRIPT, Hit

__all__ = ["Recovery", "Result", "validate"]


@dataclass
class Result:
    """What ``validate`` found: the findings, one recovery line per disconnected SSE exchange."""

    profile: str
    findings: list[Finding]
    recovery: list[Recovery]

    @property
    def valid(self) -> bool:
        return not any(f.level == Level.ERROR for f in self.findings)


def validate(transcript: Transcript, profile: str | None = None) -> Result:
    """Validate ``transcript`` under ``profile`` (default: the transcript's own).

    Raises [`UnknownProfile`][ssewire.mcp.protocol.profiles.UnknownProfile] (an input error) when the name
    is not a published revision or alias, or when neither names one.
    """
    model = build(transcript, profile)
    findings = [
        _finding(model, check.code, None, hit)
        for check in CHECKS
        if check.on == TRANSCRIPT
        for hit in check.func(model)
    ]
    for view in model.views:
        for check in CHECKS:
            if check.applies(view.method):
                findings.extend(_finding(model, check.code, view.ex, hit) for hit in check.func(view, model))
    return Result(model.profile.name, findings, model.recovery)


def _finding(model: Model, code: str, exchange, hit: Hit) -> Finding:  # type: ignore[no-untyped-def]
    entry = CATALOGUE[code]
    return Finding(
        code=code,
        status=Status.DETECTED,
        level=hit.level or entry.level,
        message=hit.message,
        exchange=exchange.id if exchange else None,
        path=(exchange.path if exchange else "") + hit.path,
        requirement=entry.requirement(model.page, model.profile.request_headers),
    )
