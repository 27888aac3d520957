"""Child processes the tests start and stop: one idiom for a server that listens on a
127.0.0.1 port (started, waited for until it accepts, stopped with SIGTERM then SIGKILL),
and the one ``free_port`` for servers that must be told their port before they start.

A port found free, then bound by a server a moment later, can be taken in between; most
often by an outgoing connection, whose local port the kernel picks from the same ephemeral
range as ``bind(port 0)`` does, and the more so when several test processes (pytest-xdist
workers, another checkout's run) connect at once. So each test process takes a block of
ports of its own below the ephemeral range, held by an exclusive lock on a file for as long
as the process lives, and hands out its ports in turn, each checked free when handed out.
Where no block can be had (no ``fcntl``, every block held, no room below the range), a port
the kernel picks is used, as before.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pathlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

PORTS_FROM = 10000  # the lowest port handed out: well above the services' usual ports
BLOCK = 500  # ports a test process holds (one run of the suite takes about 100 in one process)
LOCKS = pathlib.Path(tempfile.gettempdir()) / "ssewire-test-ports"


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default 32768 elsewhere)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768


class _Block:
    """This process's block of ports, taken on first use, held until the process exits."""

    def __init__(self) -> None:
        self.owner: int | None = None  # the pid that took it (a forked child takes its own)
        self.handle: IO[bytes] | None = None
        self.ports: Iterator[int] | None = None

    def take(self) -> Iterator[int] | None:
        if self.owner == os.getpid():
            return self.ports
        self.owner, self.handle, self.ports = os.getpid(), None, None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: the kernel's pick
            return None
        with contextlib.suppress(OSError):
            LOCKS.mkdir(mode=0o777, exist_ok=True)
        for first in range(PORTS_FROM, _ephemeral_low() - BLOCK + 1, BLOCK):
            try:
                handle = open(LOCKS / f"{first}.lock", "a+b")  # noqa: SIM115 - held for the process's life
            except OSError:
                continue
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # another process holds this block
                handle.close()
                continue
            self.handle, self.ports = handle, itertools.cycle(range(first, first + BLOCK))
            return self.ports
        return None


_block = _Block()


def _bindable(port: int) -> bool:
    """Nothing listens on ``port`` and no connection of it lingers (no SO_REUSEADDR here)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A 127.0.0.1 port free now, from this process's block: no other test process is
    handed it, and the kernel gives it to no outgoing connection."""
    ports = _block.take()
    if ports is not None:
        for _ in range(BLOCK):
            port = next(ports)
            if _bindable(port):
                return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def stop(process: subprocess.Popen[Any], within: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``within`` seconds; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=within)


@contextlib.contextmanager
def listening(
    argv: Sequence[str], port: int, *, name: str, within: float = 20.0, **popen: Any
) -> Iterator[subprocess.Popen[Any]]:
    """Start ``argv``; yield the process once ``port`` accepts connections; stop it after."""
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.PIPE)
    process = subprocess.Popen(list(argv), **popen)
    try:
        deadline = time.monotonic() + within
        while not accepts(port):
            if process.poll() is not None or time.monotonic() > deadline:
                said = (
                    process.stderr.read().decode(errors="replace")[-500:]
                    if process.stderr and process.poll() is not None
                    else ""
                )
                raise RuntimeError(
                    f"{name} did not start on 127.0.0.1:{port} within {within:g} s: {said.strip()}"
                )
            time.sleep(0.05)
        yield process
    finally:
        stop(process)
