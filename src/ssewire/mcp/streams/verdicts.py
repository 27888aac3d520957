"""What the stream ledger says of an event and of a stream: defined once, read by the
ledger and by both twins of its booking loop (`_books_py`, `_books_c`)."""

from __future__ import annotations

from typing import Any

from ..._strenum import StrEnum
from ...jsonrpc import Kind


class EventVerdict(StrEnum):
    """What one event is, as the ledger sees it when it arrives. The unsafe ones are named
    as [`UnsafeResumption`][ssewire.mcp.streams.guard.UnsafeResumption]'s kinds."""

    NEW = "new"  # never delivered: deliver it
    REPLAY = "replay"  # an event id this chain delivered, with the same content: drop it
    COPY = "copy"  # a message another chain delivered first (a broadcast): drop it
    CHANGED_PAYLOAD = "changed-payload"  # an event id this chain delivered, with other content
    OTHER_STREAM = "other-stream"  # a resumed stream carries another chain's event ids
    RESTARTED = "restarted"  # a resumed stream repeats its chain's messages under new ids

    @property
    def unsafe(self) -> bool:
        return self in _UNSAFE


_UNSAFE = frozenset({EventVerdict.CHANGED_PAYLOAD, EventVerdict.OTHER_STREAM, EventVerdict.RESTARTED})


class StreamState(StrEnum):
    """Where a stream stands (a finished stream is forgotten, not kept in a state)."""

    OPEN = "open"
    ENDED = "ended"  # it ended cleanly
    BROKEN = "broken"  # it ended before its end (a disconnect)


ANSWERS = frozenset({Kind.RESPONSE, Kind.ERROR})


class _Mixed:
    def __repr__(self) -> str:
        return "MIXED"


MIXED: Any = _Mixed()
"""A scope's writer when more than one chain wrote to its tables since they were empty
(`StreamLedger` keeps, per scope, the one chain that did, to forget it in one step)."""


def identifiable(message: Any) -> bool:
    """Whether a message equal to this one is this one: it has a JSON-RPC id, or it is
    progress (which must increase)."""
    if message.kind != Kind.NOTIFICATION:
        return True
    return isinstance(message.payload, dict) and message.payload.get("method") == "notifications/progress"
