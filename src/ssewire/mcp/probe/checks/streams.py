"""Streams: priming, liveness on an idle GET stream, buffering, broadcasts, and what a
resumption delivers after a cut (the exact rest, or an explicit refusal)."""

from __future__ import annotations

import itertools
from collections.abc import Generator
from typing import Any

from ....jsonrpc import Kind, Message, OtherEvent, Priming
from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.reissue import PROGRESS
from ._intermediary import ending
from ._plan import Answer, Context, Received, Step, Together, check

# Seconds without a keep-alive that fail the check even on a stream that ended early: the
# low end of common proxies' idle timeouts (30-60 s).
LONG_SILENCE = 30.0


diagnostic(
    "stream.priming-missing",
    Level.WARNING,
    "Sending Messages to the Server (2025-11-25): SHOULD prime with an event id and empty data",
    typescript="configure an eventStore so the transport primes and resumes streams",
    python="pass an event_store to the session manager",
    plain="start every SSE answer with 'id: <id>' and an empty data line (and retry)",
)


@check("stream.priming-missing")
def priming(ctx: Context) -> None:
    """2025-11-25: a server that resumes streams (it sends event ids) opens each SSE answer to
    a POST with an event id and empty data, so a cut before the first message can resume
    (judged over the answers so far, so it runs after the handshake)."""
    if ctx.conversation is None or not ctx.conversation.priming:
        ctx.passed("stream.priming-missing", f"not applicable: {ctx.version} has no priming events")
        return
    streams = [a for a in ctx.received if a.send.method == "POST" and a.status == 200 and a.is_sse]
    if not any(i.event_id for a in ctx.received if a.is_sse for i in a.items):
        ctx.passed("stream.priming-missing", "not applicable: the server sends no event ids (no resumption)")
        return
    unprimed = [
        a for a in streams if not (a.items and isinstance(a.items[0], Priming) and a.items[0].event_id)
    ]
    if not streams:
        ctx.not_checked("stream.priming-missing", "no SSE answer to a POST to judge")
    elif unprimed:
        ctx.verdict(
            "stream.priming-missing",
            Status.DETECTED,
            f"{len(unprimed)} of {len(streams)} SSE answers open without an event id and empty data",
            unprimed[0].evidence(),
        )
    else:
        retry = sum(a.retry is not None for a in streams)
        ctx.passed(
            "stream.priming-missing",
            f"{len(streams)} SSE answers open with a priming event ({retry} with retry)",
        )


diagnostic(
    "stream.keepalive-missing",
    Level.WARNING,
    "convention (proxies close idle connections, often after 30-60 s)",
    typescript="send a comment (': keep-alive') on open SSE streams every 15 s",
    python="wrap the stream with periodic comments (sse-starlette ping)",
    plain="write ': keep-alive' comments while a stream is idle",
)


diagnostic(
    "stream.idle-closed",
    Level.WARNING,
    "Listening for Messages from the Server: the GET stream stays open (convention: until the client leaves)",
    typescript="do not time out the standalone stream; behind a proxy, send keep-alives more often than its idle timeout",
    python="raise the server's and proxy's idle timeouts for the MCP endpoint (nginx: proxy_read_timeout, 60 s by default)",
    plain="keep the GET stream open while idle, with keep-alive comments more often than any proxy's idle timeout",
)


