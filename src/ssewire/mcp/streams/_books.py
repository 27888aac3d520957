"""Which twin books the ledger's events: the compiled one (``_books_c``) where it is built
and not switched off, else the pure one. The same switches as the decoder's (``_env``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import _env
from ._books_py import book as py_book
from .verdicts import EventVerdict


def _load_compiled() -> Any:
    if _env.extension_mode() == "off":
        return None
    try:
        from ._books_c import book as compiled
    except ImportError:
        if _env.extension_mode() == "required":
            raise
        return None
    return compiled


c_book: Any = _load_compiled()
"""The compiled twin's ``book``, or None (not built, or ``SSEWIRE_NO_EXTENSIONS=1``)."""
book: Callable[..., list[EventVerdict]] = py_book if c_book is None else c_book
IMPLEMENTATION = "python" if c_book is None else "cython"
