"""The official MCP TypeScript SDK server (tests/ts_server/server.mjs, its npm packages
pinned in package-lock.json) as the tests start it: through node, on 127.0.0.1.

A test module calls ``require_node()`` at import. Where node and npm are on the PATH it
installs the pinned packages itself (``npm ci``, once per checkout, see ``provision.py``);
where they are not, it skips with a reason naming them, unless SSEWIRE_REQUIRE_NODE=1 (set
by .ci/run), which turns that skip into a failure.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import shutil
import subprocess
from collections.abc import Iterator

from tests.support import ROOT
from tests.support.provision import require_npm_packages

SERVER = ROOT / "tests" / "ts_server"
NODE = shutil.which("node")
NPM = shutil.which("npm")


def require_node() -> None:
    """node, npm and the pinned SDK, installed; or skip (fail under SSEWIRE_REQUIRE_NODE=1)."""
    require_npm_packages(SERVER, node=NODE, npm=NPM, switch="SSEWIRE_REQUIRE_NODE")


@contextlib.contextmanager
def ts_server(*flags: str, port: int = 0) -> Iterator[str]:
    """Start the server with ``flags`` (--stateless, --json, --store, --json-listen); yield its MCP URL."""
    require_node()
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
