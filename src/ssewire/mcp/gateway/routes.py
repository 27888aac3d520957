"""Several upstreams behind one process: a route each, at its own path.

    router = Router({"search": Gateway(url_a, path="/servers/search/mcp", serve_health=False, serve_metrics=False),
                     "files": Gateway(url_b, path="/servers/files/mcp", serve_health=False, serve_metrics=False)})

Each route is a whole `Gateway` (or a `Bridged` one) with its own upstream connections,
store, limits and sessions, so one upstream's failure reaches no other route's sessions.
The router owns what the process answers once: ``/healthz``, ``/readyz`` (naming each route
that is not ready as ``servers/<name>``, and the routes' ``generation``), ``/metrics``
(every sample labelled with its route), the drain, and the lifespan.

Its routes can be replaced while it serves (`replace`: the routes file read again): a route
kept is the same app, its sessions and calls untouched; a route that goes is drained as a
stopping process drains (its sessions served, no new one, the calls still in flight at the
deadline ended with an explicit error), then closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..server.asgi import headers_of, lifespan, plain
from .app import Gateway
from .health import HEALTH_PATHS, health
from .metrics import expose, metrics_app, render, render_process

METRICS = "/metrics"


def _gateway(app: Any) -> Gateway:
    """The gateway of a route (a `Bridged` one keeps its own beside its bridge)."""
    return app if isinstance(app, Gateway) else app.gateway


class Router:
    """An ASGI app: each request to the route whose gateway owns its path (its MCP path,
    its protected resource metadata), 404 for the rest.

    :param routes: the gateways by route name (``default`` names the one of the command
        line's ``--upstream``, reported as ``upstream`` by ``/readyz``).
    :param serve_metrics: answer ``/metrics`` here (behind the routes' authentication);
        False when they are served on a loopback port of their own (`metrics_app`).
    """

    def __init__(self, routes: Mapping[str, Any], *, serve_metrics: bool = True) -> None:
        if not routes:
            raise ValueError("a router needs a route")
        self.routes = dict(routes)
        self.serve_metrics = serve_metrics
        self._by_path = _paths(self.routes)
        # the reading of the routes file served (1: at start, each `replace` the next); None:
        # routes that are never read again (no file), and nothing says a generation
        self.generation: int | None = None
        self.reload_failures = 0  # the routes file read again and refused (the old routes kept)
        self._retiring: dict[str, Any] = {}  # the paths of routes that went, while they drain
        self._retirements: set[asyncio.Task[None]] = set()

    def replace(self, routes: Mapping[str, Any], drain: float) -> list[str]:
        """Serve ``routes`` from now on (the same app for a route kept); the routes that
        went are drained for ``drain`` seconds, then closed. Their names; ValueError (and
        nothing changed) when two paths collide."""
        if not routes:
            raise ValueError("a router needs a route")
        by_path = _paths(routes)
        kept = {id(app) for app in routes.values()}
        retired = {name: app for name, app in self.routes.items() if id(app) not in kept}
        self.routes, self._by_path = dict(routes), by_path
        self.generation = (self.generation or 1) + 1
        for app in retired.values():
            for path in _paths_of(app):
                self._retiring[path] = app  # its sessions reach it until it is closed
            self._background(self._retire(app, drain))
        return list(retired)

    def _background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._retirements.add(task)  # (awaited, or cancelled, by aclose)
        task.add_done_callback(self._retirements.discard)

    def close_later(self, app: Any) -> None:
        """Close ``app``, never served (a reading refused after it was built), in the background."""
        self._background(app.aclose())

    async def _retire(self, app: Any, drain: float) -> None:
        try:
            await app.drain(drain)
        finally:
            try:
                await app.aclose()
            finally:
                for path in _paths_of(app):
                    if self._retiring.get(path) is app:
                        del self._retiring[path]

    @property
    def gateways(self) -> dict[str, Gateway]:
        return {name: _gateway(app) for name, app in self.routes.items()}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path in HEALTH_PATHS and scope["method"] == "GET":
            await health(send, path, self.failing, self.generation)
            return
        if path == METRICS and scope["method"] == "GET" and self.serve_metrics:
            await self._metrics(scope, send)
            return
        app = self._by_path.get(path) or self._retiring.get(path)
        if app is None:
            await plain(send, 404, "not found")
            return
        await app(scope, receive, send)

    async def _metrics(self, scope: dict[str, Any], send: Any) -> None:
        """The figures of every route, behind the first route's authentication (the routes
        share the process's: the command line gives one)."""
        first = next(iter(self.gateways.values()))
        headers = headers_of(scope)
        if not first.front.trusted(headers, scope):
            await plain(send, 403, "forbidden: Origin or Host is not one this gateway serves")
        elif await first.front.admits(send, scope, headers):
            await expose(send, self.render())

    def render(self) -> bytes:
        routes = render([(name, gateway.metrics) for name, gateway in self.gateways.items()])
        if self.generation is None:
            return routes
        return routes + render_process(self.generation, self.reload_failures)

    def metrics_app(self) -> Any:
        """An ASGI app answering only ``GET /metrics``, for a loopback port of its own."""
        return metrics_app(self.render)

    async def failing(self) -> list[str]:
        """What keeps the process from being ready: ``draining``, ``store``, and each route
        whose upstream does not answer (``servers/<name>``; ``upstream`` for ``default``)."""
        names = list(self.gateways)
        verdicts = await asyncio.gather(*(gateway.failing() for gateway in self.gateways.values()))
        bad: list[str] = []
        for name, failing in zip(names, verdicts, strict=True):
            for kind in failing:
                item = (
                    kind if kind != "upstream" else ("upstream" if name == "default" else f"servers/{name}")
                )
                if item not in bad:
                    bad.append(item)
        return bad

    async def drain(self, seconds: float) -> None:
        await asyncio.gather(*(app.drain(seconds) for app in self.routes.values()))  # (a bridge's too)

    def cut_streams(self) -> None:
        for gateway in self.gateways.values():
            gateway.cut_streams()

    async def aclose(self) -> None:
        for task in list(self._retirements):
            task.cancel()  # (its app is closed all the same: _retire's finally)
        await asyncio.gather(*self._retirements, return_exceptions=True)
        for app in self.routes.values():
            await app.aclose()


def _paths_of(app: Any) -> list[str]:
    gateway = _gateway(app)
    return [gateway.path, *gateway.metadata_paths]


def _paths(routes: Mapping[str, Any]) -> dict[str, Any]:
    """Each path the routes answer, to its route; ValueError when one is taken twice."""
    by_path: dict[str, Any] = {}
    for name, app in routes.items():
        for path in _paths_of(app):
            if path in by_path or path in HEALTH_PATHS or path == METRICS:
                raise ValueError(f"route {name!r}: its path {path} is taken")
            by_path[path] = app
    return by_path
