"""MCP request headers: MCP-Protocol-Version (2025-06-18 on), and in 2026-07-28 the
Mcp-Method / Mcp-Name headers that must agree with the body, and the server's 400 answers."""

from __future__ import annotations

from collections.abc import Iterator

from ...checks.findings import Level
from ...protocol.profiles import KNOWN_VERSIONS, PROFILES
from ..model import ExchangeView, Model, stripped
from ._registry import MCP_METHODS, POST, Hit, rule

VERSION_PATH = "/request/headers/mcp-protocol-version"
HEADER_MISMATCH, UNSUPPORTED_VERSION = -32020, -32022


def _legacy_version(x: ExchangeView, m: Model) -> tuple[str, str | None] | None:
    """2025-06-18 / 2025-11-25: the revision expected in the header and the value sent, or
    None where the header is not required (initialize; a session on 2025-03-26)."""
    profile = m.profile
    if not profile.version_header or profile.request_headers or x.is_init:
        return None
    negotiated = m.visible(m.negotiated, x.ex)
    expected = negotiated[-1] if negotiated else profile.name
    revision = PROFILES.get(expected)
    if revision is not None and not revision.version_header:
        return None  # that revision (2025-03-26) has no version header
    return expected, stripped(x.ex.request.headers.get("mcp-protocol-version"))


@rule(
    "protocol_version_mismatch",
    Level.ERROR,
    "MUST",
    "Protocol Version Header",
    "send MCP-Protocol-Version with the revision in use (the negotiated one; in 2026-07-28 the body's _meta protocolVersion) on every request but initialize",
    on=MCP_METHODS,
)
def version_header(x: ExchangeView, m: Model) -> Iterator[Hit]:
    found = _legacy_version(x, m)
    if found is None:
        return
    expected, value = found
    if value is None:
        yield Hit(
            VERSION_PATH,
            f"MCP-Protocol-Version is missing (the server will assume 2025-03-26); the negotiated revision is {expected}",
        )
    elif value != expected:
        # "SHOULD be the one negotiated": a warning; a missing header breaks a MUST.
        yield Hit(
            VERSION_PATH,
            f"MCP-Protocol-Version is {value!r}, the negotiated revision is {expected}",
            level=Level.WARNING,
        )


@rule("protocol_version_mismatch", on=POST)
def version_header_2026(x: ExchangeView, m: Model) -> Iterator[Hit]:
    h = x.headers_2026
    if h is None:
        return
    if h.version is None:
        yield Hit(VERSION_PATH, "MCP-Protocol-Version is missing; every POST must carry it")
    elif h.version_differs:
        yield Hit(
            VERSION_PATH,
            f"MCP-Protocol-Version is {h.version!r} but the body's _meta says {h.meta_version!r}",
        )


@rule(
    "method_header_mismatch",
    Level.ERROR,
    "MUST",
    "Standard Request Headers",
    "send Mcp-Method equal to the body's method on every request",
    on=POST,
)
def method_header(x: ExchangeView, m: Model) -> Iterator[Hit]:
    h = x.headers_2026
    if h is not None and h.method_differs:
        got = "missing" if h.method is None else repr(h.method)
        yield Hit(
            "/request/headers/mcp-method", f"Mcp-Method is {got}, the body's method is {h.body_method!r}"
        )


@rule(
    "name_header_mismatch",
    Level.ERROR,
    "MUST",
    "Standard Request Headers",
    "send Mcp-Name equal to params.name (tools/call, prompts/get) or params.uri (resources/read)",
    on=POST,
)
def name_header(x: ExchangeView, m: Model) -> Iterator[Hit]:
    h = x.headers_2026
    if h is not None and h.name_differs:
        got = "missing" if h.name is None else "different"
        yield Hit(
            "/request/headers/mcp-name",
            f"Mcp-Name is {got}; it must equal params.{h.name_field} of {h.body_method}",
        )


@rule(
    "header_mismatch_not_rejected",
    Level.ERROR,
    "MUST",
    "Server Validation",
    "answer a request whose MCP headers are missing or disagree with the body with 400 and error -32020",
    on=POST,
)
def header_mismatch_not_rejected(x: ExchangeView, m: Model) -> Iterator[Hit]:
    resp, body = x.ex.response, x.body
    if not x.must_reject or resp is None or body is None:
        return
    if resp.status != 400 or (body.error_code is not None and body.error_code != HEADER_MISMATCH):
        yield Hit(
            "/response/status",
            f"the request's MCP headers disagree with its body, but the server answered {_answer(x)}, not 400 with -32020",
        )


@rule(
    "unsupported_version_not_rejected",
    Level.ERROR,
    "MUST",
    "Protocol Version Header",
    "answer an unsupported MCP-Protocol-Version with 400 (2026-07-28: error -32022)",
    on=MCP_METHODS,
)
def unsupported_version(x: ExchangeView, m: Model) -> Iterator[Hit]:
    found, resp = _legacy_version(x, m), x.ex.response
    if found is None or resp is None:
        return
    value = found[1]
    if value is not None and value not in KNOWN_VERSIONS and resp.status != 400:
        yield Hit(
            "/response/status",
            f"an unsupported MCP-Protocol-Version {value!r} was answered {resp.status}, not 400",
        )


@rule("unsupported_version_not_rejected", on=POST)
def unsupported_version_2026(x: ExchangeView, m: Model) -> Iterator[Hit]:
    h, resp, body = x.headers_2026, x.ex.response, x.body
    if h is None or resp is None or body is None or h.problem or not h.unsupported:
        return
    if resp.status != 400 or (body.error_code is not None and body.error_code != UNSUPPORTED_VERSION):
        yield Hit(
            "/response/status",
            f"an unsupported MCP-Protocol-Version {h.version!r} was answered {_answer(x)}, not 400 with -32022",
        )


def _answer(x: ExchangeView) -> str:
    """``"400"``, or ``"400 with error -32600"`` when the body carried a JSON-RPC error."""
    assert x.ex.response is not None and x.body is not None
    code = x.body.error_code
    return f"{x.ex.response.status}" + (f" with error {code}" if code is not None else "")
