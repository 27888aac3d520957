"""A warm process that forks one child per command, for a peer that starts many short
Python processes of one kind: the conformance suite starts its client once a scenario,
dozens at once, and each of them imported the MCP SDK's OAuth provider again (half a
second of CPU apiece, most of what a client run cost the suite).

Each child is still a process of its own, as the peer asked for: its own pid, argv,
environment, directory, standard streams and exit status, forked from a server that
imported the module (and its ``PRELOAD``) once and never ran an event loop. The peer
runs `forking`'s command: ``forkshim.py`` (the standard library only, no site) hands its
argv, environment, directory and standard streams to the server and exits with the child's
status, passing SIGTERM and SIGINT on to it.

``python -m tests.support.forkserver SOCKET MODULE``: the server (``MODULE.main(argv)``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from typing import Any

from tests.support import ROOT

SHIM = ROOT / "tests" / "support" / "forkshim.py"
LIFETIME = 1800.0  # seconds a server serves at most (its test stops it long before)
READY_TIMEOUT = 60.0  # seconds the server may take to import what it preloads
HEADER = struct.Struct("!I")  # the request's length, sent with the three descriptors


@contextlib.contextmanager
def forking(module: str) -> Iterator[list[str]]:
    """A fork server for ``module``: the command that runs ``module.main(argv)`` once, in a
    child of its own (arguments after it are the child's argv, after ``module``'s name)."""
    folder = tempfile.mkdtemp(prefix="ssewire-fork-")  # (no spaces: the suite splits commands at them)
    path = os.path.join(folder, "socket")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.forkserver", path, module],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        readable, _, _ = select.select([server.stdout], [], [], READY_TIMEOUT)
        line = server.stdout.readline() if readable else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the fork server for {module} did not start (exit {server.poll()})")
        yield [sys.executable, "-S", str(SHIM), path, module]
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = conn.recv(size - len(data))
        if not piece:
            raise ConnectionError("the shim left before its request was whole")
        data += piece
    return data


def _child(module: Any, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the command's process, run it, exit with its status."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = request["argv"]
        result = module.main(request["argv"])
        code = result if isinstance(result, int) else 0
    except SystemExit as stopped:
        code = stopped.code if isinstance(stopped.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(path: str, name: str) -> None:
    module = importlib.import_module(name)
    for preloaded in getattr(module, "PRELOAD", ()):
        with contextlib.suppress(ImportError):  # (an extra not installed: its scenarios skip)
            importlib.import_module(preloaded)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    parent, ends = os.getppid(), time.monotonic() + LIFETIME
    waiting: dict[int, socket.socket] = {}  # children by pid: the shim told their status
    while time.monotonic() < ends and os.getppid() == parent:
        readable, _, _ = select.select([listener], [], [], 0.02)
        if readable:
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
            request = json.loads(_read(conn, HEADER.unpack(message)[0]))
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in waiting.values():
                    other.close()
                conn.close()
                _child(module, request, fds)
            for fd in fds:
                os.close(fd)
            conn.sendall(b"%d\n" % pid)
            waiting[pid] = conn
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = waiting.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
