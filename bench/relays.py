"""The gateway bench's processes, each in its own process on 127.0.0.1, and what they cost.

- the upstream: the official Python SDK server (``sdk_upstream.py``), or, where the
  upstream must cost little (G4), ``cheap_server.py``;
- nginx as a byte relay: a plain reverse proxy (HTTP/1.1 keep-alive upstream, no buffering,
  no compression), Debian's ``nginx-light`` with a configuration written here; absent, the
  bench skips naming it (``SSEWIRE_REQUIRE_NGINX=1`` fails instead);
- the gateway: ``python -m ssewire gateway --upstream ...``, its in-memory store.

A process's cost is read from ``/proc``: CPU as the time its threads ran
(``/proc/PID/task/*/schedstat``, user and system alike), peak memory as ``VmHWM``
(``/proc/PID/status``). For nginx
the process that relays is its one worker, the master's child. A `Window` reads, over a
stretch of load, each process's CPU and how busy each core was (``/proc/stat``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
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
        return 0.0 if self.pid is None else cpu_seconds(self.pid)

    def peak(self) -> int:
        """The process's resident high-water mark, in bytes."""
        if self.pid is None:
            return 0
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0


def cpu_seconds(pid: int) -> float:
    """Seconds the process's threads have run on a CPU so far (``schedstat``, in
    nanoseconds: the clock-tick counts of ``stat`` are too coarse for one message)."""
    return sum(int(p.read_text().split()[0]) for p in Path(f"/proc/{pid}/task").glob("*/schedstat")) / 1e9


TICK = os.sysconf("SC_CLK_TCK")  # /proc's clock ticks a second


def process_cpu_seconds(pid: int) -> float:
    """Seconds the process has run, its ended threads included (``/proc/PID/stat``, in
    clock ticks: for windows of seconds, and for a server whose threads come and go, which
    ``schedstat``'s per-thread sums would lose)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def core_times() -> dict[int, tuple[int, int, int]]:
    """Each core's clock ticks so far (``/proc/stat``): (busy, all, tasks). Busy is
    anything that ran, ours or another tenant's, interrupts and the time the hypervisor
    took (steal) included; tasks is what processes ran, user and system."""
    cores = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(value) for value in values[:8]]  # user nice system idle iowait irq softirq steal
            cores[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks), sum(ticks[:3]))
    return cores


@dataclass
class _Reading:
    wall: float
    relay: float
    upstream: float
    client: float
    cores: dict[int, tuple[int, int, int]]


class Window:
    """A stretch of load: its wall time, what the relay, the upstream and this process
    ran meanwhile, the share of it each core was busy, and what other work ran: the
    processes' time on every core beyond ours, so a run disturbed by another tenant says so."""

    def __init__(self, relay: Relay, upstream: Relay) -> None:
        self.relay, self.upstream = relay, upstream
        self.start = self._read()

    def _read(self) -> _Reading:
        assert self.upstream.pid is not None
        return _Reading(
            time.perf_counter(),
            self.relay.cpu(),
            process_cpu_seconds(self.upstream.pid),
            time.process_time(),
            core_times(),
        )

    def close(self, ours: float = 0.0) -> dict[str, float]:
        """Seconds of each (``wall``, ``relay``, ``upstream``, ``client``: this process);
        ``core0``, ``core1``...: the share of the window each core was busy; ``others``:
        the cores' task time beyond ours (``ours``: the seconds of any other process of
        the bench), as a share of one core over the window."""
        end, start = self._read(), self.start
        spent = {
            "wall": end.wall - start.wall,
            "relay": end.relay - start.relay,
            "upstream": end.upstream - start.upstream,
            "client": end.client - start.client,
        }
        tasks = 0
        for core, (busy, total, ran) in end.cores.items():
            busy_before, total_before, ran_before = start.cores[core]
            spent[f"core{core}"] = (busy - busy_before) / max(1, total - total_before)
            tasks += ran - ran_before
        ours += spent["relay"] + spent["upstream"] + spent["client"]
        spent["others"] = max(0.0, tasks / TICK - ours) / spent["wall"]
        return spent


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of the process onto ``cores`` (a thread started later inherits its
    starter's cores, so the process stays there)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task.name), cores)


@contextlib.contextmanager
def upstream() -> Iterator[Relay]:
    """The SDK server (its own cost is ``cpu``); the client goes to it "direct"."""
    port = free_port()
    with started([sys.executable, str(HERE / "sdk_upstream.py"), str(port)], port) as (process, url):
        yield Relay("upstream", url, process.pid)


@contextlib.contextmanager
def cheap_upstream() -> Iterator[Relay]:
    """``cheap_server.py``, whose answers are pre-rendered: an upstream that costs little."""
    port = free_port()
    argv = [sys.executable, str(HERE / "cheap_server.py"), "--port", str(port)]
    with started(argv, port) as (process, url):
        yield Relay("upstream", url, process.pid)


def _find_nginx() -> str | None:
    return shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))


def nginx_binary() -> str:
    found = _find_nginx()
    if found is None:
        text = "nginx not found: install Debian's nginx-light (apt-get install nginx-light)"
        if os.environ.get(NGINX_SWITCH) == "1":
            pytest.fail(f"{NGINX_SWITCH}=1 but {text}")
        pytest.skip(text)
    return found


def nginx_version() -> str:
    found = _find_nginx()
    if found is None:
        return "not installed"
    done = subprocess.run([found, "-v"], capture_output=True, text=True, timeout=10)
    return done.stderr.strip().rsplit("/", 1)[-1]  # "nginx version: nginx/1.22.1"


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
def gateway(upstream_url: str, under: tuple[str, ...] = (), startup: float = 30.0) -> Iterator[Relay]:
    """The gateway; ``under``: a command it runs under (callgrind, for `count_instructions`),
    given ``startup`` seconds to listen."""
    port = free_port()
    argv = [
        *under,
        sys.executable,
        "-m",
        "ssewire",
        "gateway",
        "--upstream",
        upstream_url,
        "--port",
        str(port),
    ]
    # no access lines, as nginx's `access_log off` above and the upstream's (a log line per
    # call is the operator's choice, on both)
    with started([*argv, "--keepalive", "60", "--access-log", "off"], port, startup) as (process, url):
        yield Relay("gateway", url, process.pid)


@contextlib.contextmanager
def floor_relay(upstream_url: str) -> Iterator[Relay]:
    """``floor_relay.py``: the least a relay in Python costs a call (G3's floor)."""
    upstream_port = upstream_url.split(":")[2].split("/")[0]
    port = free_port()
    argv = [sys.executable, str(HERE / "floor_relay.py"), str(port), upstream_port]
    with started(argv, port) as (process, url):
        yield Relay("floor: Python relay", url, process.pid)


def _worker(master: int) -> int:
    """nginx's one worker: the master's child (it starts within the master's first second)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise RuntimeError("nginx started no worker")
