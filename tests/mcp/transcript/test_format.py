"""The one transcript writer: what it records reads back through the strict loader, with
repeated headers, chunk boundaries and torn streams kept, from a real server too."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest

from ssewire.mcp import from_document, validate
from ssewire.mcp.transcript import TranscriptWriter, body_field, chunk_fields, header_fields
from ssewire.mcp.transport.record import Recorder
from tests.support.uvicorn_servers import uvicorn_server


def test_repeated_headers_are_kept_in_order():
    fields = header_fields(
        [("set-cookie", "a=1"), ("content-type", "text/event-stream"), ("set-cookie", "b=2")]
    )
    assert fields == {"set-cookie": ["a=1", "b=2"], "content-type": "text/event-stream"}
    assert header_fields([("x", "1"), ("x", "2"), ("x", "3")]) == {"x": ["1", "2", "3"]}


def test_a_request_body_is_kept_parsed_when_it_is_json_else_as_text():
    assert body_field(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == {
        "body": {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    }
    assert body_field(b"grant_type=x") == {"body_text": "grant_type=x"}
    assert body_field(b'{"n": NaN}') == {"body_text": '{"n": NaN}'}  # not strict JSON


def test_chunks_are_text_unless_a_chunk_splits_a_character():
    assert chunk_fields([b"data: caf\xc3\xa9\n", b"\n"]) == {"chunks": ["data: caf\u00e9\n", "\n"]}
    split = [b"data: caf\xc3", b"\xa9\n\n"]
    encoded = chunk_fields(split)["chunks_b64"]
    assert [base64.b64decode(c) for c in encoded] == split


def test_a_response_is_disconnected_until_it_ends():
    writer = TranscriptWriter()
    cut = writer.request(
        "POST", "/mcp", [("accept", "text/event-stream")], b'{"jsonrpc":"2.0","id":1,"method":"a"}'
    )
    cut.respond(200, [("content-type", "text/event-stream")])
    cut.chunk(b'data: {"jsonrpc"')
    done = writer.request("GET", "/mcp", [], name="listen")
    done.respond(405, [])
    done.end()
    unanswered = writer.request("DELETE", "/mcp", [])
    document = writer.document("2025-11-25", client="tests")
    assert [e["id"] for e in document["exchanges"]] == ["e1", "listen", "e3"]
    assert document["exchanges"][0]["response"]["disconnected"] is True
    assert document["exchanges"][1]["response"]["disconnected"] is False
    assert "response" not in document["exchanges"][2] and unanswered.status is None
    transcript = from_document(document)  # the strict loader accepts what the writer wrote
    assert transcript.exchanges[0].response.chunks == (b'data: {"jsonrpc"',)
    assert transcript.tuple == {"client": "tests"}


def test_an_exchange_id_is_recorded_once():
    writer = TranscriptWriter()
    writer.request("GET", "/mcp", [], name="listen")
    with pytest.raises(ValueError, match="already recorded"):
        writer.request("GET", "/mcp", [], name="listen")


async def _two_cookies_and_a_stream(scope, receive, send):
    assert scope["type"] == "http"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream"),
                (b"set-cookie", b"a=1"),
                (b"set-cookie", b"b=2"),
            ],
        }
    )
    for piece in (b'id: 1\r\ndata: {"jsonrpc":"2.0",', b'"method":"n"}\r\n\r\n'):
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def test_the_recorder_keeps_repeated_headers_from_a_real_server():
    async def listen(url: str) -> tuple[Recorder, dict]:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            recorder = Recorder(client)
            return recorder, await recorder.exchange(
                "GET", "/mcp", {"Accept": "text/event-stream"}, name="listen"
            )

    with uvicorn_server(_two_cookies_and_a_stream) as url:
        recorder, record = asyncio.run(listen(url))
    assert record["response"]["headers"]["set-cookie"] == ["a=1", "b=2"]
    assert "".join(record["response"]["chunks"]) == 'id: 1\r\ndata: {"jsonrpc":"2.0","method":"n"}\r\n\r\n'
    assert record["response"]["disconnected"] is False
    document = recorder.document("2025-11-25")
    codes = {f.code for f in validate(from_document(document)).findings}
    assert "unredacted_credential" in codes  # Set-Cookie, twice: the recording is raw
