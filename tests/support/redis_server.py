"""redis-server for the replica tests: Debian's ``redis-server``, found on the PATH (or
/usr/bin), started on 127.0.0.1 with a port of its own and no persistence, stopped by the
test. Absent, the test skips naming the package; ``SSEWIRE_REQUIRE_REDIS=1`` (set by
.ci/run after installing it) turns the skip into a failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from tests.support.processes import accepts, free_port, listening, stop
from tests.support.provision import unavailable

SWITCH = "SSEWIRE_REQUIRE_REDIS"


def redis_binary() -> str:
    found = shutil.which("redis-server", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/bin"]))
    if found is None:
        unavailable(
            "redis-server not found: install Debian's redis-server (apt-get install redis-server)", SWITCH
        )
    return found


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server; yields its ``redis://`` URL."""
    binary = redis_binary()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="ssewire-redis-") as tmp:
        argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
        with listening([*argv, "--dir", tmp, "--protected-mode", "yes"], port, name="redis-server"):
            yield f"redis://127.0.0.1:{port}/0"


class RedisControl:
    """A redis-server of a test's own, with the faults the store tests put on it: writes
    refused (maxmemory), the process stalled (SIGSTOP), connections cut (CLIENT KILL), the
    server restarted on the same port. Each fault is undone by the test (or at its end)."""

    def __init__(self, binary: str, port: int, directory: str) -> None:
        self.port, self.url = port, f"redis://127.0.0.1:{port}/0"
        self.argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
        self.argv += ["--dir", directory, "--protected-mode", "yes"]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, within: float = 20.0) -> None:
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + within
        while not accepts(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)  # a stalled one cannot stop
            stop(self.process)
            self.process = None

    def restart(self) -> None:
        """Stopped, then started on the same port (nothing kept: no persistence)."""
        self.stop()
        self.start()

    def _command(self, *args: str) -> Any:
        import redis

        with redis.Redis(port=self.port, socket_timeout=5) as client:
            return client.execute_command(*args)

    def refuse_writes(self) -> None:
        """Every write refused (``OOM command not allowed``); reads still answered."""
        self._command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self._command("CONFIG", "SET", "maxmemory", "1")

    def accept_writes(self) -> None:
        self._command("CONFIG", "SET", "maxmemory", "0")

    def pause(self) -> None:
        """The server stalls (SIGSTOP): connections open, nothing answered."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def blip(self) -> int:
        """Every client connection cut (``CLIENT KILL TYPE normal``); how many."""
        return int(self._command("CLIENT", "KILL", "TYPE", "normal"))

    def key_names(self, pattern: str = "*") -> list[str]:
        import redis

        with redis.Redis(port=self.port, socket_timeout=5) as client:
            return [key.decode() for key in client.keys(pattern)]


@contextlib.contextmanager
def controlled_redis() -> Iterator[RedisControl]:
    """A fresh redis-server the test may fault (`RedisControl`), stopped after it."""
    binary = redis_binary()
    with tempfile.TemporaryDirectory(prefix="ssewire-redis-") as tmp:
        control = RedisControl(binary, free_port(), tmp)
        control.start()
        try:
            yield control
        finally:
            control.stop()
