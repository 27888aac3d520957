"""``SIGHUP`` reads the routes file again (``ssewire gateway --config``), sent to the real
process: a call in flight on an unchanged route finishes as if nothing happened, a removed
route's call in flight ends with an explicit error at the drain deadline, an added route
serves, a file that is refused changes nothing; ``/readyz`` and ``/metrics`` say which
generation runs."""

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
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.transport.serving import running
from tests.support.processes import free_port, listening
from tests.support.resets import reference_server

DRAIN = 1.5  # seconds the gateway drains a route that went


def table(name: str, upstream: str, **settings: Any) -> str:
    lines = [f"[servers.{name}]", f"upstream = {json.dumps(upstream)}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def gateway(config: Path, text: str) -> Iterator[tuple[str, Any]]:
    """The gateway on ``config`` (written with ``text``): its root URL and process."""
    config.write_text(text)
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--config", str(config), "--port", str(port)]
    argv += ["--drain", str(DRAIN)]
    with (
        (config.with_suffix(".log")).open("wb") as said,
        listening(argv, port, name="the gateway", stderr=said) as process,
    ):
        yield f"http://127.0.0.1:{port}", process


def reread(process: Any, root: str, config: Path, text: str, generation: int) -> dict[str, Any]:
    """Write ``text``, send SIGHUP, wait until ``/readyz`` says ``generation``; its body."""
    config.write_text(text)
    process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while True:
        said = httpx.get(f"{root}/readyz", timeout=5).json()
        if said.get("generation") == generation:
            return said
        assert time.monotonic() < deadline, said
        time.sleep(0.05)


async def countdown(url: str, count: int, ticks: list[float]) -> str:
    async with Client(url, profile="2025-11-25", timeout=30) as client:
        result = await client.call_tool(
            "countdown", {"count": count, "delay": 0.1}, on_progress=lambda p: ticks.append(p["progress"])
        )
        return result["content"][0]["text"]


async def echo(url: str) -> str:
    async with Client(url, profile="2025-11-25", timeout=10) as client:
        return (await client.call_tool("echo", {"text": "hi"}))["content"][0]["text"]


def test_sighup_keeps_an_unchanged_routes_call_ends_a_removed_ones_and_serves_an_added_one(tmp_path):
    with running(reference_server()) as up:
        upstream = f"{up}/mcp"
        config = tmp_path / "routes.toml"
        first = table("kept", upstream) + table("gone", upstream, timeout=60)
        with gateway(config, first) as (root, process):
            assert httpx.get(f"{root}/readyz", timeout=5).json() == {"status": "ready", "generation": 1}

            async def scenario() -> tuple[Any, ...]:
                kept_ticks: list[float] = []
                gone_ticks: list[float] = []
                kept = asyncio.ensure_future(countdown(f"{root}/servers/kept/mcp", 20, kept_ticks))
                gone = asyncio.ensure_future(countdown(f"{root}/servers/gone/mcp", 100, gone_ticks))
                while len(kept_ticks) < 2 or len(gone_ticks) < 2:  # both calls under way
                    await asyncio.sleep(0.02)
                second = table("kept", upstream) + table("added", upstream)
                said = await asyncio.to_thread(reread, process, root, config, second, 2)
                added = await echo(f"{root}/servers/added/mcp")
                ended = await asyncio.gather(gone, return_exceptions=True)
                return await kept, kept_ticks, ended[0], said, added

            done, ticks, ended, said, added = asyncio.run(asyncio.wait_for(scenario(), 60))
            direct: list[float] = []
            assert done == asyncio.run(asyncio.wait_for(countdown(upstream, 20, direct), 30))  # whole
            assert ticks == direct == list(range(1, 21))
            assert said == {"status": "ready", "generation": 2}
            assert added == "hi"
            assert isinstance(ended, RPCError) and "drain" in str(ended), ended
            deadline = time.monotonic() + 10  # the route is gone once drained and closed
            while httpx.post(f"{root}/servers/gone/mcp", json={}, timeout=5).status_code != 404:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            metrics = httpx.get(f"{root}/metrics", timeout=5).text
            assert "ssewire_gateway_config_generation 2" in metrics
            assert 'route="added"' in metrics and 'route="gone"' not in metrics


@pytest.mark.parametrize(
    "broken",
    [
        "[servers.kept\nupstream = 1",  # not TOML
        '[servers.kept]\nupstream = "ftp://x"\n',  # a key wrong
        '[servers.kept]\nupstream_env = "SSEWIRE_TEST_UNSET_VARIABLE"\n',  # a variable unset
    ],
)
def test_a_file_that_is_refused_changes_nothing_and_is_counted(tmp_path, broken):
    with running(reference_server()) as up:
        config = tmp_path / "routes.toml"
        with gateway(config, table("kept", f"{up}/mcp")) as (root, process):
            config.write_text(broken)
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 10
            while (
                "ssewire_gateway_config_reload_failures_total 1"
                not in httpx.get(f"{root}/metrics", timeout=5).text
            ):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert httpx.get(f"{root}/readyz", timeout=5).json()["generation"] == 1
            assert asyncio.run(asyncio.wait_for(echo(f"{root}/servers/kept/mcp"), 20)) == "hi"
        log = config.with_suffix(".log").read_text()
        assert "the routes file was refused" in log and "generation 1 goes on" in log
        assert "ftp://x" not in log  # a value is never echoed


def test_a_changed_route_is_served_by_a_new_app_and_its_old_sessions_open_again(tmp_path):
    with running(reference_server()) as up:
        config = tmp_path / "routes.toml"
        upstream = f"{up}/mcp"
        with gateway(config, table("r", upstream)) as (root, process):

            async def scenario() -> str:
                async with Client(f"{root}/servers/r/mcp", profile="2025-11-25", timeout=10) as client:
                    await client.call_tool("echo", {"text": "before"})
                    await asyncio.to_thread(
                        reread, process, root, config, table("r", upstream, timeout=30), 2
                    )
                    # the old session is unknown to the new app: the client opens another (404, then initialize)
                    return (await client.call_tool("echo", {"text": "after"}))["content"][0]["text"]

            assert asyncio.run(asyncio.wait_for(scenario(), 30)) == "after"
            assert os.path.exists(config)


class Built:
    """An app the reloader built: its path, and whether it was closed."""

    def __init__(self, path: str) -> None:
        self.gateway = SimpleNamespace(path=path, metadata_paths=[])
        self.closed = False

    async def drain(self, seconds: float) -> None:
        pass

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("refusal", ["paths collide", "a later route fails to build"])
def test_apps_built_for_a_reading_that_is_refused_are_closed_and_the_running_ones_kept(refusal):
    """A refused reading may come after some of its apps were built (their clients, a stdio
    host): they are closed, never left open beside the routes still served."""
    from ssewire.mcp.gateway.reload import Reloader
    from ssewire.mcp.gateway.routes import Router

    async def scenario() -> tuple[list[Built], Built, Router]:
        running_app = Built("/servers/a/mcp")
        router = Router({"a": running_app})
        route = lambda name, source: SimpleNamespace(name=name, source=source)  # noqa: E731
        built: list[Built] = []

        def build(r: Any) -> Built:
            if r.name == "c":
                raise ValueError("route 'c': refused")
            built.append(Built("/servers/a/mcp" if refusal == "paths collide" else f"/servers/{r.name}/mcp"))
            return built[-1]

        reading = [route("a", "1"), route("b", "1")] + (
            [route("c", "1")] if refusal != "paths collide" else []
        )
        reloader = Reloader(router, [route("a", "1")], load=lambda: reading, build=build, drain=0)
        assert reloader.reload() is False
        await asyncio.sleep(0)  # (closed in the background)
        return built, running_app, router

    built, running_app, router = asyncio.run(scenario())
    assert len(built) == 1 and built[0].closed
    assert router.routes == {"a": running_app} and not running_app.closed and router.reload_failures == 1
