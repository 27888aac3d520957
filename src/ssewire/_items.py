"""The items a [`MessageDecoder`][ssewire.jsonrpc.MessageDecoder] gives, defined once:
read by ``jsonrpc`` (which names them) and by both twins of its per-event step
(``_messages_py``, ``_messages_c``), as ``_events`` holds the decoder's events."""

from __future__ import annotations

from typing import Any, NamedTuple

from ._strenum import StrEnum

__all__ = ["InvalidMessage", "Item", "Kind", "Message", "OtherEvent", "Priming", "TornTail"]


class Kind(StrEnum):
    """What a JSON-RPC message is (a ``str``: ``Kind.REQUEST == "request"``)."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    ERROR = "error"  # an error response
    BATCH = "batch"  # a JSON array of messages (MCP 2025-03-26)

    @property
    def answers(self) -> bool:
        """A response or an error response: it answers a request by its id."""
        return self in (Kind.RESPONSE, Kind.ERROR)


class Message(NamedTuple):
    """One valid JSON-RPC message (or batch) and the SSE event it came from."""

    kind: Kind
    payload: Any  # what orjson.loads returned (with raw_above, its large bodies as Body)
    id: str | int | None  # the JSON-RPC id (None for notifications and batches)
    method: str | None  # requests and notifications
    event_type: str
    event_id: str  # the SSE last event ID at dispatch
    size: int  # bytes of the event's data
    data: bytes = b""  # the event's data as it came, only with keep_data (what the resumption guard digests)


class InvalidMessage(NamedTuple):
    """An event whose data is not a valid JSON-RPC message; the stream goes on."""

    reason: str
    event_id: str
    size: int
    excerpt: str  # the start of the data, secrets redacted


class Priming(NamedTuple):
    """An event with empty data: not a message (MCP primes resumable streams with one,
    carrying an ID; ``event_id`` is the last event ID at dispatch, maybe empty)."""

    event_id: str


class OtherEvent(NamedTuple):
    """An event whose type is not ``message``: not JSON-RPC, passed on undecoded."""

    event_type: str
    data: bytes
    event_id: str


class TornTail(NamedTuple):
    """The stream ended inside an event: ``discarded`` bytes were never dispatched.

    ``event_id`` is the last event ID before the torn event (a torn ``id:`` line never
    counts), i.e. the cursor to resume from."""

    discarded: int
    event_id: str = ""


Item = Message | InvalidMessage | Priming | OtherEvent | TornTail
