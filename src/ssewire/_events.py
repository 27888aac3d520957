"""What the decoder emits. Defined once; both twins (and the ``.pyx``) import it."""

from __future__ import annotations

from typing import NamedTuple


class Event(NamedTuple):
    """One dispatched server-sent event.

    A named tuple: cheap to build on the hot path (millions per second), immutable,
    and equal to any event with the same content whichever twin produced it.
    """

    type: str
    """The event type; ``"message"`` when the stream gave none."""
    data: str
    """The data lines joined with LF (the final LF removed)."""
    id: str = ""
    """The stream's last event ID at dispatch (it persists across events)."""
    retry: int | None = None
    """A valid ``retry`` value seen in this event's block, else ``None``."""


class RawEvent(NamedTuple):
    """An event whose data is the raw UTF-8 bytes, as [`RawDecoder`][ssewire.RawDecoder] emits.

    Same parsing as [`Event`][ssewire.Event]; only ``data`` is left undecoded (invalid UTF-8 kept as
    is), so a JSON parser such as ``orjson.loads`` can take it without a str round trip.
    """

    type: str
    data: bytes
    id: str = ""
    retry: int | None = None
