"""The protocol layer holds each wire fact once: no revision date, media type or MCP header
name is spelled in the code outside it, and what it builds is what each revision asks."""

from __future__ import annotations

import ast
import pathlib
import time

import pytest

import ssewire
from ssewire.mcp.protocol import params, requests
from ssewire.mcp.protocol.handshake import Agreement, HandshakeFailed, Incoming, handshake
from ssewire.mcp.protocol.headers import HEADER_MISMATCH, UNSUPPORTED_VERSION, ModernHeaders
from ssewire.mcp.protocol.profiles import KNOWN_VERSIONS, NEWEST, NEWEST_WITH_SESSIONS, PROFILES, named
from ssewire.mcp.protocol.retry import retry_after
from ssewire.mcp.protocol.wire import decode_name, decode_value

SRC = pathlib.Path(ssewire.__file__).parent
HOMES = {"_http.py", "mcp/protocol/profiles.py", "mcp/protocol/wire.py"}  # where the facts are written
FACTS = {
    *KNOWN_VERSIONS,
    "text/event-stream",
    "application/json",
    "application/json, text/event-stream",
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
}


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are not docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_wire_fact_is_spelled_outside_the_protocol_layer():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name in HOMES:
            continue
        for line, value in _strings(ast.parse(path.read_text(encoding="utf-8"))):
            if value in FACTS:
                found.append(f"{name}:{line}: {value!r}")
    assert found == []


def test_the_profiles_name_the_newest_revisions():
    assert NEWEST.request_headers and not NEWEST.sessions
    assert NEWEST_WITH_SESSIONS.sessions and NEWEST_WITH_SESSIONS.priming
    assert NEWEST_WITH_SESSIONS.name == max(n for n, p in PROFILES.items() if p.sessions)
    assert named("stable-2025-11-25") is PROFILES["2025-11-25"]
    assert named("draft-2026-07-28") is NEWEST
    assert named("2024-11-05") is None and named(None) is None and named("") is None


@pytest.mark.parametrize(
    ("version", "session", "expected"),
    [
        ("2025-03-26", "s1", {"Mcp-Session-Id": "s1"}),
        ("2025-06-18", "s1", {"Mcp-Session-Id": "s1", "MCP-Protocol-Version": "2025-06-18"}),
        ("2025-11-25", None, {"MCP-Protocol-Version": "2025-11-25"}),
        (
            "2026-07-28",
            "s1",
            {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "x"},
        ),
    ],
)
def test_post_headers_follow_the_revision(version, session, expected):
    headers = requests.post_headers(PROFILES[version], session, "tools/call", "x")
    assert headers == {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        **expected,
    }


def test_get_and_delete_headers_carry_no_body_headers():
    profile = PROFILES["2025-11-25"]
    assert requests.get_headers(profile, "s1", "e7") == {
        "Accept": "text/event-stream",
        "Mcp-Session-Id": "s1",
        "MCP-Protocol-Version": "2025-11-25",
        "Last-Event-ID": "e7",
    }
    assert requests.delete_headers(profile, "s1") == {
        "Mcp-Session-Id": "s1",
        "MCP-Protocol-Version": "2025-11-25",
    }
    # a notification under 2026-07-28: the version, but no Mcp-Method ("not defined" for notifications)
    assert "Mcp-Method" not in requests.post_headers(NEWEST, None, "notifications/initialized")


