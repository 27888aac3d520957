"""DNS rebinding: a foreign Origin, and a foreign Host, must both be refused with 403."""

from __future__ import annotations

from collections.abc import Generator

from ..findings import Level, Status
from ._plan import Answer, Context, Received, Step, check

FOREIGN_ORIGIN = "https://attacker.example"
FOREIGN_HOST = "attacker.example"


@check("security.dns-rebinding")
def dns_rebinding(ctx: Context) -> Generator[Step, Answer, None]:
    send = ctx.request("tools/list", name="foreign-origin", conforming=False)
    send.headers["Origin"] = FOREIGN_ORIGIN
    by_origin = yield send
    send = ctx.request("tools/list", name="foreign-host", conforming=False)
    send.headers["Host"] = FOREIGN_HOST
    by_host = yield send
    assert isinstance(by_origin, Received) and isinstance(by_host, Received)
    if by_origin.status != 403:
        ctx.verdict(
            "security.dns-rebinding",
            Status.DETECTED,
            f"a request with a foreign Origin was answered {by_origin.status}, not 403",
            by_origin.evidence(),
        )
    elif by_host.status != 403:
        ctx.verdict(
            "security.dns-rebinding",
            Status.DETECTED,
            f"a request naming a foreign Host was answered {by_host.status}, not 403",
            by_host.evidence(),
            level=Level.WARNING,  # Origin is the spec's MUST; Host validation is the SDKs' convention
        )
    else:
        ctx.passed("security.dns-rebinding", "a foreign Origin and a foreign Host are both refused with 403")
