"""2026-07-28: every request carries its ``_meta`` (the protocol version and the client's
capabilities); a request without it is refused with -32602 (its 400 is judged with the
other statuses, ``statuses.py``). A server that serves one, or an intermediary that fills
``_meta`` in on the client's behalf, is at fault."""

from __future__ import annotations

from collections.abc import Generator

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.codes import INVALID_PARAMS
from ...protocol.wire import META_VERSION
from ._plan import Answer, Context, Judged, Received, Send, Step, check

META_MISSING = "meta-missing"  # no _meta at all
META_INCOMPLETE = "meta-without-capabilities"  # _meta without clientCapabilities
REFUSALS = (META_MISSING, META_INCOMPLETE)  # the requests statuses.py judges the status of

diagnostic(
    "modern.meta-required",
    Level.ERROR,
    "2026-07-28 Request Metadata (SEP-2575): a request without _meta protocolVersion and "
    "clientCapabilities MUST be refused with -32602 (400); an intermediary MUST NOT fill them in",
    typescript="upgrade the SDK to a 2026-07-28 transport; in front of it, relay the body as it came",
    python="upgrade the mcp package to a 2026-07-28 transport; in front of it, relay the body as it came",
    plain="refuse a request whose params._meta lacks io.modelcontextprotocol/protocolVersion or "
    "clientCapabilities with 400 and -32602 (clientInfo stays optional); a relay forwards the body unchanged",
)


def judge_refusal(answer: Received, what: str) -> Judged:
    """A request missing ``what`` must come back as a -32602 error (any status here)."""
    ident = answer.send.body.get("id") if isinstance(answer.send.body, dict) else None
    reply = answer.answer(ident)
    error = reply.get("error") if reply is not None else None
    code = error.get("code") if isinstance(error, dict) else None
    if code == INVALID_PARAMS:
        return Judged(Status.PASS, f"a request without {what} is refused with -32602", {})
    if reply is not None and "result" in reply:
        message = (
            f"a request without {what} was served ({answer.status}): the server does not require it, "
            "or an intermediary filled it in"
        )
    elif code is not None:
        message = f"a request without {what} was refused with {code}, not -32602"
    else:
        message = (
            f"a request without {what} was answered {answer.status or answer.error} without a JSON-RPC error"
        )
    return Judged(Status.DETECTED, message, answer.evidence())


@check("modern.meta-required")
def meta_required(ctx: Context) -> Generator[Step, Answer, None]:
    if not ctx.modern:
        ctx.not_checked(
            "modern.meta-required", f"the server speaks {ctx.version}: 2026-07-28 checks do not apply"
        )
        return
    missing = Send(
        "POST",
        ctx.headers("tools/list"),
        {"jsonrpc": "2.0", "id": ctx.ident(), "method": "tools/list"},
        name=META_MISSING,
        conforming=False,
    )
    incomplete = Send(
        "POST",
        ctx.headers("tools/list"),
        {
            "jsonrpc": "2.0",
            "id": ctx.ident(),
            "method": "tools/list",
            "params": {"_meta": {META_VERSION: ctx.version}},
        },
        name=META_INCOMPLETE,
        conforming=False,
    )
    verdicts = []
    for send, what in ((missing, "_meta"), (incomplete, "_meta clientCapabilities")):
        answer = yield send
        assert isinstance(answer, Received)
        verdicts.append(judge_refusal(answer, what))
    failed = [v for v in verdicts if v.status != Status.PASS]
    if failed:
        ctx.verdict("modern.meta-required", Status.DETECTED, failed[0].message, failed[0].evidence)
    else:
        ctx.passed(
            "modern.meta-required",
            "requests without _meta, or without its clientCapabilities, are refused with -32602",
        )
