"""Which twin delivers a stream's items: the compiled one (``_delivery_c``) where it is
built and not switched off, else the pure one. The same switches as the decoder's (``_env``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from ... import _env
from . import _delivery_py as py_twin

_C = "ssewire.mcp.client._delivery_c"
_compiled = _env.compiled(_C, "deliver", "progressed")  # a build without both is not built
c_twin: ModuleType | None = None if _compiled is None else sys.modules[_C]
"""The compiled twin (``deliver``, ``progressed``), or None (not built, or
``SSEWIRE_NO_EXTENSIONS=1``)."""
twin: ModuleType = py_twin if c_twin is None else c_twin
IMPLEMENTATION = "python" if c_twin is None else "cython"

progressed: Callable[[dict[Any, Any], Any, Any], bool] = twin.progressed
"""The chosen twin's `_delivery_py.progressed`."""
deliver: Callable[[Iterable[Any], dict[Any, Any], Any, Callable[[Any], None], Any], int] = twin.deliver
"""The chosen twin's `_delivery_py.deliver`."""
