"""The gateway is transparent where it does not own the answer (2026-07-28): what a client
sends goes up as sent, and the upstream's status, named headers and body come back as
they came. Against upstreams started here on 127.0.0.1: the official SDK's fixture server
(tests/support/sdk_fixture_server.py), a small recording upstream of this file's own, which
shows exactly what arrived, and the TypeScript SDK server for a listen answered as JSON
lines."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from ssewire.mcp.protocol.wire import BOTH, JSON, META_CAPABILITIES, META_VERSION
from ssewire.mcp.server.quotas import Limits
from ssewire.mcp.transport.serving import running
from tests.support.gateway_runs import gateway_over
from tests.support.mcp_helpers import INITIALIZE, request_body
from tests.support.sdk_fixture_server import fixture_app
from tests.support.tokens import as_principal, token_auth
from tests.support.ts_servers import ts_server

MODERN = "2026-07-28"
ACK = "notifications/subscriptions/acknowledged"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META = {META_VERSION: MODERN, META_CAPABILITIES: {"elicitation": {}}}
WAIT = 10.0  # seconds any one exchange of these tests may take


def headers(method: str | None = None, name: str | None = None, **more: str) -> dict[str, str]:
    sent = {"Accept": BOTH, "Content-Type": JSON, "MCP-Protocol-Version": MODERN}
    if method is not None:
        sent["Mcp-Method"] = method
    if name is not None:
        sent["Mcp-Name"] = name
    return {**sent, **more}


def call(ident: int, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META, **params},
    }


class Recorder:
    """An upstream that records each request (its headers and body as they came) and
    answers by the method: ``multi`` several messages in one JSON body, ``teapot`` a 404
    with an error body and headers, ``locked`` a 401, ``subscriptions/listen`` a stream
    held open until its client leaves (with ``lines`` in its params, an application/json
    body of one message a line, as the conformance suite's TypeScript fixture answers);
    anything else a result."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.listen_ended = threading.Event()
        self.url = ""  # where it is served

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await request_body(receive)
        seen = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        self.requests.append((seen, body))
        parsed = orjson.loads(body) if body else {}
        method, ident = parsed.get("method"), parsed.get("id")
        if method == "subscriptions/listen":
            lines = bool(parsed.get("params", {}).get("lines"))
            await (self._listen_lines if lines else self._listen)(receive, send, ident)
            return
        if method == "multi":
            note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
            answer = orjson.dumps([note, {"jsonrpc": "2.0", "id": ident, "result": {"n": 2}}])
            await _respond(send, 200, answer, [(b"content-type", b"application/json")])
        elif method == "teapot":
            error = {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no teapot here"}}
            extra = [(b"retry-after", b"7"), (b"x-upstream-secret", b"never-down")]
            await _respond(send, 404, orjson.dumps(error), [(b"content-type", b"application/json"), *extra])
        elif method == "huge":  # past a small gateway's message limit, as JSON and as an event
            big = orjson.dumps({"jsonrpc": "2.0", "id": ident, "result": {"text": "x" * 4096}})
            if parsed.get("params", {}).get("sse"):
                sse = [(b"content-type", b"text/event-stream")]
                await _respond(send, 200, b"data: " + big + b"\n\n", sse)
            else:
                await _respond(send, 200, big, [(b"content-type", b"application/json")])
        elif method == "locked":
            await _respond(send, 401, b"", [(b"www-authenticate", b'Bearer realm="up"')])
        elif ident is None:
            await _respond(send, 202, b"", [])
        else:
            answer = orjson.dumps({"jsonrpc": "2.0", "id": ident, "result": {"method": method}})
            await _respond(send, 200, answer, [(b"content-type", b"application/json")])

    async def _listen(self, receive: Any, send: Any, ident: Any) -> None:
        start = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        note = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "x://1"}}
        # an id and a retry field the gateway drops (nothing resumes a 2026-07-28 stream),
        # and the event's data split over two lines
        head, tail = orjson.dumps(note).split(b',"method"')
        event = b"id: up-1\nretry: 10\ndata: " + head + b',\ndata: "method"' + tail
        await send({"type": "http.response.body", "body": event + b"\n\n", "more_body": True})
        try:
            await asyncio.wait_for(receive(), WAIT)  # the next message is the disconnect
        except asyncio.TimeoutError:
            return
        finally:
            self.listen_ended.set()

    async def _listen_lines(self, receive: Any, send: Any, ident: Any) -> None:
        """The acknowledgment, then a line of 2 KiB written in two pieces, held open."""
        start = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache")]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        ack = {
            "jsonrpc": "2.0",
            "method": ACK,
            "params": {"_meta": {SUBSCRIPTION: ident}, "notifications": {}},
        }
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * 2048}}
        long = orjson.dumps(note) + b"\n"
        for piece in (orjson.dumps(ack) + b"\n", long[:1000], long[1000:]):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        try:
            await asyncio.wait_for(receive(), WAIT)  # the next message is the disconnect
        except asyncio.TimeoutError:
            return
        finally:
            self.listen_ended.set()

    def last(self) -> tuple[dict[str, str], bytes]:
        return self.requests[-1]


