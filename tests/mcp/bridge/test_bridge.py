"""The revision bridge against real servers on 127.0.0.1, both ways:

- the official SDK server restricted to 2025-11-25 behind the bridge, driven by a 2026-07-28
  client (raw httpx requests: the wire is what is tested);
- a small 2026-07-28-only server (written here: it refuses initialize and every other
  revision) behind the bridge, driven by the official SDK client on 2025-11-25 and by raw
  httpx for the GET stream and the refusals.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import orjson
import pytest
from mcp import Client
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitResult, TextContent
from pydantic import BaseModel, Field

from ssewire.jsonrpc import Message, MessageDecoder
from ssewire.mcp.bridge import Bridge, Settings
from ssewire.mcp.bridge.state import BadState, Sealer
from ssewire.mcp.transport.serving import running
from tests.support.mcp_helpers import request_body

OLD, NEW = "2025-11-25", "2026-07-28"
WAIT = 20.0  # seconds any one step of a test may take


# -- the 2025-11-25 upstream: the official SDK server, refusing the stateless revision ----------


class Confirm(BaseModel):
    ok: bool


CANCELLED: list[str] = []  # the slow tool's calls that ended by cancellation, upstream
STARTED: list[str] = []  # the slow tool's calls that began running, upstream


def sdk_server_2025() -> Any:
    server = MCPServer("sdk-2025", version="1.0", log_level="WARNING")

    @server.tool()
    async def slow(tag: str) -> str:
        STARTED.append(tag)
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            CANCELLED.append(tag)
            raise
        return "late"

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    def whoami(ctx: Context) -> str:
        params = ctx.session.client_params
        return params.client_info.name if params is not None else "?"

    @server.tool()
    async def confirm(ctx: Context, what: str) -> str:
        answer = await ctx.elicit(f"really {what}?", Confirm)
        return f"{what}: {answer.action} {answer.data.ok if answer.data else None}"

    @server.tool()
    def region(where: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return f"region={where}"

    @server.tool()
    async def confirm_both(ctx: Context) -> str:  # two questions at once: one round
        first, second = await asyncio.gather(ctx.elicit("first?", Confirm), ctx.elicit("second?", Confirm))
        return f"{first.action} {second.action}"

    @server.tool()
    async def changed(ctx: Context) -> str:
        await ctx.session.send_tool_list_changed()
        return "sent"

    low = server._lowlevel_server  # list changes are announced only with these options
    options = low.create_initialization_options
    low.create_initialization_options = lambda *a, **k: options(NotificationOptions(tools_changed=True))
    app = server.streamable_http_app(streamable_http_path="/mcp")

    async def only_2025(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode()
            if version and version != OLD:
                body = orjson.dumps(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32022, "message": "2025 only"}}
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return only_2025


# -- the 2026-07-28 upstream: stateless only, written here -------------------------------------


class Stateless2026:
    """server/discover, tools/call (echo, confirm: an input-required round, touch: a
    resource update to the listens that asked), subscriptions/listen; 400 / -32022 for any
    other revision (initialize included)."""

    def __init__(self) -> None:
        self.listens: list[tuple[Any, dict[str, Any], asyncio.Queue[dict[str, Any]]]] = []
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        body = await request_body(receive)
        if scope["method"] != "POST" or headers.get("mcp-protocol-version") != NEW:
            await self._json(
                send,
                400,
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32022, "message": "2026-07-28 only"}},
            )
            return
        request = orjson.loads(body)
        self.seen.append({"headers": headers, "body": request})
        if "id" not in request:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        ident, method, params = request["id"], request["method"], request.get("params") or {}
        assert headers.get("mcp-method") == method
        meta = params.get("_meta") or {}
        if method == "server/discover":
            result = {
                "supportedVersions": [NEW],
                "capabilities": {
                    "tools": {"listChanged": True},
                    "resources": {"listChanged": True, "subscribe": True},
                },
                "ttlMs": 0,
                "cacheScope": "private",
                "resultType": "complete",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "stateless-2026", "version": "1"}},
            }
            await self._json(send, 200, {"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/call":
            await self._json(
                send, 200, {"jsonrpc": "2.0", "id": ident, "result": await self._tool(params, meta)}
            )
        elif method == "tools/list":
            tools = [
                {"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "confirm", "touch")
            ]
            await self._json(
                send,
                200,
                {"jsonrpc": "2.0", "id": ident, "result": {"tools": tools, "resultType": "complete"}},
            )
        elif method == "subscriptions/listen":
            await self._listen(ident, params, receive, send)
        else:
            await self._json(
                send, 200, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}}
            )

    async def _tool(self, params: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params["name"], params.get("arguments") or {}
        if name == "echo":
            client = meta.get("io.modelcontextprotocol/clientInfo", {}).get("name")
            return _text(f"{arguments['text']} (from {client})")
        if name == "confirm":
            answers = params.get("inputResponses") or {}
            if "ok" not in answers:
                question = {
                    "method": "elicitation/create",
                    "params": {
                        "mode": "form",
                        "message": f"really {arguments['what']}?",
                        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                    },
                }
                return {
                    "resultType": "input_required",
                    "inputRequests": {"ok": question},
                    "requestState": "round-1",
                }
            assert params.get("requestState") == "round-1"
            return _text(f"{arguments['what']}: {answers['ok']['action']} {answers['ok']['content']['ok']}")
        if name == "nag":  # asks again whatever it is told: the bridge's rounds are bounded
            question = {"method": "roots/list", "params": {}}
            return {"resultType": "input_required", "inputRequests": {"again": question}}
        if name == "touch":
            for _, wanted, queue in self.listens:
                if arguments["uri"] in (wanted.get("resourceSubscriptions") or []):
                    queue.put_nowait(
                        {"method": "notifications/resources/updated", "params": {"uri": arguments["uri"]}}
                    )
            return _text("touched")
        raise AssertionError(name)

    async def _listen(self, ident: Any, params: dict[str, Any], receive: Any, send: Any) -> None:
        wanted = params.get("notifications") or {}
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        entry = (ident, wanted, queue)
        self.listens.append(entry)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        ack = {"notifications": wanted, "_meta": {"io.modelcontextprotocol/subscriptionId": ident}}
        gone = asyncio.ensure_future(_disconnect(receive))
        try:
            await _event(
                send, {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack}
            )
            while not gone.done():
                step = asyncio.ensure_future(queue.get())
                await asyncio.wait({step, gone}, return_when=asyncio.FIRST_COMPLETED, timeout=WAIT)
                if not step.done():
                    step.cancel()
                    continue
                note = step.result()
                note["params"]["_meta"] = {"io.modelcontextprotocol/subscriptionId": ident}
                await _event(send, {"jsonrpc": "2.0", **note})
        finally:
            gone.cancel()
            self.listens.remove(entry)

    @staticmethod
    async def _json(send: Any, status: int, value: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(value)})


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False, "resultType": "complete"}


async def _event(send: Any, message: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.body",
            "body": b"event: message\ndata: " + orjson.dumps(message) + b"\n\n",
            "more_body": True,
        }
    )


async def _disconnect(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


# -- fixtures ---------------------------------------------------------------------------------


@contextlib.contextmanager
def bridged(upstream_app: Any, revision: str) -> Iterator[str]:
    settings = Settings(keepalive=1.0, reconnect_delay=0.2, timeout=WAIT, input_timeout=WAIT)
    with running(upstream_app) as up:
        with running(Bridge(f"{up}/mcp", upstream_revision=revision, settings=settings)) as bridge:
            yield f"{bridge}/mcp"


@pytest.fixture(scope="module")
def to_2025() -> Iterator[str]:
    with bridged(sdk_server_2025(), OLD) as url:
        yield url


@pytest.fixture(scope="module")
def upstream_2026() -> Stateless2026:
    return Stateless2026()


@pytest.fixture(scope="module")
def to_2026(upstream_2026: Stateless2026) -> Iterator[str]:
    with bridged(upstream_2026, NEW) as url:
        yield url


# -- a 2026-07-28 client, raw --------------------------------------------------------------


def modern(
    method: str,
    params: dict[str, Any] | None = None,
    *,
    ident: Any = 1,
    client: str = "raw-2026",
    caps: Any = None,
) -> tuple[dict[str, str], dict[str, Any]]:
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": NEW,
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {"elicitation": {}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": NEW,
        "Mcp-Method": method,
    }
    if method in ("tools/call", "prompts/get"):
        headers["Mcp-Name"] = params["name"]
    return headers, {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


async def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [json.loads(await response.aread())]
    found: list[dict[str, Any]] = []
    decoder = MessageDecoder()
    async for chunk in response.aiter_bytes():
        found += [item.payload for item in decoder.feed(chunk) if isinstance(item, Message)]
    return found


async def post(
    http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any] | None = None, **kw: Any
) -> tuple[int, list[dict[str, Any]]]:
    headers, body = modern(method, params, **kw)
    async with http.stream("POST", url, headers=headers, json=body) as response:
        return response.status_code, await asyncio.wait_for(messages_of(response), WAIT)


def last(found: list[dict[str, Any]]) -> dict[str, Any]:
    assert found, "no message came"
    return found[-1]


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 4 * WAIT))


# -- 2026-07-28 client, 2025-11-25 upstream ------------------------------------------------------


def test_discover_and_a_tool_call_through_an_upstream_session(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            status, found = await post(http, to_2025, "server/discover")
            assert status == 200
            result = last(found)["result"]
            assert result["supportedVersions"] == [NEW]
            assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "sdk-2025"
            assert "tools" in result["capabilities"]
            status, found = await post(
                http, to_2025, "tools/call", {"name": "echo", "arguments": {"text": "héllo"}}, ident="a"
            )
            answer = last(found)
            assert status == 200 and answer["id"] == "a"
            assert answer["result"]["content"][0]["text"] == "héllo"
            assert answer["result"]["resultType"] == "complete"

    run(go())


def test_each_client_identity_has_its_own_upstream_session(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            names = await asyncio.gather(
                *(
                    post(http, to_2025, "tools/call", {"name": "whoami"}, client=name)
                    for name in ("alice", "bob", "alice")
                )
            )
            assert [last(found)["result"]["content"][0]["text"] for _, found in names] == [
                "alice",
                "bob",
                "alice",
            ]

    run(go())


def test_an_elicitation_becomes_an_input_required_round(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            call = {"name": "confirm", "arguments": {"what": "deploy"}}
            _, found = await post(http, to_2025, "tools/call", call, ident=7)
            first = last(found)["result"]
            assert first["resultType"] == "input_required"
            [(key, question)] = first["inputRequests"].items()
            assert question["method"] == "elicitation/create"
            assert question["params"]["message"] == "really deploy?"
            state = first["requestState"]

            # another client cannot continue it, nor a forged state
            _, found = await post(
                http,
                to_2025,
                "tools/call",
                {**call, "requestState": state, "inputResponses": {}},
                client="mallory",
            )
            assert last(found)["error"]["data"]["bridge"] == "request-state"
            forged = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
            _, found = await post(
                http, to_2025, "tools/call", {**call, "requestState": forged, "inputResponses": {}}
            )
            assert last(found)["error"]["code"] == -32602

            retry = {
                **call,
                "requestState": state,
                "inputResponses": {key: {"action": "accept", "content": {"ok": True}}},
            }
            _, found = await post(http, to_2025, "tools/call", retry, ident=8)
            answer = last(found)
            assert answer["id"] == 8
            assert answer["result"]["content"][0]["text"] == "deploy: accept True"

            # the state is spent: a second retry is refused by name
            _, found = await post(http, to_2025, "tools/call", retry, ident=9)
            assert last(found)["error"]["data"]["bridge"] == "request-state"

    run(go())


def test_questions_sent_at_once_are_one_round(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            call = {"name": "confirm_both", "arguments": {}}
            _, found = await post(http, to_2025, "tools/call", call)
            first = last(found)["result"]
            assert first["resultType"] == "input_required"
            asked = first["inputRequests"]
            assert sorted(q["params"]["message"] for q in asked.values()) == ["first?", "second?"]
            answers = {key: {"action": "accept", "content": {"ok": True}} for key in asked}
            retry = {**call, "requestState": first["requestState"], "inputResponses": answers}
            _, found = await post(http, to_2025, "tools/call", retry, ident=2)
            assert last(found)["result"]["content"][0]["text"] == "accept accept"

    run(go())


def test_a_request_without_its_meta_is_refused_400(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            for drop in (
                None,
                "io.modelcontextprotocol/protocolVersion",
                "io.modelcontextprotocol/clientCapabilities",
            ):
                headers, body = modern("tools/list", ident=5)
                if drop is None:
                    del body["params"]["_meta"]
                else:
                    del body["params"]["_meta"][drop]
                answer = await http.post(to_2025, headers=headers, json=body)
                assert answer.status_code == 400
                error = answer.json()["error"]
                assert error["code"] == -32602 and answer.json()["id"] == 5
                assert drop is None or drop in error["message"]

    run(go())


def test_a_tool_call_without_its_param_headers_is_refused_400(to_2025: str) -> None:
    """A server with sessions checks no Mcp-Param-* header: the bridge does, from tools/list."""

    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            for sent, served in (
                ("eu-west", True),
                ("=?base64?ZXUtd2VzdA==?=", True),  # "eu-west", Base64
                ("=?base64?ZXUtd2VzdA=?=", False),  # bad padding: it does not decode (malformed)
                ("us-east", False),
                (None, False),
            ):
                headers, body = modern("tools/call", {"name": "region", "arguments": {"where": "eu-west"}})
                if sent is not None:
                    headers["Mcp-Param-Region"] = sent
                answer = await http.post(to_2025, headers=headers, json=body)
                if served:
                    assert answer.status_code == 200, answer.text
                    assert "region=eu-west" in answer.text
                else:
                    assert answer.status_code == 400, (sent, answer.text)
                    assert answer.json()["error"]["code"] == -32020

    run(go())


def test_listings_and_reads_carry_the_most_cautious_caching_hints(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            _, found = await post(http, to_2025, "tools/list")
            result = last(found)["result"]
            assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
            _, found = await post(http, to_2025, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
            assert "ttlMs" not in last(found)["result"]

    run(go())


def test_subscriptions_listen_is_served_from_the_get_stream(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            headers, body = modern(
                "subscriptions/listen",
                {"notifications": {"toolsListChanged": True, "promptsListChanged": True}},
                ident="L",
                client="listener",
            )
            async with http.stream("POST", to_2025, headers=headers, json=body) as response:
                assert response.status_code == 200
                decoder = MessageDecoder()
                seen: list[dict[str, Any]] = []
                chunks = response.aiter_bytes()

                async def until(predicate: Any) -> dict[str, Any]:
                    while True:
                        for item in seen:
                            if predicate(item):
                                return item
                        chunk = await asyncio.wait_for(chunks.__anext__(), WAIT)
                        seen.extend(i.payload for i in decoder.feed(chunk) if isinstance(i, Message))

                ack = await until(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
                assert ack["params"]["notifications"] == {"toolsListChanged": True}  # no prompts upstream
                assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"
                await asyncio.sleep(0.5)  # the upstream GET stream opens
                _, found = await post(http, to_2025, "tools/call", {"name": "changed"}, client="listener")
                assert last(found)["result"]["content"][0]["text"] == "sent"
                note = await until(lambda m: m.get("method") == "notifications/tools/list_changed")
                assert note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"

    run(go())


def test_a_client_that_closes_its_stream_cancels_the_call_upstream(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            call = asyncio.ensure_future(
                post(http, to_2025, "tools/call", {"name": "slow", "arguments": {"tag": "t1"}})
            )
            for _ in range(200):  # closed once the call runs upstream (not after a fixed time: a
                if "t1" in STARTED:  # loaded machine may not have sent it yet, leaving nothing to cancel)
                    break
                await asyncio.sleep(0.05)
            assert "t1" in STARTED and not call.done()
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            for _ in range(100):
                if "t1" in CANCELLED:
                    break
                await asyncio.sleep(0.05)
            assert CANCELLED == ["t1"]

    run(go())


def test_methods_the_stateless_revision_removed_are_refused_by_name(to_2025: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            for method in ("ping", "resources/subscribe", "logging/setLevel"):
                status, found = await post(http, to_2025, method, {"uri": "x://y", "level": "info"})
                error = last(found)["error"]
                assert status == 404  # -32601 answered as the stateless revision's servers do
                assert error["code"] == -32601 and method in error["message"]
                assert error["data"]["bridge"] == "removed-method"
            got = await http.get(
                to_2025, headers={"Accept": "text/event-stream", "MCP-Protocol-Version": NEW}
            )
            assert got.status_code == 405

    run(go())


# -- 2025-11-25 client, 2026-07-28 upstream ------------------------------------------------------


def test_the_official_client_on_2025_11_25_calls_and_answers_an_elicitation(
    to_2026: str, upstream_2026: Stateless2026
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"ok": True})

    async def go() -> None:
        async with Client(to_2026, mode="legacy", elicitation_callback=elicit, client_info=None) as client:
            assert client.protocol_version == OLD
            assert client.server_info is not None and client.server_info.name == "stateless-2026"
            echoed = await client.call_tool("echo", {"text": "hi"})
            assert isinstance(echoed.content[0], TextContent)
            assert echoed.content[0].text.startswith("hi (from ")
            confirmed = await client.call_tool("confirm", {"what": "ship"})
            assert isinstance(confirmed.content[0], TextContent)
            assert confirmed.content[0].text == "ship: accept True"
        assert asked == ["really ship?"]
        # every upstream request carried the stateless revision's headers and _meta
        for seen in upstream_2026.seen:
            assert seen["headers"]["mcp-protocol-version"] == NEW
            meta = seen["body"]["params"]["_meta"]
            assert meta["io.modelcontextprotocol/protocolVersion"] == NEW
            assert "elicitation" in meta["io.modelcontextprotocol/clientCapabilities"]

    run(go())


async def _initialize(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": OLD,
            "capabilities": {},
            "clientInfo": {"name": "raw-2025", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    answer = await http.post(url, headers=headers, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["protocolVersion"] == OLD
    return {**headers, "Mcp-Session-Id": answer.headers["mcp-session-id"], "MCP-Protocol-Version": OLD}


def test_the_get_stream_is_served_from_subscriptions_listen(to_2026: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            session = await _initialize(http, to_2026)
            subscribe = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "resources/subscribe",
                "params": {"uri": "file:///a"},
            }
            assert (await http.post(to_2026, headers=session, json=subscribe)).json()["result"] == {}
            stream_headers = {
                "Accept": "text/event-stream",
                "Mcp-Session-Id": session["Mcp-Session-Id"],
                "MCP-Protocol-Version": OLD,
            }
            async with http.stream("GET", to_2026, headers=stream_headers) as stream:
                assert stream.status_code == 200
                chunks = stream.aiter_bytes()
                decoder = MessageDecoder()
                await asyncio.sleep(0.5)  # the upstream listen opens
                touch = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "touch", "arguments": {"uri": "file:///a"}},
                }
                async with http.stream("POST", to_2026, headers=session, json=touch) as called:
                    assert last(await messages_of(called))["result"]["content"][0]["text"] == "touched"
                while True:
                    chunk = await asyncio.wait_for(chunks.__anext__(), WAIT)
                    found = [i.payload for i in decoder.feed(chunk) if isinstance(i, Message)]
                    if found:
                        break
                assert found[0] == {
                    "jsonrpc": "2.0",
                    "method": "notifications/resources/updated",
                    "params": {"uri": "file:///a"},
                }

    run(go())


def test_what_cannot_be_mapped_to_the_stateless_upstream_is_refused_by_name(to_2026: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            session = await _initialize(http, to_2026)
            # a stream resumption: the upstream's revision has none
            resume = {
                "Accept": "text/event-stream",
                "Mcp-Session-Id": session["Mcp-Session-Id"],
                "Last-Event-ID": "1",
            }
            refused = await http.get(to_2026, headers=resume)
            assert refused.status_code == 409
            assert refused.json()["error"]["data"]["bridge"] == "resumption"
            assert "no resumption" in refused.json()["error"]["message"]
            # tasks were removed in the upstream's revision
            tasks = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t"}}
            error = (await http.post(to_2026, headers=session, json=tasks)).json()["error"]
            assert error["code"] == -32601 and "tasks/get" in error["message"]
            assert error["data"]["bridge"] == "removed-method"
            # a stateless client's discover, sent to a bridge serving sessions
            discover_headers, discover = modern("server/discover")
            answer = await http.post(to_2026, headers=discover_headers, json=discover)
            assert answer.status_code == 400 and answer.json()["error"]["data"]["bridge"] == "removed-method"
            # ping is answered by the bridge itself
            ping = {"jsonrpc": "2.0", "id": 4, "method": "ping"}
            assert (await http.post(to_2026, headers=session, json=ping)).json()["result"] == {}
            # another session's id is not found
            stranger = {**session, "Mcp-Session-Id": "0" * 32}
            assert (await http.post(to_2026, headers=stranger, json=ping)).status_code == 404

    run(go())


def test_input_required_rounds_are_bounded(to_2026: str) -> None:
    async def go() -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            session = await _initialize(http, to_2026)
            call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nag"}}
            rounds = 0
            async with http.stream("POST", to_2026, headers=session, json=call) as answer:
                decoder = MessageDecoder()
                async for chunk in answer.aiter_bytes():
                    for item in decoder.feed(chunk):
                        if not isinstance(item, Message):
                            continue
                        if item.payload.get("method") == "roots/list":  # answered on another POST
                            rounds += 1
                            reply = {"jsonrpc": "2.0", "id": item.payload["id"], "result": {"roots": []}}
                            assert (await http.post(to_2026, headers=session, json=reply)).status_code == 202
                        elif item.payload.get("id") == 5:
                            error = item.payload["error"]
            assert rounds == Settings().max_rounds  # answered; the next ask is refused
            assert error["data"]["bridge"] == "rounds"

    run(go())


def test_a_request_state_is_sealed_bounded_and_short_lived() -> None:
    sealer = Sealer(lifetime=60)
    token = sealer.seal("h", "owner", "tools/call", "confirm", 1)
    state = sealer.open(token)
    assert (state.handle, state.owner, state.name, state.round) == ("h", "owner", "confirm", 1)
    with pytest.raises(BadState, match="not one this bridge issued"):
        Sealer(lifetime=60).open(token)  # another process's key (or a restart)
    head, _, mac = token.partition(".")
    with pytest.raises(BadState):
        sealer.open(head[:-1] + ("A" if head[-1] != "A" else "B") + "." + mac)
    with pytest.raises(BadState, match="over"):
        sealer.open("x" * 5000)
    with pytest.raises(BadState, match="expired"):
        Sealer(key=b"k" * 32, lifetime=-1).open(
            Sealer(key=b"k" * 32, lifetime=-1).seal("h", "o", "m", None, 1)
        )


def test_upstream_sessions_are_bounded_and_a_working_one_is_never_taken() -> None:
    settings = Settings(max_sessions=1, timeout=WAIT)

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            slow = asyncio.ensure_future(
                post(http, url, "tools/call", {"name": "slow", "arguments": {"tag": "t2"}}, client="alice")
            )
            for _ in range(200):  # once the call runs upstream (a loaded machine may take past a
                if "t2" in STARTED:  # fixed time to open alice's session: bob's would then fit)
                    break
                await asyncio.sleep(0.05)
            assert "t2" in STARTED and not slow.done()
            status, found = await post(http, url, "server/discover", client="bob")
            assert status == 503
            assert last(found)["error"]["data"]["bridge"] == "busy"
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await slow
            for _ in range(100):  # the cancelled call ends: its session is idle, so it makes room
                status, found = await post(http, url, "server/discover", client="bob")
                if status == 200:
                    break
                await asyncio.sleep(0.05)
            assert status == 200

    with running(sdk_server_2025()) as up:
        with running(Bridge(f"{up}/mcp", upstream_revision=OLD, settings=settings)) as bridge:
            run(go(f"{bridge}/mcp"))


def test_a_parked_call_past_its_lifetime_is_ended_upstream() -> None:
    bridge = Bridge("", upstream_revision=OLD, settings=Settings(state_lifetime=1.0, timeout=WAIT))

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            call = {"name": "confirm", "arguments": {"what": "wait"}}
            _, found = await post(http, url, "tools/call", call)
            first = last(found)["result"]
            assert first["resultType"] == "input_required"
            assert bridge.sessions_mode is not None and len(bridge.sessions_mode.parked) == 1
            for _ in range(100):  # the janitor lets it go (and cancels it upstream)
                if not bridge.sessions_mode.parked:
                    break
                await asyncio.sleep(0.05)
            assert not bridge.sessions_mode.parked
            [key] = first["inputRequests"]
            retry = {
                **call,
                "requestState": first["requestState"],
                "inputResponses": {key: {"action": "cancel"}},
            }
            _, found = await post(http, url, "tools/call", retry)
            error = last(found)["error"]
            assert error["data"]["bridge"] == "request-state" and "expired" in error["message"]

    with running(sdk_server_2025()) as up:
        bridge.upstream.url = f"{up}/mcp"
        with running(bridge) as served:
            run(go(f"{served}/mcp"))


def test_one_principal_holds_at_most_its_share_of_sessions(upstream_2026: Stateless2026) -> None:
    settings = Settings(max_sessions_per_principal=1)

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            await _initialize(http, url)
            body = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": OLD,
                    "capabilities": {},
                    "clientInfo": {"name": "again", "version": "1"},
                },
            }
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            refused = await http.post(url, headers=headers, json=body)
            assert refused.status_code == 429 and "retry-after" in refused.headers

    with running(upstream_2026) as up:
        with running(Bridge(f"{up}/mcp", upstream_revision=NEW, settings=settings)) as bridge:
            run(go(f"{bridge}/mcp"))


def test_a_drain_ends_the_calls_left_at_its_deadline_explicitly_and_cancels_them_upstream() -> None:
    bridge = Bridge("", upstream_revision=OLD, settings=Settings(timeout=WAIT))
    loops: list[asyncio.AbstractEventLoop] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not loops:
            loops.append(asyncio.get_running_loop())  # the server's loop: where the drain runs
        await bridge(scope, receive, send)

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            call = asyncio.ensure_future(
                post(http, url, "tools/call", {"name": "slow", "arguments": {"tag": "drained"}})
            )
            assert bridge.sessions_mode is not None
            for _ in range(200):  # the call is being read upstream
                if bridge.sessions_mode.running:
                    break
                await asyncio.sleep(0.05)
            began = asyncio.get_running_loop().time()
            drained = asyncio.run_coroutine_threadsafe(bridge.drain(0.5), loops[0])
            _, found = await call
            took = asyncio.get_running_loop().time() - began
            await asyncio.to_thread(drained.result, WAIT)
            error = last(found)["error"]
            assert error["data"]["bridge"] == "draining" and "drain deadline" in error["message"], error
            assert took < 0.5 + 2.0, took
            for _ in range(100):
                if "drained" in CANCELLED:
                    break
                await asyncio.sleep(0.05)
            assert "drained" in CANCELLED  # stopped upstream too, never left running there

    with running(sdk_server_2025()) as up:
        bridge.upstream.url = f"{up}/mcp"
        with running(app) as served:
            run(go(f"{served}/mcp"))
