"""The official-SDK conformance fixture (tests/support/sdk_fixture_server.py) as a client
sees it on 127.0.0.1: a 2025-11-25 session and 2026-07-28 stateless requests, raw httpx."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.sdk_fixture_server import PATH, fixture_app
from tests.support.uvicorn_servers import uvicorn_server

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _message(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC answer, whether the SDK sent JSON or an SSE stream."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        answers = [json.loads(d) for d in data if d and "id" in json.loads(d)]
        assert len(answers) == 1, response.text
        return answers[0]
    return response.json()


def _session(client: httpx.Client, url: str) -> dict[str, str]:
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "fixture-test", "version": "0"},
    }
    reply = client.post(
        url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=ACCEPT
    )
    assert reply.status_code == 200, reply.text
    headers = {
        **ACCEPT,
        "Mcp-Session-Id": reply.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    note = client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert note.status_code == 202
    return headers


def _stateless(
    client: httpx.Client, url: str, method: str, name: str, params: dict[str, Any], **extra: str
) -> httpx.Response:
    headers = {**ACCEPT, "MCP-Protocol-Version": STATELESS, "Mcp-Method": method, "Mcp-Name": name, **extra}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return client.post(url, json=body, headers=headers)


def test_a_session_lists_the_suites_tools_and_reads_a_resource() -> None:
    with uvicorn_server(fixture_app(), lifespan="on") as root, httpx.Client(timeout=10) as client:
        url = root + PATH
        headers = _session(client, url)
        tools = _message(
            client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers)
        )
        names = {tool["name"] for tool in tools["result"]["tools"]}
        assert {"test_simple_text", "test_image_content", "test_sampling", "test_elicitation"} <= names
        assert "test_input_required_result_elicitation" in names
        read = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "resources/read",
            "params": {"uri": "test://template/7/data"},
        }
        contents = _message(client.post(url, json=read, headers=headers))["result"]["contents"]
        assert json.loads(contents[0]["text"]) == {"id": "7", "templateTest": True, "data": "Data for ID: 7"}


def test_stateless_requests_answer_with_caching_hints_and_input_required_results() -> None:
    with uvicorn_server(fixture_app(), lifespan="on") as root, httpx.Client(timeout=10) as client:
        url = root + PATH
        simple = _stateless(client, url, "tools/call", "test_simple_text", {"name": "test_simple_text"})
        assert simple.status_code == 200, simple.text
        assert (
            _message(simple)["result"]["content"][0]["text"] == "This is a simple text response for testing."
        )

        read = _message(
            _stateless(client, url, "resources/read", "test://static-text", {"uri": "test://static-text"})
        )
        assert read["result"]["contents"][0]["text"] == "This is the content of the static text resource."
        assert read["result"]["ttlMs"] == 0 and read["result"]["cacheScope"] == "private"

        tool = "test_input_required_result_request_state"
        first = _message(_stateless(client, url, "tools/call", tool, {"name": tool}))["result"]
        assert first["resultType"] == "input_required" and set(first["inputRequests"]) == {"confirm"}
        answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
        retry = {"name": tool, "inputResponses": answer, "requestState": first["requestState"]}
        done = _message(_stateless(client, url, "tools/call", tool, retry))["result"]
        assert done["resultType"] == "complete" and "state-ok" in done["content"][0]["text"]

        tampered = {**retry, "requestState": first["requestState"][:-4] + "AAAA"}
        refused = _message(_stateless(client, url, "tools/call", tool, tampered))
        assert refused["error"]["code"] == -32602


def test_a_foreign_host_is_refused() -> None:
    with uvicorn_server(fixture_app(), lifespan="on") as root, httpx.Client(timeout=10) as client:
        reply = client.post(
            root + PATH,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={**ACCEPT, "Host": "evil.example"},
        )
        assert 400 <= reply.status_code < 500


def test_the_sdk_checks_an_x_mcp_header_parameter_against_its_header() -> None:
    with uvicorn_server(fixture_app(), lifespan="on") as root, httpx.Client(timeout=10) as client:
        url, tool = root + PATH, "test_header_param"
        call = {"name": tool, "arguments": {"region": "eu"}}
        agreed = _stateless(client, url, "tools/call", tool, call, **{"Mcp-Param-Region": "eu"})
        assert _message(agreed)["result"]["content"][0]["text"] == "region=eu"
        for headers in ({"Mcp-Param-Region": "us"}, {}):  # a mismatch, then the header left out
            refused = _stateless(client, url, "tools/call", tool, call, **headers)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020
