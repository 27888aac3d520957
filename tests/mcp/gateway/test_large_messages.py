"""A large upstream message is relayed as the bytes it came in: the gateway reads its
envelope (checked as JSON whole), never builds its body, and writes the body on verbatim
under the downstream's id; what it must read (a tools/list it filters) it parses.

Against a small 2025-11-25 upstream of this file's own on 127.0.0.1, whose answers are
written the way no JSON library re-encodes them (spaces, escapes, key order), so a body
that was parsed and written again would show."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import orjson
import pytest

from ssewire import Decoder
from ssewire.mcp.server.asgi import headers_of, read_body, respond
from ssewire.mcp.server.tools import ToolPolicy
from ssewire.mcp.transport.serving import running
from tests.support.gateway_runs import gateway_over, session

SIZE = 300 * 1024  # past the gateway's 64 KiB envelope-only threshold
WAIT = 20.0


def odd_body(size: int) -> bytes:
    """A tool result in bytes no serializer writes: spaced, escaped, keys out of order."""
    text = b"\\u00e9t\\u00e9 \\/ " * (size // 16)
    return b'{ "isError" : false ,\t"content" : [ { "text" : "' + text + b'", "type" : "text" } ] }'


def tools_body(count: int) -> bytes:
    tools = [
        {"name": f"tool-{n}", "description": "d" * 200, "inputSchema": {"type": "object"}}
        for n in range(count)
    ]
    return b'{"tools":  ' + orjson.dumps(tools) + b"}"


class Upstream:
    """Just enough of a 2025-11-25 server: a session, and each call answered on an SSE
    stream with the bytes of ``bodies`` (by tool name) or of ``tools/list``."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive, headers_of(scope), 1 << 20)
        if scope["method"] != "POST":
            await respond(send, 405 if scope["method"] == "GET" else 200, b"", [])
            return
        request = orjson.loads(body)
        method, ident = request.get("method"), request.get("id")
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "up", "version": "1"},
            }
            answer = orjson.dumps({"jsonrpc": "2.0", "id": ident, "result": result})
            head = [("content-type", "application/json"), ("mcp-session-id", "s-1")]
            await respond(send, 200, answer, head)
        elif ident is None:
            await respond(send, 202, b"", [])
        else:
            name = request["params"]["name"] if method == "tools/call" else method
            data = (
                b'{"jsonrpc":"2.0", "result": ' + self.bodies[name] + b', "id": ' + orjson.dumps(ident) + b"}"
            )
            if name.endswith("-json"):  # answered as one JSON body
                await respond(send, 200, data, [("content-type", "application/json")])
                return
            event = b"".join(b"data: " + line + b"\n" for line in data.split(b"\n"))  # one line or several
            await respond(send, 200, event + b"\n", [("content-type", "text/event-stream")])


def answer_of(http: httpx.Client, url: str, headers: dict[str, str], request: dict[str, Any]) -> bytes:
    """The data of the event answering ``request``."""
    reply = http.post(url, json=request, headers=headers)
    assert reply.status_code == 200, reply.text
    (data,) = [event.data for event in Decoder().feed(reply.content) if event.data]
    return data.encode()


def members(data: bytes) -> dict[str, bytes]:
    return {name: bytes(raw) for name, raw in msgspec.json.decode(data, type=dict[str, msgspec.Raw]).items()}


@pytest.fixture(scope="module")
def upstream():
    bodies = {
        "odd": odd_body(SIZE),
        "odd-json": odd_body(SIZE),
        "small": b'{ "content" : [] }',
        "tools/list": tools_body(600),
        "lines": odd_body(SIZE).replace(b",\t", b",\n").replace(b"} ]", b"}\n]"),  # over several data lines
        "lines-huge-number": odd_body(SIZE).replace(b"false ,\t", b"1e400 ,\n"),
    }
    with running(Upstream(bodies), lifespan="off") as root:
        yield root + "/mcp", bodies


def test_a_large_result_is_written_on_as_it_came_under_the_downstream_id(upstream):
    url, bodies = upstream
    with gateway_over(url) as gw, httpx.Client(timeout=WAIT) as http:
        headers = session(http, gw.url)
        call = {
            "jsonrpc": "2.0",
            "id": "down-7",
            "method": "tools/call",
            "params": {"name": "odd", "arguments": {}},
        }
        data = answer_of(http, gw.url, headers, call)
        got = members(data)
        assert "result" in got, data[:400]
        assert got["result"] == bodies["odd"]  # verbatim: never parsed and written again
        as_json = members(
            answer_of(http, gw.url, headers, {**call, "params": {"name": "odd-json", "arguments": {}}})
        )
        assert as_json["result"] == bodies["odd-json"]  # a JSON answer upstream: the same
        assert orjson.loads(got["id"]) == "down-7" and orjson.loads(got["jsonrpc"]) == "2.0"
        small = answer_of(http, gw.url, headers, {**call, "params": {"name": "small", "arguments": {}}})
        assert orjson.loads(small)["result"] == {"content": []}  # a small one is read whole, as before


def test_a_large_tools_list_is_parsed_to_be_filtered(upstream):
    url, bodies = upstream
    with (
        gateway_over(url, tools=ToolPolicy(allow=["tool-3", "tool-500"])) as gw,
        httpx.Client(timeout=WAIT) as http,
    ):
        assert len(bodies["tools/list"]) > 64 * 1024
        headers = session(http, gw.url)
        data = answer_of(http, gw.url, headers, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert [tool["name"] for tool in orjson.loads(data)["result"]["tools"]] == ["tool-3", "tool-500"]


def test_a_large_body_spread_over_data_lines_is_written_on_as_it_came(upstream):
    """An event's data lines join with LF, which JSON reads as space: the writer frames each
    line of such a body as a data line of its own (the downstream event cannot end early),
    and the body is never parsed and written again."""
    url, bodies = upstream
    with gateway_over(url) as gw, httpx.Client(timeout=WAIT) as http:
        headers = session(http, gw.url)
        for ident, name in enumerate(("lines", "lines-huge-number"), 3):
            # (1e400: valid JSON past a float's range, which orjson could not write again)
            call = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": name}}
            reply = http.post(gw.url, json=call, headers=headers)
            events = [event for event in Decoder().feed(reply.content) if event.data]
            assert len(events) == 1, [event.data[:100] for event in events]
            got = members(events[0].data.encode())
            assert got["result"] == bodies[name]  # verbatim, its line ends included
            assert orjson.loads(got["id"]) == ident


def test_a_large_2026_answer_goes_through_the_passthrough_as_its_bytes(upstream):
    """Under 2026-07-28 too (the passthrough) a large answer is read for its envelope only:
    its body reaches the client verbatim, a number no JSON library could write again
    included (parsed whole, it would not even be read)."""
    url, bodies = upstream
    with gateway_over(url) as gw, httpx.Client(timeout=WAIT) as http:
        for ident, name in enumerate(("odd", "lines-huge-number"), 11):
            call = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": name}}
            headers = {
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": name,
            }
            reply = http.post(gw.url, json=call, headers=headers)
            assert reply.status_code == 200, reply.text[:400]
            events = [event for event in Decoder().feed(reply.content) if event.data]
            assert len(events) == 1, [event.data[:100] for event in events]
            got = members(events[0].data.encode())
            assert got["result"] == bodies[name]  # verbatim
            assert orjson.loads(got["id"]) == ident
