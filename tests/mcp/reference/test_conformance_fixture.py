"""The reference server's conformance surface (``ReferenceServer(conformance=True)``) over
HTTP: the 2025-11-25 sessions with prompts, resources, completion, logging and a question
asked of the client, and at the same URL the 2026-07-28 stateless rules (_meta required,
removed methods 404, version and header errors, caching hints, input-required results with
a signed requestState, subscriptions/listen).

One server on 127.0.0.1 for the module (an ephemeral port); every read has a deadline.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ssewire.mcp.protocol.codes import INVALID_PARAMS
from ssewire.mcp.protocol.profiles import NEWEST
from ssewire.mcp.protocol.requests import post_headers, request
from ssewire.mcp.reference import ReferenceServer
from ssewire.mcp.reference.fixture import SCHEMA_2020_12, CallError, StateSigner
from ssewire.mcp.transport.serving import running

DEADLINE = 10.0  # seconds any one exchange may take here
BOTH = "application/json, text/event-stream"
CAPABILITIES = {"sampling": {}, "elicitation": {}, "roots": {}}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running(ReferenceServer(conformance=True)) as root:
        yield root + "/mcp"


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer, JSON or SSE (the priming event has no data)."""
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    lines = (line[5:].strip() for line in response.text.splitlines() if line.startswith("data:"))
    return [json.loads(data) for data in lines if data]


# -- 2026-07-28 -------------------------------------------------------------------------


def modern(
    url: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    ident: Any = 7,
    capabilities: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    meta: bool = True,
) -> httpx.Response:
    """One 2026-07-28 request as a conforming client sends it (``meta=False``: no _meta)."""
    params = dict(params or {})
    body = request(
        ident,
        method,
        params,
        NEWEST if meta else None,
        capabilities=CAPABILITIES if capabilities is None else capabilities,
    )
    sent = {**post_headers(NEWEST, None, method, params.get("uri", params.get("name"))), **(headers or {})}
    return httpx.post(url, json=body, headers=sent, timeout=DEADLINE)


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    final = _messages(response)[-1]
    assert "result" in final, final
    return dict(final["result"])


def test_a_request_without_meta_is_refused_400_with_its_id(url: str) -> None:
    answer = modern(url, "tools/list", ident="no-meta", meta=False)
    assert answer.status_code == 400
    assert answer.json()["id"] == "no-meta"
    assert answer.json()["error"]["code"] == INVALID_PARAMS


def test_meta_without_client_capabilities_is_refused(url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {}}}
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = NEWEST.name
    answer = httpx.post(url, json=body, headers=post_headers(NEWEST, None, "tools/list"), timeout=DEADLINE)
    assert (answer.status_code, answer.json()["error"]["code"], answer.json()["id"]) == (400, -32602, 3)


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "no/such"],
)
def test_removed_and_unknown_methods_are_404_under_2026(url: str, method: str) -> None:
    answer = modern(url, method, ident=f"id-{method}")
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == -32601
    assert answer.json()["id"] == f"id-{method}"


def test_an_unsupported_version_names_the_supported_ones_and_the_requested(url: str) -> None:
    body = request(11, "server/discover", {}, NEWEST, capabilities={})
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    headers = {**post_headers(NEWEST, None, "server/discover"), "MCP-Protocol-Version": "v999.0.0"}
    answer = httpx.post(url, json=body, headers=headers, timeout=DEADLINE)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32022 and answer.json()["id"] == 11
    assert error["data"] == {"supported": [NEWEST.name], "requested": "v999.0.0"}
    discovered = result_of(modern(url, "server/discover"))
    assert set(error["data"]["supported"]) <= set(discovered["supportedVersions"])


