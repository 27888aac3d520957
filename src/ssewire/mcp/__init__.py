"""MCP Streamable HTTP tooling: revision profiles, the transcript format, the validator.

from ssewire.mcp import load, validate
result = validate(load("session.json"), profile="2025-11-25")
for finding in result.findings: ...
"""

from .findings import Finding, Level, Status
from .guard import ResumptionGuard, UnsafeResumption
from .ledger import Recovery, StreamLedger
from .profiles import PROFILES, Profile, UnknownProfile, resolve
from .rules import CATALOGUE as RULES
from .transcript import Transcript, TranscriptError, from_document, load, loads
from .validate import Result, validate

__all__ = [
    "PROFILES",
    "RULES",
    "Finding",
    "Level",
    "Profile",
    "Recovery",
    "Result",
    "ResumptionGuard",
    "Status",
    "StreamLedger",
    "Transcript",
    "TranscriptError",
    "UnknownProfile",
    "UnsafeResumption",
    "from_document",
    "load",
    "loads",
    "resolve",
    "validate",
]
