"""Health and readiness of the gateway process (``/healthz``, ``/readyz``), probed through
each failure an orchestrator must see: Redis stopped and back, an upstream stopped and back,
a drain after SIGTERM. Both endpoints answer without credentials and never say more than
what is not ready: no URL, host, port or error text."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError
from ssewire.mcp.reference.tools import filler
from ssewire.mcp.server.auth import hash_token
from ssewire.mcp.transport.serving import running
from tests.support.gateway_runs import POST
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port, listening
from tests.support.redis_server import controlled_redis
from tests.support.resets import reference_server
from tests.support.tokens import TOKENS

READY = {"status": "ready"}
ROUTED = {**READY, "generation": 1}  # from a routes file: which reading of it is served
# what a readiness body must never hold, whatever the failure: it answers without credentials
NEVER = ("127.0.0.1", "localhost", "http", "redis", "rror", "refused", "Connect", "timed out", "Traceback")


@contextlib.contextmanager
def gateway(tmp_path: Path, *flags: str, config: str | None = None) -> Iterator[tuple[str, subprocess.Popen]]:
    """``ssewire gateway FLAGS`` (with ``config`` as its ``--config`` file) on a free
    127.0.0.1 port: its root URL and the process. Its stderr goes to a file (a pipe nobody
    reads could fill), quoted when it does not start."""
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--port", str(port), *flags]
    if config is not None:
        path = tmp_path / f"gateway-{port}.toml"
        path.write_text(config)
        argv += ["--config", str(path)]
    log = tmp_path / f"gateway-{port}.log"
    with log.open("wb") as said:
        try:
            with listening(argv, port, name="the gateway", stderr=said) as process:
                yield f"http://127.0.0.1:{port}", process
        except RuntimeError as failed:
            raise RuntimeError(f"{failed}; its stderr: {log.read_text(errors='replace')[-2000:]}") from None


def routes(**upstreams: str) -> str:
    return "".join(f'[servers.{name}]\nupstream = "{url}"\n' for name, url in upstreams.items())


def probe(root: str, path: str = "/readyz", **options: Any) -> httpx.Response:
    return httpx.get(root + path, timeout=10, **options)


def until(root: str, status: int, within: float, path: str = "/readyz") -> httpx.Response:
    """``GET path`` every 0.2 s until it answers ``status`` or ``within`` seconds passed;
    the last answer."""
    deadline = time.monotonic() + within
    while True:
        answer = probe(root, path)
        if answer.status_code == status or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def not_ready(
    answer: httpx.Response, failing: list[str], *secrets: str, generation: int | None = None
) -> None:
    """A 503 JSON body naming exactly ``failing`` (and the generation of a routes file),
    and nothing of the configuration."""
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    said = {"status": "not ready", "failing": failing}
    assert answer.json() == (said if generation is None else {**said, "generation": generation})
    for text in (*secrets, *NEVER):
        assert text not in answer.text, (text, answer.text)


def port_of(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]


@pytest.mark.parametrize("form", ["config", "one upstream"])
def test_healthz_and_readyz_when_all_is_well(tmp_path, form):
    with running(reference_server()) as a, running(reference_server()) as b:
        flags = ("--upstream", a + "/mcp") if form == "one upstream" else ()
        config = routes(a=a + "/mcp", b=b + "/mcp") if form == "config" else None
        with gateway(tmp_path, *flags, config=config) as (root, _):
            health, ready = probe(root, "/healthz"), until(root, 200, 5)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert health.headers["content-type"].startswith("application/json")
    assert ready.status_code == 200 and ready.json() == (ROUTED if form == "config" else READY), ready.text
    assert ready.headers["content-type"].startswith("application/json")


def test_readyz_names_the_store_while_redis_is_stopped_and_is_ready_once_it_is_back(tmp_path):
    with (
        controlled_redis() as redis,
        running(reference_server()) as upstream,
        gateway(tmp_path, "--store", redis.url, config=routes(a=upstream + "/mcp")) as (root, _),
    ):
        assert until(root, 200, 5).json() == ROUTED
        redis.stop()
        stopped = until(root, 503, 5)  # a ping has a second to answer
        not_ready(stopped, ["store"], redis.url, str(redis.port), upstream, port_of(upstream), generation=1)
        assert probe(root, "/healthz").status_code == 200  # the process still serves
        redis.start()
        back = until(root, 200, 10)
        assert back.status_code == 200 and back.json() == ROUTED, back.text


@pytest.mark.slow
@pytest.mark.parametrize(("form", "named"), [("config", "servers/a"), ("one upstream", "upstream")])
def test_readyz_names_a_stopped_upstream_and_is_ready_once_it_is_back(tmp_path, form, named):
    """An upstream that answered within 10 s counts as ready; stopped, the gateway's probe
    (2 s, cached about 1 s) finds it gone: within 10 + 2 + 1 s the route is named, and only
    it; restarted on the same port, it is ready again within a few seconds."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with contextlib.ExitStack() as stack, running(reference_server()) as other:
        upstream = stack.enter_context(contextlib.ExitStack())
        upstream.enter_context(running(reference_server(), port=port))
        flags = ("--upstream", url) if form == "one upstream" else ()
        config = routes(a=url, b=other + "/mcp") if form == "config" else None
        root, _ = stack.enter_context(gateway(tmp_path, *flags, config=config))
        expected = ROUTED if form == "config" else READY
        generation = 1 if form == "config" else None
        assert until(root, 200, 5).json() == expected
        upstream.close()  # the upstream stops
        stopped = until(root, 503, 20)
        not_ready(stopped, [named], url, str(port), other, port_of(other), generation=generation)
        assert probe(root, "/healthz").status_code == 200
        stack.enter_context(running(reference_server(), port=port))  # back, on the same port
        back = until(root, 200, 10)
        assert back.status_code == 200 and back.json() == expected, back.text


