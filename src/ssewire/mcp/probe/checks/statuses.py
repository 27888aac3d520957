"""2026-07-28: a refusal keeps its HTTP status end to end: a method the server does not
implement is 404 with -32601, a request without its ``_meta`` 400 with -32602. A 200 that
carries the error (an event stream opened before the answer came, as a relay does that
commits to streaming first) hides the refusal from everything that reads statuses.

The -32020 and -32022 refusals have their own diagnostics (``modern.py``), which judge
their status with their code."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.codes import METHOD_NOT_FOUND
from ._intermediary import named_by
from ._plan import Answer, Context, Judged, Received, Step, check
from .meta import REFUSALS

NO_SUCH_METHOD = "probe/no-such-method"  # no server implements it: 404, -32601

diagnostic(
    "modern.error-status",
    Level.ERROR,
    "2026-07-28 (SEP-2575): a method the server does not implement MUST be answered 404 with "
    "-32601, a request missing required _meta 400 with -32602; an intermediary MUST pass the status on",
    typescript="upgrade the SDK to a 2026-07-28 transport; a proxy in front relays the upstream's status and body as they came",
    python="upgrade the mcp package to a 2026-07-28 transport; a proxy in front relays the upstream's status and body as they came",
    plain="answer an unknown or removed method 404 with -32601 and a missing _meta 400 with -32602; "
    "a relay waits for the upstream's status before it opens its own stream",
)


def _how(answer: Received) -> str:
    return (
        "as an event stream" if answer.is_sse else "as JSON" if answer.json is not None else "without a body"
    )


def _evidence(answer: Received) -> dict[str, Any]:
    return {**answer.evidence(), "intermediary": named_by(answer.headers) or "none named"}


def judge_unknown_method(answer: Received) -> Judged:
    """An unknown method: 404 with -32601."""
    code = answer.error_code()
    if answer.status == 404 and code == METHOD_NOT_FOUND:
        return Judged(Status.PASS, "an unknown method is answered 404 with -32601", {})
    if answer.succeeded and code is not None:
        message = f"an unknown method's error ({code}) came with {answer.status} {_how(answer)}, not 404"
    elif answer.succeeded:
        message = f"an unknown method was served ({answer.status}), not answered 404 with -32601"
    else:
        shown = f"{answer.status or answer.error}" + (f" with {code}" if code is not None else "")
        message = f"an unknown method was answered {shown}, not 404 with -32601"
    return Judged(Status.DETECTED, message, _evidence(answer))


def judge_refusal_status(answer: Received) -> Judged | None:
    """A -32602 refusal of a request without its _meta: 400 (None when it was not refused,
    which ``modern.meta-required`` reports)."""
    code = answer.error_code()
    if code is None or answer.status is None:
        return None
    if answer.status == 400:
        return Judged(Status.PASS, "a request without _meta is refused with 400", {})
    return Judged(
        Status.DETECTED,
        f"a request without _meta was refused ({code}) with {answer.status} {_how(answer)}, not 400",
        _evidence(answer),
    )


@check("modern.error-status")
def error_status(ctx: Context) -> Generator[Step, Answer, None]:
    if not ctx.modern:
        ctx.not_checked(
            "modern.error-status", f"the server speaks {ctx.version}: 2026-07-28 checks do not apply"
        )
        return
    unknown = yield ctx.request(NO_SUCH_METHOD, name="unknown-method", conforming=False)
    assert isinstance(unknown, Received)
    judged = [judge_unknown_method(unknown)]
    for answer in ctx.received:
        if answer.send.name in REFUSALS:
            verdict = judge_refusal_status(answer)
            if verdict is not None:
                judged.append(verdict)
    failed = [v for v in judged if v.status != Status.PASS]
    if failed:
        ctx.verdict("modern.error-status", Status.DETECTED, failed[0].message, failed[0].evidence)
    else:
        ctx.passed("modern.error-status", "; ".join(dict.fromkeys(v.message for v in judged)))
