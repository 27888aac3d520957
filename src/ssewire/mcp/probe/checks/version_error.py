"""2026-07-28: a -32022 (unsupported protocol version) says what the server speaks instead:
``error.data.supported`` lists its versions, ``error.data.requested`` echoes the one asked
for, so a client can retry under one of them. Judged on the answer ``modern.py`` received
to its request under a version no server has."""

from __future__ import annotations

from typing import Any

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.codes import UNSUPPORTED_VERSION
from ._plan import Context, Judged, Received, check
from .modern import NO_SUCH_REVISION, UNSUPPORTED

diagnostic(
    "modern.unsupported-version-data",
    Level.ERROR,
    "2026-07-28 Request Metadata > Protocol Version Header: an UnsupportedProtocolVersionError "
    "(-32022) MUST carry data.supported (the versions the server speaks) and data.requested",
    typescript="upgrade the SDK; a proxy in front relays the error body as it came",
    python="upgrade the mcp package; a proxy in front relays the error body as it came",
    plain='answer -32022 with "data": {"supported": [the versions you speak], "requested": the version asked for}',
)


def judge_version_error(answer: Received, version: str) -> Judged | None:
    """The -32022's data (None: no -32022 came, ``modern.unsupported-version-32022`` says so)."""
    ident = answer.send.body.get("id") if isinstance(answer.send.body, dict) else None
    reply = answer.answer(ident)
    error = reply.get("error") if reply is not None else None
    if not isinstance(error, dict) or error.get("code") != UNSUPPORTED_VERSION:
        return None
    data: Any = error.get("data")
    data = data if isinstance(data, dict) else {}
    supported, requested = data.get("supported"), data.get("requested")
    wrong = []
    if not (isinstance(supported, list) and supported and all(isinstance(v, str) for v in supported)):
        wrong.append(
            "data.supported is "
            + ("missing" if supported is None else f"not a list of versions ({supported!r:.60})")
        )
    elif version not in supported:
        wrong.append(f"data.supported ({', '.join(supported)[:80]}) leaves out {version}, which it speaks")
    if requested != NO_SUCH_REVISION:
        wrong.append(
            "data.requested is "
            + ("missing" if requested is None else f"{requested!r:.40}, not {NO_SUCH_REVISION}")
        )
    evidence = {**answer.evidence(), "data": data or None}
    if wrong:
        return Judged(Status.DETECTED, "the -32022 refusal's " + "; ".join(wrong), evidence)
    return Judged(
        Status.PASS,
        f"the -32022 refusal names the versions supported ({', '.join(supported)[:80]}) and the one requested",
        {},
    )


@check("modern.unsupported-version-data")
def version_error_data(ctx: Context) -> None:
    if not ctx.modern:
        ctx.not_checked(
            "modern.unsupported-version-data",
            f"the server speaks {ctx.version}: 2026-07-28 checks do not apply",
        )
        return
    answers = [a for a in ctx.received if a.send.name == UNSUPPORTED]
    verdict = judge_version_error(answers[-1], ctx.version) if answers else None
    if verdict is None:
        ctx.not_checked(
            "modern.unsupported-version-data",
            "no -32022 came to judge (see modern.unsupported-version-32022)",
        )
    elif verdict.status == Status.PASS:
        ctx.passed("modern.unsupported-version-data", verdict.message)
    else:
        ctx.verdict("modern.unsupported-version-data", verdict.status, verdict.message, verdict.evidence)
