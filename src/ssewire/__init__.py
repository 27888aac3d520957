"""ssewire: exact, fast Server-Sent Events decoding.

``Decoder`` is the fastest available twin: the Cython ``CDecoder`` when it is built and
not disabled, else the pure-Python ``PyDecoder``. Both behave identically.
``RawDecoder`` is the same parser emitting ``RawEvent`` s whose data stays bytes.
"""

from __future__ import annotations

from . import _env
from ._decoder_py import PyDecoder, PyRawDecoder
from ._encoder import encode_comment, encode_event
from ._errors import EventTooLarge, SSEError, UnexpectedContentType
from ._events import Event, RawEvent

__all__ = [
    "IMPLEMENTATION",
    "CDecoder",
    "CRawDecoder",
    "Decoder",
    "Event",
    "EventTooLarge",
    "PyDecoder",
    "PyRawDecoder",
    "RawDecoder",
    "RawEvent",
    "SDKEvent",
    "SSEBytesDecoder",
    "SSEError",
    "UnexpectedContentType",
    "encode_comment",
    "encode_event",
]
__version__ = "0.1.0"


def _load_compiled():  # type: ignore[no-untyped-def]
    mode = _env.extension_mode()
    if mode == "off":
        return None, None
    try:
        from ._decoder_c import CDecoder as compiled, CRawDecoder as compiled_raw
    except ImportError:
        if mode == "required":
            raise
        return None, None
    return compiled, compiled_raw


CDecoder, CRawDecoder = _load_compiled()
Decoder = PyDecoder if CDecoder is None else CDecoder
RawDecoder = PyRawDecoder if CRawDecoder is None else CRawDecoder
IMPLEMENTATION = "python" if CDecoder is None else "cython"

from ._sdk import SDKEvent, SSEBytesDecoder  # noqa: E402  (needs Decoder, chosen above)
