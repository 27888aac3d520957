"""Which decoder twin ``ssewire.Decoder`` is: the one place that decides.

A leaf (as yarl's ``_quoting`` is): the adapters, ``jsonrpc`` and the CLI import the
chosen classes from here, so the package root only re-exports and has no import order to
keep. ``SSEWIRE_NO_EXTENSIONS`` / ``SSEWIRE_REQUIRE_EXTENSIONS`` are read by ``_env``.
"""

from __future__ import annotations

from typing import Any

from . import _env
from ._decoder_py import PyDecoder, PyRawDecoder


def _load_compiled() -> tuple[Any, Any]:
    mode = _env.extension_mode()
    if mode == "off":
        return None, None
    try:
        from ._decoder_c import CDecoder as compiled
        from ._decoder_c import CRawDecoder as compiled_raw
    except ImportError:
        if mode == "required":
            raise
        return None, None
    return compiled, compiled_raw


CDecoder, CRawDecoder = _load_compiled()
Decoder: Any = PyDecoder if CDecoder is None else CDecoder
RawDecoder: Any = PyRawDecoder if CRawDecoder is None else CRawDecoder
IMPLEMENTATION = "python" if CDecoder is None else "cython"
