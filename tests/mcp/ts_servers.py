"""The official MCP TypeScript SDK server (tests/ts_server/server.mjs, its npm packages
pinned in package-lock.json and installed by .ci/run with ``npm ci``) as the tests start it:
through node, on 127.0.0.1.

A test module calls :func:`require_node` at import: it skips when node is missing, unless
SSEWIRE_REQUIRE_NODE=1 (set by .ci/run), which turns that skip into a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import selectors
import shutil
import subprocess
from collections.abc import Iterator

import pytest

SERVER = pathlib.Path(__file__).resolve().parent.parent / "ts_server"
NODE = shutil.which("node")


def require_node() -> None:
    if NODE is None:
        if os.environ.get("SSEWIRE_REQUIRE_NODE") == "1":
            pytest.fail("SSEWIRE_REQUIRE_NODE=1 but node is not on the PATH", pytrace=False)
        pytest.skip("node is not installed", allow_module_level=True)


@contextlib.contextmanager
def ts_server(*flags: str, port: int = 0) -> Iterator[str]:
    """Start the server with ``flags`` (--stateless, --json, --store); yield its MCP URL."""
    if not (SERVER / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the TypeScript SDK is not installed: run npm ci --prefix tests/ts_server")
    assert NODE is not None
    process = subprocess.Popen(
        [NODE, "server.mjs", *flags, "--port", str(port)],
        cwd=SERVER,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdin is not None
        with selectors.DefaultSelector() as ready:  # node prints {"port": N} once it listens
            ready.register(process.stdout, selectors.EVENT_READ)
            if not ready.select(30):
                raise RuntimeError("the TypeScript SDK server did not start within 30 s")
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the TypeScript SDK server did not start (exit {process.wait(10)})")
        yield f"http://127.0.0.1:{json.loads(line)['port']}/mcp"
    finally:
        assert process.stdin is not None
        process.stdin.close()  # the server exits when stdin closes
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
