"""Hostile clients against ``ssewire serve`` in its own process, and its memory meanwhile.

Peak memory is the child's VmHWM (/proc/<pid>/status, Linux): the most resident memory it
ever had, read after each attack. Used by ``test_server.py`` (a bound asserted, generous)
and ``scripts/server_memory.py`` (the figures of docs/probe.md).
"""

from __future__ import annotations

import contextlib
import select
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import free_port, stop

MIB = 1 << 20
BOTH = "application/json, text/event-stream"
START_DEADLINE = 30.0


@dataclass
class Served:
    url: str  # the MCP endpoint
    port: int
    pid: int


@contextlib.contextmanager
def serve(*options: str) -> Iterator[Served]:
    """``ssewire serve`` on 127.0.0.1 with ``options``, in its own process; stopped after."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ssewire", "serve", "--port", str(port), *options],
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + START_DEADLINE
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ssewire serve did not start")
            try:
                httpx.options(url, timeout=1.0)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield Served(url, port, process.pid)
    finally:
        stop(process)


def peak_memory(pid: int) -> int:
    """The process's peak resident memory so far, in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


def initialize(client: httpx.Client, url: str, ident: int = 0) -> httpx.Response:
    return client.post(url, json={**INITIALIZE, "id": ident}, headers={"accept": BOTH})


@dataclass
class BodyOutcome:
    status: int | None  # the answer's status, None when none came
    sent: int  # body bytes the server took before it stopped reading or closed
    how: str  # how the send ended: "answered", "closed", "stalled" or "sent all"
    seconds: float


def endless_body(port: int, total: int, *, chunk: int = MIB, stall: float = 2.0) -> BodyOutcome:
    """POST ``total`` bytes as a chunked body, ``chunk`` bytes at a time, until the server
    answers, closes, or stops reading for ``stall`` seconds; then read its status line."""
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {BOTH}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    piece = f"{chunk:x}\r\n".encode() + b" " * chunk + b"\r\n"
    started = time.monotonic()
    sent = 0
    how = "sent all"
    with socket.create_connection(("127.0.0.1", port), timeout=stall) as sock:
        sock.sendall(head)
        while sent < total:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                how = "answered"
                break
            try:
                sock.sendall(piece)
            except TimeoutError:
                how = "stalled"
                break
            except OSError:  # reset or broken pipe: the server closed
                how = "closed"
                break
            sent += chunk
        status = _status(sock, stall)
    return BodyOutcome(status, sent, how, time.monotonic() - started)


def _status(sock: socket.socket, wait: float) -> int | None:
    sock.settimeout(wait)
    received = b""
    with contextlib.suppress(OSError):
        while b"\r\n" not in received and len(received) < 1024:
            data = sock.recv(1024)
            if not data:
                break
            received += data
    parts = received.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def initialize_flood(url: str, count: int) -> Counter[int]:
    """``count`` initializes, one after another on one connection; statuses counted."""
    statuses: Counter[int] = Counter()
    with httpx.Client(timeout=10.0) as client:
        for ident in range(count):
            statuses[initialize(client, url, ident).status_code] += 1
    return statuses


def _tool_call(ident: int, name: str, arguments: dict[str, object]) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def big_answers(url: str, count: int, size: int) -> Counter[int]:
    """``count`` calls of the ``big`` tool, ``size`` bytes each, on one session, each answer
    read to its end: every answer is kept in the server's store for resumption."""
    statuses: Counter[int] = Counter()
    with httpx.Client(timeout=60.0) as client:
        session = initialize(client, url).headers["mcp-session-id"]
        headers = {"accept": BOTH, "mcp-session-id": session}
        for ident in range(count):
            call = _tool_call(ident, "big", {"size": size})
            statuses[client.post(url, json=call, headers=headers).status_code] += 1
    return statuses


def busy_calls(url: str, count: int) -> Counter[str]:
    """``count`` long countdowns started and left (their readers go at once): how many the
    server started ("started") and how many it refused ("busy")."""
    outcomes: Counter[str] = Counter()
    with httpx.Client(timeout=10.0) as client:
        session = initialize(client, url).headers["mcp-session-id"]
        headers = {"accept": BOTH, "mcp-session-id": session}
        for ident in range(count):
            call = _tool_call(ident, "countdown", {"count": 10_000, "delay": 5, "size": 10})
            with client.stream("POST", url, json=call, headers=headers) as answer:
                kind = answer.headers.get("content-type", "")
                body = answer.read() if kind.startswith("application/json") else b""
            outcomes["busy" if b'"code": -32000' in body else "started"] += 1
    return outcomes
