"""Which decoder twin ``ssewire.Decoder`` is: the one place that decides.

A leaf (as yarl's ``_quoting`` is): the adapters, ``jsonrpc`` and the CLI import the
chosen classes from here, so the package root only re-exports and has no import order to
keep. ``SSEWIRE_NO_EXTENSIONS`` / ``SSEWIRE_REQUIRE_EXTENSIONS`` are read by ``_env``.
"""

from __future__ import annotations

from typing import Any

from . import _env
from ._decoder_py import PyDecoder, PyRawDecoder

_compiled = _env.compiled("ssewire._decoder_c", "CDecoder", "CRawDecoder") or (None, None)
CDecoder: Any = _compiled[0]
"""The compiled twin (Cython: lines found with ``memchr``), or None when it is not built or
``SSEWIRE_NO_EXTENSIONS=1`` disabled it. Same signature and behaviour as
[`PyDecoder`][ssewire.PyDecoder]; its stub is ``_decoder_c.pyi``."""
CRawDecoder: Any = _compiled[1]
"""The compiled twin of [`PyRawDecoder`][ssewire.PyRawDecoder], or None."""
Decoder: Any = PyDecoder if CDecoder is None else CDecoder
"""The decoder to use: the compiled twin when it is built and not disabled, else
[`PyDecoder`][ssewire.PyDecoder]. Both take the same options and give the same events.

    decoder = ssewire.Decoder(max_event_size=1 << 20)
    events = decoder.feed(chunk)
"""
RawDecoder: Any = PyRawDecoder if CRawDecoder is None else CRawDecoder
"""[`Decoder`][ssewire.Decoder]'s parser emitting [`RawEvent`][ssewire.RawEvent]s, whose
``data`` stays UTF-8 bytes: for a JSON parser that takes bytes (orjson)."""
IMPLEMENTATION = "python" if CDecoder is None else "cython"
"""``"cython"`` or ``"python"``: which twin [`Decoder`][ssewire.Decoder] is. Check it after
installing: ``python -c "import ssewire; print(ssewire.IMPLEMENTATION)"``."""
