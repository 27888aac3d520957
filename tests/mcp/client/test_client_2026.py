"""The client speaking 2026-07-28 whole, against servers started here on 127.0.0.1: the
version fallback on -32022, clientInfo in every request's _meta, Mcp-Param-* headers from
x-mcp-header annotations (and tools with invalid ones set aside), input-required results
answered through the handlers in bounded rounds, subscriptions/listen, a discover answer
that is no agreement, and authentication by an httpx2.Auth flow (the MCP SDK's kind) and
by authlib's httpx.Auth.

The servers are small scripted ASGI apps (`Scripted`): each answers what the test needs,
and records what the client sent."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import orjson
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.server.mcpserver import Elicit, MCPServer, Resolve
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from pydantic import BaseModel, Field

from ssewire.mcp.client import Client, InputRequired, RPCError
from tests.support.conformance_client import MemoryStorage
from tests.support.mcp_helpers import request_body
from tests.support.uvicorn_servers import uvicorn_server

MODERN = "2026-07-28"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
DISCOVERED = {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {"tools": {}}}
Answer = tuple[int, dict[str, str], Any]  # status, headers, a JSON body or a list of SSE chunks


class Scripted:
    """An ASGI MCP endpoint answering each request with ``answer(method, message, headers)``
    (``method`` the HTTP method; ``message`` the JSON-RPC body or None); records every
    request as (method, headers, message). A list body is sent as SSE chunks, then the
    stream ends (an SSE chunk of None: a pause of 50 ms)."""

    def __init__(self, answer: Callable[[str, Any, dict[str, str]], Answer]) -> None:
        self.answer = answer
        self.seen: list[tuple[str, dict[str, str], Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        body = await request_body(receive)
        message = orjson.loads(body) if body else None
        self.seen.append((scope["method"], headers, message))
        status, extra, content = self.answer(scope["method"], message, headers)
        if isinstance(content, list):
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": _raw({"content-type": "text/event-stream", **extra}),
                }
            )
            for chunk in content:
                if chunk is None:
                    await asyncio.sleep(0.05)
                    continue
                await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        data = b"" if content is None else orjson.dumps(content)
        kind = {"content-type": "application/json"} if data else {}
        await send({"type": "http.response.start", "status": status, "headers": _raw({**kind, **extra})})
        await send({"type": "http.response.body", "body": data})

    def posted(self, method: str | None = None) -> list[tuple[dict[str, str], Any]]:
        return [
            (h, m)
            for verb, h, m in self.seen
            if verb == "POST" and isinstance(m, dict) and (method is None or m.get("method") == method)
        ]


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()]


def ok(message: Any, result: Any) -> Answer:
    return 200, {}, {"jsonrpc": "2.0", "id": message["id"], "result": result}


def event(message: dict[str, Any], ident: str | None = None) -> str:
    return (f"id: {ident}\n" if ident else "") + f"data: {orjson.dumps(message).decode()}\n\n"


def run(app: Scripted, main: Callable[[str], Any]) -> Any:
    with uvicorn_server(app) as base:
        return asyncio.run(asyncio.wait_for(main(base + "/mcp"), 30))


def modern_server(tools: list[dict[str, Any]] | None = None, call: Any = None) -> Scripted:
    """A 2026-07-28 server: discover, tools/list, and tools/call answered by ``call``."""

    def answer(verb: str, message: Any, headers: dict[str, str]) -> Answer:
        if verb != "POST":
            return 405, {}, None
        if "id" not in message:
            return 202, {}, None
        method = message["method"]
        if method == "server/discover":
            return ok(message, DISCOVERED)
        if method == "tools/list":
            return ok(message, {"tools": tools or []})
        if method == "tools/call" and call is not None:
            return call(message, headers)
        return ok(message, {"content": []})

    return Scripted(answer)


# -- version negotiation ----------------------------------------------------------------


def test_a_32022_refusal_is_retried_under_a_version_it_names():
    rejected: list[Any] = []

    def answer(verb, message, headers):
        if verb != "POST" or "id" not in message:
            return 202, {}, None
        if message["method"] in ("server/discover", "tools/list") and message["method"] not in rejected:
            rejected.append(message["method"])
            error = {
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": [MODERN], "requested": "x"},
            }
            return 400, {}, {"jsonrpc": "2.0", "id": message["id"], "error": error}
        if message["method"] == "server/discover":
            return ok(message, DISCOVERED)
        return ok(message, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})

    app = Scripted(answer)

    async def main(url):
        async with Client(url) as client:
            return client.version, await client.list_tools(), client.version_retries

    version, tools, retries = run(app, main)
    assert version == MODERN and [t["name"] for t in tools] == ["t"]
    assert retries == 1  # tools/list; discover's retry is the handshake's
    sent = [
        (h["mcp-protocol-version"], m["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"])
        for h, m in app.posted()
    ]
    assert sent == [(MODERN, MODERN)] * 4
    ids = [m["id"] for _, m in app.posted()]
    assert len(set(ids)) == 4  # every retry under a new id


def session_server(discover: Callable[[Any], Answer]) -> Scripted:
    """A 2025-11-25 server whose answer to server/discover is ``discover``'s; the session's
    tools/call answer is polled: a priming event with retry, the stream closed, the response
    on the GET that resumes it with Last-Event-ID."""

    calls: list[Any] = []

    def answer(verb, message, headers):
        if verb == "GET":
            if headers.get("last-event-id") == "call-1" and calls:
                done = {
                    "jsonrpc": "2.0",
                    "id": calls[-1],
                    "result": {"content": [{"type": "text", "text": "resumed"}]},
                }
                return 200, {}, [event(done, "call-2")]
            return 405, {}, None
        if verb == "DELETE":
            return 200, {}, None
        if "id" not in message:
            return 202, {}, None
        method = message["method"]
        if method == "server/discover":
            return discover(message)
        if method == "initialize":
            asked = message["params"]["protocolVersion"]
            result = {
                "protocolVersion": asked,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old", "version": "1"},
            }
            return 200, {"mcp-session-id": "s-1"}, {"jsonrpc": "2.0", "id": message["id"], "result": result}
        if method == "tools/call":
            calls.append(message["id"])
            return 200, {}, ["id: call-1\nretry: 100\ndata: \n\n"]  # primed, then closed: poll
        return ok(message, {})

    return Scripted(answer)


@pytest.mark.parametrize(
    "discover",
    [
        pytest.param(lambda m: ok(m, {}), id="an-empty-result"),
        pytest.param(
            lambda m: ok(m, {"supportedVersions": "2026-07-28", "capabilities": {}}), id="versions-not-a-list"
        ),
        pytest.param(lambda m: ok(m, {"supportedVersions": [MODERN]}), id="no-capabilities"),
        pytest.param(lambda m: (404, {}, None), id="not-found"),
    ],
)
def test_a_discover_answer_that_is_no_discover_result_is_no_agreement(discover):
    app = session_server(discover)

    async def main(url):
        async with Client(url, listen=False, idle_timeout=5) as client:
            result = await client.call_tool("poll", {})
            return client.version, client.session, result

    version, session, result = run(app, main)
    assert (version, session) == ("2025-11-25", "s-1")  # initialized, not taken for 2026-07-28
    assert result["content"][0]["text"] == "resumed"  # the polled stream resumed in the session
    resumed = [h for verb, h, _ in app.seen if verb == "GET"]
    assert resumed and resumed[0]["last-event-id"] == "call-1" and resumed[0]["mcp-session-id"] == "s-1"


def test_a_32022_naming_only_revisions_with_sessions_initializes_the_newest_of_them():
    def refuse(message):
        error = {
            "code": -32022,
            "message": "no",
            "data": {"supported": ["2025-03-26", "2025-06-18"], "requested": MODERN},
        }
        return 400, {}, {"jsonrpc": "2.0", "id": message["id"], "error": error}

    app = session_server(refuse)

    async def main(url):
        async with Client(url, listen=False) as client:
            return client.version

    assert run(app, main) == "2025-06-18"
    assert app.posted("initialize")[0][1]["params"]["protocolVersion"] == "2025-06-18"


# -- _meta ----------------------------------------------------------------------------


@pytest.mark.parametrize("fill", [True, False])
def test_client_info_is_in_every_request_meta_unless_turned_off(fill):
    app = modern_server([{"name": "t", "inputSchema": {"type": "object"}}])
    info = {"name": "relayed-client", "version": "9"}

    async def main(url):
        async with Client(url, info=info, meta_client_info=fill) as client:
            await client.list_tools()
            await client.call_tool("t", {})

    run(app, main)
    metas = [m["params"]["_meta"] for _, m in app.posted()]
    assert len(metas) == 3
    for meta in metas[1:]:
        assert (meta.get(CLIENT_INFO_KEY) == info) is fill and (CLIENT_INFO_KEY in meta) is fill
    assert metas[0][CLIENT_INFO_KEY] == info  # discover names the client either way
    assert all(meta["io.modelcontextprotocol/clientCapabilities"] == {} for meta in metas)


# -- Mcp-Param-* ------------------------------------------------------------------------

ANNOTATED = {
    "name": "route",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "greeting": {"type": "string", "x-mcp-header": "Greeting"},
            "padded": {"type": "string", "x-mcp-header": "Padded"},
            "lookalike": {"type": "string", "x-mcp-header": "Lookalike"},
            "gone": {"type": "string", "x-mcp-header": "Gone"},
            "nested": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
            "query": {"type": "string"},
        },
    },
}


def b64(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


def test_annotated_arguments_go_as_mcp_param_headers_base64_where_unsafe():
    app = modern_server([ANNOTATED])
    arguments = {
        "region": "us-west1",
        "priority": 42,
        "verbose": False,
        "greeting": "Hello, 世界",
        "padded": " x ",
        "lookalike": "=?base64?abc?=",
        "gone": None,
        "nested": {"zone": "b"},
        "query": "SELECT 1",
    }

    async def main(url):
        async with Client(url) as client:
            await client.list_tools()
            await client.call_tool("route", arguments)

    run(app, main)
    headers, body = app.posted("tools/call")[0]
    params = {k: v for k, v in headers.items() if k.startswith("mcp-param-")}
    assert params == {
        "mcp-param-region": "us-west1",
        "mcp-param-priority": "42",
        "mcp-param-verbose": "false",
        "mcp-param-greeting": b64("Hello, 世界"),
        "mcp-param-padded": b64(" x "),
        "mcp-param-lookalike": b64("=?base64?abc?="),
        "mcp-param-zone": "b",
    }  # null omitted; the unannotated query not mirrored
    assert headers["mcp-name"] == "route" and body["params"]["arguments"] == arguments


INVALID = {
    "empty": {"v": {"type": "string", "x-mcp-header": ""}},
    "object": {"v": {"type": "object", "x-mcp-header": "V"}},
    "number": {"v": {"type": "number", "x-mcp-header": "V"}},
    "duplicate": {
        "a": {"type": "string", "x-mcp-header": "Id"},
        "b": {"type": "string", "x-mcp-header": "ID"},
    },
    "space": {"v": {"type": "string", "x-mcp-header": "My Region"}},
    "non-ascii": {"v": {"type": "string", "x-mcp-header": "Région"}},
    "under-items": {"v": {"type": "array", "items": {"type": "string", "x-mcp-header": "V"}}},
    "under-anyof": {"v": {"anyOf": [{"type": "string", "x-mcp-header": "V"}]}},
}


def test_tools_with_invalid_annotations_are_set_aside_with_a_warning(caplog):
    tools = [
        {"name": name, "inputSchema": {"type": "object", "properties": props}}
        for name, props in INVALID.items()
    ]
    tools.append(
        {
            "name": "fine",
            "inputSchema": {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}},
        }
    )
    app = modern_server(tools)

    async def main(url):
        async with Client(url) as client:
            kept = await client.list_tools()
            with pytest.raises(ValueError, match="set aside"):
                await client.call_tool("number", {"v": 1})
            await client.call_tool("fine", {"r": "x"})
            return kept, dict(client.set_aside)

    with caplog.at_level(logging.WARNING, logger="ssewire.mcp.client"):
        kept, aside = run(app, main)
    assert [t["name"] for t in kept] == ["fine"]
    assert set(aside) == set(INVALID)
    warned = {r.getMessage() for r in caplog.records if "set aside" in r.getMessage()}
    assert len(warned) == len(INVALID)
    assert [m["params"]["name"] for _, m in app.posted("tools/call")] == ["fine"]


# -- input-required results -------------------------------------------------------------


def test_input_required_rounds_are_answered_through_the_handlers():
    def call(message, headers):
        params = message["params"]
        responses = params.get("inputResponses")
        if responses is None:
            asks = {
                "who": {
                    "method": "elicitation/create",
                    "params": {"message": "name?", "requestedSchema": {"type": "object"}},
                },
                "where": {"method": "roots/list", "params": {}},
            }
            return ok(
                message, {"resultType": "input_required", "inputRequests": asks, "requestState": "opaque-1"}
            )
        if params.get("requestState") == "opaque-1":
            asks = {"model": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}}
            return ok(message, {"resultType": "input_required", "inputRequests": asks})  # no state this time
        return ok(
            message,
            {"resultType": "complete", "content": [{"type": "text", "text": orjson.dumps(params).decode()}]},
        )

    app = modern_server([], call)

    async def sampling(params):
        await asyncio.sleep(0)
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    handlers = {
        "elicitation/create": lambda p: {"action": "accept", "content": {"name": "Ada"}},
        "roots/list": lambda p: {"roots": [{"uri": "file:///w"}]},
        "sampling/createMessage": sampling,
    }

    async def main(url):
        async with Client(url, handlers=handlers) as client:
            result = await client.call_tool("ask", {"x": 1})
            return result, client.input_rounds

    result, rounds = run(app, main)
    assert rounds == 2
    calls = [m for _, m in app.posted("tools/call")]
    assert len({m["id"] for m in calls}) == 3  # each retry under a new id
    assert "inputResponses" not in calls[0]["params"] and "requestState" not in calls[0]["params"]
    assert calls[1]["params"]["requestState"] == "opaque-1"
    assert calls[1]["params"]["inputResponses"] == {
        "who": {"action": "accept", "content": {"name": "Ada"}},
        "where": {"roots": [{"uri": "file:///w"}]},
    }
    assert "requestState" not in calls[2]["params"]  # the last result had none
    assert all(m["params"]["arguments"] == {"x": 1} for m in calls)
    caps = calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert set(caps) == {"elicitation", "roots", "sampling"}
    assert "model" in orjson.loads(result["content"][0]["text"])["inputResponses"]


def test_input_required_rounds_are_bounded():
    def call(message, headers):
        asks = {
            "again": {
                "method": "elicitation/create",
                "params": {"message": "more", "requestedSchema": {"type": "object"}},
            }
        }
        return ok(message, {"resultType": "input_required", "inputRequests": asks, "requestState": "s"})

    app = modern_server([], call)
    handlers = {"elicitation/create": lambda p: {"action": "decline"}}

    async def main(url):
        async with Client(url, handlers=handlers, max_input_rounds=3) as client:
            with pytest.raises(InputRequired, match="after 3 rounds"):
                await client.call_tool("loop", {})
            with pytest.raises(InputRequired, match="no handler"):
                async with Client(url) as bare:
                    await bare.call_tool("loop", {})

    run(app, main)
    assert len(app.posted("tools/call")) == 4 + 1  # the first call and 3 retries; the bare client's one


def test_a_result_without_result_type_is_complete():
    app = modern_server(
        [], lambda m, h: ok(m, {"content": [], "inputRequests": {"x": {"method": "roots/list"}}})
    )

    async def main(url):
        async with Client(url, handlers={"roots/list": lambda p: {"roots": []}}) as client:
            return await client.call_tool("t", {})

    assert run(app, main)["content"] == []
    assert len(app.posted("tools/call")) == 1


# -- subscriptions/listen ---------------------------------------------------------------


def test_subscriptions_listen_delivers_its_notifications_and_is_cancelled_at_its_end():
    def answer(verb, message, headers):
        if verb != "POST" or "id" not in message:
            return 202, {}, None
        if message["method"] == "server/discover":
            return ok(message, DISCOVERED)
        if message["method"] == "subscriptions/listen":
            meta = {"_meta": {"io.modelcontextprotocol/subscriptionId": message["id"]}}
            ack = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": {"toolsListChanged": True}, **meta},
            }
            changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": meta}
            return 200, {}, [event(ack), event(changed), *([": keep-alive\n\n", None] * 40)]
        return ok(message, {})

    app = Scripted(answer)
    elsewhere: list[Any] = []

    async def main(url):
        got: list[Any] = []
        async with Client(url, on_notification=elsewhere.append) as client:
            ended = await client.subscribe({"toolsListChanged": True}, got.append, duration=0.6)
        return got, ended

    got, ended = run(app, main)
    assert ended is None and not elsewhere
    assert [n["method"] for n in got] == [
        "notifications/subscriptions/acknowledged",
        "notifications/tools/list_changed",
    ]
    listen = app.posted("subscriptions/listen")[0][1]
    assert listen["params"]["notifications"] == {"toolsListChanged": True}
    cancelled = app.posted("notifications/cancelled")
    assert cancelled and cancelled[0][1]["params"]["requestId"] == listen["id"]


# -- authentication ---------------------------------------------------------------------


class TokenFlow(httpx2.Auth):
    """An httpx2.Auth as the MCP SDK's OAuth provider is one: on 401 it makes its own
    request (a token endpoint), reads the answer's body, and retries with the token."""

    requires_response_body = True

    def __init__(self, token_url: str) -> None:
        self.token_url, self.token = token_url, None

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncIterator[httpx2.Request]:  # type: ignore[override]
        if self.token:
            request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            grant = yield httpx2.Request("POST", self.token_url, data={"grant_type": "client_credentials"})
            self.token = grant.json()["access_token"]
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def authenticated_server(token: str) -> Scripted:
    inner = modern_server(
        [{"name": "t", "inputSchema": {"type": "object"}}],
        lambda m, h: (
            200,
            {},
            [
                event(
                    {
                        "jsonrpc": "2.0",
                        "id": m["id"],
                        "result": {"content": [{"type": "text", "text": "streamed"}]},
                    }
                )
            ],
        ),
    )

    def answer(verb, message, headers):
        if headers.get("authorization") != f"Bearer {token}":
            return 401, {"www-authenticate": 'Bearer realm="t"'}, None
        return inner.answer(verb, message, headers)

    class Both(Scripted):
        async def __call__(self, scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/token":
                await receive()
                self.seen.append(("TOKEN", {}, None))
                body = orjson.dumps({"access_token": token, "token_type": "Bearer"})
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
            await super().__call__(scope, receive, send)

    return Both(answer)


def test_an_httpx2_auth_flow_authenticates_the_client_as_it_is():
    app = authenticated_server("tok-1")

    async def main(url):
        flow = TokenFlow(url.replace("/mcp", "/token"))
        async with Client(url, auth=flow) as client:
            return await client.list_tools(), await client.call_tool("t", {})

    tools, result = run(app, main)
    assert [t["name"] for t in tools] == ["t"] and result["content"][0]["text"] == "streamed"
    assert [verb for verb, _, _ in app.seen].count("TOKEN") == 1  # one token, then reused
    posted = app.posted()
    assert "authorization" not in posted[0][0]  # the first try, refused (401): the flow then fetched a token
    assert all(h.get("authorization") == "Bearer tok-1" for h, _ in posted[1:])


def test_authlibs_httpx_auth_is_taken_as_it_is():
    oauth2 = pytest.importorskip("authlib.integrations.httpx_client")
    app = authenticated_server("tok-2")

    async def main(url):
        auth = oauth2.OAuth2Auth({"access_token": "tok-2", "token_type": "Bearer"})
        async with Client(url, auth=auth) as client:
            return await client.list_tools()

    assert [t["name"] for t in run(app, main)] == ["t"]
    assert all(h.get("authorization") == "Bearer tok-2" for h, _ in app.posted())  # never refused


def test_an_auth_that_is_neither_is_a_type_error():
    with pytest.raises(TypeError, match=r"httpx2\.Auth"):
        Client("http://127.0.0.1:1/mcp", auth=object())
    assert isinstance(httpx.BasicAuth("a", "b"), httpx.Auth)


# -- the official Python SDK server (mcp), speaking 2026-07-28 --------------------------


class Name(BaseModel):
    name: str


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return f"routed {region}"


def greet(who: Annotated[Name, Resolve(ask_name)]) -> str:
    return f"hello {who.name}"


def sdk_app() -> Any:
    """The SDK's server with a tool whose ``region`` carries ``x-mcp-header`` (the SDK checks
    Mcp-Param-* against the body) and one whose argument is elicited (the SDK answers with an
    input-required result under 2026-07-28)."""
    server = MCPServer("ssewire-2026-target", version="0", log_level="WARNING")
    server.tool()(route)
    server.tool()(greet)
    return server.streamable_http_app(streamable_http_path="/mcp")


def test_against_the_sdk_server_headers_input_rounds_and_a_subscription():
    asked: list[Any] = []

    def elicit(params):
        asked.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    async def main(url):
        async with Client(url) as unlisted:  # the tool's schema unseen: no Mcp-Param-Region
            with pytest.raises(RPCError) as refused:
                await unlisted.call_tool("route", {"region": "x"})
        async with Client(url, handlers={"elicitation/create": elicit}) as client:
            await client.list_tools()
            routed = await client.call_tool("route", {"region": "Zürich"})  # Base64 in the header
            greeted = await client.call_tool("greet", {})
            got: list[Any] = []
            ended = await client.subscribe({"toolsListChanged": True}, got.append, duration=0.5)
            return refused.value.code, client.version, routed, greeted, client.input_rounds, got, ended

    with uvicorn_server(sdk_app(), lifespan="on") as base:
        code, version, routed, greeted, rounds, got, ended = asyncio.run(
            asyncio.wait_for(main(base + "/mcp"), 30)
        )
    assert code == -32020 and version == MODERN  # the SDK checks the header against the body
    assert routed["content"][0]["text"] == "routed Zürich"
    assert (
        greeted["content"][0]["text"] == "hello Ada" and rounds == 1 and asked[0]["message"] == "Your name?"
    )
    assert ended is None and got[0]["method"] == "notifications/subscriptions/acknowledged"


# -- the SDK's OAuth client provider, as it is ------------------------------------------


class OAuthServer:
    """An MCP endpoint behind OAuth 2.1 (RFC 9728 protected-resource metadata, RFC 8414
    authorization-server metadata, dynamic registration, an authorization endpoint that
    approves at once, a token endpoint) on one origin; it records the paths it was asked."""

    def __init__(self) -> None:
        self.mcp = modern_server([{"name": "t", "inputSchema": {"type": "object"}}])
        self.paths: list[str] = []
        self.base = ""

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"]
        self.paths.append(path)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path == "/mcp":
            if headers.get("authorization") == "Bearer granted":
                await self.mcp(scope, receive, send)
                return
            challenge = f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            await _reply(send, 401, {"error": "unauthorized"}, {"www-authenticate": challenge})
            return
        more = True
        while more:  # the body (a form, JSON metadata) is not looked at
            more = (await receive()).get("more_body", False)
        if path == "/.well-known/oauth-protected-resource/mcp":
            await _reply(send, 200, {"resource": f"{self.base}/mcp", "authorization_servers": [self.base]})
        elif path == "/.well-known/oauth-authorization-server":
            await _reply(
                send,
                200,
                {
                    "issuer": self.base,
                    "authorization_endpoint": f"{self.base}/authorize",
                    "token_endpoint": f"{self.base}/token",
                    "registration_endpoint": f"{self.base}/register",
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                },
            )
        elif path == "/register":
            client = {
                "client_id": "registered-1",
                "redirect_uris": ["http://127.0.0.1:1/callback"],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
            await _reply(send, 201, client)
        elif path == "/authorize":
            query = dict(pair.split("=", 1) for pair in scope["query_string"].decode().split("&"))
            location = f"http://127.0.0.1:1/callback?code=the-code&state={query['state']}"
            await _reply(send, 302, None, {"location": location})
        elif path == "/token":
            await _reply(
                send,
                200,
                {"access_token": "granted", "token_type": "Bearer", "expires_in": 3600},
                {"cache-control": "no-store"},
            )
        else:
            await _reply(send, 404, None)


async def _reply(send, status, body, headers=None):
    data = b"" if body is None else orjson.dumps(body)
    raw = _raw({**({"content-type": "application/json"} if data else {}), **(headers or {})})
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def test_the_sdks_oauth_client_provider_authenticates_the_client_as_it_is():
    app = OAuthServer()
    redirected: dict[str, str] = {}

    async def redirect_handler(authorization_url: str) -> None:  # the user's browser, headless
        async with httpx.AsyncClient(timeout=5.0) as http:
            location = (await http.get(authorization_url)).headers["location"]
        redirected.update({k: v[0] for k, v in parse_qs(urlsplit(location).query).items()})

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected["state"])

    async def main(url):
        app.base = url.removesuffix("/mcp")
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(
                redirect_uris=["http://127.0.0.1:1/callback"], client_name="t"
            ),
            storage=MemoryStorage(),
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        async with Client(url, auth=provider) as client:
            return await client.list_tools()

    with uvicorn_server(app) as base:
        tools = asyncio.run(asyncio.wait_for(main(base + "/mcp"), 30))
    assert [t["name"] for t in tools] == ["t"]
    assert {"/.well-known/oauth-protected-resource/mcp", "/register", "/authorize", "/token"} <= set(
        app.paths
    )
    assert all(h.get("authorization") == "Bearer granted" for h, _ in app.mcp.posted())
