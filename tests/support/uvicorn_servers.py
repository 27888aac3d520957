"""Real servers for the tests: started on 127.0.0.1 by the tests, stopped by them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from ssewire.mcp.transport.serving import running


@contextmanager
def uvicorn_server(app: Any, *, lifespan: Literal["on", "off", "auto"] = "off") -> Iterator[str]:
    """Serve an ASGI app with uvicorn on a free 127.0.0.1 port; yield its base URL."""
    with running(app, lifespan=lifespan) as url:
        yield url
