"""``/healthz`` and ``/readyz``, for an orchestrator or a balancer.

``/healthz``: the process serves (200, always, while it answers at all). ``/readyz``: it
should be sent new work: 200, or 503 naming what is not ready (``draining``, ``store``, an
upstream). Both are answered before Host checks and authentication, so their bodies name
kinds of trouble only: never a URL, an address, a setting or an error's text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from ..protocol.wire import JSON
from ..server.asgi import respond

HEALTHZ, READYZ = "/healthz", "/readyz"
HEALTH_PATHS = frozenset({HEALTHZ, READYZ})


async def health(
    send: Any, path: str, failing: Callable[[], Awaitable[list[str]]], generation: int | None = None
) -> None:
    """Answer ``path`` (one of `HEALTH_PATHS`); ``failing`` names what is not ready;
    ``generation``: which reading of the routes file runs (said by ``/readyz``)."""
    headers = [("content-type", JSON), ("cache-control", "no-store")]
    if path == HEALTHZ:
        await respond(send, 200, orjson.dumps({"status": "ok"}), headers)
        return
    bad = await failing()
    said: dict[str, Any] = {"status": "not ready", "failing": bad} if bad else {"status": "ready"}
    if generation is not None:
        said["generation"] = generation
    await respond(send, 503 if bad else 200, orjson.dumps(said), headers)
