"""The live probe's diagnostics: the catalogue, the verdict value, the release verdict.

A diagnostic is one question the probe asks a live server. Every one has a stable id, a
level (what a detected problem costs), the requirement it rests on (the transport page's
section and keyword, or ``convention`` where only SDKs decide, e.g. 406 / 415 / 429 /
CORS) and a fix hint for the three stacks people deploy: the TypeScript SDK, the Python
SDK, and a plain ASGI or Workers handler. Each verdict adds a status (detected /
suspected / not-checked / pass), a message and redacted evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .findings import Level, Status


@dataclass(frozen=True)
class Diagnostic:
    id: str
    level: Level
    requirement: str  # "<section>: <KEYWORD>" or "convention"
    ts: str  # the fix with the official TypeScript SDK
    python: str  # ... with the official Python SDK
    plain: str  # ... in a plain ASGI / Workers handler

    def hints(self) -> dict[str, str]:
        return {"typescript-sdk": self.ts, "python-sdk": self.python, "plain-handler": self.plain}


@dataclass(frozen=True)
class Verdict:
    id: str
    status: Status
    level: Level
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)  # method, status, headers: never secrets

    def as_dict(self) -> dict[str, Any]:
        entry = CATALOGUE[self.id]
        return {
            "id": self.id,
            "status": str(self.status),
            "level": str(self.level),
            "requirement": entry.requirement,
            "message": self.message,
            "evidence": self.evidence,
            "fix": entry.hints(),
        }


D = Diagnostic
E, W = Level.ERROR, Level.WARNING
_ALL = [
    D(
        "transport.accept-header-406",
        E,
        "Sending Messages to the Server / Listening for Messages: MUST (clients list both types); 406 is convention",
        "upgrade: the SDK's Accept check admits any order, parameters and q-values",
        "upgrade the mcp package; do not compare the Accept header as a string",
        "parse Accept as media ranges (order, parameters, q-values, */*); refuse only what cannot be served",
    ),
    D(
        "transport.get-stream-405",
        W,
        "Listening for Messages from the Server: MAY (405 is allowed, but server-initiated messages are then lost)",
        "serve GET on the MCP endpoint with the transport's handleRequest",
        "mount the session manager on GET as well as POST and DELETE",
        "answer GET with text/event-stream (a standalone stream) unless the server never sends on its own",
    ),
    D(
        "transport.unsupported-media-type-415",
        E,
        "Sending Messages to the Server: MUST (the body is JSON); 415 is convention",
        "let the SDK parse the body; do not compare Content-Type as a string",
        "upgrade the mcp package; accept parameters such as charset",
        "compare the media type case-insensitively and ignore its parameters",
    ),
    D(
        "transport.target-rate-limited-429",
        W,
        "convention",
        "raise the rate limit for the probe's address or exempt 127.0.0.1",
        "raise the rate limit for the probe's address or exempt 127.0.0.1",
        "send Retry-After with every 429; exempt health and conformance checks",
    ),
    D(
        "transport.cors-expose-headers-missing",
        W,
        "convention (a browser client cannot read Mcp-Session-Id otherwise)",
        "add exposedHeaders: ['Mcp-Session-Id', 'MCP-Protocol-Version'] to the cors() options",
        "CORSMiddleware(..., expose_headers=['Mcp-Session-Id', 'MCP-Protocol-Version'])",
        "send Access-Control-Expose-Headers: Mcp-Session-Id, MCP-Protocol-Version on cross-origin answers",
    ),
    D(
        "transport.sse-content-type-mismatch",
        E,
        "Sending Messages to the Server: MUST (application/json or text/event-stream)",
        "do not override the Content-Type the transport sets",
        "do not wrap the app in middleware that rewrites Content-Type",
        "label SSE answers text/event-stream and JSON answers application/json",
    ),
    D(
        "tool.output-contract-violation",
        E,
        "server/tools, Structured Content / Output Schema: MUST conform",
        "return structuredContent that validates against the tool's outputSchema",
        "return a value of the annotated return type (the SDK derives outputSchema from it)",
        "validate structuredContent against outputSchema before answering",
    ),
    D(
        "session.missing-id",
        W,
        "Session Management: SHOULD (400 for a request without Mcp-Session-Id)",
        "use the SDK's session handling (sessionIdGenerator) and let it answer 400",
        "use StreamableHTTPSessionManager; it answers 400 without a session id",
        "answer 400 to a non-initialize request without Mcp-Session-Id",
    ),
    D(
        "session.unknown-id",
        E,
        "Session Management: MUST (404 for a session that is not, or no longer, valid)",
        "look the id up in your session map and answer 404 when it is missing",
        "use StreamableHTTPSessionManager; it answers 404 for unknown ids",
        "answer 404 for an Mcp-Session-Id this server never issued or has ended",
    ),
    D(
        "session.reinitialize",
        E,
        "Session Management: MUST (a client whose session ended starts a new one with initialize)",
        "create a new transport for every initialize without a session id",
        "do not keep one session per process: each initialize gets its own",
        "accept initialize without Mcp-Session-Id at any time and assign a fresh id",
    ),
    D(
        "session.stickiness",
        E,
        "Session Management: the session id is honoured on every request",
        "share the session map across workers (or pin clients to one worker)",
        "run one worker, or share session state across workers",
        "store sessions where every replica behind the load balancer can find them",
    ),
    D(
        "session.delete",
        E,
        "Session Management: MUST (a terminated session answers 404)",
        "close and forget the transport on DELETE",
        "use StreamableHTTPSessionManager's DELETE handling",
        "on DELETE, end the session so later requests with its id get 404 (or answer DELETE 405)",
    ),
    D(
        "security.dns-rebinding",
        E,
        "Security Warning: MUST validate Origin (403); Host validation is convention",
        "enable DNS rebinding protection with allowedOrigins and allowedHosts",
        "TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=..., allowed_origins=...)",
        "answer 403 to a foreign Origin and to a Host this server is not",
    ),
    D(
        "stream.priming-missing",
        W,
        "Sending Messages to the Server (2025-11-25): SHOULD prime with an event id and empty data",
        "configure an eventStore so the transport primes and resumes streams",
        "pass an event_store to the session manager",
        "start every SSE answer with 'id: <id>' and an empty data line (and retry)",
    ),
    D(
        "stream.duplicate-event-id",
        E,
        "Resumability and Redelivery: MUST be unique across the session's streams",
        "let the eventStore generate ids (e.g. streamId + counter)",
        "make the EventStore's ids unique per session, not per stream",
        "prefix event ids with the stream, or use a session-wide counter",
    ),
    D(
        "stream.cross-stream-duplicate",
        E,
        "Multiple Connections: MUST NOT broadcast one message on several streams",
        "send related notifications with relatedRequestId so they go to one stream",
        "send notifications through the request's context, not the session broadcast",
        "route each message to exactly one stream",
    ),
    D(
        "stream.resume-replayed-before-cursor",
        E,
        "Resumability and Redelivery: MUST NOT replay events at or before Last-Event-ID",
        "replayEventsAfter must start strictly after the given id",
        "replay_events_after must start strictly after the given id",
        "replay only events with a position greater than the cursor's",
    ),
    D(
        "stream.resume-replayed-other-stream",
        E,
        "Resumability and Redelivery: MUST NOT replay another stream's messages",
        "replay only the stream the event id belongs to",
        "replay only the stream the event id belongs to",
        "map each event id to its stream and replay that stream only",
    ),
    D(
        "stream.eviction-not-signalled",
        E,
        "Resumability and Redelivery: a resumed stream continues the original (convention: refuse explicitly when it cannot)",
        "when the cursor was evicted, answer an error instead of replaying a gap",
        "when the cursor was evicted, answer an error instead of replaying a gap",
        "answer 409 with Retry-After (or an SSE error event) when the events after the cursor are gone",
    ),
    D(
        "stream.keepalive-missing",
        W,
        "convention (proxies close idle connections, often after 30-60 s)",
        "send a comment (': keep-alive') on open SSE streams every 15 s",
        "wrap the stream with periodic comments (sse-starlette ping)",
        "write ': keep-alive' comments while a stream is idle",
    ),
    D(
        "stream.idle-closed",
        W,
        "Listening for Messages from the Server: the GET stream stays open (convention: until the client leaves)",
        "do not time out the standalone stream",
        "raise the server's and proxy's idle timeouts for the MCP endpoint",
        "keep the GET stream open while idle, with keep-alive comments",
    ),
    D(
        "stream.buffered",
        W,
        "convention (events must reach the client as they are sent)",
        "disable response compression and buffering on the SSE route",
        "disable GZipMiddleware on the endpoint; send X-Accel-Buffering: no behind nginx",
        "flush after each event; no compression or proxy buffering on text/event-stream",
    ),
    D(
        "modern.get-delete-405",
        E,
        "2026-07-28 Backward Compatibility: GET and DELETE are answered 405",
        "upgrade the SDK to a 2026-07-28 transport",
        "upgrade the mcp package to a 2026-07-28 transport",
        "answer GET and DELETE on the MCP endpoint with 405",
    ),
    D(
        "modern.header-mismatch-32020",
        E,
        "2026-07-28 Server Validation: MUST answer 400 with -32020",
        "upgrade the SDK: it checks Mcp-Method / Mcp-Name against the body",
        "upgrade the mcp package: it checks Mcp-Method / Mcp-Name against the body",
        "compare MCP-Protocol-Version, Mcp-Method and Mcp-Name with the body; answer 400, -32020",
    ),
    D(
        "modern.unsupported-version-32022",
        E,
        "2026-07-28 Protocol Version Header: MUST answer 400 with -32022",
        "upgrade the SDK",
        "upgrade the mcp package",
        "answer an unknown MCP-Protocol-Version with 400 and error -32022",
    ),
    D(
        "modern.legacy-headers-ignored",
        W,
        "2026-07-28 Backward Compatibility: Mcp-Session-Id and Last-Event-ID are ignored",
        "do not reject requests that still carry Mcp-Session-Id",
        "do not reject requests that still carry Mcp-Session-Id",
        "ignore Mcp-Session-Id and Last-Event-ID in 2026-07-28",
    ),
]
del D, E, W
CATALOGUE: dict[str, Diagnostic] = {d.id: d for d in _ALL}

# The release verdict, by the most serious detected finding.
BLOCKED = "No: fix blockers first"
REVIEW = "Review: warnings detected"
READY = "Yes: no detected problem"


def release_verdict(verdicts: list[Verdict]) -> str:
    """Detected errors block; detected warnings ask for review; pass, info, suspected and
    not-checked never lower the verdict."""
    detected = [v for v in verdicts if v.status == Status.DETECTED]
    if any(v.level == Level.ERROR for v in detected):
        return BLOCKED
    if any(v.level == Level.WARNING for v in detected):
        return REVIEW
    return READY
