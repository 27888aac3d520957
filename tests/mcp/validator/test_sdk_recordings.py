"""Transcripts recorded from the official MCP Python SDK server, checked finding by finding.

The test starts the SDK's Streamable HTTP app with uvicorn on 127.0.0.1, drives it with
raw httpx requests through :class:`ssewire.mcp.transport.record.Recorder`, and validates what was
on the wire. Every finding expected below is argued from the revision's text.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import httpx2
import pytest
from mcp.server.mcpserver import Context, MCPServer  # the official SDK: a [test] dependency
from mcp.server.streamable_http import EventStore

import ssewire
from ssewire.mcp import from_document, validate
from ssewire.mcp.transcript import ExchangeRecord, TranscriptWriter
from ssewire.mcp.transport.record import Recorder
from tests.support.sdk_servers import MemoryEventStore
from tests.support.uvicorn_servers import uvicorn_server

# one worker (xdist_group): the module's SDK recordings are made once
pytestmark = [
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
    pytest.mark.xdist_group("sdk_recordings"),
]

BOTH = "application/json, text/event-stream"
JSON_BODY = {"Content-Type": "application/json"}  # the SDK answers 400 to a POST without it
CLIENT = {"name": "ssewire-tests", "version": "0"}


def sdk_app(event_store: EventStore | None):
    server = MCPServer("ssewire-test-server", version="0", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text."""
        return text

    @server.tool()
    async def notify_echo(text: str, ctx: Context) -> str:
        """Report progress and log, then return the text (so the answer is an SSE stream)."""
        await ctx.report_progress(0.5, 1.0, "halfway")
        await ctx.info("echoing")
        return text

    return server.streamable_http_app(streamable_http_path="/mcp", event_store=event_store)


def call(ident: int, name: str, **extra: Any) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": {"text": "hi"}, **extra},
    }


async def record_2025_11_25(base_url: str) -> dict:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        rec = Recorder(client)
        init = await rec.exchange(
            "POST",
            "/mcp",
            {"Accept": BOTH, **JSON_BODY},
            name="initialize",
            body={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": CLIENT},
            },
        )
        sid = init["response"]["headers"]["mcp-session-id"]
        session = {"Accept": BOTH, **JSON_BODY, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        await rec.exchange(
            "POST",
            "/mcp",
            session,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            name="initialized",
        )
        await rec.exchange(
            "POST", "/mcp", session, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, name="list-tools"
        )
        await rec.exchange("POST", "/mcp", session, call(3, "echo"), name="call-echo")
        streamed = await rec.exchange(
            "POST", "/mcp", session, call(4, "notify_echo", _meta={"progressToken": "p1"}), name="call-notify"
        )
        priming = streamed["response"]["chunks"][0]
        assert priming.startswith("id: ") and "data: \r\n\r\n" in priming, priming
        priming_id = priming[4 : priming.index("\r\n")]
        await rec.exchange(
            "POST",
            "/mcp",
            {**session, "Accept": "application/json"},
            {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
            name="accept-json-only",
        )
        listen = {"Accept": "text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        await rec.exchange("GET", "/mcp", listen, read_timeout=0.5, name="listen")
        await rec.exchange(
            "GET", "/mcp", {**listen, "Last-Event-ID": priming_id}, read_timeout=0.5, name="resume-notify"
        )
        await rec.exchange(
            "DELETE", "/mcp", {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}, name="delete"
        )
        await rec.exchange(
            "POST", "/mcp", session, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, name="after-delete"
        )
        return rec.document("2025-11-25", client="httpx", server="mcp")


def meta(version: str = "2026-07-28", **extra: Any) -> dict:
    return {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            **extra,
        }
    }


def headers_2026(method: str, name: str | None = None, version: str = "2026-07-28") -> dict:
    headers = {"Accept": BOTH, **JSON_BODY, "MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


async def record_2026_07_28(base_url: str) -> dict:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        rec = Recorder(client)
        await rec.exchange(
            "POST",
            "/mcp",
            headers_2026("tools/list"),
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta()},
            name="list-tools",
        )
        await rec.exchange(
            "POST",
            "/mcp",
            headers_2026("tools/call", "echo"),
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}, **meta()},
            },
            name="call-echo",
        )
        await rec.exchange(
            "POST",
            "/mcp",
            headers_2026("tools/call", "notify_echo"),
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "notify_echo",
                    "arguments": {"text": "hi"},
                    **meta(progressToken="p1", **{"io.modelcontextprotocol/logLevel": "info"}),
                },
            },
            name="call-notify",
        )
        await rec.exchange(
            "GET",
            "/mcp",
            {"Accept": "text/event-stream", "MCP-Protocol-Version": "2026-07-28"},
            read_timeout=0.5,
            name="listen",
        )
        await rec.exchange("DELETE", "/mcp", {"MCP-Protocol-Version": "2026-07-28"}, name="delete")
        await rec.exchange(
            "POST",
            "/mcp",
            headers_2026("tools/list"),
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}, **meta()},
            },
            name="method-mismatch",
        )
        await rec.exchange(
            "POST",
            "/mcp",
            headers_2026("tools/list", version="2099-01-01"),
            {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": meta("2099-01-01")},
            name="unsupported-version",
        )
        return rec.document("2026-07-28", client="httpx", server="mcp")


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict]:
    with uvicorn_server(sdk_app(MemoryEventStore()), lifespan="on") as url:
        legacy = asyncio.run(record_2025_11_25(url))
    with uvicorn_server(sdk_app(None), lifespan="on") as url:
        modern = asyncio.run(record_2026_07_28(url))
    return {"2025-11-25": legacy, "2026-07-28": modern}


