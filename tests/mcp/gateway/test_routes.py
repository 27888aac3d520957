"""Routes from a config file (``ssewire gateway --config FILE``), the process as an operator
runs it: two upstreams side by side (the official Python SDK server, its streams cut, and the
TypeScript SDK server, untouched: its calls never notice), a tool allow-list and deny-list
(a refused call never reaches the upstream), per-route credentials from the environment, and
the principals a route admits."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.server.auth import hash_token
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import fault_proxy
from tests.support.gateway_runs import POST, session
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port, listening
from tests.support.resets import cut_share, reference_server
from tests.support.sdk_servers import probe_app, text_of_size
from tests.support.tokens import TOKENS, as_principal
from tests.support.ts_servers import require_node, ts_server

require_node()  # the TypeScript SDK server: skips (or fails under SSEWIRE_REQUIRE_NODE=1) without node

SIZE = 256 << 10  # characters of each countdown result (multi-byte ones among them)
PROGRESS = 4
CALLS = int(os.environ.get("SSEWIRE_ROUTE_CALLS", "6"))  # per client
DEADLINE = 60.0  # one call, resumptions included


# -- the upstreams' side: what reached them ----------------------------------------------


@dataclass
class Seen:
    method: str  # the HTTP method
    headers: dict[str, str]
    body: Any  # the JSON-RPC message, or None

    def calls(self, tool: str) -> bool:
        body = self.body if isinstance(self.body, dict) else {}
        params = body.get("params") if isinstance(body.get("params"), dict) else {}
        return body.get("method") == "tools/call" and params.get("name") == tool


@dataclass
class Recording:
    """An ASGI app in front of ``app`` that keeps every HTTP request it passes on (headers,
    JSON body); ``close``: every answer says ``Connection: close``, so the gateway opens one
    upstream connection per request and a fault proxy's per-connection plan is per request."""

    app: Any
    close: bool = False
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        taken, body = [], b""
        while True:
            message = await receive()
            taken.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        self.seen.append(Seen(scope["method"], headers, parsed))
        replay = iter(taken)

        async def replayed() -> Any:
            return next(replay, None) or await receive()

        async def sending(message: dict[str, Any]) -> None:
            if self.close and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, replayed, sending)


@contextlib.contextmanager
def recorded(app: Any, close: bool = False) -> Iterator[tuple[str, Recording]]:
    """``app`` behind a `Recording`, served on 127.0.0.1: its MCP URL and the recording."""
    recording = Recording(app, close=close)
    with running(recording) as root:
        yield root + "/mcp", recording


# -- the gateway process -----------------------------------------------------------------


