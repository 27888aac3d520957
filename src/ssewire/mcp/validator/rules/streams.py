"""Streams and resumption: what each response body carried, and what the stream ledger
found across streams (reused event ids, broadcasts, replays, undelivered responses)."""

from __future__ import annotations

from collections.abc import Iterator

from ...._http import JSON, is_success, media_type
from ...checks.findings import Level
from ..model import ExchangeView, Model
from ._registry import GET, MCP_METHODS, POST, Hit, rule

SENDING = "Sending Messages to the Server"
RESUMABILITY = "Resumability and Redelivery"


@rule(
    "invalid_sse_json",
    Level.ERROR,
    "MUST",
    SENDING,
    "put exactly one JSON-RPC message, as JSON, in each SSE event's data",
    on=MCP_METHODS,
)
def invalid_sse_json(x: ExchangeView, m: Model) -> Iterator[Hit]:
    for event, item in x.body.invalid if x.body else ():
        reason = item.reason.split(":", 1)[0] if item.reason.startswith("invalid JSON") else item.reason
        yield Hit(
            f"/response/events/{event}", f"event data ({item.size} bytes) is not a JSON-RPC message: {reason}"
        )


@rule(
    "incomplete_sse_event",
    Level.ERROR,
    "MUST",
    SENDING,
    "end every event with a blank line before the stream ends; a client must drop a torn event",
    on=MCP_METHODS,
)
def incomplete_sse_event(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if x.body is None or x.body.torn is None or (x.ex.response and x.ex.response.truncated):
        return  # a body the recorder cut ends inside an event by its cut: recording_truncated says so
    # A stream that ended inside an event broke the framing; a connection that dropped
    # inside one broke no rule of either side (the recovery line says what to do), but
    # the torn message is still reported.
    dropped = bool(x.ex.response and x.ex.response.disconnected)
    how = "the connection dropped" if dropped else "the stream ended"
    index, discarded = x.body.torn
    yield Hit(
        f"/response/events/{index}",
        f"{how} inside an event: {discarded} bytes never dispatched",
        level=Level.WARNING if dropped else None,
    )


@rule("invalid_json_response", on=MCP_METHODS)
def json_body_is_a_message(x: ExchangeView, m: Model) -> Iterator[Hit]:
    body, resp = x.body, x.ex.response
    if body is None or resp is None or not is_success(resp.status):
        return
    if (
        body.json_unparsable is not None
        and not resp.truncated
        and media_type(resp.headers.get("content-type")) == JSON
    ):
        yield Hit("/response/body", f"the JSON body does not parse ({body.json_unparsable} bytes)")
    for reason in body.json_invalid:
        yield Hit("/response/body", f"not a JSON-RPC message: {reason}")


@rule(
    "recording_truncated",
    Level.INFO,
    "convention",
    "",
    "raise the recorder's limits (ssewire probe --record-max-answer / --record-max-total) to keep whole bodies",
    on=MCP_METHODS,
)
def recording_truncated(x: ExchangeView, m: Model) -> Iterator[Hit]:
    """A body the recorder cut to stay bounded: what was kept is judged, nothing after the cut
    (a torn event at the cut, or a response never seen, is the recorder's, not a fault)."""
    resp = x.ex.response
    if resp is not None and resp.truncated:
        kept = sum(len(c) for c in resp.chunks or ())
        yield Hit(
            "/response/truncated",
            f"the recording keeps the body's first {kept} bytes and left out {resp.truncated} read after them",
        )


@rule(
    "event_id_removed",
    Level.WARNING,
    "SHOULD NOT",
    "Backward Compatibility",
    "this revision has no resumption: SSE event ids have no meaning, leave them out",
    on=MCP_METHODS,
)
def event_id_removed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if x.body is not None and x.body.id_events and not m.profile.resumability:
        yield Hit(
            f"/response/events/{x.body.id_events[0]}",
            f"{len(x.body.id_events)} SSE event id(s) sent; {m.profile.name} has no resumption",
        )


@rule(
    "duplicate_event_id",
    Level.ERROR,
    "MUST",
    RESUMABILITY,
    "make SSE event ids unique across all streams of a session",
    on=MCP_METHODS,
)
def duplicate_event_id(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if x.stream is not None and x.stream.reused_ids and m.profile.resumability:
        yield Hit(
            "/response/events",
            f"{x.stream.reused_ids} SSE event id(s) already used on another stream of the session (values not shown)",
        )


@rule(
    "cross_stream_duplicate",
    Level.ERROR,
    "MUST NOT",
    "Multiple Connections",
    "send each message on exactly one stream; never broadcast it to several",
    on=MCP_METHODS,
)
def cross_stream_duplicate(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if x.stream is None:
        return
    for has_id in (True, False):
        events = x.stream.copies[has_id]
        if events:
            what = "message(s) with a JSON-RPC id" if has_id else "notification(s)"
            yield Hit(
                f"/response/events/{events[0]}",
                f"{len(events)} {what} already sent on another stream",
                level=Level.ERROR if has_id else Level.WARNING,
            )


@rule(
    "last_event_id_on_post",
    Level.WARNING,
    "SHOULD",
    RESUMABILITY,
    "resume a broken stream with GET + Last-Event-ID; a POST is a new request",
    on=POST,
)
def last_event_id_on_post(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if m.profile.resumability and x.ex.request.headers.get("last-event-id") is not None:
        yield Hit(
            "/request/headers/last-event-id", "Last-Event-ID sent on a POST: streams are resumed with GET"
        )


@rule(
    "resumability_removed",
    Level.WARNING,
    "SHOULD NOT",
    "Backward Compatibility",
    "this revision has no stream resumption: re-send the request with a new id instead",
    on=POST + GET,
)
def resumability_removed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not m.profile.resumability and x.ex.request.headers.get("last-event-id") is not None:
        yield Hit(
            "/request/headers/last-event-id",
            f"Last-Event-ID sent, but {m.profile.name} has no stream resumption",
        )


@rule(
    "last_event_id_unknown",
    Level.WARNING,
    "SHOULD",
    RESUMABILITY,
    "resume with the id of the last event this client received on that stream",
    on=GET,
)
def last_event_id_unknown(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if x.stream is None or not x.stream.unknown_resume:
        return
    # an earlier body the recorder cut may hold the id, in what it left out
    if not any(v.ex.response and v.ex.response.truncated for v in m.views[: x.ex.index]):
        yield Hit(
            "/request/headers/last-event-id",
            "Last-Event-ID names no event seen on any earlier stream of this session (value not shown)",
        )


@rule(
    "resume_replayed_before_cursor",
    Level.ERROR,
    "MUST NOT",
    RESUMABILITY,
    "on resumption, replay only the events after Last-Event-ID",
    on=GET,
)
def resume_replayed_before_cursor(x: ExchangeView, m: Model) -> Iterator[Hit]:
    replayed = x.stream.replayed_before if x.stream else []
    if replayed:
        yield Hit(
            f"/response/events/{replayed[0]}",
            f"the resumed stream replayed {len(replayed)} event(s)/message(s) from at or before Last-Event-ID",
        )


@rule(
    "resume_replayed_other_stream",
    Level.ERROR,
    "MUST NOT",
    RESUMABILITY,
    "on resumption, replay only the stream that Last-Event-ID belongs to",
    on=GET,
)
def resume_replayed_other_stream(x: ExchangeView, m: Model) -> Iterator[Hit]:
    replayed = x.stream.replayed_other if x.stream else []
    if replayed:
        yield Hit(
            f"/response/events/{replayed[0]}",
            f"the resumed stream replayed {len(replayed)} event(s)/message(s) of another stream",
        )


@rule(
    "response_not_delivered",
    Level.WARNING,
    "SHOULD",
    SENDING,
    "send the JSON-RPC response on the request's stream before ending it",
    on=POST,
)
def response_not_delivered(x: ExchangeView, m: Model) -> Iterator[Hit]:
    """A POST stream that ended cleanly without its response (after all resumptions).

    2026-07-28: an error (the request is left without an answer). 2025-11-25 lets the
    server close early once it sent an event id (the client polls with GET), so only a
    stream without one is flagged; the older revisions say SHOULD NOT close early.
    """
    body = x.body
    missing = x.awaiting - m.delivered(x) if x.awaiting else set()
    if not missing or body is None or body.invalid or (m.profile.priming and body.last_event_id):
        return  # (an invalid event may have been the response: one finding is enough)
    yield Hit(
        "/response",
        f"the SSE stream ended without the response to {len(missing)} request(s), and no resumption delivered it",
        level=Level.ERROR if m.profile.request_headers else Level.WARNING,
    )
