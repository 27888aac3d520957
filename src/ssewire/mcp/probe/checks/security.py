"""DNS rebinding: a foreign Origin must be refused with 403, and a foreign Host refused; and
an intermediary that rewrites Host, which leaves the server's Host check blind."""

from __future__ import annotations

from collections.abc import Generator

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ._intermediary import named_by
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


diagnostic(
    "security.host-rewritten",
    Level.WARNING,
    "Security Warning: MUST validate Origin; Host validation is convention (it only works if the server sees the client's Host)",
    typescript="behind a proxy, pass the client's Host on (nginx: proxy_set_header Host $http_host), or validate Host at the proxy",
    python="behind a proxy, pass the client's Host on (nginx: proxy_set_header Host $http_host) so allowed_hosts sees it",
    plain="forward the client's Host unchanged to the server, or refuse hosts that are not yours at the proxy (nginx: a default server answering 421)",
)


@check("security.dns-rebinding", "security.host-rewritten")
def dns_rebinding(ctx: Context) -> Generator[Step, Answer, None]:
    """A foreign Origin and a foreign Host, each in its own request. A server that refuses the
    Origin has its DNS-rebinding protection on; if it then serves the Host, either it checks
    Origin only, or something in front gave it another Host: named intermediaries tell."""
    send = ctx.request("tools/list", name="foreign-origin", conforming=False)
    send.headers["Origin"] = FOREIGN_ORIGIN
    by_origin = yield send
    send = ctx.request("tools/list", name="foreign-host", conforming=False)
    send.headers["Host"] = FOREIGN_HOST
    by_host = yield send
    assert isinstance(by_origin, Received) and isinstance(by_host, Received)
    rewritten = _host_rewritten(ctx, by_origin, by_host)
    if by_origin.status != 403:
        ctx.verdict(
            "security.dns-rebinding",
            Status.DETECTED,
            f"a request with a foreign Origin was answered {by_origin.status}, not 403",
            by_origin.evidence(),
        )
    elif by_host.status not in HOST_REFUSALS:
        cause = " (likely rewritten on the way: security.host-rewritten)" if rewritten else ""
        ctx.verdict(
            "security.dns-rebinding",
            Status.DETECTED,
            f"a request naming a foreign Host was answered {by_host.status}, not refused{cause}",
            by_host.evidence(),
            level=Level.WARNING,  # Origin is the spec's MUST; Host validation is the SDKs' convention
        )
    else:
        ctx.passed(
            "security.dns-rebinding",
            f"a foreign Origin is refused with 403, a foreign Host with {by_host.status}",
        )


def _host_rewritten(ctx: Context, by_origin: Received, by_host: Received) -> bool:
    """Judge ``security.host-rewritten``; True when suspected. What the server saw as Host is
    not visible from here, so this is inferred: protection on (a foreign Origin refused), a
    foreign Host served as the server's own, and an intermediary named in the answers."""
    ident = "security.host-rewritten"
    if by_host.status in HOST_REFUSALS:
        ctx.passed(ident, f"a foreign Host reached a check that refused it ({by_host.status}): not rewritten")
        return False
    if by_origin.status != 403:
        ctx.not_checked(
            ident,
            f"a foreign Origin was answered {by_origin.status}: with no DNS-rebinding protection seen, "
            "a rewritten Host cannot be told from an unchecked one",
        )
        return False
    if not by_host.succeeded:
        ctx.not_checked(ident, f"the foreign-Host request was answered {by_host.status or by_host.error}")
        return False
    signs = named_by(by_host.headers) or named_by(by_origin.headers)
    rests_on = [
        "a foreign Origin is refused with 403: the server's DNS-rebinding protection is on",
        f"a foreign Host ({FOREIGN_HOST}) is answered {by_host.status}, like the server's own",
    ]
    if not signs:
        ctx.not_checked(
            ident,
            "cannot tell: a foreign Host is served while a foreign Origin is refused, but no intermediary "
            "names itself: the server may check Origin only (security.dns-rebinding)",
        )
        return False
    rests_on.append(f"the answers name an intermediary: {'; '.join(signs)}")
    ctx.verdict(
        ident,
        Status.SUSPECTED,  # inferred: the Host the server saw is not visible to the probe
        f"an intermediary likely rewrites Host ({'; '.join(signs)}): the server's DNS-rebinding "
        "protection never sees a foreign Host",
        {**by_host.evidence(), "rests_on": rests_on},
    )
    return True