@contextlib.contextmanager
def gateway(tmp_path: Path, config: str, *flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``ssewire gateway --config`` with ``config`` as its file, on a free 127.0.0.1 port;
    yields its root URL (``http://127.0.0.1:PORT``). Its stderr goes to a file (a pipe
    nobody reads could fill), quoted when it does not start."""
    path = tmp_path / f"gateway-{free_port()}.toml"
    path.write_text(config)
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--config", str(path), "--port", str(port), *flags]
    log = path.with_suffix(".log")
    with log.open("wb") as said:
        try:
            with listening(argv, port, name="the gateway", stderr=said, env={**os.environ, **(env or {})}):
                yield f"http://127.0.0.1:{port}"
        except RuntimeError as failed:
            raise RuntimeError(f"{failed}; its stderr: {log.read_text(errors='replace')[-2000:]}") from None


def route(name: str, upstream: str, **settings: Any) -> str:
    """One ``[servers.NAME]`` table (values written as TOML: JSON's strings, numbers and
    arrays are TOML's; an inline table for ``tools``)."""
    lines = [f"[servers.{name}]", f"upstream = {json.dumps(upstream)}"]
    for key, value in settings.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


def samples(text: str, name: str, route_name: str) -> float:
    """The sum of ``ssewire_gateway_NAME`` samples labelled ``route="ROUTE"``; an
    AssertionError when there is none."""
    found = [
        float(value)
        for labels, value in re.findall(rf"^ssewire_gateway_{name}\{{([^}}]*)\}} (\S+)$", text, re.M)
        if f'route="{route_name}"' in labels.split(",")
    ]
    assert found, f"no ssewire_gateway_{name} sample with route={route_name!r} in /metrics"
    return sum(found)


# -- the callers ---------------------------------------------------------------------------


@dataclass
class Outcomes:
    exact: int = 0
    wrong: list[str] = field(default_factory=list)  # what was not exact, and how


async def ssewire_calls(url: str, calls: int, outcomes: Outcomes, **options: Any) -> None:
    """``calls`` countdowns through ssewire's Client, each result compared with the text."""
    expected = text_of_size(SIZE)
    async with Client(url, profile="2025-11-25", listen=False, timeout=DEADLINE, **options) as client:
        for _ in range(calls):
            ticks: list[float] = []
            try:
                result = await client.call_tool(
                    "countdown",
                    {"count": PROGRESS, "size": SIZE, "delay": 0.005},
                    on_progress=lambda p, ticks=ticks: ticks.append(p["progress"]),
                )
            except Exception as error:  # anything raised is a failure of the route
                outcomes.wrong.append(f"{type(error).__name__}: {error}"[:200])
                continue
            text = result["content"][0]["text"]
            if result.get("isError") or text != expected or ticks != list(range(1, PROGRESS + 1)):
                outcomes.wrong.append(f"not exact: {len(text)} characters, progress {ticks}")
            else:
                outcomes.exact += 1


async def sdk_calls(url: str, calls: int, outcomes: Outcomes) -> None:
    """``calls`` countdowns through the official MCP Python SDK client."""
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    expected = text_of_size(SIZE)
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120))
    transport = streamable_http_client(url, http_client=http, max_sse_event_size=None)
    async with http, SDKClient(transport, mode="legacy") as client:
        for _ in range(calls):
            ticks: list[float] = []

            async def progress(value: float, total: Any, message: Any, ticks: list[float] = ticks) -> None:
                ticks.append(value)

            try:
                result = await asyncio.wait_for(
                    client.call_tool(
                        "countdown",
                        {"count": PROGRESS, "size": SIZE, "delay": 0.005},
                        progress_callback=progress,
                    ),
                    DEADLINE,
                )
            except Exception as error:
                outcomes.wrong.append(f"{type(error).__name__}: {error}"[:200])
                continue
            text = result.content[0].text if result.content else ""
            if result.is_error or text != expected or ticks != list(range(1, PROGRESS + 1)):
                outcomes.wrong.append(
                    f"not exact: is_error={result.is_error}, {len(text)} characters, {ticks}"
                )
            else:
                outcomes.exact += 1


# -- two routes, cuts on one ---------------------------------------------------------------


def test_cuts_on_one_route_leave_the_other_routes_calls_untouched_and_are_healed(tmp_path):
    """The py route's upstream (the Python SDK server) is behind a proxy cutting 70 % of its
    tool-call answers; the ts route's (the TypeScript SDK server) is direct. Calls run on
    both routes at once: every ts call exact with no reset absorbed on its route, every py
    call exact too (healed: resets absorbed on its route)."""
    with (
        recorded(probe_app(store=True), close=True) as (py_upstream, _),
        fault_proxy(urlsplit(py_upstream).port or 80, cut_share(0.7, high=SIZE)) as proxy,
        ts_server("--store") as ts_upstream,
    ):
        config = route("py", f"http://127.0.0.1:{proxy.port}/mcp", keepalive=0.5) + route(
            "ts", ts_upstream, keepalive=0.5
        )
        with gateway(tmp_path, config) as root:
            py, ts = f"{root}/servers/py/mcp", f"{root}/servers/ts/mcp"
            on_py, on_ts_sdk, on_ts_ssewire = Outcomes(), Outcomes(), Outcomes()

            async def both() -> None:
                await asyncio.gather(
                    ssewire_calls(py, CALLS, on_py),
                    sdk_calls(ts, CALLS, on_ts_sdk),
                    ssewire_calls(ts, CALLS, on_ts_ssewire),
                )

            asyncio.run(asyncio.wait_for(both(), 240))
            figures = httpx.get(f"{root}/metrics", timeout=10).text
    absorbed = {name: samples(figures, "upstream_resets_absorbed_total", name) for name in ("py", "ts")}
    print(f"\n{proxy.stats.cuts} cuts on the py route's upstream; resets absorbed by route: {absorbed}")
    assert not proxy.stats.plan_errors, proxy.stats.plan_errors
    assert proxy.stats.cuts >= CALLS // 2, proxy.stats  # the py route's streams were cut
    assert (on_ts_sdk.exact, on_ts_sdk.wrong) == (CALLS, [])
    assert (on_ts_ssewire.exact, on_ts_ssewire.wrong) == (CALLS, [])
    assert samples(figures, "upstream_resets_absorbed_total", "ts") == 0
    assert samples(figures, "calls_failed_total", "ts") == 0
    assert (on_py.exact, on_py.wrong) == (CALLS, [])  # healed, every one
    assert samples(figures, "upstream_resets_absorbed_total", "py") > 0
    assert samples(figures, "calls_failed_total", "py") == 0