def test_a_2026_request_carries_its_meta_and_keeps_the_callers():
    body = requests.request(3, "tools/call", {"name": "x", "_meta": {"progressToken": "p"}}, NEWEST)
    meta = body["params"]["_meta"]
    assert meta == {
        "progressToken": "p",
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    assert requests.request(3, "tools/list", None, NEWEST_WITH_SESSIONS) == {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/list",
    }
    assert requests.name_of("resources/read", {"uri": "file:///a"}) == "file:///a"
    assert requests.name_of("tools/list", {"name": "x"}) is None


def _drive(opening, answers):
    """Feed a handshake one answer per step; returns (steps sent, agreement or the failure)."""
    sent, came = [], None
    try:
        while True:
            out = opening.send(came) if came is not None else next(opening)
            sent.append(out)
            came = answers.pop(0)
    except StopIteration as done:
        return sent, done.value
    except HandshakeFailed as failed:
        return sent, failed


def _ids():
    counter = iter(range(1, 100))
    return lambda: next(counter)


def test_the_handshake_discovers_a_2026_server():
    sent, agreement = _drive(
        handshake(None, ids=_ids(), client={"name": "t", "version": "1"}),
        [Incoming(200, {"jsonrpc": "2.0", "id": 1, "result": DISCOVERED})],
    )
    assert [s.name for s in sent] == ["discover"] and sent[0].optional
    assert sent[0].headers["Mcp-Method"] == "server/discover"
    assert agreement == Agreement(NEWEST, None, DISCOVERED)


DISCOVERED = {"supportedVersions": [NEWEST.name], "capabilities": {}}  # a discover result naming it


def test_an_answer_that_is_no_discover_result_is_no_agreement():
    """A server of the revisions with sessions may answer discover with ``{}``: initialized."""
    sent, agreement = _drive(
        handshake(None, ids=_ids(), client={"name": "t", "version": "1"}),
        [
            Incoming(200, {"jsonrpc": "2.0", "id": 1, "result": {"serverInfo": {}}}),
            Incoming(200, {"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": "2025-11-25"}}, "s1"),
            Incoming(202),
        ],
    )
    assert [s.name for s in sent] == ["discover", "initialize", "initialized"]
    assert agreement.profile.name == "2025-11-25" and agreement.session == "s1"


def test_the_handshake_falls_back_to_initialize_and_takes_the_servers_version():
    sent, agreement = _drive(
        handshake(None, ids=_ids(), client={"name": "t", "version": "1"}),
        [
            Incoming(400, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "no session"}}),
            Incoming(200, {"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": "2025-06-18"}}, "s9"),
            Incoming(202),
        ],
    )
    assert [s.name for s in sent] == ["discover", "initialize", "initialized"]
    initialize = sent[1]
    assert initialize.body["params"]["protocolVersion"] == NEWEST_WITH_SESSIONS.name
    assert set(initialize.headers) == {"Accept", "Content-Type"}  # no session, no version yet
    assert (
        sent[2].headers["Mcp-Session-Id"] == "s9" and sent[2].headers["MCP-Protocol-Version"] == "2025-06-18"
    )
    assert agreement == Agreement(PROFILES["2025-06-18"], "s9", {"protocolVersion": "2025-06-18"})


def test_a_version_that_is_not_a_name_leaves_the_one_asked_for():
    _, agreement = _drive(
        handshake(None, ids=_ids(), client={}),
        [
            Incoming(None),
            Incoming(200, {"jsonrpc": "2.0", "id": 2, "result": {"protocolVersion": ["x"]}}),
            Incoming(202),
        ],
    )
    assert agreement.profile is NEWEST_WITH_SESSIONS


def test_a_forced_revision_is_not_negotiated():
    sent, failed = _drive(handshake(NEWEST, ids=_ids(), client={}), [Incoming(None)])
    assert [s.name for s in sent] == ["discover"] and not sent[0].optional
    assert isinstance(failed, HandshakeFailed) and "server/discover was answered None" in str(failed)
    sent, failed = _drive(handshake(PROFILES["2025-03-26"], ids=_ids(), client={}), [Incoming(401)])
    assert [s.name for s in sent] == ["initialize"] and sent[0].body["params"][
        "protocolVersion"
    ] == "2025-03-26"
    assert isinstance(failed, HandshakeFailed) and str(failed) == "initialize was answered 401"


def test_retry_after_reads_seconds_and_dates():
    now = time.time()
    assert retry_after("5") == 5.0
    assert retry_after(" 0 ") == 0.0
    assert retry_after(None) is None and retry_after("soon") is None and retry_after("-3") is None
    assert retry_after("²") is None  # what httpx makes of a latin-1 0xB2: a digit to str, not to float()
    assert retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=now) == 0.0  # in the past: now
    in_a_minute = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 60))
    assert 58.0 <= retry_after(in_a_minute, now=now) <= 60.0  # type: ignore[operator]


def _modern(headers, method="tools/call", params=None):
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return ModernHeaders.of(headers, message)


