"""The routes file read again while the gateway serves (``SIGHUP``).

Each route of the new reading is compared with the running one by what its table says: an
unchanged route keeps its app (its sessions and calls go on as if nothing happened); a
changed one is a route that went and a route that came (its old app drained, a new one
serving its path: a client's next request under an old session gets a 404 and opens
another); a new one is added; one that went is drained, then closed (`Router.replace`). A
reading that fails (not TOML, a key wrong, a variable unset, two paths colliding) changes
nothing: the running routes stay, and the log says why. The generation counts the readings
served; ``/readyz`` and ``/metrics`` say it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..._errors import InputError
from .config import Route
from .routes import Router

log = logging.getLogger("ssewire.mcp.gateway")


class Reloader:
    """Reads the routes (``load``) and makes an app of each new or changed one (``build``)."""

    def __init__(
        self,
        router: Router,
        routes: list[Route],
        *,
        load: Callable[[], list[Route]],
        build: Callable[[Route], Any],
        drain: float,
    ) -> None:
        self.router, self.load, self.build, self.drain = router, load, build, drain
        self.running = {route.name: route for route in routes}
        router.generation = router.generation or 1  # said from now on: a file may be read again

    def reload(self) -> bool:
        """Read the file again and serve it; False (the running routes kept) when it is refused."""
        built: list[Any] = []  # closed again if the reading is refused after all
        try:
            routes = self.load()
            apps: dict[str, Any] = {}
            said: dict[str, list[str]] = {"kept": [], "changed": [], "added": []}
            for route in routes:
                before = self.running.get(route.name)
                if before is not None and before.source == route.source:
                    apps[route.name] = self.router.routes[route.name]
                    said["kept"].append(route.name)
                else:
                    apps[route.name] = self.build(route)
                    built.append(apps[route.name])
                    said["changed" if before is not None else "added"].append(route.name)
            removed = self.router.replace(apps, self.drain)
        except BaseException as refused:
            for app in built:
                self.router.close_later(app)
            if not isinstance(refused, (InputError, ValueError)):
                raise
            self.router.reload_failures += 1  # (texts that name keys, never values)
            log.warning(
                "the routes file was refused (%s): generation %d goes on", refused, self.router.generation
            )
            return False
        self.running = {route.name: route for route in routes}
        gone = [name for name in removed if name not in apps]
        parts = [f"{kind}: {', '.join(names)}" for kind, names in (*said.items(), ("removed", gone)) if names]
        log.info(
            "the routes file was read again: generation %d (%s)", self.router.generation, "; ".join(parts)
        )
        return True
