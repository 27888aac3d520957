"""ssewire: exact, fast Server-Sent Events decoding.

``Decoder`` is the fastest available twin: the Cython ``CDecoder`` when it is built and
not disabled, else the pure-Python ``PyDecoder``. Both behave identically.
``RawDecoder`` is the same parser emitting ``RawEvent`` s whose data stays bytes.
"""

from __future__ import annotations

from ._decoder_py import PyDecoder, PyRawDecoder
from ._encoder import encode_comment, encode_event, encode_raw_event
from ._errors import EventTooLarge, SSEError, UnexpectedContentType
from ._events import Event, RawEvent
from ._sdk import SDKEvent, SSEBytesDecoder
from ._select import IMPLEMENTATION, CDecoder, CRawDecoder, Decoder, RawDecoder

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
    "encode_raw_event",
]
__version__ = "0.1.0"
