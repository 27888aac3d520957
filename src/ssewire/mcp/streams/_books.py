"""Which twin books the ledger's events: the compiled one (``_books_c``) where it is built
and not switched off, else the pure one. The same switches as the decoder's (``_env``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import _env
from ._books_py import book as py_book
from .verdicts import EventVerdict

_compiled = _env.compiled("ssewire.mcp.streams._books_c", "book")
c_book: Any = None if _compiled is None else _compiled[0]
"""The compiled twin's ``book``, or None (not built, or ``SSEWIRE_NO_EXTENSIONS=1``)."""
book: Callable[..., list[EventVerdict]] = py_book if c_book is None else c_book
IMPLEMENTATION = "python" if c_book is None else "cython"
