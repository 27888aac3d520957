"""A gateway in front of an upstream of one revision serving clients of both
(``ssewire gateway --upstream-revision``): clients of the upstream's revision are relayed by
the gateway, the others reach the revision bridge. Real servers on 127.0.0.1: the official
SDK server restricted to 2025-11-25 and a 2026-07-28-only server (the bridge's test upstreams).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ssewire.cli import main
from ssewire.mcp.bridge import Bridge
from ssewire.mcp.gateway import Gateway
from ssewire.mcp.gateway.bridged import Bridged
from ssewire.mcp.server.tools import ToolPolicy
from ssewire.mcp.transport.serving import running
from tests.mcp.bridge.test_bridge import (
    NEW,
    OLD,
    WAIT,
    Stateless2026,
    _initialize,
    last,
    post,
    sdk_server_2025,
)


@contextlib.contextmanager
def bridged_gateway(
    upstream_app: Any, revision: str, tools: ToolPolicy | None = None
) -> Iterator[tuple[str, Bridged]]:
    with running(upstream_app) as up:
        gateway = Gateway(f"{up}/mcp", keepalive=0.5, tools=tools)
        app = Bridged(gateway, Bridge(f"{up}/mcp", upstream_revision=revision, tools=tools))
        with running(app) as root:
            yield root + app.path, app


async def _legacy_echo(http: httpx.AsyncClient, url: str, text: str) -> dict[str, Any]:
    headers = await _initialize(http, url)
    await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }
    answer = await http.post(
        url, headers={**headers, "Accept": "application/json, text/event-stream"}, json=call
    )
    assert answer.status_code == 200, answer.text
    messages = [line[5:].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    found = [json.loads(m) for m in messages if m] if messages else [answer.json()]
    return last([m for m in found if m.get("id") == 7])


def test_both_revisions_reach_a_2025_only_upstream() -> None:
    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            status, found = await post(http, url, "server/discover")
            assert status == 200 and last(found)["result"]["supportedVersions"] == [NEW]  # the bridge's
            status, found = await post(
                http, url, "tools/call", {"name": "echo", "arguments": {"text": "new"}}
            )
            assert status == 200 and last(found)["result"]["content"][0]["text"] == "new"
            answer = await _legacy_echo(http, url, "old")  # the gateway's session, relayed
            assert answer["result"]["content"][0]["text"] == "old"

    with bridged_gateway(sdk_server_2025(), OLD) as (url, _):
        asyncio.run(asyncio.wait_for(go(url), 4 * WAIT))


def test_both_revisions_reach_a_2026_only_upstream() -> None:
    upstream = Stateless2026()

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            answer = await _legacy_echo(http, url, "old")  # initialize answered from server/discover
            assert answer["result"]["content"][0]["text"] == "old (from raw-2025)"  # _meta from initialize
            status, found = await post(
                http, url, "tools/call", {"name": "echo", "arguments": {"text": "new"}}
            )
            assert status == 200 and last(found)["result"]["content"][0]["text"] == "new (from raw-2026)"

    with bridged_gateway(upstream, NEW) as (url, _):
        asyncio.run(asyncio.wait_for(go(url), 4 * WAIT))
    assert {seen["body"]["method"] for seen in upstream.seen} >= {"server/discover", "tools/call"}
    assert all(seen["headers"]["mcp-protocol-version"] == NEW for seen in upstream.seen)


def test_a_routes_tool_policy_holds_for_the_bridged_clients_too() -> None:
    """Denied tools are absent from a bridged client's tools/list and refused on call before
    anything goes upstream, as they are for the gateway's own clients."""
    upstream = Stateless2026()

    async def go(url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT) as http:
            headers = await _initialize(http, url)  # a 2025 client: the bridge, to a 2026 upstream
            await http.post(
                url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            listing = await http.post(
                url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            )
            assert [tool["name"] for tool in listing.json()["result"]["tools"]] == ["echo"], listing.text
            refused = await http.post(
                url,
                headers=headers,
                json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "confirm"}},
            )
            assert refused.status_code == 200 and refused.json()["error"]["data"]["gateway"] == "tool-refused"
            allowed = await _legacy_echo(http, url, "old")
            assert allowed["result"]["content"][0]["text"] == "old (from raw-2025)"

    with bridged_gateway(upstream, NEW, ToolPolicy(allow=["echo"])) as (url, _):
        asyncio.run(asyncio.wait_for(go(url), 4 * WAIT))
    called = [
        seen["body"]["params"]["name"] for seen in upstream.seen if seen["body"]["method"] == "tools/call"
    ]
    assert called == ["echo"]  # the refused tool never went up


def _scope(method: str = "POST", path: str = "/mcp", *versions: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"mcp-protocol-version", v) for v in versions],
    }


@pytest.mark.parametrize(
    ("revision", "scope", "bridged"),
    [
        (OLD, _scope("POST", "/mcp", NEW.encode()), True),
        (OLD, _scope("POST", "/mcp", OLD.encode()), False),
        (OLD, _scope("POST", "/mcp"), False),  # initialize names no version
        (NEW, _scope("POST", "/mcp"), True),
        (NEW, _scope("GET", "/mcp", OLD.encode()), True),  # a 2025 client's stream
        (NEW, _scope("POST", "/mcp", NEW.encode()), False),
        (NEW, _scope("POST", "/mcp", b"2099-01-01"), False),  # unknown: the gateway's -32022
        (NEW, _scope("POST", "/mcp", OLD.encode(), NEW.encode()), False),  # several: refused there
        (NEW, _scope("OPTIONS", "/mcp"), False),
        (NEW, _scope("GET", "/.well-known/oauth-protected-resource"), False),
    ],
)
def test_the_choice_is_made_from_the_head(revision: str, scope: dict[str, Any], bridged: bool) -> None:
    app = Bridged(
        Gateway("http://127.0.0.1:9/mcp"), Bridge("http://127.0.0.1:9/mcp", upstream_revision=revision)
    )
    assert app._bridged(scope) is bridged


def test_the_command_line_refuses_a_revision_it_cannot_bridge(capsys: pytest.CaptureFixture[str]) -> None:
    for revision in ("2099-01-01", "2025-06-18"):
        assert main(["gateway", "--upstream", "http://127.0.0.1:9/mcp", "--upstream-revision", revision]) == 2
    assert "--upstream-revision" in capsys.readouterr().err