def test_readyz_names_a_stdio_route_whose_program_cannot_start(tmp_path):
    """A local upstream that cannot serve answers 503: that is no answer of a server (nor
    at start-up, which waits for it unless told not to)."""
    missing = str(tmp_path / "no-such-program")
    with running(reference_server()) as other:
        config = routes(b=other + "/mcp") + f'[servers.s]\ncommand = ["{missing}"]\n'
        with gateway(tmp_path, "--start-timeout", "0", config=config) as (root, _):
            answer = until(root, 503, 10)
            not_ready(answer, ["servers/s"], missing, other, port_of(other), generation=1)


async def _overloaded(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An upstream (or the proxy in front of it) that answers every request 503."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 503, "headers": [(b"retry-after", b"1")]})
        await send({"type": "http.response.body", "body": b"overloaded"})


def test_an_upstreams_503_to_a_client_is_not_heard_as_the_upstream_answering(tmp_path):
    with running(_overloaded) as upstream:
        url = upstream + "/mcp"
        with gateway(tmp_path, "--upstream", url, "--start-timeout", "0") as (root, _):
            relayed = httpx.post(root + "/mcp", json=INITIALIZE, headers=POST, timeout=10)
            assert relayed.status_code >= 500
            not_ready(probe(root), ["upstream"], url, port_of(upstream))


def test_readyz_says_draining_at_once_after_sigterm_while_calls_go_on_to_the_deadline(tmp_path):
    """Memory store, ``--drain 5``: SIGTERM while two calls are in flight. At once /readyz is
    503 naming "draining" and a new session is refused 503 with Retry-After; the call that
    ends within the deadline arrives whole, the one that would not ends with the explicit
    draining error; the process exits 0 within the deadline and a second."""
    drain = 5.0
    with running(reference_server()) as upstream:
        with gateway(tmp_path, "--upstream", upstream + "/mcp", "--drain", str(drain)) as (root, process):
            assert until(root, 200, 5).json() == READY
            seen = asyncio.run(asyncio.wait_for(_drained(root, process), 30))
            code = process.wait(timeout=drain + 5)
            gone = time.monotonic() - seen["signalled"]
    assert code == 0
    assert gone <= drain + 1.5, gone  # within the deadline and a second (and a little to notice)
    not_ready(seen["ready"], ["draining"], upstream, port_of(upstream))
    assert seen["opened"].status_code == 503 and "retry-after" in seen["opened"].headers, seen["opened"]
    assert seen["short"]["content"][0]["text"] == filler(1000)  # whole
    assert seen["short_progress"] == list(range(1, 11))
    error = seen["long"]
    assert error["code"] == -32603 and error["data"]["gateway"] == "draining", error
    assert seen["long_ended"] <= drain + 1.0, seen["long_ended"]


async def _drained(root: str, process: subprocess.Popen) -> dict[str, Any]:
    url = root + "/mcp"
    short_client = Client(url, profile="2025-11-25", listen=False, timeout=30)
    long_client = Client(url, profile="2025-11-25", listen=False, timeout=30)
    seen: dict[str, Any] = {"short_progress": []}
    try:
        await short_client.connect()
        await long_client.connect()
        started = asyncio.Event()
        short = asyncio.ensure_future(  # 10 x 0.25 s: done within the drain
            short_client.call_tool(
                "countdown",
                {"count": 10, "delay": 0.25, "size": 1000},
                on_progress=lambda p: (seen["short_progress"].append(p["progress"]), started.set()),
            )
        )
        long = asyncio.ensure_future(  # 60 x 0.25 s: still running at the deadline
            long_client.call_tool("countdown", {"count": 60, "delay": 0.25, "size": 0})
        )
        await asyncio.wait_for(started.wait(), 10)
        process.send_signal(signal.SIGTERM)
        seen["signalled"] = signalled = time.monotonic()
        async with httpx.AsyncClient(timeout=5) as http:
            for _ in range(10):  # "at once": once the signal is handled, within a second
                seen["ready"] = await http.get(root + "/readyz")
                if seen["ready"].status_code == 503:
                    break
                await asyncio.sleep(0.1)
            seen["opened"] = await http.post(url, json=INITIALIZE, headers=POST)
        seen["short"] = await short
        try:
            await long
            seen["long"] = {"code": None, "data": {"gateway": "the call was not ended"}}
        except RPCError as ended:
            seen["long"] = ended.error
        seen["long_ended"] = time.monotonic() - signalled
        return seen
    finally:
        for client in (short_client, long_client):
            with contextlib.suppress(Exception):
                await client.close(end_session=False)


def test_healthz_and_readyz_answer_without_credentials_when_auth_is_on(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"{who}:{hash_token(token)}\n" for who, token in TOKENS.items()))
    with running(reference_server()) as upstream:
        config = routes(a=upstream + "/mcp")
        with gateway(tmp_path, "--auth-tokens", str(tokens), config=config) as (root, _):
            health, ready = probe(root, "/healthz"), until(root, 200, 5)
            refused = httpx.post(root + "/servers/a/mcp", json=INITIALIZE, headers=POST, timeout=10)
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert ready.status_code == 200 and ready.json() == ROUTED
    assert refused.status_code == 401  # the MCP endpoint still wants a token
    for text in (*NEVER, upstream, port_of(upstream), *TOKENS, *TOKENS.values(), str(tokens)):
        assert text not in health.text and text not in ready.text, text
