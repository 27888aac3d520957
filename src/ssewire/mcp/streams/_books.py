"""Which twin books the ledger's events: the compiled one (``_books_c``) where it is built
and not switched off, else the pure one. The same switches as the decoder's (``_env``)."""

from __future__ import annotations

import sys
from types import ModuleType

from ... import _env
from . import _books_py as py_twin

_C = "ssewire.mcp.streams._books_c"
_compiled = _env.compiled(_C, "book", "sift", "disown")  # a build without all three is not built
c_twin: ModuleType | None = None if _compiled is None else sys.modules[_C]
"""The compiled twin (``book``, ``sift``, ``disown``), or None (not built, or
``SSEWIRE_NO_EXTENSIONS=1``)."""
twin: ModuleType = py_twin if c_twin is None else c_twin
IMPLEMENTATION = "python" if c_twin is None else "cython"
