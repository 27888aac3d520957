"""ssewire: exact, fast Server-Sent Events decoding.

``Decoder`` is the fastest available twin: the Cython ``CDecoder`` when it is built and
not disabled, else the pure-Python ``PyDecoder``. Both behave identically.
"""

from __future__ import annotations

from . import _env
from ._decoder_py import PyDecoder
from ._errors import EventTooLarge, SSEError
from ._events import Event

__all__ = [
    "IMPLEMENTATION",
    "CDecoder",
    "Decoder",
    "Event",
    "EventTooLarge",
    "PyDecoder",
    "SSEError",
]
__version__ = "0.1.0"


def _load_compiled():  # type: ignore[no-untyped-def]
    mode = _env.extension_mode()
    if mode == "off":
        return None
    try:
        from ._decoder_c import CDecoder as compiled
    except ImportError:
        if mode == "required":
            raise
        return None
    return compiled


CDecoder = _load_compiled()
Decoder = PyDecoder if CDecoder is None else CDecoder
IMPLEMENTATION = "python" if CDecoder is None else "cython"
