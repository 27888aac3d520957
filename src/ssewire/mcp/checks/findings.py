"""What a check reports: levels, statuses, and the one [`Finding`][ssewire.mcp.checks.findings.Finding] value.

A validator finding and a probe verdict are the same type: a probe verdict has no
exchange or path (it is about the live server), a validator finding no evidence beyond
its location. The catalogue (`ssewire.mcp.checks.catalogue`) says what each code means.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .catalogue import CATALOGUE, Entry, Kind, Level, Status

__all__ = ["Finding", "Level", "Status"]


@dataclass(frozen=True)
class Finding:
    """One thing a check found: its code, status and level, what was seen, and where.

    ``requirement`` is resolved when the finding is made (a validator code names the
    revision's page and sections); empty means the catalogue entry's own.
    """

    code: str
    status: Status
    level: Level
    message: str  # never contains a credential, session id or event id value
    evidence: Mapping[str, Any] = field(
        default_factory=dict, hash=False
    )  # never secrets; hash=False: a Finding stays hashable
    exchange: str | None = None  # the exchange id; None: the whole transcript, or a live probe
    path: str = ""  # JSON-pointer-like: where in the transcript
    requirement: str = ""
    revision: str = ""  # a probe verdict: the MCP revision it was judged under ("": not a probe's)

    @property
    def id(self) -> str:
        """The code (the probe's name for it)."""
        return self.code

    @property
    def entry(self) -> Entry:
        return CATALOGUE[self.code]

    @property
    def hint(self) -> str:
        return self.entry.hint

    def rests_on(self) -> str:
        return self.requirement or self.entry.requirement()

    def as_dict(self) -> dict[str, Any]:
        """A validator finding's or a probe verdict's report shape, by the code's kind."""
        entry = self.entry
        if entry.kind == Kind.DIAGNOSTIC:
            return {
                "id": self.code,
                **({"revision": self.revision} if self.revision else {}),
                "status": str(self.status),
                "level": str(self.level),
                "requirement": self.rests_on(),
                "message": self.message,
                "evidence": dict(self.evidence),
                "fix": entry.hints(),
            }
        return {
            "code": self.code,
            "level": str(self.level),
            "status": str(self.status),
            "requirement": self.rests_on(),
            "exchange": self.exchange,
            "path": self.path,
            "message": self.message,
            "hint": entry.hint,
        }