def test_a_header_disagreeing_with_the_body_is_32020(url: str) -> None:
    answer = modern(url, "tools/list", headers={"Mcp-Method": "prompts/list"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32020)
    body = request(12, "server/discover", {}, NEWEST)
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    answer = httpx.post(
        url, json=body, headers=post_headers(NEWEST, None, "server/discover"), timeout=DEADLINE
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32020)


@pytest.mark.parametrize(
    ("sent", "served"),
    [
        ("eu-west", True),
        ("=?base64?ZXUtd2VzdA==?=", True),  # the Base64 form of eu-west, decoded before comparing
        ("=?base64?ZXUtd2VzdA?=", False),  # its padding missing: it does not decode
        ("us-east", False),
        (None, False),  # the argument has a value: its header is due
    ],
)
def test_an_x_mcp_header_argument_must_come_as_its_header_too(
    url: str, sent: str | None, served: bool
) -> None:
    headers = {} if sent is None else {"Mcp-Param-Region": sent}
    answer = modern(
        url, "tools/call", {"name": "test_header_param", "arguments": {"region": "eu-west"}}, headers=headers
    )
    if served:
        assert result_of(answer)["content"][0]["text"] == "region=eu-west"
    else:
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32020), answer.text
        assert "Mcp-Param-Region" in answer.json()["error"]["message"]


def test_a_2020_12_input_schema_is_listed_as_written(url: str, session: Session) -> None:
    """SEP-1613 / SEP-2106: no keyword dropped, in either revision's tools/list."""
    modern_tools = result_of(modern(url, "tools/list"))["tools"]
    session_tools = session.call("tools/list")["result"]["tools"]
    for tools in (modern_tools, session_tools):
        listed = {tool["name"]: tool for tool in tools}["json_schema_2020_12_tool"]
        assert listed["inputSchema"] == SCHEMA_2020_12
        assert {"$schema", "$defs", "allOf", "if", "then", "else", "additionalProperties"} <= set(
            listed["inputSchema"]
        )


def test_an_answer_nobody_asked_for_is_refused_and_a_notification_accepted(url: str) -> None:
    headers = post_headers(NEWEST, None)
    stray = httpx.post(url, json={"jsonrpc": "2.0", "id": 8, "result": {}}, headers=headers, timeout=DEADLINE)
    assert (stray.status_code, stray.json()["error"]["code"], stray.json()["id"]) == (400, -32600, 8)
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    assert httpx.post(url, json=note, headers=headers, timeout=DEADLINE).status_code == 202


def test_lists_and_reads_carry_caching_hints_and_a_result_type(url: str) -> None:
    for method, params in (
        ("tools/list", {}),
        ("prompts/list", {}),
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("resources/read", {"uri": "test://static-text"}),
        ("server/discover", {}),
    ):
        result = result_of(modern(url, method, params))
        assert result["resultType"] == "complete", method
        assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0, method
        assert result["cacheScope"] in ("public", "private"), method
    discovered = result_of(modern(url, "server/discover"))
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ssewire-reference"
    assert "prompts" in discovered["capabilities"]


def test_a_missing_resource_is_an_error_naming_it_not_empty_contents(url: str) -> None:
    answer = modern(url, "resources/read", {"uri": "test://nothing-here"})
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "code": -32602,
        "message": "Resource not found",
        "data": {"uri": "test://nothing-here"},
    }


