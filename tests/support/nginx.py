"""nginx as the reverse proxy in front of a test server: Debian's ``nginx-light``, found on
the PATH (or /usr/sbin), started on 127.0.0.1 with a configuration the test writes, and
stopped by it. Absent, the test skips naming the package; ``SSEWIRE_REQUIRE_NGINX=1`` (set
by .ci/run after installing it) turns the skip into a failure."""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator

from tests.support.processes import accepts, free_port
from tests.support.provision import unavailable

SWITCH = "SSEWIRE_REQUIRE_NGINX"
START_WITHIN = 10.0  # seconds for nginx to accept connections

# What a reverse proxy in front of an MCP server commonly does: HTTP/1.1 upstream with
# keep-alive, no response buffering (so events pass as they come), and gzip on the event
# stream and JSON answers, flushed with each upstream read.
GZIP = """
    gzip on;
    gzip_types text/event-stream application/json;
    gzip_min_length 0;
    gzip_proxied any;
"""

CONFIG = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 16m;
    client_body_buffer_size 16m;  # in memory: a worker may not write the test's temp folder
{gzip}
    upstream mcp {{
        server {upstream};
        {keepalive}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host {host};
            proxy_buffering off;
            proxy_read_timeout {read_timeout}ms;
        }}
    }}
}}
"""


def nginx_binary() -> str:
    """nginx's path, or this test skipped (failed under the switch)."""
    found = shutil.which("nginx", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin"]))
    if found is None:
        unavailable("nginx not found: install Debian's nginx-light (apt-get install nginx-light)", SWITCH)
    return found

    return False


@contextlib.contextmanager
def nginx_proxy(
    upstream_url: str,
    *,
    gzip: bool = True,
    read_timeout: float = 300.0,
    rewrite_host: bool = False,
    keepalive: bool = True,
) -> Iterator[str]:
    """nginx in front of ``upstream_url`` (``http://127.0.0.1:PORT``); yields the proxy's base URL.

    ``read_timeout``: seconds the upstream may stay silent before nginx ends the answer
    (``proxy_read_timeout``); ``rewrite_host``: send the upstream its own address as Host
    (``proxy_set_header Host <upstream>``) instead of the client's; ``keepalive=False``: a
    new upstream connection for each request (nginx keeps none)."""
    binary = nginx_binary()
    upstream = upstream_url.removeprefix("http://").rstrip("/")
    with tempfile.TemporaryDirectory(prefix="ssewire-nginx-") as tmp:
        port = free_port()
        config = pathlib.Path(tmp, "nginx.conf")
        config.write_text(
            CONFIG.format(
                tmp=tmp,
                upstream=upstream,
                port=port,
                gzip=GZIP if gzip else "",
                host=upstream if rewrite_host else "$http_host",
                keepalive="keepalive 8;" if keepalive else "",
                read_timeout=max(1, round(read_timeout * 1000)),  # nginx takes milliseconds
            )
        )
        process = subprocess.Popen(
            [binary, "-p", tmp, "-c", str(config), "-e", f"{tmp}/error.log"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # it writes to error.log (-e), read below
        )
        try:
            deadline = time.monotonic() + START_WITHIN
            while not accepts(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    log = pathlib.Path(tmp, "error.log")
                    said = log.read_text() if log.exists() else f"exit {process.returncode}"
                    raise RuntimeError(f"nginx did not start on 127.0.0.1:{port}: {said.strip()[-500:]}")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
