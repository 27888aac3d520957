"""Serve an ASGI app on loopback in a thread: the CLI, the scripts and the tests start the
reference server and the gateway this way."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any, Literal


@contextlib.contextmanager
def running(app: Any, *, port: int = 0, lifespan: Literal["on", "off", "auto"] = "on") -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yield its base URL; stop it."""
    import uvicorn

    from ... import _env

    # log_config=None: leave the caller's logging alone (dictConfig is not thread-safe either);
    # a bounded graceful shutdown: an open GET stream would otherwise hold the stop forever
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan=lifespan,
        log_config=None,
        timeout_graceful_shutdown=1,
        # uvicorn's "auto" would take them whatever SSEWIRE_NO_EXTENSIONS says
        http="httptools" if _env.accelerated("httptools") else "h11",
        loop="uvloop" if _env.accelerated("uvloop") else "asyncio",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
