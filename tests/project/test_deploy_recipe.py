"""The deployment recipe of docs/deploy.md, run as written.

Its titled blocks are read from the page: ``gateway.toml``, ``tokens.txt`` (the commands
that make it), ``replicas`` (the two command lines) and ``nginx.conf`` (the part of nginx's
``http`` block). Only the ports change (each one the page shows gets a free one) and the
``ssewire`` program is this environment's. Then: a real redis-server, the reference server
as the upstream, both replicas, nginx with the page's configuration inside a main file of
the test's own (pid, logs and temporary folders in the test's folder); and the page's
claims checked through nginx: a call with a token of the recipe is served, one without is
refused 401, ``/readyz`` answers 200, and the rolling restart (SIGTERM one replica, wait for
its exit, start it again, then the other) leaves every call served, the calls in flight
included. nginx or redis-server missing skips, naming the package (a failure under
SSEWIRE_REQUIRE_NGINX / SSEWIRE_REQUIRE_REDIS, as .ci/run sets them).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from ssewire.mcp.client import Client, RPCError
from tests.support import ROOT
from tests.support.mcp_helpers import INITIALIZE
from tests.support.nginx import nginx_binary
from tests.support.processes import accepts, free_port, listening, stop
from tests.support.redis_server import redis_binary, redis_server

# one worker (xdist_group): the module's deployment (nginx, Redis, two replicas, an upstream)
# is started once
pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("deploy_recipe")]

PAGE = ROOT / "docs" / "deploy.md"
HOST = "mcp.example.com"  # the recipe's public name (--allow-host, server_name)
ROUTE = "/servers/main/mcp"  # the route of the recipe's gateway.toml
PORTS = ("8080", "8081", "8082", "6379", "9000", "9001")  # nginx, the replicas, Redis, the upstreams
DRAIN = 30.0  # the recipe's --drain
SSEWIRE = str(pathlib.Path(sys.executable).with_name("ssewire"))  # the script pip installed

# the main file around the recipe's part of the http block, as nginx's own would hold it
MAIN = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/conf.d/*.conf;
}}
"""


def block(title: str) -> str:
    """The text of the page's fenced block titled ``title`` (exactly one)."""
    found = re.findall(rf'^```\w+ title="{re.escape(title)}"\n(.*?)^```', PAGE.read_text(), re.S | re.M)
    assert len(found) == 1, f"docs/deploy.md: {len(found)} blocks titled {title!r}"
    return str(found[0])


def commands(text: str) -> list[str]:
    """A shell block's commands, continued lines joined."""
    return [line.strip() for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def ported(text: str, ports: dict[str, int]) -> str:
    """``text`` with each port of the page replaced by the test's."""
    return re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda m: str(ports[m.group(1)]), text)


@dataclass
class Deployment:
    folder: pathlib.Path
    ports: dict[str, int]
    argv: dict[int, list[str]]  # a replica's port -> its command line
    tokens: dict[str, str]  # principal -> its token
    replicas: dict[int, subprocess.Popen[Any]] = field(default_factory=dict)
    logs: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports['8080']}{ROUTE}"

    def headers(self, principal: str | None = "alice") -> dict[str, str]:
        given = {"Host": HOST}
        if principal is not None:
            given["Authorization"] = f"Bearer {self.tokens[principal]}"
        return given

    @contextlib.contextmanager
    def replica(self, port: int) -> Iterator[subprocess.Popen[Any]]:
        log = self.logs.enter_context((self.folder / f"replica-{port}.log").open("ab"))
        with listening(self.argv[port], port, name="a replica", cwd=self.folder, stderr=log) as process:
            self.replicas[port] = process
            yield process

    def start(self, port: int) -> None:
        """A replica started (again) with its command line, once its /readyz answers 200."""
        process = subprocess.Popen(
            self.argv[port],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=self.logs.enter_context((self.folder / f"replica-{port}.log").open("ab")),
        )
        self.replicas[port] = process
        deadline = time.monotonic() + 20
        while ready(port) != 200:
            assert process.poll() is None, (process.returncode, self.log(port))
            assert time.monotonic() < deadline, self.log(port)
            time.sleep(0.1)

    def log(self, port: int) -> str:
        return (self.folder / f"replica-{port}.log").read_text(errors="replace")[-3000:]


