"""The gateway's behaviour, one thing a test, against the reference server on 127.0.0.1:
downstream resumption from the gateway's store, the message limit, keep-alives, upstream
session loss, server-to-client requests, 2026-07-28 per-request relaying and re-issues,
metrics, and bad downstream input (each an explicit error or a bounded wait, other
sessions unaffected)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import httpx
import orjson
import pytest

from ssewire import Decoder
from ssewire.cli import main as cli
from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import Cut
from tests.support.gateway_runs import POST, countdown, gateway_over, messages, session
from tests.support.get_first import GetFirst, list_tools
from tests.support.mcp_helpers import INITIALIZE, request_body
from tests.support.resets import reference_server


@pytest.fixture(scope="module")
def gateway(upstream):
    with gateway_over(upstream, max_message_size=256 * 1024, keepalive=0.2) as gw:
        yield gw


def test_a_downstream_client_resumes_from_the_gateway_store_without_gap_or_copy(gateway):
    with httpx.Client(timeout=30) as http:
        headers = session(http, gateway.url)
        decoder, first = Decoder(), []
        with http.stream("POST", gateway.url, json=countdown(7, 6, 0.1), headers=headers) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            for chunk in answer.iter_bytes():
                first += decoder.feed(chunk)
                if len(messages(first)) >= 2:
                    break  # the connection goes: the call goes on upstream
        cursor = decoder.last_event_id
        assert cursor
        resumed = http.get(
            gateway.url, headers={**headers, "Accept": "text/event-stream", "Last-Event-ID": cursor}
        )
        assert resumed.status_code == 200
        rest = Decoder().feed(resumed.content)
    got = messages(first) + messages(rest)
    progress = [m["params"]["progress"] for m in got if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6]  # each once, in order, across the two connections
    assert all(m["params"]["progressToken"] == "tok" for m in got if "method" in m)  # the client's own token
    assert [m["id"] for m in got if "result" in m] == [7]  # the downstream id, once


def test_an_unknown_or_evicted_cursor_is_refused_explicitly(gateway):
    with httpx.Client(timeout=10) as http:
        headers = {**session(http, gateway.url), "Accept": "text/event-stream"}
        for cursor in ("99-1", "not-ours"):
            answer = http.get(gateway.url, headers={**headers, "Last-Event-ID": cursor})
            assert answer.status_code == 409
            assert answer.json()["error"]["code"] == -32000


def test_an_upstream_message_over_the_limit_fails_that_call_and_the_session_goes_on(gateway):
    async def calls():
        async with Client(gateway.url, profile="2025-11-25", listen=False) as client:
            with pytest.raises(RPCError) as failed:
                await client.call_tool("big", {"size": 512 * 1024})
            assert failed.value.error["data"] == {"gateway": "too-large"}
            assert (await client.call_tool("echo", {"text": "still here"}))["content"][0][
                "text"
            ] == "still here"

    asyncio.run(calls())


def test_keepalives_flow_downstream_while_the_upstream_is_silent(gateway):
    with httpx.Client(timeout=30) as http:
        headers = session(http, gateway.url)
        decoder = Decoder()
        answer = http.post(gateway.url, json=countdown(3, 2, 0.8), headers=headers)
        events = decoder.feed(answer.content)
    assert decoder.comments >= 4  # 1.6 s of upstream silence, one comment every 0.2 s
    assert [m["id"] for m in messages(events) if "result" in m] == [3]


def test_an_upstream_session_lost_is_reinitialized_and_the_call_goes_through(gateway, upstream):
    async def calls():
        async with Client(gateway.url, profile="2025-11-25", listen=False) as client:
            await client.call_tool("echo", {"text": "one"})
            relay = gateway.app.relays[client.session]
            before = relay.client.session
            async with httpx.AsyncClient() as http:  # behind the gateway's back
                gone = await http.delete(
                    upstream, headers={"Mcp-Session-Id": before, "MCP-Protocol-Version": "2025-11-25"}
                )
                assert gone.status_code == 200
            result = await client.call_tool("echo", {"text": "two"})
            assert result["content"][0]["text"] == "two"
            assert relay.client.session != before
            assert relay.record.upstream == relay.client.session  # the record follows

    reinitialized = gateway.app.metrics.snapshot()["upstream_reinitializations_total"]
    asyncio.run(calls())
    assert gateway.app.metrics.snapshot()["upstream_reinitializations_total"] == reinitialized + 1


def test_a_server_request_reaches_the_downstream_client_and_its_answer_goes_up(gateway):
    asked = []

    def sample(params):
        asked.append(params["messages"][0]["content"]["text"])
        return {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "m"}

    async def calls():
        handlers = {"sampling/createMessage": sample}
        async with Client(gateway.url, profile="2025-11-25", listen=False, handlers=handlers) as client:
            return await client.call_tool("ask", {"question": "the answer?"})

    result = asyncio.run(calls())
    assert asked == ["the answer?"]
    assert "forty-two" in result["content"][0]["text"]


def test_a_server_request_goes_down_only_once_its_answer_would_be_taken(upstream):
    """A store that takes time to begin waiting for an answer (Redis: a round trip): the
    request goes down only then, so a client answering at once is never refused for being
    early (at a replica under load, the answer came first and was refused: 400)."""
    from ssewire.mcp.gateway.stores import MemoryStore

    class SlowToWait(MemoryStore):
        async def expect(self, session, ident, timeout, registered=None):
            await asyncio.sleep(0.2)
            return await super().expect(session, ident, timeout, registered)

    def sample(params):
        return {"role": "assistant", "content": {"type": "text", "text": "in time"}, "model": "m"}

    async def calls():
        handlers = {"sampling/createMessage": sample}
        async with Client(gw.url, profile="2025-11-25", listen=False, handlers=handlers) as client:
            return await client.call_tool("ask", {"question": "?"})

    with gateway_over(upstream, store=SlowToWait()) as gw:
        result = asyncio.run(calls())
    assert "in time" in result["content"][0]["text"]


def test_a_server_request_the_store_cannot_wait_for_never_goes_down(upstream):
    """A store that fails as it begins the wait: the request is not sent down (no answer
    to it could be taken), and the upstream hears of the failure at once, not at its
    deadline."""
    from ssewire.mcp.gateway.stores import MemoryStore, StoreFailed

    class Failing(MemoryStore):
        async def expect(self, session, ident, timeout, registered=None):
            raise StoreFailed("the store is down")

    asked = []

    def sample(params):
        asked.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "never"}, "model": "m"}

    async def calls():
        handlers = {"sampling/createMessage": sample}
        async with Client(gw.url, profile="2025-11-25", listen=False, handlers=handlers) as client:
            started = time.monotonic()
            try:
                result = await client.call_tool("ask", {"question": "?"})
            except RPCError as refused:
                result = {"error": refused}
            return result, time.monotonic() - started

    with gateway_over(upstream, store=Failing()) as gw:
        result, took = asyncio.run(calls())
    assert asked == [] and took < 5
    assert "never" not in str(result)


def test_metrics_are_served_in_the_prometheus_text_format(gateway):
    asyncio.run(_echo(gateway.url))
    answer = httpx.get(gateway.url.removesuffix("/mcp") + "/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    lines = dict(line.rsplit(" ", 1) for line in answer.text.splitlines() if not line.startswith("#"))
    assert float(lines["ssewire_gateway_messages_total"]) >= 1
    assert float(lines["ssewire_gateway_sessions_opened_total"]) >= 1
    assert float(lines['ssewire_gateway_added_latency_seconds_bucket{le="+Inf"}']) == float(
        lines["ssewire_gateway_added_latency_seconds_count"]
    )


async def _echo(url: str, text: str = "hi") -> str:
    async with Client(url, profile="2025-11-25", listen=False) as client:
        result = await client.call_tool("echo", {"text": text})
        return result["content"][0]["text"]


# -- bad input downstream -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        pytest.param(b"{", {}, 400, -32700, id="malformed-json"),
        pytest.param(b"[" + orjson.dumps(INITIALIZE) + b"]", {}, 400, -32600, id="a-batch"),
        pytest.param(b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', {}, 400, -32600, id="not-json-rpc-2"),
        pytest.param(b"x" * 300_000, {}, 413, -32600, id="oversized-body"),
        pytest.param(b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', {}, 400, -32600, id="a-list-id"),
        pytest.param(b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', {}, 400, -32600, id="a-boolean-id"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 3, "method": 7}', {}, 400, -32600, id="a-number-method"),
        pytest.param(orjson.dumps(INITIALIZE), {"Accept": "text/html"}, 406, -32600, id="wrong-accept"),
        pytest.param(
            orjson.dumps(INITIALIZE), {"Content-Type": "text/plain"}, 415, -32600, id="wrong-content-type"
        ),
        pytest.param(
            b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}',
            {"Mcp-Session-Id": "nobody"},
            404,
            -32001,
            id="unknown-session",
        ),
        pytest.param(b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}', {}, 400, -32600, id="no-session"),
    ],
)
def test_bad_downstream_requests_get_an_explicit_error(gateway, body, headers, status, code):
    answer = httpx.post(gateway.url, content=body, headers={**POST, **headers}, timeout=10)
    assert answer.status_code == status
    assert answer.json()["error"]["code"] == code


@pytest.mark.parametrize(
    "headers", [{"Origin": "https://evil.example"}, {"Host": "evil.example"}], ids=["origin", "host"]
)
def test_foreign_origins_and_hosts_are_refused(gateway, headers):
    answer = httpx.post(gateway.url, json=INITIALIZE, headers={**POST, **headers}, timeout=10)
    assert answer.status_code == 403


def test_a_client_that_never_reads_is_cut_after_the_write_timeout_and_slows_no_one(upstream, caplog):
    caplog.set_level(logging.INFO, logger="ssewire.mcp.gateway")
    with gateway_over(upstream, keepalive=0.2, write_timeout=1.0) as gw, httpx.Client(timeout=30) as http:
        stalled = session(http, gw.url)
        size = 12 << 20  # more than the sockets between them buffer
        big = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size": size}},
        }
        with http.stream("POST", gw.url, json=big, headers=stalled):  # opened, never read
            started = time.monotonic()
            assert asyncio.run(_echo(gw.url, "others go on")) == "others go on"
            assert time.monotonic() - started < 5
            deadline = time.monotonic() + 15
            while gw.app.metrics.snapshot()["stalled_readers_total"] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert gw.app.metrics.snapshot()["stalled_readers_total"] == 1  # cut, not held open
            # and said, with why (uvicorn's own line names no reason)
            assert any(
                getattr(r, "fields", {}).get("kind") == "cut" and "read nothing for 1 s" in r.getMessage()
                for r in caplog.records
            )
            assert gw.app.store.log.stored <= gw.app.store.log.max_bytes
        resumed = http.get(gw.url, headers={**stalled, "Accept": "text/event-stream", "Last-Event-ID": "1-1"})
        answer = [m for m in messages(Decoder().feed(resumed.content)) if m.get("id") == 5]
        assert len(answer[0]["result"]["content"][0]["text"]) == size  # what it missed, from the store


def test_a_deleted_session_is_gone(gateway):
    with httpx.Client(timeout=10) as http:
        headers = session(http, gateway.url)
        assert http.delete(gateway.url, headers=headers).status_code == 200
        again = http.post(gateway.url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=headers)
        assert again.status_code == 404


# -- 2026-07-28: per request ----------------------------------------------------------


def first(pattern: bytes, at: int):
    """Cut the first upstream connection whose request holds ``pattern``."""
    done = []

    def plan(n, head):
        if pattern in head and not done:
            done.append(n)
            return Cut(at=at)
        return None

    return plan


def test_2026_requests_are_relayed_and_a_broken_listing_is_reissued():
    with (
        running(reference_server(profile="2026-07-28")) as root,
        gateway_over(root + "/mcp", first(b'"tools/list"', 20)) as gw,
    ):

        async def calls():
            async with Client(gw.url, profile="2026-07-28") as client:
                tools = await client.request("tools/list")
                ticks = []
                result = await client.call_tool(
                    "countdown", {"count": 3, "size": 10}, on_progress=ticks.append
                )
                return tools, result, ticks

        tools, result, ticks = asyncio.run(calls())
        assert {tool["name"] for tool in tools["tools"]} >= {"echo", "countdown"}
        assert [tick["progress"] for tick in ticks] == [1, 2, 3]
        assert len(result["content"][0]["text"]) == 10
        assert gw.app.metrics.snapshot()["reissues_total"] == 1


def test_2026_a_broken_tool_call_is_not_repeated_but_answered_with_an_error():
    with (
        running(reference_server(profile="2026-07-28")) as root,
        gateway_over(root + "/mcp", first(b'"tools/call"', 20)) as gw,
    ):

        async def calls():
            async with Client(gw.url, profile="2026-07-28") as client:
                with pytest.raises(RPCError) as failed:
                    await client.call_tool("echo", {"text": "once"})
                return failed.value.error

        error = asyncio.run(calls())
        assert error["data"] == {"gateway": "upstream"}
        assert "may have been processed" in error["message"]
        assert gw.app.metrics.snapshot()["reissues_total"] == 0


# -- the command ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["--upstream", "ftp://x"], ["--upstream", "http://127.0.0.1:1/mcp", "--store", "sqlite://x"]],
    ids=["not-http", "unknown-store"],
)
def test_the_command_refuses_bad_arguments(argv, capsys):
    assert cli(["gateway", *argv]) == 2
    assert "gateway" in capsys.readouterr().err


def test_a_cancelled_call_stops_and_the_upstream_is_told_under_its_own_id():
    seen: list[bytes] = []
    app = reference_server(store_size=256)

    async def spying(scope, receive, send):
        async def received():
            message = await receive()
            if message.get("type") == "http.request":
                seen.append(message.get("body", b""))
            return message

        await app(scope, received, send)

    with running(spying) as root, gateway_over(root + "/mcp") as gw, httpx.Client(timeout=30) as http:
        headers = session(http, gw.url)
        started = time.monotonic()
        with http.stream("POST", gw.url, json=countdown(11, 100, 0.05), headers=headers) as answer:
            decoder, chunks = Decoder(), answer.iter_bytes()
            events = []
            while not messages(events):  # the call is running upstream: its first progress came down
                events += decoder.feed(next(chunks))
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 11}}
            assert http.post(gw.url, json=cancel, headers=headers).status_code == 202
            for chunk in chunks:
                events += decoder.feed(chunk)
        assert time.monotonic() - started < 4  # not the 5 s the call would take
        assert not [m for m in messages(events) if "result" in m or "error" in m]
        deadline = time.monotonic() + 5
        while not any(b"notifications/cancelled" in body for body in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
    upstream_call = next(json.loads(body) for body in seen if b'"tools/call"' in body)
    told = next(json.loads(body) for body in seen if b"notifications/cancelled" in body)
    assert told["params"]["requestId"] == upstream_call["id"] != 11  # the gateway's own id upstream


@pytest.mark.parametrize("related", [True, False], ids=["on-the-call-stream", "on-the-get-stream"])
def test_a_server_request_comes_down_the_stream_it_relates_to(related):
    from ssewire.mcp.client import delivering
    from tests.support.sdk_servers import probe_app

    came_on = []

    def sample(params):
        came_on.append(delivering())  # the id of the call whose stream carried it, or None (GET)
        return {"role": "assistant", "content": {"type": "text", "text": "yes"}, "model": "m"}

    async def calls(url, gw):
        handlers = {"sampling/createMessage": sample}
        async with Client(url, profile="2025-11-25", handlers=handlers) as client:
            deadline = time.monotonic() + 10
            while not all(r.client.listening for r in gw.app.relays.values()) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)  # the gateway's own GET stream upstream is open
            return await client.call_tool("ask", {"question": "?", "related": related})

    with running(probe_app()) as root, gateway_over(root + "/mcp") as gw:
        result = asyncio.run(calls(gw.url, gw))
    assert "yes" in result["content"][0]["text"]
    assert len(came_on) == 1
    assert (came_on[0] is not None) is related


def test_a_flood_of_tiny_calls_is_bounded_by_the_store_budget_like_large_ones():
    """Each event and stream is counted with what it costs besides its payload, so many
    tiny finished calls make room as a few large ones would."""
    from ssewire.mcp.gateway.stores import MemoryStore

    async def flood():
        store = MemoryStore(max_bytes=1 << 20)
        for _ in range(5000):
            stream = await store.open_stream("s", {"id": 1, "method": "ping"})
            await store.append(
                "s", stream, [(b"", 0.0), (b'{"jsonrpc":"2.0","id":1,"result":{}}', 0.0)], final=True
            )
        return store

    store = asyncio.run(flood())
    assert store.log.stored <= store.log.max_bytes
    assert len(store.log.streams) < 1000  # the oldest finished streams made room
    assert store.log.stored == sum(s.size for s in store.log.streams.values())  # the books balance


def test_2026_closing_a_stream_cancels_its_call_upstream_and_no_client_cancels_another_s():
    """2026-07-28 (basic/patterns/cancellation): over HTTP, closing the response stream is the
    cancellation. Two clients use the same JSON-RPC ids through one gateway: B's
    notifications/cancelled names no request of A's (ignored), B closing its stream ends B's
    call upstream only, and A's call with the same id is answered whole."""
    seen: list[bytes] = []
    left: list[bytes] = []  # bodies of upstream requests whose client (the gateway) went away
    app = reference_server(profile="2026-07-28")

    async def spying(scope, receive, send):
        body = b""

        async def received():
            nonlocal body
            message = await receive()
            if message.get("type") == "http.request":
                body += message.get("body", b"")
                seen.append(message.get("body", b""))
            elif message.get("type") == "http.disconnect":
                left.append(body)
            return message

        await app(scope, received, send)

    async def calls(url):
        async with (
            Client(url, profile="2026-07-28", first_id=100) as a,
            Client(url, profile="2026-07-28", first_id=100) as b,
        ):  # discover: 100, the call: 101, for both
            call_a = asyncio.ensure_future(a.call_tool("countdown", {"count": 20, "delay": 0.05}))
            call_b = asyncio.ensure_future(b.call_tool("countdown", {"count": 400, "delay": 0.05}))
            await asyncio.sleep(0.3)
            await b.notify("notifications/cancelled", {"requestId": 101})  # whose 101? no one's here
            call_b.cancel()  # B closes its stream: that is its cancellation
            return await asyncio.wait_for(call_a, 15)

    with running(spying) as root, gateway_over(root + "/mcp") as gw:
        answer = asyncio.run(calls(gw.url))
        deadline = time.monotonic() + 5
        while not any(b'"count":400' in body for body in left) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert answer["content"], answer  # A's call 101 answered whole, though B cancelled "101"
    assert not any(b"notifications/cancelled" in body for body in seen)  # not sent up as anyone's
    assert any(b'"count":400' in body for body in left)  # B's call ended upstream when B left