def test_the_one_upstream_form_labels_its_metrics_default(tmp_path, upstream):
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", upstream, "--port", str(port)]
    with listening(argv, port, name="the gateway"), httpx.Client(timeout=10) as http:
        root = f"http://127.0.0.1:{port}"
        headers = session(http, f"{root}/mcp")
        ping = http.post(f"{root}/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
        assert ping.status_code == 200
        figures = http.get(f"{root}/metrics").text
    assert samples(figures, "sessions_opened_total", "default") == 1
    unlabelled = [
        line
        for line in figures.splitlines()
        if line.startswith("ssewire_gateway_") and 'route="default"' not in line
    ]
    assert unlabelled == []  # every sample names its route


# -- the tool policy -------------------------------------------------------------------------

ALL_TOOLS = {"echo", "countdown", "big", "ask", "structured"}  # the reference server's


def call(ident: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def refusal(ident: int, tool: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "error": {
            "code": -32602,
            "message": f"gateway: tool '{tool}' is not available on this route",
            "data": {"gateway": "tool-refused", "tool": tool},
        },
    }


@pytest.mark.parametrize(
    ("policy", "offered"),
    [
        pytest.param({"allow": ["echo", "countdown"]}, {"echo", "countdown"}, id="allow"),
        pytest.param({"deny": ["big", "ask"]}, ALL_TOOLS - {"big", "ask"}, id="deny"),
    ],
)
def test_a_tool_policy_filters_the_list_and_refuses_other_calls_before_the_upstream(
    tmp_path, policy, offered
):
    with (
        recorded(reference_server(store_size=256)) as (guarded_url, guarded),
        recorded(reference_server(store_size=256)) as (open_url, _),
    ):
        config = route("guarded", guarded_url, tools=policy) + route("open", open_url)
        with gateway(tmp_path, config) as root:
            url = f"{root}/servers/guarded/mcp"

            async def listed(at: str) -> set[str]:
                async with Client(at, profile="2025-11-25", listen=False, timeout=20) as client:
                    return {tool["name"] for tool in await client.list_tools()}

            assert asyncio.run(listed(url)) == offered
            assert asyncio.run(listed(f"{root}/servers/open/mcp")) == ALL_TOOLS  # the other route: all

            with httpx.Client(timeout=20) as http:
                headers = session(http, url)
                for ident, tool in enumerate(sorted(ALL_TOOLS - offered), start=10):
                    answer = http.post(url, json=call(ident, tool, size=16, question="?"), headers=headers)
                    assert answer.status_code == 200, answer.text  # a 2025 revision: HTTP 200, JSON
                    assert answer.headers["content-type"].startswith("application/json")
                    assert answer.json() == refusal(ident, tool)
                allowed = http.post(url, json=call(3, "echo", text="hi"), headers=headers)
                assert allowed.status_code == 200
                assert "hi" in allowed.text and "error" not in allowed.text

            async def refused_through_the_client() -> dict[str, Any]:
                async with Client(url, profile="2025-11-25", listen=False, timeout=20) as client:
                    with pytest.raises(RPCError) as raised:
                        await client.call_tool(sorted(ALL_TOOLS - offered)[0], {"size": 16})
                    return raised.value.error

            error = asyncio.run(refused_through_the_client())
            assert error["code"] == -32602 and error["data"]["gateway"] == "tool-refused"
    refused = ALL_TOOLS - offered
    reached = [seen.body for seen in guarded.seen if any(seen.calls(tool) for tool in refused)]
    assert reached == []  # no refused call ever went up
    assert any(seen.calls("echo") for seen in guarded.seen)  # an offered one did (the recording works)


def test_a_tool_policy_under_2026_07_28_answers_http_400_json(tmp_path):
    """Under 2026-07-28 the same refusal comes as HTTP 400 with the JSON-RPC error."""
    with recorded(reference_server(profile="2026-07-28")) as (url, upstream):
        with gateway(tmp_path, route("guarded", url, tools={"allow": ["echo"]})) as root:
            answers: list[httpx.Response] = []

            async def keep(response: httpx.Response) -> None:
                if response.headers.get("content-type", "").startswith("application/json"):
                    await response.aread()  # a JSON answer only: an event stream is the client's to read
                answers.append(response)

            async def refused() -> dict[str, Any]:
                async with (
                    httpx.AsyncClient(
                        timeout=httpx.Timeout(20, read=None), event_hooks={"response": [keep]}
                    ) as http,
                    Client(
                        f"{root}/servers/guarded/mcp", profile="2026-07-28", http=http, timeout=20
                    ) as client,
                ):
                    assert [tool["name"] for tool in await client.list_tools()] == ["echo"]
                    with pytest.raises(RPCError) as raised:
                        await client.call_tool("big", {"size": 16})
                    return raised.value.error

            error = asyncio.run(refused())
    last = answers[-1]
    assert last.status_code == 400, last.text
    assert last.headers["content-type"].startswith("application/json")
    assert last.json()["error"] == refusal(0, "big")["error"]
    assert error == refusal(0, "big")["error"]
    assert not any(seen.calls("big") for seen in upstream.seen)


# -- credentials from the environment --------------------------------------------------------


def test_each_route_sends_its_own_credentials_from_the_environment_and_no_other(tmp_path):
    secret_a, secret_b = "Bearer route-a-secret-31415", "key-b-27182"
    env = {"SSEWIRE_T_A_AUTH": f"Authorization: {secret_a}", "SSEWIRE_T_B_KEY": f"X-Api-Key: {secret_b}"}
    with (
        recorded(reference_server()) as (a_url, a),
        recorded(reference_server()) as (b_url, b),
        recorded(reference_server()) as (c_url, c),
    ):
        config = (
            route("a", a_url, headers_env=["SSEWIRE_T_A_AUTH"])
            + route("b", b_url, headers_env=["SSEWIRE_T_B_KEY"])
            + route("c", c_url)
        )
        with gateway(tmp_path, config, env=env) as root, httpx.Client(timeout=20) as http:
            for name in ("a", "b", "c"):
                url = f"{root}/servers/{name}/mcp"
                headers = session(http, url)
                echoed = http.post(url, json=call(2, "echo", text="x"), headers=headers)
                assert echoed.status_code == 200, echoed.text
    for recording in (a, b, c):
        assert recording.seen and any(seen.calls("echo") for seen in recording.seen)
    assert all(seen.headers.get("authorization") == secret_a for seen in a.seen)
    assert all("x-api-key" not in seen.headers for seen in a.seen)
    assert all(seen.headers.get("x-api-key") == secret_b for seen in b.seen)
    assert all("authorization" not in seen.headers for seen in b.seen)
    assert all("authorization" not in seen.headers and "x-api-key" not in seen.headers for seen in c.seen)


# -- principals ----------------------------------------------------------------------------


def test_a_principal_not_listed_on_a_route_is_forbidden_there_and_served_on_another(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{who}:{hash_token(token)}\n" for who, token in TOKENS.items()))
    with (
        recorded(reference_server()) as (team_url, team),
        recorded(reference_server()) as (open_url, _),
    ):
        config = route("team", team_url, principals=["alice"]) + route("open", open_url)
        with (
            gateway(tmp_path, config, "--auth-tokens", str(tokens)) as root,
            httpx.Client(timeout=20) as http,
        ):
            at_team, at_open = f"{root}/servers/team/mcp", f"{root}/servers/open/mcp"
            before = len(team.seen)
            refused = http.post(at_team, json=INITIALIZE, headers={**POST, **as_principal("bob")})
            assert refused.status_code == 403, refused.text
            assert refused.headers["content-type"].startswith("application/json")
            body = refused.json()
            assert body["error"] == "forbidden" and isinstance(body.get("error_description"), str)
            assert TOKENS["bob"] not in refused.text
            anonymous = http.post(at_team, json=INITIALIZE, headers=POST)
            assert anonymous.status_code == 401  # no credentials: authentication first, not 403
            assert len(team.seen) == before  # neither went up

            async def echo(url: str, principal: str) -> str:
                async with Client(
                    url, profile="2025-11-25", listen=False, timeout=20, headers=as_principal(principal)
                ) as client:
                    result = await client.call_tool("echo", {"text": principal})
                    return str(result["content"][0]["text"])

            assert "bob" in asyncio.run(echo(at_open, "bob"))
            assert "alice" in asyncio.run(echo(at_team, "alice"))
            assert "alice" in asyncio.run(echo(at_open, "alice"))