async def _respond(send: Any, status: int, body: bytes, head: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def sdk():
    """The official SDK's fixture server, and a gateway in front of it: (direct, behind)."""
    with running(fixture_app(), lifespan="on") as root, gateway_over(root + "/mcp") as gw:
        yield root + "/mcp", gw.url


@pytest.fixture(scope="module")
def recorded():
    recorder = Recorder()
    with running(recorder, lifespan="off") as root, gateway_over(root + "/mcp") as gw:
        recorder.url = root + "/mcp"
        yield recorder, gw.url


def recorded_url(recorder: Recorder) -> str:
    return recorder.url


@pytest.fixture(scope="module")
def http():
    with httpx.Client(timeout=WAIT) as client:
        yield client


def both(http: httpx.Client, sdk: tuple[str, str], body: Any, sent: dict[str, str]) -> list[httpx.Response]:
    return [http.post(url, content=orjson.dumps(body), headers=sent) for url in sdk]


def test_upstream_statuses_and_error_bodies_pass_as_they_came(sdk, http):
    # no _meta: the server must refuse it (400, -32602); the gateway fills nothing in
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    direct, behind = both(http, sdk, listing, headers("tools/list"))
    assert direct.status_code == behind.status_code == 400
    assert direct.json() == behind.json()
    assert behind.json()["error"]["code"] == -32602
    assert behind.headers["content-type"].startswith(JSON)
    # a method the server does not have: its status and error, as direct
    unknown = {"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {"_meta": META}}
    direct, behind = both(http, sdk, unknown, headers("no/such"))
    assert (direct.status_code, direct.json()) == (behind.status_code, behind.json())
    assert behind.json()["error"]["code"] == -32601


def test_the_body_goes_up_as_it_was_sent_and_the_named_headers_with_it(recorded, http):
    recorder, url = recorded
    sent = b'{ "jsonrpc":"2.0","id":7,  "method":"tools/list","params":{"extra":[1, 2.50]} }'
    extra = {"Authorization": "Bearer downstream-secret", "Cookie": "c=1", "X-Other": "no"}
    answer = http.post(url, content=sent, headers={**headers("tools/list"), **extra})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"jsonrpc": "2.0", "id": 7, "result": {"method": "tools/list"}}
    seen, body = recorder.last()
    assert body == sent  # byte for byte: no _meta filled in, no re-encoding
    assert seen["mcp-protocol-version"] == MODERN and seen["mcp-method"] == "tools/list"
    assert "authorization" not in seen and "cookie" not in seen and "x-other" not in seen


def test_mcp_param_headers_reach_the_upstream_plain_and_base64(sdk, recorded, http):
    encoded = "=?base64?" + base64.b64encode(b"eu-west").decode() + "?="
    for value in ("eu-west", encoded):
        sent = headers("tools/call", "test_header_param", **{"Mcp-Param-Region": value})
        direct, behind = both(http, sdk, call(3, "test_header_param", {"region": "eu-west"}), sent)
        assert behind.status_code == direct.status_code == 200, behind.text
        assert behind.json()["result"]["content"] == direct.json()["result"]["content"]
        assert "region=eu-west" in behind.json()["result"]["content"][0]["text"]
    # a header that disagrees with the argument is the upstream's to refuse, as direct
    wrong = headers("tools/call", "test_header_param", **{"Mcp-Param-Region": "us-east"})
    direct, behind = both(http, sdk, call(4, "test_header_param", {"region": "eu-west"}), wrong)
    assert (direct.status_code, direct.json()["error"]["code"]) == (behind.status_code, -32020)
    # and every one goes up verbatim, the base64 form undecoded
    recorder, url = recorded
    params = {"Mcp-Param-Region": encoded, "mcp-param-tier": "gold"}
    http.post(
        url, json=call(5, "tool", {"region": "eu-west"}), headers=headers("tools/call", "tool", **params)
    )
    seen, _ = recorder.last()
    assert seen["mcp-param-region"] == encoded and seen["mcp-param-tier"] == "gold"


def test_an_unknown_version_gets_the_gateways_32022_with_what_it_supports(recorded, http):
    recorder, url = recorded
    before = len(recorder.requests)
    listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"_meta": META}}
    answer = http.post(
        url, json=listing, headers=headers("tools/list", **{"MCP-Protocol-Version": "2099-01-01"})
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == -32022 and answer.json()["id"] == 8
    assert error["data"]["requested"] == "2099-01-01"
    assert MODERN in error["data"]["supported"] and "2025-11-25" in error["data"]["supported"]
    assert len(recorder.requests) == before  # never sent up
    # server/discover is how a client learns the versions: it goes up whatever it names
    discover = {"jsonrpc": "2.0", "id": 9, "method": "server/discover"}
    answer = http.post(
        url, json=discover, headers=headers("server/discover", **{"MCP-Protocol-Version": "2099-01-01"})
    )
    assert answer.status_code == 200 and answer.json()["result"] == {"method": "server/discover"}


def test_an_initialize_with_an_unknown_version_header_still_opens_a_session(sdk, http):
    sent = {"Accept": BOTH, "Content-Type": JSON, "MCP-Protocol-Version": "2099-01-01"}
    answer = http.post(sdk[1], json=INITIALIZE, headers=sent)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["protocolVersion"] == "2025-11-25"
    http.delete(sdk[1], headers={"Mcp-Session-Id": answer.headers["mcp-session-id"]})


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_not_allowed_under_2026(recorded, http, method):
    _, url = recorded
    answer = http.request(
        method, url, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": MODERN}
    )
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"


def test_a_json_body_of_several_messages_and_an_error_status_come_back_as_they_came(recorded, http):
    _, url = recorded
    answer = http.post(url, json={"jsonrpc": "2.0", "id": 10, "method": "multi"}, headers=headers("multi"))
    assert answer.status_code == 200
    messages = answer.json()
    assert [m.get("method") for m in messages] == ["notifications/message", None]
    assert messages[1] == {"jsonrpc": "2.0", "id": 10, "result": {"n": 2}}
    answer = http.post(url, json={"jsonrpc": "2.0", "id": 11, "method": "teapot"}, headers=headers("teapot"))
    assert answer.status_code == 404
    assert answer.json()["error"] == {"code": -32601, "message": "no teapot here"}
    assert answer.headers["retry-after"] == "7"  # named by the transport: passed
    assert "x-upstream-secret" not in answer.headers  # not named: the gateway's own head


def test_an_upstream_refusing_the_operators_credentials_is_the_gateways_answer(recorded, http):
    _, url = recorded
    answer = http.post(url, json={"jsonrpc": "2.0", "id": 12, "method": "locked"}, headers=headers("locked"))
    assert answer.status_code == 502
    assert "www-authenticate" not in answer.headers  # the challenge is the operator's, not the client's
    assert answer.json()["error"]["data"] == {"gateway": "upstream-unauthorized", "status": 401}


def test_an_upstream_message_over_the_limit_ends_that_call_explicitly(recorded, http):
    recorder, _ = recorded
    with gateway_over(recorded_url(recorder), max_message_size=1024) as small:
        for sse, status in ((False, 502), (True, 200)):
            huge = {"jsonrpc": "2.0", "id": 20, "method": "huge", "params": {"sse": sse}}
            answer = http.post(small.url, json=huge, headers=headers("huge"))
            assert answer.status_code == status
            text = answer.text if not sse else answer.text.split("data: ", 1)[1]
            error = json.loads(text)
            assert error["id"] == 20 and error["error"]["data"] == {"gateway": "too-large"}


def test_an_input_required_result_round_trip(sdk, http):
    tool = "test_input_required_result_request_state"
    sent = headers("tools/call", tool)
    first = http.post(sdk[1], json=call(13, tool, {}), headers=sent)
    assert first.status_code == 200, first.text
    result = first.json()["result"]
    assert result["resultType"] == "input_required"
    (key,) = result["inputRequests"]
    responses = {key: {"action": "accept", "content": {"ok": True}}}
    again = call(14, tool, {}, inputResponses=responses, requestState=result["requestState"])
    second = http.post(sdk[1], json=again, headers=sent)
    assert second.status_code == 200, second.text
    assert second.json()["result"]["resultType"] == "complete"
    # tampered with, the state is refused upstream exactly as direct
    tampered = call(15, tool, {}, inputResponses=responses, requestState=result["requestState"][:-4] + "AAAA")
    direct, behind = both(http, sdk, tampered, sent)
    assert (direct.status_code, direct.json().get("error", {}).get("code")) == (
        behind.status_code,
        behind.json().get("error", {}).get("code"),
    )


def test_subscriptions_listen_is_relayed_and_closing_it_closes_upstream(recorded):
    recorder, url = recorded
    recorder.listen_ended.clear()
    listen = {"jsonrpc": "2.0", "id": 16, "method": "subscriptions/listen", "params": {"_meta": META}}
    with httpx.Client(timeout=WAIT) as client:
        with client.stream("POST", url, json=listen, headers=headers("subscriptions/listen")) as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            data: list[str] = []
            deadline = time.monotonic() + WAIT
            for line in answer.iter_lines():
                assert not line.startswith(("id:", "retry:"))  # the upstream's cursor is not passed on
                if line.startswith("data:"):
                    data.append(line[5:].strip())
                if not line and data:
                    break
                assert time.monotonic() < deadline
    assert json.loads("".join(data))["params"] == {"uri": "x://1"}
    assert recorder.listen_ended.wait(WAIT)  # its client left: the upstream stream closed too


@contextlib.contextmanager
def listening(url: str, ident: int, **params: Any) -> Iterator[Iterator[Any]]:
    """A listen answered as JSON lines: its lines as they come, each parsed."""
    body = {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "subscriptions/listen",
        "params": {"_meta": META, **params},
    }
    with httpx.Client(timeout=WAIT) as client:
        with client.stream("POST", url, json=body, headers=headers("subscriptions/listen")) as answer:
            assert answer.status_code == 200, answer.read()
            assert answer.headers["content-type"] == JSON  # as the upstream labelled it
            yield (json.loads(line) for line in answer.iter_lines())


def test_a_listen_answered_as_json_lines_goes_down_as_it_comes(recorded):
    """Read whole, such a body would never go down: it lasts while both ends hold it."""
    recorder, url = recorded
    recorder.listen_ended.clear()
    with listening(url, 17, lines=True) as lines:
        ack, note = next(lines), next(lines)
    assert (ack["method"], ack["params"]["_meta"]) == (ACK, {SUBSCRIPTION: 17})
    assert note["params"]["data"] == "x" * 2048  # a line that came in two pieces, whole
    assert recorder.listen_ended.wait(WAIT)  # its client left: the upstream's answer closed too
    # a line over the message limit ends it with the gateway's error, on a line of its own
    with gateway_over(recorded_url(recorder), max_message_size=1024) as small:
        with listening(small.url, 18, lines=True) as lines:
            ack, error = next(lines), next(lines)
    assert ack["method"] == ACK
    assert error["id"] == 18 and error["error"]["data"] == {"gateway": "too-large"}


def test_a_listen_of_the_typescript_server_answered_as_json_lines_goes_down_as_it_comes(http):
    tool = "test_trigger_tool_change"
    with ts_server("--json-listen") as url, gateway_over(url) as gateway:
        with listening(gateway.url, 19, notifications={"toolsListChanged": True}) as lines:
            assert next(lines)["method"] == ACK  # at once, the stream open
            changed = http.post(gateway.url, json=call(20, tool, {}), headers=headers("tools/call", tool))
            assert changed.status_code == 200, changed.text
            note = next(lines)
    assert (note["method"], note["params"]["_meta"]) == (
        "notifications/tools/list_changed",
        {SUBSCRIPTION: 19},
    )


def test_what_the_gateway_owns_stays_its_own_authentication_and_quotas(recorded, http):
    recorder, _ = recorded
    with gateway_over(recorded_url(recorder), auth=token_auth(), limits=Limits(calls=1)) as guarded:
        before = len(recorder.requests)
        listing = {"jsonrpc": "2.0", "id": 30, "method": "tools/list", "params": {"_meta": META}}
        refused = http.post(guarded.url, json=listing, headers=headers("tools/list"))
        assert refused.status_code == 401 and "www-authenticate" in refused.headers
        assert len(recorder.requests) == before  # never went up
        answer = http.post(
            guarded.url, json=listing, headers={**headers("tools/list"), **as_principal("alice")}
        )
        assert answer.status_code == 200, answer.text
        seen, _ = recorder.last()
        assert "authorization" not in seen  # the client's token never goes up
        # a listen stream holds a stream's share, not a call's: a call still fits beside it
        listen = {"jsonrpc": "2.0", "id": 31, "method": "subscriptions/listen", "params": {"_meta": META}}
        alice = {**headers("subscriptions/listen"), **as_principal("alice")}
        with httpx.Client(timeout=WAIT) as other:
            with other.stream("POST", guarded.url, json=listen, headers=alice) as stream:
                assert stream.status_code == 200
                also = http.post(
                    guarded.url, json=listing, headers={**headers("tools/list"), **as_principal("alice")}
                )
                assert also.status_code == 200, also.text
