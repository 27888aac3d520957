"""Where the gateway keeps downstream sessions and streams: one typed interface (``base.py``),
a memory store for one process and a Redis store for replicas (``redis.py``, imported on
demand: it needs the ``redis`` package)."""

from .base import (
    MAX_ANSWER_BYTES,
    MAX_EVENTS,
    MAX_STORE_BYTES,
    SESSION_TTL,
    Abandoned,
    CallRecord,
    Gap,
    Lease,
    Position,
    SessionRecord,
    Store,
    Stored,
    StoreFailed,
    StreamGone,
    StreamState,
    event_id,
    parse_event_id,
    redacted,
)
from .memory import MemoryStore

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_EVENTS",
    "MAX_STORE_BYTES",
    "SESSION_TTL",
    "Abandoned",
    "CallRecord",
    "Gap",
    "Lease",
    "MemoryStore",
    "Position",
    "SessionRecord",
    "Store",
    "StoreFailed",
    "Stored",
    "StreamGone",
    "StreamState",
    "event_id",
    "parse_event_id",
    "redacted",
]
