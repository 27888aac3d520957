"""redis-server for the replica tests: Debian's ``redis-server``, found on the PATH (or
/usr/bin), started on 127.0.0.1 with a port of its own and no persistence, stopped by the
test. Absent, the test skips naming the package; ``SSEWIRE_REQUIRE_REDIS=1`` (set by
.ci/run after installing it) turns the skip into a failure."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator

from tests.support.processes import free_port, listening
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