def findings(document: dict) -> list[tuple[str, str, str | None]]:
    return [(f.level, f.code, f.exchange) for f in validate(from_document(document)).findings]


def test_sdk_2025_11_25_session(recorded):
    document = recorded["2025-11-25"]
    statuses = [e["response"]["status"] for e in document["exchanges"]]
    # initialize, initialized (202), list, echo, notify (SSE), bad Accept (406), GET,
    # resumed GET, DELETE, after DELETE (404)
    assert statuses == [200, 202, 200, 200, 200, 406, 200, 200, 200, 404]
    result = validate(from_document(document))
    assert [(f.level, f.code, f.exchange) for f in result.findings] == [
        # ours: Accept without text/event-stream breaks "MUST ... listing both"
        # (Sending Messages to the Server). The SDK's 406 is a convention, not a finding.
        ("error", "invalid_post_accept", "accept-json-only"),
    ]
    # Both GET streams were closed by the recorder: the resumed one has an event id (resume);
    # the standalone one had none, and a GET carries no request to re-issue.
    assert [(r.exchange, r.action) for r in result.recovery] == [
        ("listen", "do-not-replay"),
        ("resume-notify", "resume-with-get"),
    ]


def test_sdk_2025_11_25_resumption_as_recorded_and_validated(recorded):
    """What the recording and the validator see of a resumption: the replay carries exactly
    the message events after the cursor, with their original ids, and never the cursor's
    own priming event; the SDK primes the resumed stream with a fresh id of its own.

    Which events follow the cursor is decided by this file's MemoryEventStore (the SDK ships
    only the interface), so this proves the recording and the validator, not the SDK."""
    exchanges = {e["id"]: e for e in recorded["2025-11-25"]["exchanges"]}
    streamed, resumed = exchanges["call-notify"], exchanges["resume-notify"]
    cursor = resumed["request"]["headers"]["last-event-id"]
    original = events(streamed["response"]["chunks"])
    replay = events(resumed["response"]["chunks"])
    assert original[0] == (cursor, "")  # the priming event opened the stream
    assert len(original) == 4  # priming, progress, log, result
    assert [e for e in replay if e[1]] == original[1:]  # the messages after the cursor, as sent
    fresh = [ident for ident, data in replay if not data]
    assert len(fresh) == 1 and fresh[0] not in {ident for ident, _ in original}
    assert "resume_replayed_before_cursor" not in {
        f.code for f in validate(from_document(recorded["2025-11-25"])).findings
    }


def events(chunks: list[str]) -> list[tuple[str, str]]:
    """(id, data) of each event, decoded by ssewire from the chunks as recorded."""
    decoder = ssewire.Decoder()
    found = [e for chunk in chunks for e in decoder.feed(chunk.encode())] + decoder.close()
    return [(e.id, e.data) for e in found]