def ready(port: int) -> int | None:
    """The status of a replica's /readyz (None: nothing answers there)."""
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code
    except httpx.TransportError:
        return None


@contextlib.contextmanager
def nginx(folder: pathlib.Path, conf: str, port: int) -> Iterator[None]:
    binary = nginx_binary()
    (folder / "conf.d").mkdir()
    (folder / "conf.d" / "ssewire.conf").write_text(conf)
    (folder / "nginx-main.conf").write_text(MAIN.format(tmp=folder))
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-c", str(folder / "nginx-main.conf"), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not accepts(port):
            if process.poll() is not None or time.monotonic() > deadline:
                log = folder / "error.log"
                raise RuntimeError(
                    f"nginx did not start: {log.read_text() if log.exists() else process.returncode}"
                )
            time.sleep(0.05)
        yield
    finally:
        stop(process)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Iterator[Deployment]:
    nginx_binary(), redis_binary()  # skip (or fail under the switches) before starting anything
    folder = tmp_path_factory.mktemp("deploy")
    with redis_server() as redis_url:
        ports = {"6379": int(redis_url.rsplit(":", 1)[1].split("/")[0])}
        ports.update({port: free_port() for port in PORTS if port != "6379"})
        (folder / "gateway.toml").write_text(ported(block("gateway.toml"), ports))
        tokens = {}
        for line in commands(block("tokens.txt")):
            made = subprocess.run(
                ["bash", "-c", line.replace("ssewire ", shlex.quote(SSEWIRE) + " ", 1)],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert made.returncode == 0, made.stderr
            tokens[shlex.split(line)[2]] = made.stderr.strip().splitlines()[-1]  # printed once, on stderr
        argv = {}
        for line in commands(ported(block("replicas"), ports)):
            words = shlex.split(line)
            assert words[:2] == ["ssewire", "gateway"], line
            argv[int(words[words.index("--port") + 1])] = [SSEWIRE, *words[1:]]
        assert sorted(argv) == sorted([ports["8081"], ports["8082"]]), argv
        upstream = [SSEWIRE, "serve", "--port", str(ports["9000"]), "--keepalive", "1"]
        search = [SSEWIRE, "serve", "--port", str(ports["9001"]), "--keepalive", "1"]
        run = Deployment(folder, ports, argv, tokens)
        with (
            run.logs,
            listening(upstream, ports["9000"], name="the upstream (ssewire serve)"),
            listening(search, ports["9001"], name="the search upstream (ssewire serve)"),
            run.replica(ports["8081"]),
            run.replica(ports["8082"]),
            nginx(folder, ported(block("nginx.conf"), ports), ports["8080"]),
        ):
            yield run
            for process in run.replicas.values():  # the ones the rolling restart started
                stop(process)


async def _connected(run: Deployment, http: httpx.AsyncClient) -> Client:
    """A session through nginx. A replica that drains answers a new session 503 (Retry-After:
    1): like a client that honours it, this one opens it again, and lands on the other."""
    deadline = time.monotonic() + 10
    while True:
        client = Client(run.url, http=http, listen=False, timeout=30)
        try:
            await client.connect()
            return client
        except RPCError as refused:
            await client.close(end_session=False)
            if "stopping" not in str(refused) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)


def _http(run: Deployment) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers=run.headers(), timeout=httpx.Timeout(30, read=None))


async def _echo(run: Deployment, text: str, tool: str = "echo") -> str:
    async with _http(run) as http:
        client = await _connected(run, http)
        try:
            result = await client.call_tool(tool, {"text": text})
        finally:
            await client.close()
    return str(result["content"][0]["text"])


def call(run: Deployment, text: str, tool: str = "echo") -> str:
    return asyncio.run(_echo(run, text, tool))


async def _in_flight(run: Deployment, progress: list[float], stopping: threading.Event) -> dict[str, Any]:
    """A countdown call through nginx (8 progress notifications 0.25 s apart), and once the
    replica is told to stop, an echo on the same session: both answered."""
    async with _http(run) as http:
        client = await _connected(run, http)
        try:
            countdown = asyncio.ensure_future(
                client.call_tool(
                    "countdown",
                    {"count": 8, "delay": 0.25, "size": 64},
                    on_progress=lambda note: progress.append(note["progress"]),
                )
            )
            await asyncio.to_thread(stopping.wait, 20)
            echoed = await client.call_tool("echo", {"text": "same session"})
            return {"countdown": await countdown, "echo": echoed["content"][0]["text"]}
        finally:
            await client.close()