@check("stream.keepalive-missing", "stream.idle-closed", needs=("get_stream",))
def idle_stream(ctx: Context) -> Generator[Step, Answer, None]:
    """Watch an idle GET stream: does it stay open, and do keep-alives come? A stream ended by
    a transport error is a close too (a proxy's idle timeout cuts the connection), with its
    time; who ended it is said where the answer shows it (``_intermediary.ending``)."""
    if ctx.modern or ctx.learned.get_stream is not True:
        for ident in ("stream.keepalive-missing", "stream.idle-closed"):
            ctx.not_checked(ident, "no GET stream to watch")
        return
    answer = yield ctx.listen(name="idle-listen", read_for=ctx.idle_check)
    assert isinstance(answer, Received)
    lifetime = answer.lifetime
    times = [0.0, *answer.comment_times]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(times)]
    interval = max(gaps) if gaps else None  # the longest silence the server leaves between keep-alives
    end = ending(answer, interval)
    figures = ctx.figures
    figures.get_stream_uptime_s = round(lifetime, 3)
    figures.keepalive_gaps_s = gaps
    figures.keepalive_interval_s = interval
    if interval:
        figures.keepalive_intervals_lived = round(lifetime / interval, 2)
    figures.get_stream_end = end.summary if end else f"open when the {ctx.idle_check:g} s watch ended"
    if end is not None and end.silence is not None:
        figures.get_stream_silence_at_end_s = round(end.silence, 3)
    if end is not None:
        ctx.verdict(
            "stream.idle-closed",
            Status.DETECTED,
            f"the idle GET stream was {end.summary}",
            {
                **answer.evidence(),
                "ended_by": end.by,
                "rests_on": end.rests_on,
                "lifetime_s": round(lifetime, 3),
                "silence_before_end_s": None if end.silence is None else round(end.silence, 3),
                "keepalive_interval_s": interval,
            },
        )
    else:
        ctx.passed("stream.idle-closed", f"the GET stream stayed open for {lifetime:.1f} s")
    if answer.comment_times:
        ctx.passed(
            "stream.keepalive-missing",
            f"{len(answer.comment_times)} keep-alive comment(s) in {lifetime:.1f} s (gaps {gaps})",
        )
    elif end is None or lifetime >= LONG_SILENCE:
        ctx.verdict(
            "stream.keepalive-missing",
            Status.DETECTED,
            f"no keep-alive comment in {lifetime:.1f} s on an idle GET stream",
            {"gaps_s": gaps, "lifetime_s": round(lifetime, 3)},
        )
    else:  # it ended before a keep-alive was due by the usual intervals: not seen, inferred
        ctx.verdict(
            "stream.keepalive-missing",
            Status.SUSPECTED,
            f"no keep-alive comment in the {lifetime:.1f} s the idle GET stream lived ({end.summary}): "
            "too short to say none come; to stay open it needs one sooner (stream.idle-closed)",
            {"gaps_s": gaps, "lifetime_s": round(lifetime, 3), "ended_by": end.by},
        )


diagnostic(
    "stream.buffered",
    Level.WARNING,
    "convention (events must reach the client as they are sent)",
    typescript="disable response compression and buffering on the SSE route",
    python="disable GZipMiddleware on the endpoint; send X-Accel-Buffering: no behind nginx",
    plain="flush after each event; no compression or proxy buffering on text/event-stream",
)


@check("stream.buffered", needs=("full_run",))
def buffering(ctx: Context) -> None:
    """Suspected when a streaming tool's progress arrives bunched at the end of its answer."""
    run = ctx.learned.full_run
    if run is None:
        ctx.not_checked("stream.buffered", "no allowed tool streams progress (--call-tools)")
        return
    times = [t for item, t in zip(run.items, run.arrivals, strict=True) if _is_progress(item)]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(times)]
    ctx.figures.progress_gaps_s = gaps
    spread = times[-1] - times[0]
    if run.duration > 0.3 and times[0] > 0.5 * run.duration and spread < 0.1 * run.duration:
        ctx.verdict(
            "stream.buffered",
            Status.SUSPECTED,
            f"{len(times)} progress notifications arrived within {spread * 1000:.0f} ms at the end of a {run.duration:.2f} s answer",
            run.evidence(),
        )
    else:
        ctx.passed(
            "stream.buffered", f"{len(times)} progress notifications arrived as sent (spread {spread:.2f} s)"
        )


@check(needs=("full_run", "get_stream"))  # reports nothing itself
def while_listening(ctx: Context) -> Generator[Step, Answer, None]:
    """A streaming call while the GET stream is open: the recording shows where each message
    went (the verdict comes from the validator, in the wrap-up)."""
    run = ctx.learned.full_run
    if ctx.modern or run is None or ctx.learned.get_stream is not True:
        return
    listen = ctx.listen(name="listen-during-call", read_for=run.duration + 1.0)
    call = ctx.request("tools/call", _progress_call(ctx, "listening"), name="call-while-listening")
    yield Together([listen, call], [0.0, 0.3])


