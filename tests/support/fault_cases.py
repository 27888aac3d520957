"""One fault per finding code: each case edits a conformant session (its valid twin) to
break exactly one rule, and names the codes, the level and the exit code it must produce."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.conformant_sessions import BASES, find
from tests.support.transcripts import (
    BOTH,
    JSON_HEADERS,
    SSE,
    SSE_HEADERS,
    V11,
    V26,
    chunks,
    error,
    event,
    exchange,
    meta,
    notification,
    priming,
    progress,
    request,
    result,
)


@dataclass(frozen=True)
class Case:
    name: str  # "<code>" or "<code>-<variant>"
    base: str
    fault: Callable[[dict], None]
    expected: frozenset[str]  # error / warning codes the faulty transcript must produce
    exit_code: int  # of `ssewire validate` (1: an error-level finding; warnings alone pass)
    levels: frozenset[str] = frozenset({"error"})  # the levels of the named code's findings, exactly

    @property
    def code(self) -> str:
        return self.name.split("-", 1)[0]  # codes use underscores, variants follow a dash

    def valid(self) -> dict:
        return BASES[self.base]()

    def invalid(self) -> dict:
        document = copy.deepcopy(self.valid())
        self.fault(document)
        return document


def _set(ident: str, *path: str, value):
    def fault(document: dict) -> None:
        target = find(document, ident)
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return fault


def _rejected(ident: str, answer: dict):
    """The server answered 400 with this JSON-RPC error."""
    return _all(_set(ident, "response", "status", value=400), _set(ident, "response", "body", value=answer))


def _drop_header(ident: str, side: str, name: str):
    def fault(document: dict) -> None:
        del find(document, ident)[side]["headers"][name]

    return fault


def _all(*faults):
    def fault(document: dict) -> None:
        for one in faults:
            one(document)

    return fault


def _every_request_header(name: str, value: str):
    def fault(document: dict) -> None:
        for item in document["exchanges"]:
            if name in item["request"]["headers"]:
                item["request"]["headers"][name] = value
        for item in document["exchanges"]:
            if name in item["response"]["headers"]:
                item["response"]["headers"][name] = value

    return fault


def _cut_last_chunk(ident: str, *, disconnected: bool):
    """The body ends inside its last event: the server ended it there, or the connection dropped."""

    def fault(document: dict) -> None:
        response = find(document, ident)["response"]
        response["chunks"] = response["chunks"][:-1]
        response["disconnected"] = disconnected

    return fault


def _append_event(ident: str, text: str):
    def fault(document: dict) -> None:
        find(document, ident)["response"]["chunks"] += chunks(text)

    return fault


def _replace_events(ident: str, *texts: str):
    return _set(ident, "response", "chunks", value=chunks(*texts))


C = Case
CASES: list[Case] = [
    # contract codes
    C(
        "invalid_post_accept",
        V11,
        _set("call-echo", "request", "headers", "Accept", value="application/json"),
        frozenset({"invalid_post_accept"}),
        exit_code=1,
    ),
    C(
        "invalid_get_accept",
        V11,
        _set("listen", "request", "headers", "Accept", value="application/json"),
        frozenset({"invalid_get_accept"}),
        exit_code=1,
    ),
    C(
        "protocol_version_mismatch-missing",
        V11,
        _drop_header("list-tools", "request", "MCP-Protocol-Version"),
        frozenset({"protocol_version_mismatch"}),
        exit_code=1,
    ),
    C(
        "protocol_version_mismatch-other",
        V11,
        _set("list-tools", "request", "headers", "MCP-Protocol-Version", value="2025-06-18"),
        frozenset({"protocol_version_mismatch"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "protocol_version_mismatch-2026",
        V26,
        _all(
            _set("list-tools", "request", "headers", "MCP-Protocol-Version", value="2025-11-25"),
            _rejected("list-tools", error(1, -32020, "header mismatch")),
        ),
        frozenset({"protocol_version_mismatch"}),
        exit_code=1,
    ),
    C(
        "method_header_mismatch",
        V26,
        _all(
            _set("list-tools", "request", "headers", "Mcp-Method", value="tools/call"),
            _rejected("list-tools", error(1, -32020, "header mismatch")),
        ),
        frozenset({"method_header_mismatch"}),
        exit_code=1,
    ),
    C(
        "method_header_mismatch-missing",
        V26,
        _all(
            _drop_header("list-tools", "request", "Mcp-Method"),
            _rejected("list-tools", error(1, -32020, "header mismatch")),
        ),
        frozenset({"method_header_mismatch"}),
        exit_code=1,
    ),
    C(
        "invalid_response_content_type",
        V11,
        _set("list-tools", "response", "headers", "Content-Type", value="text/plain"),
        frozenset({"invalid_response_content_type"}),
        exit_code=1,
    ),
    C(
        "invalid_sse_json",
        V11,
        _replace_events("call-echo", priming("a-1"), event("{not json", "a-2"), event(result(2), "a-3")),
        frozenset({"invalid_sse_json"}),
        exit_code=1,
    ),
    C(
        "incomplete_sse_event",
        V11,
        _cut_last_chunk("call-echo", disconnected=False),
        frozenset({"incomplete_sse_event"}),
        exit_code=1,
    ),
    C(
        "incomplete_sse_event-disconnected",
        V11,
        _cut_last_chunk("call-echo", disconnected=True),
        frozenset({"incomplete_sse_event"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "get_removed_in_profile",
        V26,
        lambda d: d["exchanges"].append(
            exchange("listen", "GET", {"Accept": SSE, "MCP-Protocol-Version": V26}, 405)
        ),
        frozenset({"get_removed_in_profile"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "get_removed_in_profile-served",
        V26,
        lambda d: d["exchanges"].append(
            exchange(
                "listen",
                "GET",
                {"Accept": SSE, "MCP-Protocol-Version": V26},
                200,
                response_headers=dict(SSE_HEADERS),
                response_chunks=chunks(event(notification("notifications/tools/list_changed"))),
            )
        ),
        frozenset({"get_removed_in_profile"}),
        exit_code=1,
        levels=frozenset({"warning", "error"}),  # the client's GET, and the server serving it
    ),
    C(
        "session_header_removed",
        V26,
        _set("list-tools", "response", "headers", "Mcp-Session-Id", value="s1"),
        frozenset({"session_header_removed"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "resumability_removed",
        V26,
        _set("call-echo", "request", "headers", "Last-Event-ID", value="x-1"),
        frozenset({"resumability_removed"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "event_id_removed",
        V26,
        _replace_events("call-echo", event(progress(2), "1"), event(result(2, {"content": []}), "2")),
        frozenset({"event_id_removed"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "cross_stream_duplicate",
        V11,
        _append_event("listen", event(result(2, {"content": []}), "g-3")),
        frozenset({"cross_stream_duplicate", "response_on_standalone_get"}),
        exit_code=1,
    ),
    C(
        "cross_stream_duplicate-request",
        V11,
        _replace_events(
            "call-echo", priming("a-1"), event(request("srv-1", "ping"), "a-2"), event(result(2), "a-3")
        ),
        frozenset({"cross_stream_duplicate"}),
        exit_code=1,
    ),
    C(
        "cross_stream_duplicate-notification",
        V11,
        _replace_events(
            "call-echo",
            priming("a-1"),
            event(notification("notifications/tools/list_changed"), "a-2"),
            event(result(2), "a-3"),
        ),
        frozenset({"cross_stream_duplicate"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    # further rules
    C(
        "delete_removed_in_profile",
        V26,
        lambda d: d["exchanges"].append(exchange("delete", "DELETE", {"MCP-Protocol-Version": V26}, 405)),
        frozenset({"delete_removed_in_profile"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "post_not_answered_202",
        V11,
        _set("initialized", "response", "status", value=200),
        frozenset({"post_not_answered_202"}),
        exit_code=1,
    ),
    C(
        "batch_not_allowed",
        V11,
        _set("list-tools", "request", "body", value=[request(4, "tools/list")]),
        frozenset({"batch_not_allowed"}),
        exit_code=1,
    ),
    C(
        "invalid_request_body",
        V11,
        _all(
            lambda d: find(d, "list-tools")["request"].pop("body"),
            _set("list-tools", "request", "body_text", value="{not json"),
            _rejected("list-tools", error(None, -32700, "Parse error")),
        ),
        frozenset({"invalid_request_body"}),
        exit_code=1,
    ),
    C(
        "invalid_request_body-client_response",
        V26,
        _set("cancel", "request", "body", value=result(9)),
        frozenset({"invalid_request_body"}),
        exit_code=1,
    ),
    C(
        "invalid_json_response",
        V11,
        _set("list-tools", "response", "body", value=result(99)),
        frozenset({"invalid_json_response"}),
        exit_code=1,
    ),
    C(
        "response_not_delivered",
        V26,
        _replace_events("call-echo", event(progress(2))),
        frozenset({"response_not_delivered"}),
        exit_code=1,
    ),
    C(
        "session_id_missing",
        V11,
        _all(
            _drop_header("list-tools", "request", "Mcp-Session-Id"),
            _rejected("list-tools", error(None, -32600, "Missing session")),
        ),
        frozenset({"session_id_missing"}),
        exit_code=1,
    ),
    C(
        "missing_session_not_rejected",
        V11,
        _drop_header("list-tools", "request", "Mcp-Session-Id"),
        frozenset({"session_id_missing", "missing_session_not_rejected"}),
        exit_code=1,
        levels=frozenset({"warning"}),
    ),
    C(
        "unknown_session_not_404",
        V11,
        _all(
            _set("after-delete", "response", "status", value=200),
            _set("after-delete", "response", "body", value=result(5)),
        ),
        frozenset({"unknown_session_not_404"}),
        exit_code=1,
    ),
    C(
        "invalid_session_id",
        V11,
        _every_request_header("Mcp-Session-Id", "caf\u00e9 1"),
        frozenset({"invalid_session_id"}),
        exit_code=1,
    ),
    C(
        "duplicate_event_id",
        V11,
        _replace_events(
            "listen",
            event(notification("notifications/tools/list_changed"), "a-2"),
            event(request("srv-1", "ping"), "g-2"),
        ),
        frozenset({"duplicate_event_id"}),
        exit_code=1,
    ),
    C(
        "resume_replayed_before_cursor",
        V11,
        _replace_events("resume-slow", event(progress(3), "b-2"), event(result(3, {"content": []}), "b-3")),
        frozenset({"resume_replayed_before_cursor"}),
        exit_code=1,
    ),
    C(
        "resume_replayed_other_stream",
        V11,
        _replace_events(
            "resume-slow", event(result(2, {"content": []}), "a-3"), event(result(3, {"content": []}), "b-3")
        ),
        frozenset({"resume_replayed_other_stream"}),
        exit_code=1,
    ),
    C(
        "last_event_id_unknown",
        V11,
        _set("resume-slow", "request", "headers", "Last-Event-ID", value="zz-9"),
        frozenset({"last_event_id_unknown"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "last_event_id_on_post",
        V11,
        _set("list-tools", "request", "headers", "Last-Event-ID", value="a-3"),
        frozenset({"last_event_id_on_post"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "response_on_standalone_get",
        V11,
        _append_event("listen", event(result(77), "g-3")),
        frozenset({"response_on_standalone_get"}),
        exit_code=1,
    ),
    C(
        "name_header_mismatch",
        V26,
        _all(
            _set("call-echo", "request", "headers", "Mcp-Name", value="other"),
            lambda d: find(d, "call-echo")["response"].pop("chunks"),
            _set("call-echo", "response", "headers", value=dict(JSON_HEADERS)),
            _rejected("call-echo", error(2, -32020, "header mismatch")),
        ),
        frozenset({"name_header_mismatch"}),
        exit_code=1,
    ),
    C(
        "header_mismatch_not_rejected",
        V26,
        _set("list-tools", "request", "headers", "Mcp-Method", value="tools/call"),
        frozenset({"method_header_mismatch", "header_mismatch_not_rejected"}),
        exit_code=1,
    ),
    C(
        "header_mismatch_not_rejected-wrong_code",
        V26,
        _all(
            _set("list-tools", "request", "headers", "Mcp-Method", value="tools/call"),
            _rejected("list-tools", error(1, -32600, "bad request")),
        ),
        frozenset({"method_header_mismatch", "header_mismatch_not_rejected"}),
        exit_code=1,
    ),
    C(
        "unsupported_version_not_rejected",
        V26,
        _all(
            _set("list-tools", "request", "headers", "MCP-Protocol-Version", value="2099-01-01"),
            _set("list-tools", "request", "body", value=request(1, "tools/list", meta("2099-01-01"))),
        ),
        frozenset({"unsupported_version_not_rejected"}),
        exit_code=1,
    ),
    C(
        "unsupported_version_not_rejected-legacy",
        V11,
        _set("list-tools", "request", "headers", "MCP-Protocol-Version", value="2099-01-01"),
        frozenset({"protocol_version_mismatch", "unsupported_version_not_rejected"}),
        exit_code=1,
    ),
    C(
        "duplicate_header",
        V11,
        _set("list-tools", "request", "headers", "accept", value=BOTH),
        frozenset({"duplicate_header"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "unredacted_credential",
        V11,
        _set("list-tools", "request", "headers", "Authorization", value="Bearer sk-live-0123456789abcdef"),
        frozenset({"unredacted_credential"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
    C(
        "unredacted_credential-url",
        V11,
        _set("list-tools", "request", "url", value="/mcp?access_token=abcdef0123456789"),
        frozenset({"unredacted_credential"}),
        exit_code=0,
        levels=frozenset({"warning"}),
    ),
]
del C
