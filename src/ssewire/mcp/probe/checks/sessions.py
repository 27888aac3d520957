"""Sessions (2025 revisions): a missing id gets 400, an unknown one 404, a new initialize a
new session, the id holds on every request, and DELETE ends it. A stateless server (no
Mcp-Session-Id at initialize) passes them all as not applicable."""

from __future__ import annotations

import uuid
from collections.abc import Generator

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.requests import delete_headers
from ...protocol.wire import PROTOCOL_VERSION, SESSION_ID
from ._plan import CLIENT_INFO, Answer, Context, Received, Send, Step, Together, check

diagnostic(
    "session.missing-id",
    Level.WARNING,
    "Session Management: SHOULD (400 for a request without Mcp-Session-Id)",
    typescript="use the SDK's session handling (sessionIdGenerator) and let it answer 400",
    python="use StreamableHTTPSessionManager; it answers 400 without a session id",
    plain="answer 400 to a non-initialize request without Mcp-Session-Id",
)


diagnostic(
    "session.unknown-id",
    Level.ERROR,
    "Session Management: MUST (404 for a session that is not, or no longer, valid)",
    typescript="look the id up in your session map and answer 404 when it is missing",
    python="use StreamableHTTPSessionManager; it answers 404 for unknown ids",
    plain="answer 404 for an Mcp-Session-Id this server never issued or has ended",
)


diagnostic(
    "session.reinitialize",
    Level.ERROR,
    "Session Management: MUST (a client whose session ended starts a new one with initialize)",
    typescript="create a new transport for every initialize without a session id",
    python="do not keep one session per process: each initialize gets its own",
    plain="accept initialize without Mcp-Session-Id at any time and assign a fresh id",
)


diagnostic(
    "session.stickiness",
    Level.ERROR,
    "Session Management: the session id is honoured on every request",
    typescript="share the session map across workers (or pin clients to one worker)",
    python="run one worker, or share session state across workers",
    plain="store sessions where every replica behind the load balancer can find them",
)


diagnostic(
    "session.delete",
    Level.ERROR,
    "Session Management: MUST (a terminated session answers 404)",
    typescript="close and forget the transport on DELETE",
    python="use StreamableHTTPSessionManager's DELETE handling",
    plain="on DELETE, end the session so later requests with its id get 404 (or answer DELETE 405)",
)


SESSION_IDS = (
    "session.missing-id",
    "session.unknown-id",
    "session.reinitialize",
    "session.stickiness",
    "session.delete",
)


def _stateless(ctx: Context) -> bool:
    if ctx.modern or ctx.session is None:
        why = "2026-07-28 has no sessions" if ctx.modern else "the server is stateless (no Mcp-Session-Id)"
        for ident in SESSION_IDS:
            ctx.passed(ident, f"not applicable: {why}")
        return True
    return False


@check("session.missing-id", "session.unknown-id")
def missing_and_unknown(ctx: Context) -> Generator[Step, Answer, None]:
    if _stateless(ctx):
        return
    send = ctx.request("tools/list", name="no-session", conforming=False)
    del send.headers[SESSION_ID]
    missing = yield send
    assert isinstance(missing, Received)
    if missing.status == 400:
        ctx.passed("session.missing-id", "a request without Mcp-Session-Id is answered 400")
    else:
        ctx.verdict(
            "session.missing-id",
            Status.DETECTED,
            f"a request without Mcp-Session-Id was answered {missing.status}, not 400",
            missing.evidence(),
        )
    send = ctx.request("tools/list", name="unknown-session", conforming=False)
    send.headers[SESSION_ID] = uuid.uuid4().hex  # never issued by this server
    unknown = yield send
    assert isinstance(unknown, Received)
    if unknown.status == 404:
        ctx.passed("session.unknown-id", "a never-issued session id is answered 404")
    else:
        ctx.verdict(
            "session.unknown-id",
            Status.DETECTED,
            f"a never-issued session id was answered {unknown.status}, not 404",
            unknown.evidence(),
        )


@check("session.stickiness")
def stickiness(ctx: Context) -> Generator[Step, Answer, None]:
    if ctx.modern or ctx.session is None:
        return
    if not ctx.session_resilience:
        ctx.not_checked(
            "session.stickiness", "run with --session-resilience (8 sequential and 4 parallel pings)"
        )
        return
    failed = []
    for n in range(8):
        answer = yield ctx.request("tools/list", name=f"sticky-{n + 1}")
        assert isinstance(answer, Received)
        if answer.status != 200:
            failed.append(answer.evidence())
    parallel = yield Together(
        [ctx.request("tools/list", name=f"sticky-parallel-{n + 1}") for n in range(4)], [0.0] * 4
    )
    assert isinstance(parallel, list)
    failed += [a.evidence() for a in parallel if a.status != 200]
    if failed:
        ctx.verdict(
            "session.stickiness",
            Status.DETECTED,
            f"{len(failed)} of 12 pings in the session failed",
            {"failed": failed[:3]},
        )
    else:
        ctx.passed("session.stickiness", "12 pings (8 sequential, 4 parallel) were all served in the session")


@check("session.reinitialize", "session.delete")
def reinitialize_then_delete(ctx: Context) -> Generator[Step, Answer, None]:
    """A second session, opened and then ended: the probe's own session stays untouched."""
    if ctx.modern or ctx.session is None:
        return
    send = ctx.request(
        "initialize",
        {"protocolVersion": ctx.version, "capabilities": {}, "clientInfo": CLIENT_INFO},
        name="reinitialize",
    )
    for header in (SESSION_ID, PROTOCOL_VERSION):
        send.headers.pop(header, None)
    again = yield send
    assert isinstance(again, Received)
    second = again.headers.get("mcp-session-id")
    if again.status != 200 or second is None or second == ctx.session:
        ctx.verdict(
            "session.reinitialize",
            Status.DETECTED,
            f"a new initialize was answered {again.status} without a fresh session id",
            again.evidence(),
        )
        ctx.not_checked("session.delete", "no second session to end")
        return
    ctx.passed("session.reinitialize", "a new initialize opens a new session")
    deleted = yield Send("DELETE", delete_headers(ctx.conversation, second), name="delete")
    assert isinstance(deleted, Received)
    if deleted.status == 405:
        ctx.passed(
            "session.delete", "DELETE is answered 405: the server does not let clients end sessions (MAY)"
        )
        return
    after = ctx.request("tools/list", name="after-delete")
    after.headers[SESSION_ID] = second
    later = yield after
    assert isinstance(later, Received)
    if not deleted.succeeded:
        ctx.not_checked("session.delete", f"DELETE was answered {deleted.status}")
    elif later.succeeded:
        ctx.verdict(
            "session.delete",
            Status.DETECTED,
            f"DELETE was answered {deleted.status}, but the session still answers {later.status}",
            later.evidence(),
        )
    else:
        # which 4xx an ended session gets is session.unknown-id's question
        ctx.passed("session.delete", f"after DELETE the session is no longer served ({later.status})")
