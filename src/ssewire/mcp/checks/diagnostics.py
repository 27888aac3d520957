"""The live probe's diagnostics, as the probe's code and tests name them: the catalogue's
diagnostic entries (`CATALOGUE`, a view of the one catalogue), the verdict value (a
`Finding` with no exchange) and the release verdict.

A diagnostic is one question the probe asks a live server; each is defined beside the check
that asks it (``ssewire.mcp.probes``), with its level, the requirement it rests on and a fix
for the three stacks people deploy: the TypeScript SDK, the Python SDK, and a plain ASGI or
Workers handler.
"""

from __future__ import annotations

from .catalogue import DIAGNOSTICS as CATALOGUE
from .catalogue import Entry as Diagnostic
from .findings import Finding as Verdict
from .report import BLOCKED, READY, REVIEW, release_verdict

__all__ = ["BLOCKED", "CATALOGUE", "READY", "REVIEW", "Diagnostic", "Verdict", "release_verdict"]
