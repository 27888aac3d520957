"""The live probe's checks, sans-IO: each asks for requests and judges the answers.

Importing this package registers the checks in the order the probe runs them, each with
the diagnostics it reports (defined beside it, in the one catalogue) and the facts it needs
from earlier checks: the handshake first (``HANDSHAKE``: ``negotiate``,
``find_streaming_tool``), the wrap-up last (it judges everything that came back, and the
recording). A check registered before what it needs is an error at import.
"""

from __future__ import annotations

# The import order is the order the checks run in.
# isort: off
from . import (  # noqa: F401  (registers)
    handshake,
    transport,
    security,
    tools,
    streams,
    modern,
    meta,
    statuses,
    version_error,
    param_headers,
    sessions,
    intermediaries,
    wrapup,
)

# isort: on
from ._plan import CHECKS, HANDSHAKE, Context, Figures, Learned, ProbeCheck, Received, Send, Together
from .handshake import Unreachable, find_streaming_tool, negotiate

__all__ = [
    "CHECKS",
    "HANDSHAKE",
    "Context",
    "Figures",
    "Learned",
    "ProbeCheck",
    "Received",
    "Send",
    "Together",
    "Unreachable",
    "find_streaming_tool",
    "negotiate",
]
