"""A stdio server behind ``ssewire gateway --config``: the official Python SDK's stdio server
(``tests.support.stdio_server``), started by the gateway, reached over Streamable HTTP by the
official Python client (2025-11-25) and by the package's client under 2026-07-28 (through the
revision bridge), restarted when it dies, stopped with the gateway."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ssewire.mcp.client import Client
from ssewire.mcp.protocol.profiles import named
from ssewire.mcp.protocol.requests import post_headers, request
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port, listening

ROOT = str(Path(__file__).resolve().parents[3])


@contextlib.contextmanager
def gateway(tmp_path: Path, command: list[str] | None = None) -> Iterator[tuple[str, Any]]:
    """The gateway with one stdio route, ``local`` (the official SDK's stdio server unless
    ``command`` says otherwise); its MCP URL and process."""
    config = tmp_path / "stdio.toml"
    command = command or [sys.executable, "-m", "tests.support.stdio_server"]
    config.write_text(
        f'[servers.local]\ncommand = {json.dumps(command)}\nenv = ["PYTHONPATH"]\ncwd = {json.dumps(ROOT)}\n'
    )
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "ssewire",
        "gateway",
        "--config",
        str(config),
        "--port",
        str(port),
        "--drain",
        "2",
        "--start-timeout",
        "0",  # (a route that cannot start is a case of its own)
    ]
    env = {**os.environ, "PYTHONPATH": ROOT}
    with (
        (tmp_path / "gateway.log").open("wb") as said,
        listening(argv, port, name="the gateway", stderr=said, env=env) as process,
    ):
        yield f"http://127.0.0.1:{port}/servers/local/mcp", process


async def official(url: str) -> tuple[list[str], str, list[float], str]:
    """The official client: the tools, a call with progress, a call that kills the server
    (its error), then the server's pid (a new process)."""
    import httpx2
    from mcp import Client as SDKClient
    from mcp.client.streamable_http import streamable_http_client

    ticks: list[float] = []

    async def progress(value: float, total: Any, message: Any) -> None:
        ticks.append(value)

    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
        SDKClient(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        tools = [tool.name for tool in (await client.list_tools()).tools]
        done = await client.call_tool("countdown", {"count": 3}, progress_callback=progress)
        try:
            crashed = await client.call_tool("crash", {})
            died = f"a result: {crashed}"
        except Exception as error:  # the SDK raises the JSON-RPC error of the call
            died = str(error)
        return tools, done.content[0].text, ticks, died


def test_a_stdio_server_is_served_to_the_official_client_and_heals_its_own_death(tmp_path):
    with gateway(tmp_path) as (url, _):
        tools, done, ticks, died = asyncio.run(asyncio.wait_for(official(url), 60))
        assert {"echo", "countdown", "crash"} <= set(tools)
        assert (done, ticks) == ("done", [1, 2, 3])
        assert "ended (exit status 3) before answering" in died and "may have been processed" in died

        async def after() -> str:  # a new session, served by the process started again
            async with Client(url, profile="2025-11-25") as client:
                return (await client.call_tool("echo", {"text": "again"}))["content"][0]["text"]

        assert asyncio.run(asyncio.wait_for(after(), 30)) == "again"
        ready = httpx.get(url.replace("/servers/local/mcp", "/readyz"), timeout=10)
        assert ready.status_code == 200, ready.text


def test_a_2026_07_28_client_reaches_the_stdio_server_through_the_bridge(tmp_path):
    async def modern(url: str) -> tuple[str, str]:
        async with Client(url, profile="2026-07-28") as client:
            assert client.version == "2026-07-28"
            echoed = (await client.call_tool("echo", {"text": "modern"}))["content"][0]["text"]
            pid = (await client.call_tool("whoami"))["content"][0]["text"]
            return echoed, pid

    with gateway(tmp_path) as (url, _):
        echoed, pid = asyncio.run(asyncio.wait_for(modern(url), 60))
        assert echoed == "modern" and pid.isdigit()
    log = (tmp_path / "gateway.log").read_text()
    assert log.count("POST tools/call 200 ok route=local") == 2  # the bridged calls' access lines


def test_a_program_that_cannot_start_is_a_503_with_retry_after_on_either_revision(tmp_path):
    """Not the 502 of an upstream that failed: it cannot serve now, and says when to come
    back, to a 2025 client opening its session and to a 2026-07-28 one through the bridge."""

    async def opened(url: str) -> list[httpx.Response]:
        modern = named("2026-07-28")
        async with httpx.AsyncClient(timeout=20) as http:
            return [
                await http.post(url, json=INITIALIZE, headers=post_headers(None, None)),
                await http.post(
                    url,
                    json=request(1, "tools/list", {}, modern, client_info={"name": "t", "version": "1"}),
                    headers=post_headers(modern, None, "tools/list"),
                ),
            ]

    with gateway(tmp_path, [str(tmp_path / "no-such-program")]) as (url, _):
        began = time.monotonic()
        answers = asyncio.run(asyncio.wait_for(opened(url), 60))
        took = time.monotonic() - began
    assert [answer.status_code for answer in answers] == [503, 503], [a.text for a in answers]
    assert all(int(answer.headers["retry-after"]) >= 1 for answer in answers)
    assert took < 10  # answered, not held for the backoff
    log = (tmp_path / "gateway.log").read_text()
    assert "stdio server could not start (No such file or directory)" in log
    assert "POST initialize 503 failed" in log  # a 5xx is the access line's failure, not a refusal
    assert "POST tools/list 503 failed" in log  # (the bridged request's line)


def test_the_stdio_server_stops_with_the_gateway(tmp_path):
    async def pid_of(url: str) -> int:
        async with Client(url, profile="2025-11-25") as client:
            return int((await client.call_tool("whoami"))["content"][0]["text"])

    with gateway(tmp_path) as (url, process):
        pid = asyncio.run(asyncio.wait_for(pid_of(url), 60))
        os.kill(pid, 0)  # running
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "the stdio server outlived the gateway"
        time.sleep(0.05)
