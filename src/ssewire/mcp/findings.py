"""Findings and the catalogue of their codes.

The codes are a contract: tools and baselines match on them, so a code is never renamed
and never reused for another rule. Each one names the requirement it rests on: a section
of the revision's transport page and its keyword (MUST / SHOULD / MAY), or "convention"
for a behaviour that is an SDK habit rather than the spec.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR, WARNING, INFO = "error", "warning", "info"
LEVELS = (ERROR, WARNING, INFO)
DETECTED, SUSPECTED = "detected", "suspected"


@dataclass(frozen=True)
class Rule:
    level: str  # the usual level; a check may lower or raise it for one finding
    keyword: str  # MUST, MUST NOT, SHOULD, ..., or "convention"
    section: str  # the section of the transport page ("" for transcript hygiene)
    hint: str  # how to fix it


R = Rule
RULES: dict[str, Rule] = {
    # --- the contract codes named by the transcript validator's specification ---
    "invalid_post_accept": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "send 'Accept: application/json, text/event-stream' on every POST",
    ),
    "invalid_get_accept": R(
        ERROR, "MUST", "Listening for Messages from the Server", "send 'Accept: text/event-stream' on the GET"
    ),
    "protocol_version_mismatch": R(
        ERROR,
        "MUST",
        "Protocol Version Header",
        "send MCP-Protocol-Version with the revision in use (the negotiated one; in 2026-07-28 the body's _meta protocolVersion) on every request but initialize",
    ),
    "method_header_mismatch": R(
        ERROR,
        "MUST",
        "Standard Request Headers",
        "send Mcp-Method equal to the body's method on every request",
    ),
    "invalid_response_content_type": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "answer a request with Content-Type application/json or text/event-stream",
    ),
    "invalid_sse_json": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "put exactly one JSON-RPC message, as JSON, in each SSE event's data",
    ),
    "incomplete_sse_event": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "end every event with a blank line before the stream ends; a client must drop a torn event",
    ),
    "get_removed_in_profile": R(
        WARNING,
        "SHOULD",
        "Backward Compatibility",
        "this revision has no GET stream: use the POST streams; servers answer GET with 405",
    ),
    "session_header_removed": R(
        WARNING,
        "SHOULD NOT",
        "Backward Compatibility",
        "this revision has no sessions: do not send or assign Mcp-Session-Id",
    ),
    "resumability_removed": R(
        WARNING,
        "SHOULD NOT",
        "Backward Compatibility",
        "this revision has no stream resumption: re-send the request with a new id instead",
    ),
    "event_id_removed": R(
        WARNING,
        "SHOULD NOT",
        "Backward Compatibility",
        "this revision has no resumption: SSE event ids have no meaning, leave them out",
    ),
    "cross_stream_duplicate": R(
        ERROR,
        "MUST NOT",
        "Multiple Connections",
        "send each message on exactly one stream; never broadcast it to several",
    ),
    # --- further rules ---
    "delete_removed_in_profile": R(
        WARNING,
        "SHOULD",
        "Backward Compatibility",
        "this revision has no sessions to end: do not send DELETE; servers answer it with 405",
    ),
    "post_not_answered_202": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "answer an accepted notification or response with 202 and no body (or reject it with 4xx)",
    ),
    "batch_not_allowed": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "send one JSON-RPC message per POST: this revision has no batches",
    ),
    "invalid_request_body": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "POST a single valid JSON-RPC request, notification or response",
    ),
    "invalid_json_response": R(
        ERROR,
        "MUST",
        "Sending Messages to the Server",
        "answer with one JSON-RPC response whose id is the request's id",
    ),
    "response_not_delivered": R(
        WARNING,
        "SHOULD",
        "Sending Messages to the Server",
        "send the JSON-RPC response on the request's stream before ending it",
    ),
    "session_id_missing": R(
        ERROR,
        "MUST",
        "Session Management",
        "send the Mcp-Session-Id from the initialize response on every later request",
    ),
    "missing_session_not_rejected": R(
        WARNING,
        "SHOULD",
        "Session Management",
        "answer a non-initialize request without Mcp-Session-Id with 400",
    ),
    "unknown_session_not_404": R(
        ERROR,
        "MUST",
        "Session Management",
        "answer a request with a terminated or unknown session id with 404",
    ),
    "invalid_session_id": R(
        ERROR, "MUST", "Session Management", "use only visible ASCII (0x21-0x7E) in Mcp-Session-Id"
    ),
    "duplicate_event_id": R(
        ERROR,
        "MUST",
        "Resumability and Redelivery",
        "make SSE event ids unique across all streams of a session",
    ),
    "resume_replayed_before_cursor": R(
        ERROR,
        "MUST NOT",
        "Resumability and Redelivery",
        "on resumption, replay only the events after Last-Event-ID",
    ),
    "resume_replayed_other_stream": R(
        ERROR,
        "MUST NOT",
        "Resumability and Redelivery",
        "on resumption, replay only the stream that Last-Event-ID belongs to",
    ),
    "last_event_id_unknown": R(
        WARNING,
        "SHOULD",
        "Resumability and Redelivery",
        "resume with the id of the last event this client received on that stream",
    ),
    "last_event_id_on_post": R(
        WARNING,
        "SHOULD",
        "Resumability and Redelivery",
        "resume a broken stream with GET + Last-Event-ID; a POST is a new request",
    ),
    "response_on_standalone_get": R(
        ERROR,
        "MUST NOT",
        "Listening for Messages from the Server",
        "send responses on the POST stream of their request; the GET stream carries requests and notifications",
    ),
    "name_header_mismatch": R(
        ERROR,
        "MUST",
        "Standard Request Headers",
        "send Mcp-Name equal to params.name (tools/call, prompts/get) or params.uri (resources/read)",
    ),
    "header_mismatch_not_rejected": R(
        ERROR,
        "MUST",
        "Server Validation",
        "answer a request whose MCP headers are missing or disagree with the body with 400 and error -32020",
    ),
    "unsupported_version_not_rejected": R(
        ERROR,
        "MUST",
        "Protocol Version Header",
        "answer an unsupported MCP-Protocol-Version with 400 (2026-07-28: error -32022)",
    ),
    "duplicate_header": R(
        WARNING,
        "convention",
        "",
        "record each header once: two spellings of one name make its value ambiguous",
    ),
    "unredacted_credential": R(
        WARNING, "convention", "", "run `ssewire redact` on the transcript before sharing it"
    ),
    "profile_alias": R(INFO, "convention", "", "name the published revision in the transcript"),
    "profile_overridden": R(INFO, "convention", "", "the --profile option replaced the transcript's profile"),
    "negotiated_version_differs": R(
        INFO,
        "convention",
        "Version Negotiation",
        "the session negotiated another revision than the profile; pass --profile with it",
    ),
}
del R


@dataclass(frozen=True)
class Finding:
    code: str
    level: str
    status: str  # "detected" (seen in the bytes) or "suspected" (inferred)
    requirement: str  # e.g. "MCP 2025-11-25 basic/transports, Session Management: MUST"
    exchange: str | None  # the exchange id, None for the whole transcript
    path: str  # JSON-pointer-like: where in the transcript
    message: str  # never contains a credential, session id or event id value
    hint: str

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "level": self.level,
            "status": self.status,
            "requirement": self.requirement,
            "exchange": self.exchange,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
        }


# 2026-07-28 split the transport page and renamed its sections.
SECTIONS_2026 = {
    "Sending Messages to the Server": "Sending Messages",
    "Multiple Connections": "Sending Messages",
    "Protocol Version Header": "Request Metadata > Protocol Version Header",
    "Backward Compatibility": "Backward Compatibility > Earlier Streamable HTTP Revisions",
}


def requirement(code: str, spec_page: str, modern: bool = False) -> str:
    """Where the rule is written: ``"<page>, <section>: <KEYWORD>"`` or ``"convention"``."""
    rule = RULES[code]
    section = SECTIONS_2026.get(rule.section, rule.section) if modern else rule.section
    if rule.keyword == "convention":
        return "convention" if not section else f"convention ({spec_page}, {section})"
    return f"{spec_page}, {section}: {rule.keyword}"
