"""Last: what the whole probe saw. Content types and 429s over every answer, and the
stream rules judged by the transcript validator on the recording of the conforming
exchanges (so the probe and ``ssewire validate`` agree where both can see a fault)."""

from __future__ import annotations

from ...._http import media_type
from ...checks.catalogue import DIAGNOSTICS, diagnostic
from ...checks.findings import Level, Status
from ...protocol.wire import JSON, SSE
from ...transcript import from_document
from ...validator.validate import validate
from ._plan import Context, check

diagnostic(
    "transport.sse-content-type-mismatch",
    Level.ERROR,
    "Sending Messages to the Server: MUST (application/json or text/event-stream)",
    typescript="do not override the Content-Type the transport sets",
    python="do not wrap the app in middleware that rewrites Content-Type",
    plain="label SSE answers text/event-stream and JSON answers application/json",
)


diagnostic(
    "transport.target-rate-limited-429",
    Level.WARNING,
    "convention",
    typescript="raise the rate limit for the probe's address or exempt 127.0.0.1",
    python="raise the rate limit for the probe's address or exempt 127.0.0.1",
    plain="send Retry-After with every 429; exempt health and conformance checks",
)


@check("transport.sse-content-type-mismatch", "transport.target-rate-limited-429")
def what_came_back(ctx: Context) -> None:
    """Judged over every answer of the probe (so it runs after the other checks)."""
    wrong = []
    for answer in ctx.received:
        if not answer.succeeded or answer.status == 202:
            continue
        ctype = media_type(answer.headers.get("content-type"))
        looks_sse = bool(answer.items) and answer.json is None
        if (looks_sse and ctype != SSE) or (answer.send.method == "POST" and ctype not in (JSON, SSE)):
            wrong.append(answer.evidence())
    if wrong:
        ctx.verdict(
            "transport.sse-content-type-mismatch",
            Status.DETECTED,
            f"{len(wrong)} successful answer(s) with the wrong Content-Type",
            {"answers": wrong[:3]},
        )
    else:
        ctx.passed(
            "transport.sse-content-type-mismatch",
            "every successful answer is labelled application/json or text/event-stream",
        )
    if ctx.rate_limited:
        ctx.verdict(
            "transport.target-rate-limited-429",
            Status.DETECTED,
            f"the target answered 429 {len(ctx.rate_limited)} time(s)",
            {"answers": ctx.rate_limited},
        )
    else:
        ctx.passed("transport.target-rate-limited-429", "no 429 from the target")


diagnostic(
    "stream.duplicate-event-id",
    Level.ERROR,
    "Resumability and Redelivery: MUST be unique across the session's streams",
    typescript="let the eventStore generate ids (e.g. streamId + counter)",
    python="make the EventStore's ids unique per session, not per stream",
    plain="prefix event ids with the stream, or use a session-wide counter",
    judged_by="duplicate_event_id",
)


diagnostic(
    "stream.cross-stream-duplicate",
    Level.ERROR,
    "Multiple Connections: MUST NOT broadcast one message on several streams",
    typescript="send related notifications with relatedRequestId so they go to one stream",
    python="send notifications through the request's context, not the session broadcast",
    plain="route each message to exactly one stream",
    judged_by="cross_stream_duplicate",
)


diagnostic(
    "stream.resume-replayed-before-cursor",
    Level.ERROR,
    "Resumability and Redelivery: MUST NOT replay events at or before Last-Event-ID",
    typescript="replayEventsAfter must start strictly after the given id",
    python="replay_events_after must start strictly after the given id",
    plain="replay only events with a position greater than the cursor's",
    judged_by="resume_replayed_before_cursor",
)


diagnostic(
    "stream.resume-replayed-other-stream",
    Level.ERROR,
    "Resumability and Redelivery: MUST NOT replay another stream's messages",
    typescript="replay only the stream the event id belongs to",
    python="replay only the stream the event id belongs to",
    plain="map each event id to its stream and replay that stream only",
    judged_by="resume_replayed_other_stream",
)


# validator code -> the probe diagnostic it answers, as the entries above declare
FROM_VALIDATOR = {e.judged_by: e.id for e in DIAGNOSTICS.values() if e.judged_by is not None}


@check(*FROM_VALIDATOR.values())
def recorded_streams(ctx: Context) -> None:
    if ctx.recording is None:
        for ident in FROM_VALIDATOR.values():
            ctx.not_checked(ident, "nothing was recorded")
        return
    result = validate(from_document(ctx.recording()), ctx.version)
    for finding in result.findings:
        diagnostic = FROM_VALIDATOR.get(finding.code)
        if diagnostic is not None:
            evidence = {"exchange": finding.exchange, "path": finding.path}
            ctx.verdict(diagnostic, Status.DETECTED, finding.message, evidence, level=Level(finding.level))
    resumed = any(
        "last-event-id" in {k.lower() for k in a.send.headers} and a.status == 200 for a in ctx.received
    )
    streams_with_ids = sum(1 for a in ctx.received if a.is_sse and any(i.event_id for i in a.items))
    for ident in FROM_VALIDATOR.values():
        if ident.startswith("stream.resume") and not resumed:
            ctx.not_checked(ident, "no resumption was served")
        elif ident == "stream.duplicate-event-id" and streams_with_ids < 2:
            ctx.not_checked(ident, "fewer than two streams carried event ids")
        else:
            ctx.passed(ident, "the validator found no such fault in the recording")
