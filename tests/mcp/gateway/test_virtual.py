"""A virtual server behind ``ssewire gateway --config``: the official Python SDK server, the
official TypeScript SDK server and the official Python SDK's stdio server merged into one
MCP server, driven by the official Python client (2025-11-25) and by the package's client
under 2026-07-28 (through the bridge); cuts on one member healed while the others' calls go
on; a member that is down failing its own calls only; tool rules on the shown names."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.transport.serving import running
from tests.support.faultproxy import fault_proxy
from tests.support.processes import free_port, listening
from tests.support.resets import cut_share, reference_server
from tests.support.sdk_servers import probe_app
from tests.support.ts_servers import require_node, ts_server

ROOT = str(Path(__file__).resolve().parents[3])
STDIO = [sys.executable, "-m", "tests.support.stdio_server"]
SIZE = 100_000  # characters of a cut member's results


def virtual(name: str, members: dict[str, dict[str, Any]], **settings: Any) -> str:
    """A ``[servers.NAME]`` virtual server of ``members`` (their tables), as TOML."""
    lines = [f"[servers.{name}]"]
    lines += [
        f"{key} = {json.dumps(value)}" for key, value in settings.items() if not isinstance(value, list)
    ]
    for member, table in members.items():
        lines.append(f"[servers.{name}.members.{member}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in table.items()]
    for rule in settings.get("rules", []):
        lines.append(f"[[servers.{name}.rules]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in rule.items()]
    return "\n".join(lines) + "\n"


def local() -> dict[str, Any]:
    return {"command": STDIO, "env": ["PYTHONPATH"], "cwd": ROOT}


@contextlib.contextmanager
def gateway(tmp_path: Path, config: str) -> Iterator[str]:
    path = tmp_path / f"virtual-{free_port()}.toml"
    path.write_text(config)
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--config", str(path), "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": ROOT}
    with (
        path.with_suffix(".log").open("wb") as said,
        listening(argv, port, name="the gateway", stderr=said, env=env),
    ):
        yield f"http://127.0.0.1:{port}"


async def official(url: str) -> dict[str, Any]:
    """What the official client sees: the tools, a countdown of each HTTP member with its
    progress, the stdio member's echo, and a sampling request of the Python member answered."""
    import httpx2
    import mcp_types as types
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    async def sampling(context: Any, params: Any) -> Any:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled"), model="m"
        )

    seen: dict[str, Any] = {}
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
        SDKClient(
            streamable_http_client(url, http_client=http), mode="legacy", sampling_callback=sampling
        ) as client,
    ):
        seen["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        for tool in ("py__countdown", "ts__countdown"):
            ticks: list[float] = []

            async def progress(value: float, total: Any, message: Any, ticks: list[float] = ticks) -> None:
                ticks.append(value)

            result = await client.call_tool(tool, {"count": 3, "delay": 0.01}, progress_callback=progress)
            seen[tool] = (result.content[0].text, ticks)
        seen["echo"] = (await client.call_tool("local__echo", {"text": "hi"})).content[0].text
        seen["ask"] = (await client.call_tool("py__ask", {"question": "q"})).content[0].text
    return seen


def test_one_server_of_three_official_members_for_the_official_client_and_a_2026_client(tmp_path):
    require_node()
    with running(probe_app()) as py, ts_server() as ts:
        members = {
            "py": {"upstream": f"{py}/mcp", "revision": "2025-11-25"},
            "ts": {"upstream": ts},
            "local": local(),
        }
        with gateway(tmp_path, virtual("all", members)) as root:
            url = f"{root}/servers/all/mcp"
            seen = asyncio.run(asyncio.wait_for(official(url), 90))

            async def modern() -> tuple[list[str], str]:
                async with Client(url, profile="2026-07-28", timeout=30) as client:
                    names = [tool["name"] for tool in await client.list_tools()]
                    return names, (await client.call_tool("ts__countdown", {"count": 2}))["content"][0][
                        "text"
                    ]

            names, done = asyncio.run(asyncio.wait_for(modern(), 60))
    own = {"py": ["ask", "countdown", "structured"], "ts": ["ask", "countdown", "structured"]}
    expected = {f"{m}__{t}" for m, tools in own.items() for t in tools}
    expected |= {f"local__{t}" for t in ("echo", "whoami", "countdown", "big", "crash")}
    assert set(seen["tools"]) == expected and set(names) == expected
    assert seen["py__countdown"] == ("done", [1, 2, 3]) and seen["ts__countdown"] == ("done", [1, 2, 3])
    assert seen["echo"] == "hi" and seen["ask"] == "sampled"
    assert done == "done"


def test_cuts_on_one_member_are_healed_and_the_other_members_calls_go_on(tmp_path):
    with running(reference_server(store_size=4096)) as ref:
        port = int(ref.rsplit(":", 1)[1])
        with fault_proxy(port, cut_share(0.5, high=SIZE)) as proxy:
            members = {"ref": {"upstream": f"http://127.0.0.1:{proxy.port}/mcp"}, "local": local()}
            with gateway(tmp_path, virtual("all", members)) as root:

                async def calls() -> tuple[list[Any], list[Any]]:
                    async with Client(f"{root}/servers/all/mcp", profile="2025-11-25", timeout=60) as client:
                        cut = [
                            client.call_tool("ref__countdown", {"count": 3, "size": SIZE}) for _ in range(6)
                        ]
                        calm = [client.call_tool("local__echo", {"text": f"n{n}"}) for n in range(6)]
                        results = await asyncio.gather(*cut, *calm, return_exceptions=True)
                        return results[:6], results[6:]

                healed, untouched = asyncio.run(asyncio.wait_for(calls(), 120))

                async def direct() -> Any:
                    async with Client(f"{ref}/mcp", profile="2025-11-25") as client:
                        return await client.call_tool("countdown", {"count": 3, "size": SIZE})

                whole = asyncio.run(asyncio.wait_for(direct(), 60))
            assert proxy.stats.cuts > 0  # the member's answers were cut, and resumed
    assert all(result == whole for result in healed), [str(r)[:200] for r in healed]
    assert [result["content"][0]["text"] for result in untouched] == [f"n{n}" for n in range(6)]


def test_a_member_that_is_down_fails_its_own_calls_explicitly_and_the_others_serve(tmp_path):
    gone = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    with gateway(tmp_path, virtual("all", {"gone": {"upstream": gone}, "local": local()})) as root:

        async def scenario() -> tuple[list[str], RPCError, str]:
            async with Client(f"{root}/servers/all/mcp", profile="2025-11-25", timeout=60) as client:
                names = [tool["name"] for tool in await client.list_tools()]
                with pytest.raises(RPCError) as failed:
                    await client.call_tool("gone__anything")
                echoed = (await client.call_tool("local__echo", {"text": "up"}))["content"][0]["text"]
                return names, failed.value, echoed

        names, failed, echoed = asyncio.run(asyncio.wait_for(scenario(), 90))
    assert names and all(name.startswith("local__") for name in names)
    assert "the member server 'gone' cannot be reached now" in str(failed)
    assert failed.error["data"] == {"gateway": "upstream"}
    assert gone.split("/")[2] not in str(failed)  # where the members are is the operator's
    assert echoed == "up"


def test_tool_rules_on_a_virtual_server_read_the_shown_names(tmp_path):
    with running(probe_app()) as py:
        members = {"py": {"upstream": f"{py}/mcp"}, "local": local()}
        config = virtual("all", members, rules=[{"allow": ["local__e*", "py__structured"]}])
        with gateway(tmp_path, config) as root:

            async def scenario() -> tuple[list[str], Any]:
                async with Client(f"{root}/servers/all/mcp", profile="2025-11-25", timeout=60) as client:
                    names = sorted(tool["name"] for tool in await client.list_tools())
                    with pytest.raises(RPCError) as refused:
                        await client.call_tool("local__crash")
                    return names, refused.value.error

            names, error = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert names == ["local__echo", "py__structured"]
    assert error["data"] == {"gateway": "tool-refused", "tool": "local__crash"}
