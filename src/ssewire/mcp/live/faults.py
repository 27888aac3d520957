"""The reference server's faults: each breaks exactly one behaviour, and names the probe
diagnostic that must find it (the tests iterate this registry, so a fault cannot land
without the check that catches it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..._errors import InputError


@dataclass(frozen=True)
class Fault:
    name: str
    diagnostic: str  # the probe diagnostic id this fault must trigger, and no other
    breaks: str  # what the server does wrong


_ALL = [
    Fault(
        "strict-accept",
        "transport.accept-header-406",
        "406 for any Accept but the exact string 'application/json, text/event-stream'",
    ),
    Fault("no-get", "transport.get-stream-405", "answers the optional GET stream with 405"),
    Fault(
        "strict-content-type",
        "transport.unsupported-media-type-415",
        "415 for a Content-Type with parameters or in another letter case",
    ),
    Fault("rate-limit-burst", "transport.target-rate-limited-429", "answers the first tools/list with 429"),
    Fault(
        "missing-expose-headers",
        "transport.cors-expose-headers-missing",
        "cross-origin answers without Access-Control-Expose-Headers",
    ),
    Fault(
        "wrong-content-type",
        "transport.sse-content-type-mismatch",
        "SSE answers labelled text/plain",
    ),
    Fault(
        "output-schema-violation",
        "tool.output-contract-violation",
        "the structured tool's result breaks its outputSchema",
    ),
    Fault("unknown-session-400", "session.unknown-id", "a never-issued session id is answered 400, not 404"),
    Fault("stale-session-accepted", "session.unknown-id", "a session id it never issued is accepted"),
    Fault("delete-not-invalidating", "session.delete", "DELETE answers 200 but the session lives on"),
    Fault("origin-ignored", "security.dns-rebinding", "neither Origin nor Host is validated"),
    Fault("no-keepalives", "stream.keepalive-missing", "no keep-alive comments on an idle GET stream"),
    Fault(
        "buffered-stream", "stream.buffered", "a streaming tool's events are held back and sent at the end"
    ),
    Fault(
        "broadcast-two-streams",
        "stream.cross-stream-duplicate",
        "progress notifications are sent on the GET stream too",
    ),
    Fault("duplicate-event-ids", "stream.duplicate-event-id", "event ids restart at 1 on every stream"),
    Fault(
        "replay-before-cursor",
        "stream.resume-replayed-before-cursor",
        "a resumption replays the cursor's own event too",
    ),
    Fault(
        "torn-replay-after-eviction",
        "stream.eviction-not-signalled",
        "an evicted cursor gets a fresh stream that looks like a continuation, not a refusal",
    ),
]

FAULTS: dict[str, Fault] = {fault.name: fault for fault in _ALL}


class UnknownFault(InputError):
    """A fault name the registry does not know."""


def resolve(names: list[str] | tuple[str, ...]) -> frozenset[str]:
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise UnknownFault(f"unknown fault(s) {', '.join(unknown)} (known: {', '.join(FAULTS)})")
    return frozenset(names)
