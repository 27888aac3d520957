"""The reference server's faults: each breaks exactly one behaviour, and names the probe
diagnostic that must find it (the tests iterate this registry, so a fault cannot land
without the check that catches it).

A fault is a member of :class:`Fault`, not a string: the server tests
``Fault.STRICT_ACCEPT in self.faults``, so a misspelt fault fails at import, and a name
given from outside (``ssewire serve --fault NAME``) is checked once, at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..._errors import InputError
from ..._strenum import StrEnum


class Fault(StrEnum):
    """One switchable defect; its value is the name ``--fault`` takes."""

    diagnostic: str  # the probe diagnostic id this fault must trigger, and no other
    breaks: str  # what the server does wrong

    def __new__(cls, name: str, diagnostic: str, breaks: str) -> Fault:
        member = str.__new__(cls, name)
        member._value_ = name
        member.diagnostic = diagnostic
        member.breaks = breaks
        return member

    STRICT_ACCEPT = (
        "strict-accept",
        "transport.accept-header-406",
        "406 for any Accept but the exact string 'application/json, text/event-stream'",
    )
    NO_GET = ("no-get", "transport.get-stream-405", "answers the optional GET stream with 405")
    STRICT_CONTENT_TYPE = (
        "strict-content-type",
        "transport.unsupported-media-type-415",
        "415 for a Content-Type with parameters or in another letter case",
    )
    RATE_LIMIT_BURST = (
        "rate-limit-burst",
        "transport.target-rate-limited-429",
        "answers the first tools/list with 429",
    )
    MISSING_EXPOSE_HEADERS = (
        "missing-expose-headers",
        "transport.cors-expose-headers-missing",
        "cross-origin answers without Access-Control-Expose-Headers",
    )
    WRONG_CONTENT_TYPE = (
        "wrong-content-type",
        "transport.sse-content-type-mismatch",
        "SSE answers labelled text/plain",
    )
    OUTPUT_SCHEMA_VIOLATION = (
        "output-schema-violation",
        "tool.output-contract-violation",
        "the structured tool's result breaks its outputSchema",
    )
    UNKNOWN_SESSION_400 = (
        "unknown-session-400",
        "session.unknown-id",
        "a never-issued session id is answered 400, not 404",
    )
    STALE_SESSION_ACCEPTED = (
        "stale-session-accepted",
        "session.unknown-id",
        "a session id it never issued is accepted",
    )
    DELETE_NOT_INVALIDATING = (
        "delete-not-invalidating",
        "session.delete",
        "DELETE answers 200 but the session lives on",
    )
    ORIGIN_IGNORED = ("origin-ignored", "security.dns-rebinding", "neither Origin nor Host is validated")
    NO_KEEPALIVES = (
        "no-keepalives",
        "stream.keepalive-missing",
        "no keep-alive comments on an idle GET stream",
    )
    IDLE_CLOSE = (
        "idle-close",
        "stream.idle-closed",
        "ends the idle GET stream (cleanly) after two keep-alive intervals",
    )
    BUFFERED_STREAM = (
        "buffered-stream",
        "stream.buffered",
        "a streaming tool's events are held back and sent at the end",
    )
    BROADCAST_TWO_STREAMS = (
        "broadcast-two-streams",
        "stream.cross-stream-duplicate",
        "progress notifications are sent on the GET stream too",
    )
    DUPLICATE_EVENT_IDS = (
        "duplicate-event-ids",
        "stream.duplicate-event-id",
        "event ids restart at 1 on every stream",
    )
    REPLAY_BEFORE_CURSOR = (
        "replay-before-cursor",
        "stream.resume-replayed-before-cursor",
        "a resumption replays the cursor's own event too",
    )
    TORN_REPLAY_AFTER_EVICTION = (
        "torn-replay-after-eviction",
        "stream.eviction-not-signalled",
        "an evicted cursor gets a fresh stream that looks like a continuation, not a refusal",
    )


FAULTS: dict[str, Fault] = {fault.value: fault for fault in Fault}  # by name, in registry order


class UnknownFault(InputError):
    """A fault name the registry does not know."""


def resolve(names: Iterable[str]) -> frozenset[Fault]:
    """The faults named, or :class:`UnknownFault` naming every unknown one and the known ones."""
    names = tuple(names)
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise UnknownFault(f"unknown fault(s) {', '.join(unknown)} (known: {', '.join(FAULTS)})")
    return frozenset(FAULTS[name] for name in names)
