"""Sessions (2025 revisions): the id assigned at initialize, carried, and ended; and
2026-07-28, which has none."""

from __future__ import annotations

from collections.abc import Iterator

from ...checks.findings import Level
from ..model import ExchangeView, Model
from ._registry import MCP_METHODS, POST, Hit, rule

SESSIONS = "Session Management"


@rule(
    "session_header_removed",
    Level.WARNING,
    "SHOULD NOT",
    "Backward Compatibility",
    "this revision has no sessions: do not send or assign Mcp-Session-Id",
    on=MCP_METHODS,
)
def session_header_removed(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if m.profile.sessions:
        return
    resp, name = x.ex.response, m.profile.name
    if x.ex.request.headers.get("mcp-session-id") is not None:
        yield Hit(
            "/request/headers/mcp-session-id", f"the client sent Mcp-Session-Id; {name} has no sessions"
        )
    if resp is not None and resp.headers.get("mcp-session-id") is not None:
        yield Hit(
            "/response/headers/mcp-session-id", f"the server sent Mcp-Session-Id; {name} has no sessions"
        )


def _needs_session(x: ExchangeView, m: Model) -> bool:
    """A request after initialize, in a session the server assigned before it."""
    return (
        m.profile.sessions
        and not x.is_init
        and x.ex.request.headers.get("mcp-session-id") is None
        and bool(m.visible(m.assigned, x.ex))
    )


@rule(
    "session_id_missing",
    Level.ERROR,
    "MUST",
    SESSIONS,
    "send the Mcp-Session-Id from the initialize response on every later request",
    on=MCP_METHODS,
)
def session_id_missing(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if _needs_session(x, m):
        yield Hit(
            "/request/headers",
            "the server assigned a session at initialize, but this request carries no Mcp-Session-Id",
        )


@rule(
    "missing_session_not_rejected",
    Level.WARNING,
    "SHOULD",
    SESSIONS,
    "answer a non-initialize request without Mcp-Session-Id with 400",
    on=MCP_METHODS,
)
def missing_session_not_rejected(x: ExchangeView, m: Model) -> Iterator[Hit]:
    resp = x.ex.response
    if _needs_session(x, m) and resp is not None and resp.status != 400:
        yield Hit("/response/status", f"a request without Mcp-Session-Id was answered {resp.status}, not 400")


@rule(
    "unknown_session_not_404",
    Level.ERROR,
    "MUST",
    SESSIONS,
    "answer a request with a terminated or unknown session id with 404",
    on=MCP_METHODS,
)
def unknown_session_not_404(x: ExchangeView, m: Model) -> Iterator[Hit]:
    sid, resp = x.ex.request.headers.get("mcp-session-id"), x.ex.response
    if not m.profile.sessions or x.is_init or sid is None or resp is None or resp.status == 404:
        return
    visible = m.visible(m.assigned, x.ex)
    gone = sid in m.visible(m.terminated, x.ex)
    if gone or (visible and sid not in visible):
        why = "terminated" if gone else "never assigned in this transcript"
        yield Hit(
            "/response/status",
            f"a request with a session id that was {why} was answered {resp.status}, not 404",
            level=None if gone else Level.WARNING,  # the spec's MUST names terminated sessions only
        )


@rule(
    "invalid_session_id",
    Level.ERROR,
    "MUST",
    SESSIONS,
    "use only visible ASCII (0x21-0x7E) in Mcp-Session-Id",
    on=POST,
)
def invalid_session_id(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not x.is_init or not m.profile.sessions or x.ex.response is None:
        return
    sid = x.ex.response.headers.get("mcp-session-id")
    if sid is not None and (not sid or any(not 0x21 <= ord(c) <= 0x7E for c in sid)):
        yield Hit(
            "/response/headers/mcp-session-id",
            "the assigned Mcp-Session-Id has characters outside visible ASCII 0x21-0x7E (value not shown)",
        )


@rule(
    "negotiated_version_differs",
    Level.INFO,
    "convention",
    "Version Negotiation",
    "the session negotiated another revision than the profile; pass --profile with it",
    on=POST,
)
def negotiated_version_differs(x: ExchangeView, m: Model) -> Iterator[Hit]:
    if not x.is_init:
        return
    for version, ex in m.negotiated:
        if ex is x.ex and version != m.profile.name:
            yield Hit("/response", f"initialize negotiated {version!r}, the profile is {m.profile.name}")
