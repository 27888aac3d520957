"""What the reference server and the gateway answer to the same bad (and a few good) requests.

Both check what a client sends them (Accept, Content-Type, the body limit, the JSON, the
JSON-RPC envelope and ids, the session, MCP-Protocol-Version, Last-Event-ID) with code of
their own. This script sends one matrix of raw HTTP requests to each and records, per case,
the HTTP status, the response's media type, the JSON-RPC error code and id (from a JSON body,
or the first JSON ``data:`` line of an SSE body) and the error text (kept apart: wording may
differ). Captured before and after a refactor, it shows the two still answer alike.

    python scripts/inbound_matrix.py capture OUT.json     # run both servers, record
    python scripts/inbound_matrix.py table OUT.json       # a Markdown table, "same" per case
    python scripts/inbound_matrix.py diff OLD.json NEW.json   # (status, code) changes; exit 1 if any

Everything binds 127.0.0.1 and every request is bounded in time. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

FORMAT = "ssewire-inbound-matrix/1"
VERSION = "2025-11-25"
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
INITIALIZE = rpc(
    id=0,
    method="initialize",
    params={"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "matrix", "version": "1"}},
)
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
    Case("initialize_no_session", "POST", {}, INITIALIZE),
    Case("initialize_notification", "POST", {}, rpc(method="initialize", params={})),
    Case("initialize_unknown_version", "POST", {}, INITIALIZE.replace(VERSION.encode(), b"1999-01-01")),
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
    sid = client.post(url, headers=DEFAULTS["POST"], content=INITIALIZE).headers["mcp-session-id"]
    headers = {**DEFAULTS["POST"], "mcp-session-id": sid, "mcp-protocol-version": VERSION}
    client.post(url, headers=headers, content=rpc(method="notifications/initialized"))
    return sid


def run_case(client: httpx.Client, base: str, case: Case) -> dict[str, Any]:
    """Send one case (after its session's initialize); what came back."""
    url = base + case.path
    headers: dict[str, Any] = dict(DEFAULTS.get(case.method, {}))  # str or raw bytes values
    try:
        if case.needs_session:
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


def run_all(base: str) -> dict[str, dict[str, Any]]:
    with httpx.Client(timeout=TIMEOUT) as client:
        del client.headers["accept"]  # httpx sends Accept: */* unless told not to
        return {case.name: run_case(client, base, case) for case in CASES}


def capture(out: Path) -> None:
    from ssewire.mcp.gateway import Gateway
    from ssewire.mcp.live.server import ReferenceServer, running

    with running(ReferenceServer(max_body=LIMIT, max_sessions=SESSIONS)) as base:
        answers = {"reference": run_all(base)}
    # the gateway's upstream keeps its default limit: the gateway relays a message with an id of
    # its own (longer), so one at LIMIT would be refused upstream and hide the gateway's answer
    with running(ReferenceServer(max_sessions=SESSIONS)) as upstream:
        gateway = Gateway(upstream + "/mcp", max_message_size=LIMIT, max_sessions=SESSIONS, timeout=10.0)
        with running(gateway) as base:
            answers["gateway"] = run_all(base)
    cases = {case.name: {server: answers[server][case.name] for server in answers} for case in CASES}
    out.write_text(json.dumps({"format": FORMAT, "cases": cases}, indent=1, ensure_ascii=False) + "\n")


def load(path: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise SystemExit(f"{path}: not a {FORMAT} file")
    return data["cases"]


def key(answer: dict[str, Any] | None) -> tuple[Any, Any]:
    return (answer or {}).get("status"), (answer or {}).get("code")


def cell(answer: dict[str, Any] | None) -> str:
    status, code = key(answer)
    return f"{status} / {code if code is not None else '-'}"


def table(path: Path) -> None:
    print("| case | reference | gateway | same |")
    print("|---|---|---|---|")
    for name, answers in load(path).items():
        reference, gateway = answers.get("reference"), answers.get("gateway")
        same = "yes" if key(reference) == key(gateway) else "no"
        print(f"| {name} | {cell(reference)} | {cell(gateway)} | {same} |")


def diff(old_path: Path, new_path: Path) -> int:
    old, new = load(old_path), load(new_path)
    changed = 0
    for name in [*old, *(name for name in new if name not in old)]:
        for server in ("reference", "gateway"):
            before, after = (old.get(name) or {}).get(server), (new.get(name) or {}).get(server)
            if key(before) != key(after):
                changed += 1
                print(f"{name} [{server}]: {cell(before)} -> {cell(after)}")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("capture").add_argument("out", type=Path)
    commands.add_parser("table").add_argument("file", type=Path)
    compare = commands.add_parser("diff")
    compare.add_argument("old", type=Path)
    compare.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "capture":
        capture(args.out)
    elif args.command == "table":
        table(args.file)
    else:
        return diff(args.old, args.new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
