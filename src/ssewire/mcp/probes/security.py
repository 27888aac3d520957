"""DNS rebinding: a foreign Origin must be refused with 403, and a foreign Host refused."""

from __future__ import annotations

from collections.abc import Generator

from ..checks.catalogue import diagnostic
from ..checks.findings import Level, Status
from ._plan import Answer, Context, Received, Step, check

FOREIGN_ORIGIN = "https://attacker.example"
FOREIGN_HOST = "attacker.example"
# The spec names 403 for Origin only; for a Host the server is not, 421 Misdirected Request
# (the Python SDK's answer) and 400 refuse it just as well.
HOST_REFUSALS = (400, 403, 421)


diagnostic(
    "security.dns-rebinding",
    Level.ERROR,
    "Security Warning: MUST validate Origin (403); Host validation is convention",
    typescript="enable DNS rebinding protection with allowedOrigins and allowedHosts",
    python="TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=..., allowed_origins=...)",
    plain="answer 403 to a foreign Origin and to a Host this server is not",
)


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
    elif by_host.status not in HOST_REFUSALS:
        ctx.verdict(
            "security.dns-rebinding",
            Status.DETECTED,
            f"a request naming a foreign Host was answered {by_host.status}, not refused",
            by_host.evidence(),
            level=Level.WARNING,  # Origin is the spec's MUST; Host validation is the SDKs' convention
        )
    else:
        ctx.passed(
            "security.dns-rebinding",
            f"a foreign Origin is refused with 403, a foreign Host with {by_host.status}",
        )
