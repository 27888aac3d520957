"""Child processes the tests start and stop: one idiom for a server that listens on a
127.0.0.1 port (started, waited for until it accepts, stopped with SIGTERM then SIGKILL)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from typing import Any


def free_port() -> int:
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
