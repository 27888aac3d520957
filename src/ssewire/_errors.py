"""Exceptions of the core. Defined once; both twins raise these very classes."""

from __future__ import annotations

from typing import Any


class SSEError(Exception):
    """Base class of every error ssewire raises about an event stream."""


class EventTooLarge(SSEError):
    """A line or an event exceeded a configured limit.

    The decoder has already dropped the rest of that event and resumes at the next
    blank line. ``events`` holds every event the same ``feed()`` call completed (before
    and after the oversized one), so catching this loses nothing.
    """

    limit: str
    max_size: int
    size: int
    events: list[Any]  # the Event s (RawEvent s from a raw decoder) the feed() completed

    def __init__(self, limit: str, max_size: int, size: int, events: list[Any] | None = None) -> None:
        self.limit = limit
        self.max_size = max_size
        self.size = size
        self.events = [] if events is None else events
        super().__init__(f"{limit}={max_size} exceeded: reached {size} bytes; the event was dropped")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.limit, self.max_size, self.size, self.events))


class UnexpectedContentType(SSEError):
    """A response that should be an event stream is not ``text/event-stream``."""

    def __init__(self, content_type: str):
        self.content_type = content_type
        super().__init__(f"expected a text/event-stream response, got Content-Type {content_type!r}")


class InputError(ValueError):
    """Input a tool cannot read or check: a file, a transcript, a profile, a baseline.

    The base of every such error, so the command line turns them all into exit code 2;
    never a finding about the input's content.
    """