def test_a_flood_of_sessions_never_ends_a_working_one_and_the_store_agrees(upstream):
    """The relay table is the gateway's one session table: a client opening many sessions
    makes the idle ones go (their records with them), never the one whose call is running;
    once every session works, a new one is refused 503 with Retry-After."""
    with gateway_over(upstream, max_sessions=4, keepalive=0.2) as gw, httpx.Client(timeout=30) as http:
        working = session(http, gw.url)
        decoder, events = Decoder(), []
        with http.stream("POST", gw.url, json=countdown(1, 8, 0.1), headers=working) as answer:
            chunks = answer.iter_bytes()
            while not messages(events):
                events += decoder.feed(next(chunks))
            flood = [http.post(gw.url, json=INITIALIZE, headers=POST) for _ in range(12)]
            assert [r.status_code for r in flood] == [200] * 12  # idle ones made room each time
            for chunk in chunks:
                events += decoder.feed(chunk)
        got = messages(events)
        assert [m["params"]["progress"] for m in got if "method" in m] == list(range(1, 9))
        assert [m["id"] for m in got if "result" in m] == [1]
        sid = working["Mcp-Session-Id"]
        table = set(gw.app.relays)
        assert sid in table and len(table) == 4
        assert table == set(gw.app.store.sessions)  # the store keeps exactly the table's sessions

        busy = []  # every session working: the next initialize is refused, nothing is dropped
        for n in range(4):
            headers = working if n == 0 else session(http, gw.url)
            busy.append(http.stream("POST", gw.url, json=countdown(10 + n, 20, 0.1), headers=headers))
        opened = [stream.__enter__() for stream in busy]
        try:
            while not all(gw.app.relays[sid].working for sid in gw.app.relays):
                time.sleep(0.02)
            refused = http.post(gw.url, json=INITIALIZE, headers=POST)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
            assert refused.json()["error"]["code"] == -32000 and len(gw.app.relays) == 4
        finally:
            for stream, response in zip(busy, opened, strict=True):
                stream.__exit__(None, None, None)
                del response