def test_sdk_2026_07_28_session(recorded):
    document = recorded["2026-07-28"]
    statuses = [e["response"]["status"] for e in document["exchanges"]]
    assert statuses == [200, 200, 200, 405, 405, 400, 400]
    result = validate(from_document(document))
    assert [(f.level, f.code, f.exchange) for f in result.findings] == [
        # GET and DELETE do not exist in 2026-07-28; the server's 405 is right (Backward
        # Compatibility: SHOULD), the client's attempt is a warning.
        ("warning", "get_removed_in_profile", "listen"),
        ("warning", "delete_removed_in_profile", "delete"),
        # ours: Mcp-Method says tools/list for a tools/call body, and Mcp-Name is
        # missing (Standard Request Headers: MUST). The server's 400 / -32020 is right.
        ("error", "method_header_mismatch", "method-mismatch"),
        ("error", "name_header_mismatch", "method-mismatch"),
        # unsupported-version: header and _meta agree on an unsupported version: the client broke nothing,
        # and the server's 400 / -32022 is what the revision requires.
    ]
    assert result.recovery == []


def test_sdk_2026_07_28_streams_without_event_ids(recorded):
    exchanges = {e["id"]: e for e in recorded["2026-07-28"]["exchanges"]}
    streamed = exchanges["call-notify"]["response"]
    assert streamed["headers"]["content-type"].startswith("text/event-stream")
    body = "".join(streamed["chunks"])
    assert body.count("data: ") >= 2 and '"id":3' in body  # events were sent: progress ... result
    assert {ident for ident, _ in events(streamed["chunks"])} == {""}


# -- the official SDK client, recorded below its HTTP client --------------------------------


class _RecordedBody(httpx2.AsyncByteStream):
    """Passes the body through, keeping each piece as the SDK client read it."""

    def __init__(self, inner: Any, record: ExchangeRecord) -> None:
        self.inner, self.record = inner, record

    async def __aiter__(self):
        async for chunk in self.inner:
            self.record.chunk(chunk)
            yield chunk
        self.record.end()  # disconnected until the client reads the body to its end

    async def aclose(self) -> None:
        await self.inner.aclose()


class _RecordingTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that records each exchange through the library's one writer."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.writer = TranscriptWriter()

    async def handle_async_request(self, request):
        record = self.writer.request(
            request.method, request.url.path, request.headers.multi_items(), request.content
        )
        response = await self.inner.handle_async_request(request)
        record.respond(response.status_code, response.headers.multi_items())
        response.stream = _RecordedBody(response.stream, record)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _sdk_client_session(url: str, mode: str) -> tuple[TranscriptWriter, str]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    transport = _RecordingTransport()
    async with httpx2.AsyncClient(transport=transport, timeout=10) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http), mode=mode) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "hi"})
            await client.call_tool("notify_echo", {"text": "hi"})
            version = client.protocol_version
    return transport.writer, version


@pytest.mark.parametrize(
    ("mode", "store", "version"), [("legacy", True, "2025-11-25"), ("auto", False, "2026-07-28")]
)
def test_the_sdk_client_and_server_together_break_no_rule(mode, store, version):
    with uvicorn_server(sdk_app(MemoryEventStore() if store else None), lifespan="on") as url:
        writer, negotiated = asyncio.run(_sdk_client_session(url, mode))
    assert negotiated == version
    document = writer.document(version)
    exchanges = document["exchanges"]
    result = validate(from_document(document))
    assert [(f.code, f.exchange) for f in result.findings] == []
    methods = [e["request"]["method"] for e in exchanges]
    if version == "2025-11-25":
        # initialize, initialized, the GET stream, three requests, DELETE at the end
        assert methods[:2] == ["POST", "POST"] and "GET" in methods and methods[-1] == "DELETE"
        # The SDK stops reading a POST stream once its response arrived: the recording
        # shows those as disconnected, each with a cursor to resume from.
        actions = {r.action for r in result.recovery}
        assert "resume-with-get" in actions and actions <= {"resume-with-get", "do-not-replay"}
    else:
        assert set(methods) == {"POST"} and result.recovery == []
