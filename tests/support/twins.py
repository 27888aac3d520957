"""Helpers shared by the decoder tests: the twins under test (the decoder's, the
stream ledger's booking loop and the client's delivery), feeding, splitting.

The compiled twin is under test whenever it is built, and always when
``SSEWIRE_REQUIRE_EXTENSIONS=1`` (as in CI): then a missing ``CDecoder`` fails the
tests instead of dropping them. Only a pure install (built or imported with
``SSEWIRE_NO_EXTENSIONS=1``) runs the pure twin alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import ssewire
from ssewire import EventTooLarge, _env
from ssewire.mcp.client import _delivery
from ssewire.mcp.streams import _books, ledger

_CLASSES = {"py": ssewire.PyDecoder, "c": ssewire.CDecoder}
_RAW_CLASSES = {"py": ssewire.PyRawDecoder, "c": ssewire.CRawDecoder}
TWINS = [name for name, cls in _CLASSES.items() if cls is not None or _env.flag(_env.REQUIRE_EXTENSIONS)]


_BOOKS = {"py": _books.py_twin, "c": _books.c_twin}
BOOK_TWINS = [
    name for name, books in _BOOKS.items() if books is not None or _env.flag(_env.REQUIRE_EXTENSIONS)
]


def book_twin(name: str):
    """The stream ledger's booking twin ``name``: the module ``_books_py`` / ``_books_c``."""
    books = _BOOKS[name]
    if books is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.mcp.streams._books_c is not built")
    return books


_DELIVERIES = {"py": _delivery.py_twin, "c": _delivery.c_twin}
DELIVERY_TWINS = [
    name for name, twin in _DELIVERIES.items() if twin is not None or _env.flag(_env.REQUIRE_EXTENSIONS)
]


def delivery_twin(name: str):
    """The client's delivery twin ``name``: the module ``_delivery_py`` / ``_delivery_c``."""
    twin = _DELIVERIES[name]
    if twin is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.mcp.client._delivery_c is not built")
    return twin


@contextlib.contextmanager
def booking_with(books) -> Iterator[None]:
    """Every stream ledger books with the twin module ``books`` inside the block (the
    ledger looks its twin up at each call)."""
    kept, ledger._twin = ledger._twin, books
    try:
        yield
    finally:
        ledger._twin = kept


def twin(name: str, raw: bool = False) -> type:
    cls = (_RAW_CLASSES if raw else _CLASSES)[name]
    if cls is None:
        pytest.fail("SSEWIRE_REQUIRE_EXTENSIONS=1 but ssewire.CDecoder is None (extension not built)")
    return cls


def feed_chunks(decoder, chunks):
    """Feed ``chunks`` in order; return every event, in order, and close."""
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


def splits(stream: bytes):
    """Whole, every 2-way split, and byte by byte."""
    yield "whole", [stream]
    for i in range(1, len(stream)):
        yield f"split@{i}", [stream[:i], stream[i:]]
    yield "bytewise", [stream[i : i + 1] for i in range(len(stream))]


def run(cls, chunks, **options):
    """Feed everything; record events (also those carried by errors) and each error."""
    decoder = cls(**options)
    events, errors = [], []
    for index, chunk in enumerate(chunks):
        try:
            events.extend(decoder.feed(chunk))
        except EventTooLarge as error:
            events.extend(error.events)
            errors.append((index, error.limit, error.max_size, error.size))
    events.extend(decoder.close())
    return events, errors, decoder.last_event_id, decoder.retry, decoder.discarded, decoder.comments
