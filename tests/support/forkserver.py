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
import signal
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
from tests.support.processes import stop

SHIM = ROOT / "tests" / "support" / "forkshim.py"
LIFETIME = 1800.0  # seconds a server serves at most (its test stops it long before)
READY_TIMEOUT = 60.0  # seconds the server may take to import what it preloads
HEADER = struct.Struct("!I")  # the request's length, sent with the three descriptors
TIMEOUT = 10.0  # seconds a shim may take to send its request


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
        stop(server)
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
    """In the forked child: become the command's process, run it, exit with its status
    (as the interpreter would: None is 0, another object is printed and is 1)."""
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
        code = stopped.code if isinstance(stopped.code, int) else 0 if stopped.code is None else 1
        if not isinstance(stopped.code, int) and stopped.code is not None:
            print(stopped.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A shim's request and its three descriptors (closed here if the request is not whole)."""
    message, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    try:
        if len(fds) != 3 or len(message) != HEADER.size:
            raise ConnectionError("the shim sent no descriptors")
        return json.loads(_read(conn, HEADER.unpack(message)[0])), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def serve(path: str, name: str) -> None:
    """Fork a child for each shim that connects; tell the shim its child's pid, then its
    status. A shim that goes away first (killed) takes its child with it: nothing is left
    running with the peer's streams. A shim that sends no whole request within `TIMEOUT`
    is dropped; none stops the server."""
    module = importlib.import_module(name)
    for preloaded in getattr(module, "PRELOAD", ()):
        with contextlib.suppress(ImportError):  # (an extra not installed: its scenarios skip)
            importlib.import_module(preloaded)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    parent, ends = os.getppid(), time.monotonic() + LIFETIME
    children: dict[socket.socket, int] = {}  # each running child, by its shim's connection
    while time.monotonic() < ends and os.getppid() == parent:
        readable, _, _ = select.select([listener, *children], [], [], 0.02)
        for ready in readable:
            if ready is listener:
                conn, _ = listener.accept()
                conn.settimeout(TIMEOUT)
                try:
                    request, fds = _request(conn)
                except (OSError, ValueError, struct.error):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    for other in children:
                        other.close()
                    conn.close()
                    _child(module, request, fds)
                for fd in fds:
                    os.close(fd)
                children[conn] = pid
                try:
                    conn.sendall(b"%d\n" % pid)
                except OSError:  # the shim is gone already
                    _gone(children, conn)
            elif ready in children:  # a shim says nothing more: it went away
                _gone(children, ready)
        for conn, pid in list(children.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                del children[conn]
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                conn.close()


def _gone(children: dict[socket.socket, int], conn: socket.socket) -> None:
    """The shim of a running child went away: the child goes too (and is reaped)."""
    pid = children.pop(conn)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