def test_a_browser_client_reads_every_answer_a_trusted_origin_gets(gateway):
    """The preflight passes (204), and each answer then carries the CORS headers, so a page
    can read the result and the Mcp-Session-Id."""
    origin = {"Origin": "http://localhost:5173"}
    with httpx.Client(timeout=10) as http:
        preflight = http.options(gateway.url, headers={**origin, "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 204 and "POST" in preflight.headers["access-control-allow-methods"]
        opened = http.post(gateway.url, json=INITIALIZE, headers={**POST, **origin})
        refused = http.post(gateway.url, content=b"{", headers={**POST, **origin})
    for answer in (opened, refused):
        assert answer.headers["access-control-allow-origin"] == origin["Origin"]
        assert "Mcp-Session-Id" in answer.headers["access-control-expose-headers"]
    assert opened.status_code == 200 and refused.status_code == 400


def test_a_session_taken_up_by_many_requests_at_once_is_taken_up_once(upstream, monkeypatch):
    """Requests for a session another process opened arrive together: one takes it up, the
    rest wait for it; a take-up that fails leaves no lock behind and no second relay."""
    from ssewire.mcp.gateway import relay as relay_module
    from ssewire.mcp.gateway.stores import MemoryStore

    attaches, real_attach = [], relay_module.Relay.attach

    async def counted(self):
        attaches.append(self)
        if len(attaches) == 1:
            raise relay_module.StreamBroken("the first take-up fails")
        await asyncio.sleep(0.2)  # long enough for the others to queue behind it
        await real_attach(self)

    shared = MemoryStore()
    with (
        gateway_over(upstream, store=shared, replica=True) as one,
        gateway_over(upstream, store=shared, replica=True) as two,
        httpx.Client(timeout=30) as http,
    ):
        headers = session(http, one.url)
        monkeypatch.setattr(relay_module.Relay, "attach", counted)

        async def pings():
            async with httpx.AsyncClient(timeout=30) as client:
                asked = [
                    client.post(two.url, json={"jsonrpc": "2.0", "id": n, "method": "ping"}, headers=headers)
                    for n in range(12)
                ]
                return [answer.status_code for answer in await asyncio.gather(*asked)]

        first = asyncio.run(pings())
        second = asyncio.run(pings())
        assert first.count(404) == 1 and first.count(200) == 11, first  # one failed take-up, then one good
        assert second == [200] * 12
        assert len(attaches) == 2  # not one per request
        assert list(two.app.relays) == [headers["Mcp-Session-Id"]] and two.app._attaching == {}


def _refusing(status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> Any:
    """An upstream that answers every request ``status`` with ``body`` (its id, if it says
    ``ID``, the request's) and ``headers``."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = await request_body(receive)
        ident = json.dumps(json.loads(request or b"{}").get("id")).encode()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body.replace(b"ID", ident)})

    return app


ERROR_503 = b'{"jsonrpc":"2.0","id":ID,"error":{"code":-32000,"message":"overloaded"}}'
JSON_HEAD = [(b"content-type", b"application/json")]


@pytest.mark.parametrize(
    ("status", "body", "said", "answered", "told", "error"),
    [
        # the upstream's own error, as it came, with its status and when to come back
        (503, ERROR_503, b"9", 503, "9", {"code": -32000, "message": "overloaded"}),
        # a body that is not the request's answer: the status still says it
        (503, b"busy", b"99999999", 503, "60", {"gateway": "unavailable"}),
        (
            503,
            ERROR_503.replace(b"ID", b"12345"),
            b"Sun, 01 Jan 2100 00:00:00 GMT",
            503,
            "60",
            {"gateway": "unavailable"},
        ),
        (503, b"busy", None, 503, "1", {"gateway": "unavailable"}),
        (500, b"broken", None, 502, None, {"gateway": "upstream"}),
    ],
    ids=["json-rpc-error", "text-far-off", "another-id-a-date", "no-retry-after", "500"],
)
def test_an_upstream_that_cannot_open_a_session_now_is_passed_on_with_when_to_come_back(
    status, body, said, answered, told, error
):
    headers = [*JSON_HEAD, *([(b"retry-after", said)] if said is not None else [])]
    with running(_refusing(status, body, headers)) as root, gateway_over(root + "/mcp") as gw:
        answer = httpx.post(gw.url, json=INITIALIZE, headers=POST, timeout=30)
    assert answer.status_code == answered, answer.text
    assert answer.headers.get("retry-after") == told  # (at most a minute, whatever it said)
    got = answer.json()["error"]
    assert got == error if "code" in error else got["data"] == error, got


def test_a_downstream_get_stream_is_answered_after_the_upstream_one():
    # The gateway opens its upstream GET stream with the first downstream one, and answers
    # the downstream one only once the upstream has answered its own: the client's next
    # request (sent once its GET is answered) cannot reach the upstream before the GET
    # stream the upstream may send its requests on.
    upstream = GetFirst(head_delay=0.3)
    with running(upstream, lifespan="off") as base, gateway_over(base + "/mcp") as gw:
        opened = asyncio.run(list_tools(gw.url))
    assert upstream.when("tools/list") > upstream.when("GET answered")
    assert opened < 3.0  # went on at the upstream GET's answer, not at the bound (10 s)
