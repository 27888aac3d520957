"""What a check reports: levels, statuses, and the [`Finding`][ssewire.mcp.checks.findings.Finding] value.

The catalogue of codes (level, keyword, section, hint) is derived from the rule registry
(`ssewire.mcp.validator.rules`); this module only holds the value types, so that reports and
rules can share them without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._strenum import StrEnum


class Level(StrEnum):
    """How much a finding matters (a ``str``: ``Level.ERROR == "error"``)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Status(StrEnum):
    """How sure a finding is."""

    DETECTED = "detected"  # seen in the bytes
    SUSPECTED = "suspected"  # inferred, not proven
    NOT_CHECKED = "not-checked"  # the check could not run (the message says why)
    PASS = "pass"  # checked and conformant


@dataclass(frozen=True)
class Finding:
    """One thing a check found: its code and level, the exchange and path, the evidence (redacted)."""

    code: str
    level: Level
    status: Status
    requirement: str  # e.g. "MCP 2025-11-25 basic/transports, Session Management: MUST"
    exchange: str | None  # the exchange id, None for the whole transcript
    path: str  # JSON-pointer-like: where in the transcript
    message: str  # never contains a credential, session id or event id value
    hint: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "level": str(self.level),
            "status": str(self.status),
            "requirement": self.requirement,
            "exchange": self.exchange,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }
