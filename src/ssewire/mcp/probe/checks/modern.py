"""2026-07-28: GET and DELETE answered 405, the request headers checked against the body
(400, -32020), unknown revisions refused (400, -32022), and the removed headers ignored."""

from __future__ import annotations

import uuid
from collections.abc import Generator

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ...protocol.wire import LAST_EVENT_ID, META_VERSION, METHOD, PROTOCOL_VERSION, SESSION_ID, SSE
from ._plan import Answer, Context, Received, Send, Step, check

NO_SUCH_REVISION = "2099-01-01"  # no revision has it: a server must refuse it (-32022)
UNSUPPORTED = "unsupported-version"  # the request under it (version_error.py judges its data)

diagnostic(
    "modern.get-delete-405",
    Level.ERROR,
    "2026-07-28 Backward Compatibility: GET and DELETE are answered 405",
    typescript="upgrade the SDK to a 2026-07-28 transport",
    python="upgrade the mcp package to a 2026-07-28 transport",
    plain="answer GET and DELETE on the MCP endpoint with 405",
)


diagnostic(
    "modern.header-mismatch-32020",
    Level.ERROR,
    "2026-07-28 Server Validation: MUST answer 400 with -32020",
    typescript="upgrade the SDK: it checks Mcp-Method / Mcp-Name against the body",
    python="upgrade the mcp package: it checks Mcp-Method / Mcp-Name against the body",
    plain="compare MCP-Protocol-Version, Mcp-Method and Mcp-Name with the body; answer 400, -32020",
)


diagnostic(
    "modern.unsupported-version-32022",
    Level.ERROR,
    "2026-07-28 Protocol Version Header: MUST answer 400 with -32022",
    typescript="upgrade the SDK",
    python="upgrade the mcp package",
    plain="answer an unknown MCP-Protocol-Version with 400 and error -32022",
)


diagnostic(
    "modern.legacy-headers-ignored",
    Level.WARNING,
    "2026-07-28 Backward Compatibility: Mcp-Session-Id and Last-Event-ID are ignored",
    typescript="do not reject requests that still carry Mcp-Session-Id",
    python="do not reject requests that still carry Mcp-Session-Id",
    plain="ignore Mcp-Session-Id and Last-Event-ID in 2026-07-28",
)


MODERN_IDS = (
    "modern.get-delete-405",
    "modern.header-mismatch-32020",
    "modern.unsupported-version-32022",
    "modern.legacy-headers-ignored",
)


@check(*MODERN_IDS)
def modern(ctx: Context) -> Generator[Step, Answer, None]:
    if not ctx.modern:
        for ident in MODERN_IDS:
            ctx.not_checked(ident, f"the server speaks {ctx.version}: 2026-07-28 checks do not apply")
        return
    version = {PROTOCOL_VERSION: ctx.version}
    get = yield Send("GET", {"Accept": SSE, **version}, name="get-removed", read_for=0.5, conforming=False)
    delete = yield Send("DELETE", dict(version), name="delete-removed", conforming=False)
    assert isinstance(get, Received) and isinstance(delete, Received)
    served = [a for a in (get, delete) if a.succeeded]
    other = [a for a in (get, delete) if a.status != 405 and a not in served]
    if served:
        ctx.verdict(
            "modern.get-delete-405",
            Status.DETECTED,
            f"{served[0].send.method} was served ({served[0].status}), not answered 405",
            served[0].evidence(),
        )
    elif other:
        ctx.verdict(
            "modern.get-delete-405",
            Status.DETECTED,
            f"{other[0].send.method} was answered {other[0].status}, not 405",
            other[0].evidence(),
            level=Level.WARNING,
        )
    else:
        ctx.passed("modern.get-delete-405", "GET and DELETE are answered 405")

    send = ctx.request("tools/list", name="method-mismatch", conforming=False)
    send.headers[METHOD] = "tools/call"
    mismatch = yield send
    assert isinstance(mismatch, Received)
    _rejected(
        ctx, "modern.header-mismatch-32020", mismatch, -32020, "Mcp-Method that disagrees with the body"
    )

    send = ctx.request("tools/list", name=UNSUPPORTED, conforming=False)
    send.headers[PROTOCOL_VERSION] = NO_SUCH_REVISION
    send.body["params"]["_meta"][META_VERSION] = NO_SUCH_REVISION
    unsupported = yield send
    assert isinstance(unsupported, Received)
    _rejected(
        ctx, "modern.unsupported-version-32022", unsupported, -32022, "an unsupported MCP-Protocol-Version"
    )

    send = ctx.request("tools/list", name="legacy-headers", conforming=False)
    send.headers[SESSION_ID] = uuid.uuid4().hex
    send.headers[LAST_EVENT_ID] = "probe-1"
    legacy = yield send
    assert isinstance(legacy, Received)
    if legacy.status == 200:
        ctx.passed("modern.legacy-headers-ignored", "Mcp-Session-Id and Last-Event-ID are ignored")
    else:
        ctx.verdict(
            "modern.legacy-headers-ignored",
            Status.DETECTED,
            f"a request carrying Mcp-Session-Id and Last-Event-ID was answered {legacy.status}",
            legacy.evidence(),
        )


def _rejected(ctx: Context, ident: str, answer: Received, code: int, what: str) -> None:
    got = answer.error_code()
    if answer.status == 400 and got == code:
        ctx.passed(ident, f"{what} is answered 400 with {code}")
    else:
        shown = f"{answer.status}" + (f" with {got}" if got is not None else "")
        ctx.verdict(
            ident, Status.DETECTED, f"{what} was answered {shown}, not 400 with {code}", answer.evidence()
        )