def test_the_2026_header_rules():
    good = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "x"}
    params = {"name": "x", "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    assert _modern(good, params=params).rejection() is None
    assert _modern({**good, "mcp-name": "=?base64?eA==?="}, params=params).rejection() is None
    code, reason = _modern({**good, "mcp-name": "y"}, params=params).rejection()  # type: ignore[misc]
    assert code == HEADER_MISMATCH and "Mcp-Name" in reason
    code, reason = _modern(
        {k: v for k, v in good.items() if k != "mcp-protocol-version"}, params=params
    ).rejection()  # type: ignore[misc]
    assert code == HEADER_MISMATCH and "MCP-Protocol-Version" in reason
    unknown = {**good, "mcp-protocol-version": "2099-01-01"}
    assert _modern(unknown, params={"name": "x"}).rejection() == (
        UNSUPPORTED_VERSION,
        "Unsupported protocol version: 2099-01-01",
    )
    # the validator's view: a missing header is not a mismatch the server had to reject
    missing = _modern({"mcp-method": "tools/call", "mcp-name": "x"}, params=params)
    assert not missing.problem and missing.version is None


# 2026-07-28 Value Encoding and Server Behavior for Custom Headers, with the SEP-2243 cases
# the conformance suite sends: (the argument, the header as sent, the header accepted)
PARAM_CASES = [
    ("Hello", "=?base64?SGVsbG8=?=", True),  # decoded, then compared
    ("Hello", "=?base64?SGVsbG8?=", False),  # the Base64 lacks its padding: it does not decode
    ("Hello", "=?base64?SGVs!!!bG8=?=", False),  # a character outside the Base64 alphabet
    ("SGVsbG8=", "SGVsbG8=", True),  # no wrapper: the value as it is
    ("=?base64?SGVsbG8=", "=?base64?SGVsbG8=", True),  # no closing ?=: no wrapper either
    ("us-west1", "  us-west1 ", True),  # the whitespace HTTP does not count
    ("us-west1", "eu-west1", False),
    ("\u00e9t\u00e9", "\u00e9t\u00e9", False),  # not ASCII: only the Base64 form may carry it
    ("\u00e9t\u00e9", params.encode("\u00e9t\u00e9"), True),
    ("Hello", "=?base64?/w==?=", False),  # Base64 of a byte that is no UTF-8
]


@pytest.mark.parametrize(("argument", "sent", "accepted"), PARAM_CASES)
def test_a_servers_param_header_rule(argument: str, sent: str, accepted: bool) -> None:
    bound = params.bindings(
        {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    )
    problem = params.mismatch(bound, {"region": argument}, {"mcp-param-region": sent})
    assert (problem is None) is accepted, problem


def test_a_param_header_is_due_exactly_when_its_argument_has_a_value() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}}
    bound = params.bindings(schema)
    assert "missing" in str(params.mismatch(bound, {"n": 3}, {}))
    assert params.mismatch(bound, {"n": None}, {}) is None and params.mismatch(bound, {}, {}) is None
    # an integer is compared as a number (the spec's SHOULD: 42.0 and 42 agree), never as text alone
    assert params.mismatch(bound, {"n": 42}, {"mcp-param-n": "42.0"}) is None
    assert params.mismatch(bound, {"n": 42.0}, {"mcp-param-n": "42"}) is None
    assert "disagrees" in str(params.mismatch(bound, {"n": 42}, {"mcp-param-n": "43"}))
    text = {"type": "object", "properties": {"s": {"type": "string", "x-mcp-header": "S"}}}
    assert params.mismatch(params.bindings(text), {"s": "42"}, {"mcp-param-s": "42.0"}) is not None


def test_mcp_name_keeps_an_undecodable_wrapper_as_it_came() -> None:
    assert decode_name("=?base64?eA==?=") == "x" and decode_name(" =?base64?eA?= ") == "=?base64?eA?="
    assert decode_value("=?base64?eA?=") is None and decode_value("plain") == "plain"


def test_every_entry_point_resolves_aliases_and_refuses_unknown_revisions():
    from ssewire.mcp import UnknownProfile
    from ssewire.mcp.client import Client
    from ssewire.mcp.probe.driver import run_probe
    from ssewire.mcp.reference.server import ReferenceServer

    assert Client("http://127.0.0.1:9/mcp", profile="stable-2025-11-25").wanted is PROFILES["2025-11-25"]
    assert ReferenceServer(profile="draft-2026-07-28").profile is NEWEST
    for make in (
        lambda: Client("http://127.0.0.1:9/mcp", profile="2025-13-01"),
        lambda: ReferenceServer(profile="2025-13-01"),
        lambda: run_probe("http://127.0.0.1:9/mcp", profile="2025-13-01"),
    ):
        with pytest.raises(UnknownProfile, match="unknown profile '2025-13-01'"):
            make()
