"""MCP Streamable HTTP tooling: revision profiles, the transcript format, the validator.

from ssewire.mcp import load, validate
result = validate(load("session.json"), profile="2025-11-25")
for finding in result.findings: ...
"""

from .findings import RULES, Finding
from .profiles import PROFILES, Profile, UnknownProfile, resolve
from .transcript import Transcript, TranscriptError, from_document, load, loads
from .validate import Recovery, Result, validate

__all__ = [
    "PROFILES",
    "RULES",
    "Finding",
    "Profile",
    "Recovery",
    "Result",
    "Transcript",
    "TranscriptError",
    "UnknownProfile",
    "load",
    "from_document",
    "loads",
    "resolve",
    "validate",
]
