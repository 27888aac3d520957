"""What lies between the probe and the server, read off the answers (sans-IO helpers).

An intermediary is *named* when an answer's headers say so (``Via``, a proxy's ``Server``,
a CDN's request-id header), never guessed from a failure alone; who ended a stream is
judged from how it ended (the body's end, or a cut inside it), the silence before the end
against the server's keep-alive interval, and that naming. Each judgment carries the facts
it rests on, for the finding's evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ._plan import Received

# Headers only an intermediary adds, and whom they name (lower-case names).
NAMING_HEADERS = {
    "via": "a proxy (Via)",  # RFC 9110 7.6.3: each proxy adds itself
    "cf-ray": "Cloudflare",
    "x-amz-cf-id": "Amazon CloudFront",
    "x-served-by": "a CDN cache (X-Served-By)",
    "x-varnish": "Varnish",
    "x-envoy-upstream-service-time": "Envoy",
    "x-azure-ref": "Azure Front Door",
    "fly-request-id": "the Fly.io proxy",
    "x-vercel-id": "Vercel's edge",
}
# ``Server`` values of software that sits in front of an application (a reverse proxy
# replaces the application's Server with its own, as nginx does by default).
PROXY_SERVERS = (
    "nginx",
    "openresty",
    "envoy",
    "istio-envoy",
    "cloudflare",
    "caddy",
    "awselb",
    "akamaighost",
    "google frontend",
    "cloudfront",
    "varnish",
    "squid",
    "haproxy",
    "traefik",
)
# Idle timeouts common proxies apply by default (seconds), to recognise one that does not
# name itself by the silence before a cut.
COMMON_IDLE_TIMEOUTS = {
    30.0: "a Google Cloud load balancer (backend timeout)",
    60.0: "nginx (proxy_read_timeout) and an AWS application load balancer",
    100.0: "Cloudflare (proxy read timeout)",
}
MISSED_KEEPALIVE = 1.5  # a silence this many keep-alive intervals long means the server missed one
SHOWN = 80  # characters of a header value shown in evidence


def named_by(headers: Mapping[str, str]) -> list[str]:
    """The intermediaries an answer's headers name (``lower-case name: value`` pairs)."""
    signs = [
        f"{name}: {headers[name][:SHOWN]} ({who})" for name, who in NAMING_HEADERS.items() if name in headers
    ]
    server = headers.get("server", "")
    if any(server.lower().startswith(proxy) for proxy in PROXY_SERVERS):
        signs.append(f"server: {server[:SHOWN]}")
    return signs


def common_timeout(silence: float) -> str | None:
    """Whose default idle timeout a silence matches (within 1 s, or 3 % for the long ones)."""
    for seconds, whose in COMMON_IDLE_TIMEOUTS.items():
        if abs(silence - seconds) <= max(1.0, 0.03 * seconds):
            return f"{silence:.1f} s of silence is the default idle timeout of {whose} ({seconds:g} s)"
    return None


@dataclass(frozen=True)
class Ending:
    """How a stream ended, by whom where the probe can tell, and what that rests on."""

    clean: bool  # the body ended by itself; False: the connection broke inside it
    by: str  # "the server", "an intermediary (...)", or "cannot tell"
    lifetime: float  # seconds from the request to the end
    silence: float | None  # seconds with nothing before a cut (None for a clean end)
    rests_on: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        how = "ended cleanly" if self.clean else "cut"
        who = "who ended it: cannot tell" if self.by == "cannot tell" else f"by {self.by}"
        return f"{how} after {self.lifetime:.1f} s, {who}"


def ending(answer: Received, keepalive_interval: float | None) -> Ending | None:
    """How ``answer``'s body ended; None when it was still open at the probe's read limit.

    A proxy's idle timeout cuts the connection inside the body (nginx, load balancers); it
    never sends the body's end. So a clean end is the server's, and a cut is an
    intermediary's when one is named (or the silence is a common proxy's timeout) and the
    silence before it was longer than the server leaves between keep-alives."""
    signs = named_by(answer.headers)
    framed = (
        "chunked" in answer.headers.get("transfer-encoding", "").lower() or "content-length" in answer.headers
    )
    if answer.ended_by_server and not framed:  # a close is its end: anyone between may have closed it
        rests_on = ["the body has no framing (neither chunked nor a length): its end is a close, by anyone"]
        return Ending(True, "cannot tell", answer.duration, None, rests_on)
    if answer.ended_by_server:
        rests_on = [
            "the body ended cleanly, with its end (a proxy's idle timeout cuts the connection instead)"
        ]
        if signs:
            rests_on.append(f"an intermediary passed the end on: {'; '.join(signs)}")
        return Ending(True, "the server", answer.duration, None, rests_on)
    if answer.cut is None:
        return None
    lifetime = answer.lifetime
    silence = lifetime - (answer.last_byte or 0.0)
    chunked = "chunked " if "chunked" in answer.headers.get("transfer-encoding", "").lower() else ""
    rests_on = [f"the connection broke inside the {chunked}body ({answer.cut}), without the body's end"]
    if keepalive_interval is None:
        idle = True
        rests_on.append(f"{silence:.1f} s of silence before the cut, and no keep-alive came in that time")
    elif silence > MISSED_KEEPALIVE * keepalive_interval:
        idle = True
        rests_on.append(
            f"{silence:.1f} s of silence before the cut, longer than the server's keep-alive interval ({keepalive_interval:.1f} s)"
        )
    else:
        idle = False
        rests_on.append(
            f"only {silence:.1f} s of silence before the cut, within the server's keep-alive interval ({keepalive_interval:.1f} s): not an idle timeout"
        )
    timeout = common_timeout(silence)
    if timeout is not None:
        rests_on.append(timeout)
    if signs:
        rests_on.append(f"the answer names an intermediary: {'; '.join(signs)}")
    else:
        rests_on.append("no intermediary names itself in the answer's headers")
    if idle and signs:
        by = f"an intermediary ({'; '.join(signs)}), on an idle timeout"
    elif idle and timeout is not None:
        by = "an intermediary (unnamed; its idle timeout matches a common proxy's)"
    else:
        by = "cannot tell"
    return Ending(False, by, lifetime, silence, rests_on)