def test_a_call_with_a_token_of_the_recipe_is_served_through_nginx(deployment):
    assert call(deployment, "through nginx") == "through nginx"
    bob = {**deployment.headers("bob"), "Accept": "application/json, text/event-stream"}
    assert httpx.post(deployment.url, json=INITIALIZE, headers=bob, timeout=10).status_code == 200


def test_the_virtual_servers_other_member_is_served_under_its_prefix(deployment):
    assert call(deployment, "searched", "search__echo") == "searched"


def test_without_a_token_the_request_is_refused_401(deployment):
    answer = httpx.post(
        deployment.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={**deployment.headers(None), "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    assert answer.status_code == 401, answer.text
    assert answer.headers["www-authenticate"].lower().startswith("bearer")
    wrong = {**deployment.headers(None), "Authorization": "Bearer not-a-token-of-the-file"}
    assert httpx.post(deployment.url, json={}, headers=wrong, timeout=10).status_code == 401


def test_readiness_through_nginx_and_at_each_replica(deployment):
    base = f"http://127.0.0.1:{deployment.ports['8080']}"
    answer = httpx.get(f"{base}/readyz", headers={"Host": HOST}, timeout=10)
    assert (answer.status_code, answer.json()) == (200, {"status": "ready", "generation": 1})
    assert httpx.get(f"{base}/healthz", headers={"Host": HOST}, timeout=10).json() == {"status": "ok"}
    assert [ready(deployment.ports[port]) for port in ("8081", "8082")] == [200, 200]


def test_a_rolling_restart_leaves_every_call_served(deployment):
    """Each replica in turn, as the page says: SIGTERM, its exit awaited (code 0, within the
    drain deadline and a second), started again and ready, then the next. A call is in
    flight through nginx at each SIGTERM (8 progress notifications 0.25 s apart), and calls
    go on all along: each is served, whole."""
    for port in (deployment.ports["8081"], deployment.ports["8082"]):
        process = deployment.replicas[port]
        progress: list[float] = []
        outcome: dict[str, Any] = {}
        stopping = threading.Event()

        def in_flight(progress=progress, outcome=outcome, stopping=stopping) -> None:
            try:
                outcome.update(asyncio.run(_in_flight(deployment, progress, stopping)))
            except Exception as failed:  # told below, with what the replica logged
                outcome["error"] = repr(failed)

        flight = threading.Thread(target=in_flight)
        flight.start()
        deadline = time.monotonic() + 10
        while not progress and time.monotonic() < deadline and flight.is_alive():
            time.sleep(0.02)
        assert progress, outcome
        process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        stopping.set()
        while ready(port) == 200:  # draining at once (503), or already gone (no answer)
            assert time.monotonic() - stopped < 1.0, "still ready 1 s after SIGTERM"
            time.sleep(0.02)
        assert call(deployment, f"while {port} drains") == f"while {port} drains"  # a new session
        process.wait(timeout=DRAIN + 1)
        assert process.returncode == 0, deployment.log(port)
        assert time.monotonic() - stopped < DRAIN + 1
        assert call(deployment, f"while {port} is down") == f"while {port} is down"
        flight.join(timeout=60)
        assert not flight.is_alive()
        assert "error" not in outcome, (outcome, deployment.log(port))
        assert progress == [1, 2, 3, 4, 5, 6, 7, 8], progress  # each once, in order
        assert outcome["countdown"]["content"] and outcome["echo"] == "same session", outcome
        deployment.start(port)
        assert call(deployment, f"after {port}") == f"after {port}"
    assert [ready(deployment.ports[port]) for port in ("8081", "8082")] == [200, 200]


def test_the_logs_are_json_lines_without_a_token(deployment):
    for port in (deployment.ports["8081"], deployment.ports["8082"]):
        lines = (deployment.folder / f"replica-{port}.log").read_text().splitlines()
        logged = [json.loads(line) for line in lines if not line.startswith("ssewire gateway: ")]
        assert any(entry["logger"] == "ssewire.mcp.gateway.access" for entry in logged), lines[:5]
        text = "\n".join(lines)
        assert not any(token in text for token in deployment.tokens.values())
