"""The gateway bench's processes, each in its own process on 127.0.0.1, and what they cost.

- the upstream: the official Python SDK server (``sdk_upstream.py``);
- nginx as a byte relay: a plain reverse proxy (HTTP/1.1 keep-alive upstream, no buffering,
  no compression), Debian's ``nginx-light`` with a configuration written here; absent, the
  bench skips naming it (``SSEWIRE_REQUIRE_NGINX=1`` fails instead);
- the gateway: ``python -m ssewire gateway --upstream ...``, its in-memory store.

A process's cost is read from ``/proc``: CPU as the time its threads ran
(``/proc/PID/task/*/schedstat``, user and system alike), peak memory as ``VmHWM``
(``/proc/PID/status``). For nginx
the process that relays is its one worker, the master's child.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from clients import HERE, free_port, started

NGINX_SWITCH = "SSEWIRE_REQUIRE_NGINX"

NGINX_CONFIG = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 16m;
    upstream mcp {{
        server 127.0.0.1:{upstream};
        keepalive 128;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


@dataclass
class Relay:
    """One way to the upstream: its MCP URL, and the process whose cost is counted."""

    name: str
    url: str
    pid: int | None  # None: nothing between the client and the upstream

    def cpu(self) -> float:
        """Seconds the process's threads have run on a CPU so far (``schedstat``, in
        nanoseconds: the clock-tick counts of ``stat`` are too coarse for one message)."""
        if self.pid is None:
            return 0.0
        return (
            sum(int(p.read_text().split()[0]) for p in Path(f"/proc/{self.pid}/task").glob("*/schedstat"))
            / 1e9
        )

    def peak(self) -> int:
        """The process's resident high-water mark, in bytes."""
        if self.pid is None:
            return 0
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0


@contextlib.contextmanager
def upstream() -> Iterator[Relay]:
    """The SDK server (its own cost is ``cpu``); the client goes to it "direct"."""
    port = free_port()
    with started([sys.executable, str(HERE / "sdk_upstream.py"), str(port)], port) as (process, url):
        yield Relay("upstream", url, process.pid)


def nginx_binary() -> str:
    found = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if found is None:
        text = "nginx not found: install Debian's nginx-light (apt-get install nginx-light)"
        if os.environ.get(NGINX_SWITCH) == "1":
            pytest.fail(f"{NGINX_SWITCH}=1 but {text}")
        pytest.skip(text)
    return found


@contextlib.contextmanager
def nginx(upstream_url: str) -> Iterator[Relay]:
    upstream_port = int(upstream_url.split(":")[2].split("/")[0])
    with tempfile.TemporaryDirectory(prefix="ssewire-bench-nginx-") as tmp:
        port = free_port()
        config = Path(tmp, "nginx.conf")
        config.write_text(NGINX_CONFIG.format(tmp=tmp, upstream=upstream_port, port=port))
        argv = [nginx_binary(), "-p", tmp, "-c", str(config), "-e", f"{tmp}/error.log"]
        with started(argv, port) as (process, url):
            yield Relay("nginx", url, _worker(process.pid))


@contextlib.contextmanager
def gateway(upstream_url: str) -> Iterator[Relay]:
    port = free_port()
    argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", upstream_url, "--port", str(port)]
    with started([*argv, "--keepalive", "60"], port) as (process, url):
        yield Relay("gateway", url, process.pid)


def _worker(master: int) -> int:
    """nginx's one worker: the master's child (it starts within the master's first second)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise RuntimeError("nginx started no worker")