def test_a_template_resource_and_a_prompt_read_back(url: str) -> None:
    contents = result_of(modern(url, "resources/read", {"uri": "test://template/42/data"}))["contents"]
    assert json.loads(contents[0]["text"]) == {"id": "42", "templateTest": True, "data": "Data for ID: 42"}
    prompt = result_of(
        modern(
            url,
            "prompts/get",
            {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
        )
    )
    assert prompt["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='a', arg2='b'"


def test_a_capability_the_client_did_not_declare_is_32021(url: str) -> None:
    answer = modern(url, "tools/call", {"name": "test_missing_capability", "arguments": {}}, capabilities={})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32021
    assert answer.json()["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    declared = result_of(modern(url, "tools/call", {"name": "test_missing_capability", "arguments": {}}))
    assert declared["resultType"] == "input_required"
    assert [each["method"] for each in declared["inputRequests"].values()] == ["sampling/createMessage"]


def _call(url: str, tool: str, **params: Any) -> httpx.Response:
    return modern(url, "tools/call", {"name": tool, "arguments": {}, **params})


def test_the_request_state_round_trips_signed_and_a_tampered_one_is_refused(url: str) -> None:
    tool = "test_input_required_result_tampered_state"
    first = result_of(_call(url, tool))
    assert first["resultType"] == "input_required"
    state = first["requestState"]
    answers = {"confirm": {"action": "accept", "content": {"ok": True}}}
    payload, mac = state.split(".")
    edited = json.loads(base64.urlsafe_b64decode(payload))
    edited["round"] = 9
    forged = base64.urlsafe_b64encode(json.dumps(edited).encode()).decode() + "." + mac
    for bad in (forged, state[:-2] + ("AA" if not state.endswith("AA") else "BB"), "x" * 10_000, 42):
        refused = _call(url, tool, inputResponses=answers, requestState=bad)
        assert refused.status_code == 400, bad
        assert refused.json()["error"]["code"] == -32602
    good = result_of(_call(url, tool, inputResponses=answers, requestState=state))
    assert good["resultType"] == "complete"
    # a state signed for one tool is not another's
    other = _call(url, "test_input_required_result_request_state", inputResponses=answers, requestState=state)
    assert other.json()["error"]["code"] == -32602


def test_a_state_from_another_server_start_is_refused() -> None:
    signer = StateSigner()
    token = signer.sign({"tool": "t", "round": 1})
    assert signer.verify(token) == {"tool": "t", "round": 1}
    with pytest.raises(CallError) as refused:
        StateSigner().verify(token)  # a new key: the old state is not this server's
    assert refused.value.code == INVALID_PARAMS


def test_multi_round_keeps_what_earlier_rounds_answered(url: str) -> None:
    tool = "test_input_required_result_multi_round"
    one = result_of(_call(url, tool))
    assert list(one["inputRequests"]) == ["step1"]
    two = result_of(
        _call(
            url,
            tool,
            inputResponses={"step1": {"action": "accept", "content": {"name": "Ada"}}},
            requestState=one["requestState"],
        )
    )
    assert list(two["inputRequests"]) == ["step2"] and two["requestState"] != one["requestState"]
    three = result_of(
        _call(
            url,
            tool,
            inputResponses={"step2": {"action": "accept", "content": {"color": "green"}}},
            requestState=two["requestState"],
        )
    )
    assert three["resultType"] == "complete"
    assert three["content"][0]["text"] == "Ada's favorite color is green"


def test_missing_answers_are_asked_again_and_invalid_ones_refused(url: str) -> None:
    tool = "test_input_required_result_elicitation"
    again = result_of(_call(url, tool, inputResponses={"wrong": {"action": "accept", "content": {}}}))
    assert again["resultType"] == "input_required" and "user_name" in again["inputRequests"]
    invalid = _call(url, tool, inputResponses={"user_name": "not an object"})
    assert (invalid.status_code, invalid.json()["error"]["code"]) == (400, -32602)
    done = result_of(
        _call(
            url,
            tool,
            inputResponses={"user_name": {"action": "accept", "content": {"name": "Bo"}}, "extra": {"x": 1}},
        )
    )
    assert done["content"][0]["text"] == "Hello, Bo!"


def test_only_declared_capabilities_are_asked_for(url: str) -> None:
    answer = modern(
        url,
        "tools/call",
        {"name": "test_input_required_result_capabilities", "arguments": {}},
        capabilities={"sampling": {}},
    )
    methods = {each["method"] for each in result_of(answer)["inputRequests"].values()}
    assert methods == {"sampling/createMessage"}


def test_logs_only_when_the_request_asks_for_a_level(url: str) -> None:
    quiet = _messages(_call(url, "test_logging_tool"))
    assert [m for m in quiet if m.get("method") == "notifications/message"] == []
    params = {"name": "test_logging_tool", "arguments": {}}
    body = request(5, "tools/call", params, NEWEST, capabilities=CAPABILITIES)
    body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "debug"
    headers = post_headers(NEWEST, None, "tools/call", "test_logging_tool")
    loud = _messages(httpx.post(url, json=body, headers=headers, timeout=DEADLINE))
    assert len([m for m in loud if m.get("method") == "notifications/message"]) == 3
    assert loud[-1]["id"] == 5 and loud[-1]["result"]["resultType"] == "complete"


async def _listen(url: str, ident: int, wanted: dict[str, bool], trigger: str) -> list[dict[str, Any]]:
    """Open a listen stream, fire ``trigger`` once acknowledged, and read what comes in 1 s."""
    params = {"notifications": wanted}
    body = request(ident, "subscriptions/listen", params, NEWEST, capabilities={})
    frames: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=DEADLINE) as client:
        headers = post_headers(NEWEST, None, "subscriptions/listen")
        async with client.stream("POST", url, json=body, headers=headers) as stream:

            async def read() -> None:
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        frames.append(json.loads(line[5:]))
                        if len(frames) == 1:
                            call = request(1, "tools/call", {"name": trigger, "arguments": {}}, NEWEST)
                            sent = post_headers(NEWEST, None, "tools/call", trigger)
                            assert (await client.post(url, json=call, headers=sent)).status_code == 200

            try:
                await asyncio.wait_for(read(), 1.0)
            except asyncio.TimeoutError:
                pass
    return frames


def test_a_listen_stream_is_acknowledged_first_then_tagged_and_filtered(url: str) -> None:
    frames = asyncio.run(_listen(url, 71, {"toolsListChanged": True}, "test_trigger_tool_change"))
    assert frames[0]["method"] == "notifications/subscriptions/acknowledged"
    assert frames[0]["params"]["notifications"] == {"toolsListChanged": True}
    assert [f["method"] for f in frames[1:]] == ["notifications/tools/list_changed"]
    assert all(f["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 71 for f in frames)
    narrow = asyncio.run(_listen(url, 72, {"promptsListChanged": True}, "test_trigger_tool_change"))
    assert [f["method"] for f in narrow] == ["notifications/subscriptions/acknowledged"]


# -- 2025-11-25 sessions, at the same URL ------------------------------------------------


class Session:
    """A 2025-11-25 session on the conformance server."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client, self.url, self.numbers = client, url, iter(range(1, 1000))
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}},
            "clientInfo": {"name": "test", "version": "1"},
        }
        answer = client.post(url, json=self._body("initialize", init), headers={"Accept": BOTH})
        assert answer.status_code == 200, answer.text
        self.headers = {
            "Accept": BOTH,
            "Mcp-Session-Id": answer.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        self.capabilities = _messages(answer)[-1]["result"]["capabilities"]

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self.numbers), "method": method, "params": params}

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = self.client.post(self.url, json=self._body(method, params or {}), headers=self.headers)
        assert answer.status_code == 200, answer.text
        return _messages(answer)[-1]


@pytest.fixture
def session(url: str) -> Iterator[Session]:
    with httpx.Client(timeout=DEADLINE) as client:
        yield Session(client, url)


def test_a_session_serves_prompts_resources_and_completion(session: Session) -> None:
    assert {"prompts", "resources", "completions", "logging"} <= set(session.capabilities)
    prompt = session.call("prompts/get", {"name": "test_prompt_with_image"})["result"]
    assert prompt["messages"][0]["content"]["mimeType"] == "image/png"
    text = session.call("resources/read", {"uri": "test://static-text"})["result"]["contents"][0]
    assert text["text"] == "This is the content of the static text resource."
    blob = session.call("resources/read", {"uri": "test://static-binary"})["result"]["contents"][0]
    assert base64.b64decode(blob["blob"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert session.call("resources/subscribe", {"uri": "test://watched-resource"})["result"] == {}
    done = session.call(
        "completion/complete", {"ref": {"type": "ref/prompt"}, "argument": {"name": "arg1", "value": "par"}}
    )
    assert done["result"]["completion"]["values"] == ["paris", "park", "party"]
    assert "resultType" not in prompt  # a 2026-07-28 field: not in a 2025 session's answers


def test_a_session_refuses_an_unknown_log_level_and_takes_a_known_one(session: Session) -> None:
    assert session.call("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    assert session.call("logging/setLevel", {"level": "warning"})["result"] == {}
    quiet = session.client.post(
        session.url,
        json=session._body("tools/call", {"name": "test_tool_with_logging"}),
        headers=session.headers,
    )
    assert [m for m in _messages(quiet) if m.get("method") == "notifications/message"] == []  # info < warning


def test_a_session_tool_asks_the_client_on_its_stream_and_uses_the_answer(url: str) -> None:
    async def run() -> str:
        async with httpx.AsyncClient(timeout=DEADLINE) as client:
            with httpx.Client(timeout=DEADLINE) as sync:
                headers = Session(sync, url).headers
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call"}
            body["params"] = {"name": "test_sampling", "arguments": {"prompt": "Say hi"}}
            async with client.stream("POST", url, json=body, headers=headers) as stream:
                async for line in stream.aiter_lines():
                    if not line.startswith("data:") or not line[5:].strip():
                        continue
                    message = json.loads(line[5:])
                    if message.get("method") == "sampling/createMessage":
                        assert message["params"]["messages"][0]["content"]["text"] == "Say hi"
                        reply = {
                            "role": "assistant",
                            "content": {"type": "text", "text": "hi!"},
                            "model": "m",
                        }
                        answer = {"jsonrpc": "2.0", "id": message["id"], "result": reply}
                        assert (await client.post(url, json=answer, headers=headers)).status_code == 202
                    elif message.get("id") == 9:
                        return str(message["result"]["content"][0]["text"])
        raise AssertionError("the stream ended without the tool's result")

    assert asyncio.run(asyncio.wait_for(run(), DEADLINE)) == "LLM response: hi!"


def _event_ids(response: httpx.Response) -> list[str]:
    return [line[3:].strip() for line in response.text.splitlines() if line.startswith("id:")]


def test_a_tool_closing_its_connection_leaves_a_stream_to_resume(session: Session) -> None:
    """2025-11-25 polling (SEP-1699): test_reconnection's connection ends after an event with
    an id and a retry field, no result yet; a GET with that Last-Event-ID carries the result."""
    body = session._body("tools/call", {"name": "test_reconnection", "arguments": {}})
    closed = session.client.post(session.url, json=body, headers=session.headers)
    assert closed.status_code == 200 and _messages(closed) == []  # primed, then closed: nothing else
    assert "retry:" in closed.text
    ids = _event_ids(closed)
    assert len(ids) == 2  # the priming event, and the one the connection was closed after
    resumed = session.client.get(
        session.url, headers={**session.headers, "Accept": "text/event-stream", "Last-Event-ID": ids[-1]}
    )
    assert resumed.status_code == 200, resumed.text
    (answer,) = _messages(resumed)
    assert answer["id"] == body["id"]
    assert answer["result"]["content"][0]["text"] == "Reconnection test completed successfully"


def test_a_session_request_stays_a_session_request(session: Session) -> None:
    """initialize without the 2026 header started a session; its requests are not stateless."""
    listed = session.call("tools/list")["result"]
    assert "ttlMs" not in listed and "test_sampling" in {tool["name"] for tool in listed["tools"]}
    assert session.call("ping")["result"] == {}


def test_conformance_mode_needs_sessions() -> None:
    with pytest.raises(ValueError, match="sessions"):
        ReferenceServer(conformance=True, stateless=True)
    with pytest.raises(ValueError, match="sessions"):
        ReferenceServer(conformance=True, profile="2026-07-28")


def test_ssewire_serve_refuses_conformance_without_sessions(capsys: pytest.CaptureFixture[str]) -> None:
    from ssewire.cli import main

    assert main(["serve", "--conformance", "--stateless", "--port", "0"]) == 2
    assert "sessions" in capsys.readouterr().err


# -- the plain 2026-07-28 profile follows the same request rules -------------------------


@pytest.fixture(scope="module")
def stateless_url() -> Iterator[str]:
    with running(ReferenceServer(profile="2026-07-28")) as root:
        yield root + "/mcp"


def test_the_2026_profile_requires_meta_and_answers_unknown_methods_404(stateless_url: str) -> None:
    bare = modern(stateless_url, "tools/list", ident=4, meta=False)
    assert (bare.status_code, bare.json()["error"]["code"], bare.json()["id"]) == (400, -32602, 4)
    unknown = modern(stateless_url, "no/such", ident=5)
    assert (unknown.status_code, unknown.json()["error"]["code"], unknown.json()["id"]) == (404, -32601, 5)
    listed = _messages(modern(stateless_url, "tools/list"))[-1]["result"]
    assert "test_simple_text" not in {tool["name"] for tool in listed["tools"]}  # no fixture unless asked
