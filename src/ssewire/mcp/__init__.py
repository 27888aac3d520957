"""MCP Streamable HTTP tooling: revision profiles, the transcript format, the validator.

from ssewire.mcp import load, validate
result = validate(load("session.json"), profile="2025-11-25")
for finding in result.findings: ...
"""

# The probe's checks and the validator's rules define their catalogue entries as they are
# imported: importing both here makes the one catalogue complete for any module of ssewire.mcp.
from .checks.catalogue import CATALOGUE, Entry, Kind
from .checks.findings import Finding, Level, Status
from .probe import checks as _probe_checks  # noqa: F401  (registers the probe's diagnostics)
from .protocol.profiles import PROFILES, Profile, UnknownProfile, resolve
from .streams.guard import ResumptionGuard, UnsafeResumption
from .streams.ledger import Recovery, StreamLedger
from .transcript import Transcript, TranscriptError, from_document, load, loads
from .validator.rules import CATALOGUE as RULES
from .validator.validate import Result, validate

__all__ = [
    "CATALOGUE",
    "PROFILES",
    "RULES",
    "Entry",
    "Finding",
    "Kind",
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