diagnostic(
    "stream.eviction-not-signalled",
    Level.ERROR,
    "Resumability and Redelivery: a resumed stream continues the original (convention: refuse explicitly when it cannot)",
    typescript="when the cursor was evicted, answer an error instead of replaying a gap",
    python="when the cursor was evicted, answer an error instead of replaying a gap",
    plain="answer 409 with Retry-After (or an SSE error event) when the events after the cursor are gone",
)


@check("stream.eviction-not-signalled", needs=("full_run",))
def resumption(ctx: Context) -> Generator[Step, Answer, None]:
    """Cut the streaming tool's answer early and late, resume each with Last-Event-ID: the
    resumed stream must deliver exactly the rest, or refuse explicitly."""
    run = ctx.learned.full_run
    if ctx.modern or run is None:
        why = (
            "2026-07-28 has no resumption"
            if ctx.modern
            else "no allowed tool streams progress (--call-tools)"
        )
        ctx.not_checked("stream.eviction-not-signalled", why)
        return
    full = [_shape(p) for p in run.messages]
    outcomes = []
    for where, cut in (("early", 3), ("late", max(3, len(run.items) - 2))):
        answer = yield ctx.request(
            "tools/call", _progress_call(ctx, where), name=f"cut-{where}", stop_after=cut
        )
        assert isinstance(answer, Received)
        cursor = next((i.event_id for i in reversed(answer.items) if i.event_id), None)
        if cursor is None or answer.ended_by_server:
            ctx.not_checked(
                "stream.eviction-not-signalled", "the tool's answer carries no event id to resume from"
            )
            return
        got = len(answer.messages)
        resume = ctx.listen(name=f"resume-{where}", read_for=run.duration + 2.0, last_event_id=cursor)
        resume.delay = run.duration + 0.2  # the tool has finished: evicted events are gone by now
        resumed = yield resume
        assert isinstance(resumed, Received)
        if resumed.status == 405:
            ctx.not_checked(
                "stream.eviction-not-signalled", "GET is answered 405: there is no stream to resume on"
            )
            return
        refused = resumed.status in (409, 410, 404, 400) or any(
            isinstance(i, OtherEvent) and i.event_type == "error" for i in resumed.items
        )
        rest = [_shape(p) for p in resumed.messages]
        outcomes.append((where, refused, _continues(rest, full, got), resumed))
    # Only the early cut can meet an evicted store; the late one is for the replay rules,
    # which the validator judges on the recording.
    bad = [(w, r) for w, refused, exact, r in outcomes if w == "early" and not refused and not exact]
    if bad:
        where, resumed = bad[0]
        ctx.verdict(
            "stream.eviction-not-signalled",
            Status.DETECTED,
            f"the {where} resumption was answered {resumed.status} with a stream that is not the rest of the original",
            resumed.evidence(),
        )
    else:
        said = ", ".join(
            f"{w}: {'refused explicitly' if refused else 'the exact rest'}" for w, refused, _, _ in outcomes
        )
        ctx.passed("stream.eviction-not-signalled", f"resumptions after a cut ({said})")


def _continues(rest: list[Any], full: list[Any], got: int) -> bool:
    """Whether a resumed stream is the original's rest after its first ``got`` messages,
    maybe after a replay of some of those: one from at or before the cursor is
    ``stream.resume-replayed-before-cursor``'s finding (the validator's, on the recording),
    not a sign of eviction, whether or not the cursor was evicted by then."""
    return any(rest == full[start:] for start in range(got, -1, -1))


def _progress_call(ctx: Context, token: str) -> dict[str, Any]:
    """Each call its own progressToken: equal messages on two streams would be a broadcast."""
    return {"name": ctx.streaming_tool, "arguments": {}, "_meta": {"progressToken": f"probe-{token}"}}


def _is_progress(item: object) -> bool:
    return isinstance(item, Message) and item.kind == Kind.NOTIFICATION and item.method == PROGRESS


def _shape(message: Any) -> Any:
    """A message without what differs between two calls of one tool: the JSON-RPC id and
    the progress token."""
    if not isinstance(message, dict):
        return message
    if "method" not in message:
        return {k: v for k, v in message.items() if k != "id"}
    params = message.get("params")
    if isinstance(params, dict) and "progressToken" in params:
        return {**message, "params": {k: v for k, v in params.items() if k != "progressToken"}}
    return message
