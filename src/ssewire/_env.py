"""The one parser for ssewire's two switches, used by the build backend and at import.

``SSEWIRE_NO_EXTENSIONS``      build a pure wheel / import the pure-Python twin, and serve
                               and send HTTP without the C-accelerated libraries
                               (`accelerated`: h11, asyncio's loop, httpx's transport).
``SSEWIRE_REQUIRE_EXTENSIONS`` a failed compile or a missing extension is an error, and so
                               is a missing accelerated library.

On an interpreter other than CPython the compiled twin is never built or imported: it
writes CPython object internals (compact str layout, ``PyBytes`` resizing).

This module imports nothing from ssewire so that ``_build/backend.py`` can load it by
path before the package is built.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib import import_module
from importlib.util import find_spec
from typing import Any

NO_EXTENSIONS = "SSEWIRE_NO_EXTENSIONS"
REQUIRE_EXTENSIONS = "SSEWIRE_REQUIRE_EXTENSIONS"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Read one switch; an unrecognised value is an error, never a guess."""
    raw = (os.environ if environ is None else environ).get(name, "")
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def extension_mode(environ: Mapping[str, str] | None = None, implementation: str | None = None) -> str:
    """Return ``"off"``, ``"optional"`` or ``"required"`` for the compiled twin.

    ``implementation`` is ``sys.implementation.name`` unless given (for tests).
    """
    disabled = flag(NO_EXTENSIONS, environ)
    required = flag(REQUIRE_EXTENSIONS, environ)
    if disabled and required:
        raise ValueError(f"{NO_EXTENSIONS} and {REQUIRE_EXTENSIONS} are both set; choose one")
    implementation = sys.implementation.name if implementation is None else implementation
    if implementation != "cpython":
        if required:
            raise ValueError(
                f"{REQUIRE_EXTENSIONS} is set, but the compiled twin needs CPython, not {implementation}"
            )
        return "off"
    if disabled:
        return "off"
    return "required" if required else "optional"


def compiled(module: str, *names: str) -> tuple[Any, ...] | None:
    """``names`` from the compiled twin ``module`` (``"ssewire._decoder_c"``) under the
    switches: None when it is switched off or not built; not built when required is the
    ``ImportError`` naming it. The one rule every twin's selector follows."""
    mode = extension_mode()
    if mode == "off":
        return None
    try:
        loaded = import_module(module)
        return tuple(getattr(loaded, name) for name in names)
    except (ImportError, AttributeError) as missing:  # (a build older than its names: not built)
        if mode == "required":
            raise ImportError(f"{module}: {missing}") from missing
        return None


def accelerated(module: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the optional C-accelerated library ``module`` (httptools, uvloop, aiohttp) is
    to be used: installed, and not switched off; when required, its absence is an
    ``ImportError`` naming it."""
    mode = extension_mode(environ)
    if mode == "off":
        return False
    if find_spec(module) is not None:
        return True
    if mode == "required":
        raise ImportError(
            f"{REQUIRE_EXTENSIONS} is set, but {module} is not installed (pip install 'ssewire[mcp]')"
        )
    return False
