"""One matrix of bad (and a few good) raw HTTP requests, and what an MCP server answers.

The reference server, the gateway and the revision bridge enter through one front
(``ssewire.mcp.server.front``) and climb one inbound ladder (``ssewire.mcp.protocol.inbound``):
sent these requests (Accept, Content-Type, the body limit, the JSON, the JSON-RPC envelope
and ids, the session, MCP-Protocol-Version, Last-Event-ID, other methods, Host and Origin),
each gives the status and JSON-RPC code of `EXPECTED` (`BY_SERVER` names the few answers
that are a server's own, with why). The front's cases (`FRONT`) are sent again as a
2026-07-28 client sends them (no session, its revision named), to the gateway's passthrough
and to the bridge's stateless side: the same answers.
`run_all` records, per case, the HTTP status, the media type, the JSON-RPC error code and id
(from a JSON body, or the first JSON ``data:`` line of an SSE body) and the error text (kept
apart: wording may differ). ``test_inbound_matrix.py`` holds both servers to it;
``scripts/inbound_matrix.py`` captures and diffs it across a change.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from tests.support.mcp_helpers import INITIALIZE

FORMAT = "ssewire-inbound-matrix/1"
VERSION = "2025-11-25"
MODERN = "2026-07-28"
LIMIT = 64 * 1024  # the body limit both servers are given: the over-limit case stays cheap
SESSIONS = 256  # room for every case's own session (no eviction mid-run)
TIMEOUT = httpx.Timeout(5.0)
JSON, SSE, BOTH = "application/json", "text/event-stream", "application/json, text/event-stream"
UNKNOWN_SID = "0123456789abcdef0123456789abcdef"
DEFAULTS: dict[str, dict[str, str]] = {
    "POST": {"accept": BOTH, "content-type": JSON},
    "PUT": {"accept": BOTH, "content-type": JSON},
    "PATCH": {"accept": BOTH, "content-type": JSON},
    "GET": {"accept": SSE},
}


def rpc(**fields: Any) -> bytes:
    """A JSON-RPC 2.0 message with these fields."""
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


def padded(size: int) -> bytes:
    """A tools/list request of exactly ``size`` bytes."""
    bare = rpc(id=1, method="tools/list", params={"pad": ""})
    return rpc(id=1, method="tools/list", params={"pad": "x" * (size - len(bare))})


PING = rpc(id=1, method="ping")
LIST = rpc(id=1, method="tools/list")
INITIALIZE_BODY = json.dumps(INITIALIZE).encode()
PREFLIGHT = {"origin": "http://localhost", "access-control-request-method": "GET"}
DEEP = PING[:-1] + b', "params": ' + b"[" * 5000 + b"]" * 5000 + b"}"  # past both parsers' depth


@dataclass(frozen=True)
class Case:
    """One request. ``headers`` override the method's defaults (None: leave the header out);
    ``needs_session``: initialize first and send its id ("deleted": and DELETE it first)."""

    name: str
    method: str
    headers: Mapping[str, str | bytes | None] = field(default_factory=dict)
    body: bytes | None = None
    needs_session: bool | Literal["deleted"] = False
    path: str = "/mcp"
    chunked: bool = False  # the body sent without Content-Length


S = True  # a case with a session of its own
CASES = [
    # Accept and Content-Type
    Case("post_no_accept", "POST", {"accept": None}, PING, S),
    Case("post_accept_json_only", "POST", {"accept": JSON}, PING, S),
    Case("post_accept_sse_only", "POST", {"accept": SSE}, PING, S),
    Case("post_accept_sse_q0", "POST", {"accept": f"{JSON}, {SSE};q=0"}, PING, S),
    Case("post_accept_wildcard", "POST", {"accept": "*/*"}, PING, S),
    Case("post_content_type_text", "POST", {"content-type": "text/plain"}, PING, S),
    Case("post_no_content_type", "POST", {"content-type": None}, PING, S),
    Case("post_content_type_params", "POST", {"content-type": "Application/JSON; charset=utf-8"}, PING, S),
    # the JSON itself
    Case("body_malformed_json", "POST", {}, b'{"jsonrpc": "2.0", "id": 1,', S),
    Case("body_nan", "POST", {}, b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', S),
    Case("body_empty", "POST", {}, b"", S),
    Case("body_invalid_utf8", "POST", {}, b'{"jsonrpc": "2.0", "id": 1, "method": "ping\xff"}', S),
    Case("body_utf8_bom", "POST", {}, b"\xef\xbb\xbf" + PING, S),
    Case("body_utf16", "POST", {}, PING.decode().encode("utf-16"), S),
    Case("body_lone_surrogate", "POST", {}, rpc(id=1, method="ping", params={"x": "\ud800"}), S),
    Case("body_deep_nesting", "POST", {}, DEEP, S),
    # the envelope
    Case("batch_requests", "POST", {}, b"[" + PING + b", " + rpc(id=2, method="ping") + b"]", S),
    Case("batch_empty", "POST", {}, b"[]", S),
    Case("json_string", "POST", {}, b'"ping"', S),
    Case("json_number", "POST", {}, b"42", S),
    Case("json_null", "POST", {}, b"null", S),
    Case("jsonrpc_missing", "POST", {}, json.dumps({"id": 1, "method": "ping"}).encode(), S),
    Case("jsonrpc_1_0", "POST", {}, json.dumps({"jsonrpc": "1.0", "id": 1, "method": "ping"}).encode(), S),
    Case("jsonrpc_number", "POST", {}, b'{"jsonrpc": 2.0, "id": 1, "method": "ping"}', S),
    # request ids (each a ping in a valid session: a valid id is answered 200)
    Case("id_string", "POST", {}, rpc(id="a-1", method="ping"), S),
    Case("id_empty_string", "POST", {}, rpc(id="", method="ping"), S),
    Case("id_integer", "POST", {}, rpc(id=7, method="ping"), S),
    Case("id_negative_integer", "POST", {}, rpc(id=-7, method="ping"), S),
    Case("id_huge_integer", "POST", {}, rpc(id=2**70, method="ping"), S),
    Case("id_float", "POST", {}, rpc(id=1.5, method="ping"), S),
    Case("id_integral_float", "POST", {}, b'{"jsonrpc": "2.0", "id": 1.0, "method": "ping"}', S),
    Case("id_null", "POST", {}, rpc(id=None, method="ping"), S),
    Case("id_true", "POST", {}, rpc(id=True, method="ping"), S),
    Case("id_object", "POST", {}, rpc(id={"a": 1}, method="ping"), S),
    Case("id_array", "POST", {}, rpc(id=[1], method="ping"), S),
    Case("id_long_string", "POST", {}, rpc(id="i" * 20_000, method="ping"), S),
    # methods
    Case("method_not_string", "POST", {}, rpc(id=1, method=1), S),
    Case("method_missing", "POST", {}, rpc(id=1), S),
    Case("method_unknown", "POST", {}, rpc(id=1, method="no/such/method"), S),
    Case("server_discover_no_session", "POST", {}, rpc(id=1, method="server/discover")),
    # initialize and sessions
    Case("initialize_no_session", "POST", {}, INITIALIZE_BODY),
    Case("initialize_notification", "POST", {}, rpc(method="initialize", params={})),
    Case("initialize_unknown_version", "POST", {}, INITIALIZE_BODY.replace(VERSION.encode(), b"1999-01-01")),
    Case("tools_list_no_session", "POST", {}, LIST),
    Case("tools_list_unknown_session", "POST", {"mcp-session-id": UNKNOWN_SID}, LIST),
    Case("tools_list_valid_session", "POST", {}, LIST, S),
    Case("tools_list_no_protocol_version", "POST", {"mcp-protocol-version": None}, LIST, S),
    Case("tools_list_unknown_protocol_version", "POST", {"mcp-protocol-version": "1999-01-01"}, LIST, S),
    Case(
        "tools_list_unknown_version_unknown_session",
        "POST",
        {"mcp-session-id": UNKNOWN_SID, "mcp-protocol-version": "1999-01-01"},
        LIST,
    ),
    Case("tools_list_protocol_version_2026", "POST", {"mcp-protocol-version": "2026-07-28"}, LIST, S),
    # the body limit
    Case("body_at_limit", "POST", {}, padded(LIMIT), S),
    Case("body_over_limit", "POST", {}, padded(LIMIT + 1), S),
    Case("body_over_limit_chunked", "POST", {}, padded(LIMIT + 1), S, chunked=True),
    # notifications and responses
    Case("notification", "POST", {}, rpc(method="notifications/roots/list_changed"), S),
    Case("notification_no_session", "POST", {}, rpc(method="notifications/roots/list_changed")),
    Case("response_unknown_request", "POST", {}, rpc(id="srv-999", result={}), S),
    Case(
        "error_response_null_id",
        "POST",
        {},
        rpc(id=None, error={"code": -32700, "message": "Parse error"}),
        S,
    ),
    # GET: the standalone stream and resumption
    Case("get_no_accept", "GET", {"accept": None}, None, S),
    Case("get_accept_json", "GET", {"accept": JSON}, None, S),
    Case("get_no_session", "GET"),
    Case("get_unknown_session", "GET", {"mcp-session-id": UNKNOWN_SID}),
    Case("get_valid_session", "GET", {}, None, S),
    Case("get_unknown_protocol_version", "GET", {"mcp-protocol-version": "1999-01-01"}, None, S),
    Case("get_last_event_id_garbage", "GET", {"last-event-id": "zzz"}, None, S),
    Case("get_last_event_id_unknown", "GET", {"last-event-id": "1-999999"}, None, S),
    Case("get_last_event_id_zero", "GET", {"last-event-id": "1-0"}, None, S),
    Case("get_last_event_id_long", "GET", {"last-event-id": "1-" + "9" * 60}, None, S),
    Case("get_last_event_id_superscript_utf8", "GET", {"last-event-id": "1-²".encode()}, None, S),
    Case("get_last_event_id_superscript_latin1", "GET", {"last-event-id": b"1-\xb2"}, None, S),
    # DELETE
    Case("delete_no_session", "DELETE"),
    Case("delete_unknown_session", "DELETE", {"mcp-session-id": UNKNOWN_SID}),
    Case("delete_valid_session", "DELETE", {}, None, S),
    Case("post_after_delete", "POST", {}, LIST, "deleted"),
    Case("get_after_delete", "GET", {}, None, "deleted"),
    Case("delete_after_delete", "DELETE", {}, None, "deleted"),
    # other HTTP methods, paths, Host and Origin
    Case("put", "PUT", {}, PING, S),
    Case("patch", "PATCH", {}, PING, S),
    Case("head", "HEAD", {}, None, S),
    Case("options_preflight", "OPTIONS", PREFLIGHT),
    Case("wrong_path", "POST", {}, PING, S, path="/other"),
    Case("foreign_host", "POST", {"host": "evil.example"}, PING, S),
    Case("foreign_origin", "POST", {"origin": "https://evil.example"}, PING, S),
    Case("loopback_origin", "POST", {"origin": "http://localhost:1234"}, LIST, S),
]


def open_session(client: httpx.Client, url: str) -> str:
    """Initialize, then notifications/initialized: the session id."""
    sid = client.post(url, headers=DEFAULTS["POST"], content=INITIALIZE_BODY).headers["mcp-session-id"]
    headers = {**DEFAULTS["POST"], "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    client.post(url, headers=headers, content=rpc(method="notifications/initialized"))
    return sid


def run_case(client: httpx.Client, base: str, case: Case, modern: bool = False) -> dict[str, Any]:
    """Send one case (after its session's initialize; ``modern``: as a 2026-07-28 client,
    with no session and its revision named); what came back."""
    url = base + case.path
    headers: dict[str, Any] = dict(DEFAULTS.get(case.method, {}))  # str or raw bytes values
    try:
        if modern:
            headers["mcp-protocol-version"] = MODERN
        elif case.needs_session:
            sid = open_session(client, base + "/mcp")
            headers.update({"mcp-session-id": sid, "mcp-protocol-version": VERSION})
            if case.needs_session == "deleted":
                client.delete(base + "/mcp", headers={"mcp-session-id": sid})
        for name, value in case.headers.items():
            if value is None:
                headers.pop(name, None)
            else:
                headers[name] = value
        body = case.body
        content = _pieces(body) if case.chunked and body is not None else body
        request = client.build_request(case.method, url, headers=headers, content=content)
        response = client.send(request, stream=True)
        try:
            return _answer(response, read=not (case.method == "GET" and response.status_code == 200))
        finally:
            response.close()
    except httpx.HTTPError as failed:
        return {"status": None, "content_type": None, "code": None, "id": None, "message": repr(failed)}


def _pieces(body: bytes) -> Iterator[bytes]:
    for start in range(0, len(body), 16 * 1024):
        yield body[start : start + 16 * 1024]


def _answer(response: httpx.Response, *, read: bool) -> dict[str, Any]:
    """Status, media type and the JSON-RPC message's code, id and error text; a GET stream
    that succeeded is left unread (it never ends)."""
    ctype = (response.headers.get("content-type") or "").split(";")[0].strip().lower() or None
    message = None
    if read and ctype == SSE:
        message = _first_sse_message(response)
    elif read and ctype == JSON:
        try:
            message = json.loads(response.read())
        except ValueError:
            message = None
    error = message.get("error") if isinstance(message, dict) else None
    error = error if isinstance(error, dict) else {}
    return {
        "status": response.status_code,
        "content_type": ctype,
        "code": error.get("code"),
        "id": _short(message.get("id")) if isinstance(message, dict) else None,
        "message": error.get("message"),
    }


def _first_sse_message(response: httpx.Response) -> Any:
    """The JSON of the first non-empty ``data:`` line (the priming event's is empty)."""
    deadline = time.monotonic() + 10
    for line in response.iter_lines():
        if line.startswith("data:") and line[5:].strip():
            try:
                return json.loads(line[5:])
            except ValueError:
                return None
        if time.monotonic() > deadline:
            break
    return None


def _short(ident: Any) -> Any:
    return f"<string of {len(ident)} chars>" if isinstance(ident, str) and len(ident) > 80 else ident


def run_all(base: str, *, modern: bool = False) -> dict[str, dict[str, Any]]:
    """Every case (``modern``: the `FRONT` ones, as a 2026-07-28 client sends them)."""
    cases = [case for case in CASES if case.name in FRONT] if modern else CASES
    with httpx.Client(timeout=TIMEOUT) as client:
        del client.headers["accept"]  # httpx sends Accept: */* unless told not to
        return {case.name: run_case(client, base, case, modern) for case in cases}


@contextlib.contextmanager
def serve_both() -> Iterator[tuple[str, str]]:
    """The base URLs of the reference server and of a gateway in front of another one, each
    given the matrix's limits, while the generator is suspended."""
    with serve_all() as bases:
        yield bases["reference"], bases["gateway"]


@contextlib.contextmanager
def serve_all() -> Iterator[dict[str, str]]:
    """The base URLs of the reference server, a gateway in front of another one, and the
    bridge both ways (``bridge``: to clients with sessions, a stateless upstream;
    ``bridge-stateless``: to stateless clients, an upstream with sessions), each given the
    matrix's limits, while the generator is suspended."""
    from ssewire.mcp.bridge import Bridge
    from ssewire.mcp.bridge.limits import Settings
    from ssewire.mcp.gateway import Gateway
    from ssewire.mcp.reference import ReferenceServer
    from ssewire.mcp.transport.serving import running

    settings = Settings(max_message_size=LIMIT, max_sessions=SESSIONS, max_sessions_per_principal=None)
    with contextlib.ExitStack() as stack:
        reference = stack.enter_context(running(ReferenceServer(max_body=LIMIT, max_sessions=SESSIONS)))
        # the upstreams keep their default limit: a relay sends a message with an id of its own
        # (longer), so one at LIMIT would be refused upstream and hide the relay's own answer
        upstream = stack.enter_context(running(ReferenceServer(max_sessions=SESSIONS))) + "/mcp"
        stateless = stack.enter_context(running(ReferenceServer(profile=MODERN))) + "/mcp"
        gateway = Gateway(upstream, max_message_size=LIMIT, max_sessions=SESSIONS, timeout=10.0)
        yield {
            "reference": reference,
            "gateway": stack.enter_context(running(gateway)),
            "bridge": stack.enter_context(
                running(Bridge(stateless, upstream_revision=MODERN, settings=settings))
            ),
            "bridge-stateless": stack.enter_context(
                running(Bridge(upstream, upstream_revision=VERSION, settings=settings))
            ),
        }


# (status, JSON-RPC code) both servers answer each case with
EXPECTED: dict[str, tuple[int | None, int | None]] = {
    # the gateway sends discover up as it came (transparent), and this 2025-11-25 reference refuses it
    "server_discover_no_session": (400, -32600),
    "post_no_accept": (406, -32600),
    "post_accept_json_only": (406, -32600),
    "post_accept_sse_only": (406, -32600),
    "post_accept_sse_q0": (406, -32600),
    "post_accept_wildcard": (200, None),
    "post_content_type_text": (415, -32600),
    "post_no_content_type": (415, -32600),
    "post_content_type_params": (200, None),
    "body_malformed_json": (400, -32700),
    "body_nan": (400, -32700),
    "body_empty": (400, -32700),
    "body_invalid_utf8": (400, -32700),
    "body_utf8_bom": (400, -32700),
    "body_utf16": (400, -32700),
    "body_lone_surrogate": (400, -32700),
    "body_deep_nesting": (400, -32700),
    "batch_requests": (400, -32600),
    "batch_empty": (400, -32600),
    "json_string": (400, -32600),
    "json_number": (400, -32600),
    "json_null": (400, -32600),
    "jsonrpc_missing": (400, -32600),
    "jsonrpc_1_0": (400, -32600),
    "jsonrpc_number": (400, -32600),
    "id_string": (200, None),
    "id_empty_string": (200, None),
    "id_integer": (200, None),
    "id_negative_integer": (200, None),
    "id_huge_integer": (400, -32600),
    "id_float": (400, -32600),
    "id_integral_float": (200, None),
    "id_null": (400, -32600),
    "id_true": (400, -32600),
    "id_object": (400, -32600),
    "id_array": (400, -32600),
    "id_long_string": (200, None),
    "method_not_string": (400, -32600),
    "method_missing": (400, -32600),
    "method_unknown": (200, -32601),
    "initialize_no_session": (200, None),
    "initialize_notification": (400, -32600),
    "initialize_unknown_version": (200, None),
    "tools_list_no_session": (400, -32600),
    "tools_list_unknown_session": (404, -32001),
    "tools_list_valid_session": (200, None),
    "tools_list_no_protocol_version": (200, None),
    "tools_list_unknown_protocol_version": (400, -32600),
    "tools_list_unknown_version_unknown_session": (400, -32600),
    "body_at_limit": (200, None),
    "body_over_limit": (413, -32600),
    "body_over_limit_chunked": (413, -32600),
    "notification": (202, None),
    "notification_no_session": (400, -32600),
    "response_unknown_request": (400, -32600),  # no request awaits it: refused, never held
    "error_response_null_id": (400, -32600),
    "get_no_accept": (406, -32600),
    "get_accept_json": (406, -32600),
    "get_no_session": (400, -32600),
    "get_unknown_session": (404, -32001),
    "get_valid_session": (200, None),
    "get_unknown_protocol_version": (400, -32600),
    "get_last_event_id_garbage": (409, -32000),
    "get_last_event_id_unknown": (409, -32000),
    "get_last_event_id_zero": (409, -32000),
    "get_last_event_id_long": (409, -32000),
    "get_last_event_id_superscript_utf8": (409, -32000),
    "get_last_event_id_superscript_latin1": (409, -32000),
    "delete_no_session": (400, -32600),
    "delete_unknown_session": (404, -32001),
    "delete_valid_session": (200, None),
    "post_after_delete": (404, -32001),
    "get_after_delete": (404, -32001),
    "delete_after_delete": (404, -32001),
    "put": (405, None),
    "patch": (405, None),
    "head": (405, None),
    "options_preflight": (204, None),
    "wrong_path": (404, None),
    "foreign_host": (403, None),
    "foreign_origin": (403, None),
    "loopback_origin": (200, None),
}

# The answers the front gives before any revision's rules: the same to a 2026-07-28 client.
FRONT = frozenset(
    {
        *(name for name in EXPECTED if name.startswith(("post_accept_sse", "body_", "batch_", "json_"))),
        *(name for name in EXPECTED if name.startswith(("jsonrpc_", "method_not", "method_missing"))),
        "post_no_accept",
        "post_accept_json_only",
        "post_content_type_text",
        "post_no_content_type",
        "id_huge_integer",
        "id_float",
        "id_null",
        "id_true",
        "id_object",
        "id_array",
        "put",
        "patch",
        "head",
        "options_preflight",
        "wrong_path",
        "foreign_host",
        "foreign_origin",
    }
    - {"body_at_limit"}
)

# A server's own answer to a case, where it differs from `EXPECTED`, and why.
BY_SERVER: dict[str, dict[str, tuple[int | None, int | None]]] = {
    # the bridge says why it will not: the method is the stateless revision's (-32601, not -32600)
    "server_discover_no_session": {"bridge": (400, -32601)},
}

# The gateway speaks 2026-07-28 too, the reference server (2025-11-25 here) does not: a
# request that names that revision is the newer revision's to judge at the gateway (its
# headers disagree with the body: -32020), a request of the older one at the reference.
BY_PROFILE: dict[str, dict[str, tuple[int | None, int | None]]] = {
    "tools_list_protocol_version_2026": {
        "reference": (200, None),
        "gateway": (400, -32020),
        "bridge": (200, None),
    },
}
