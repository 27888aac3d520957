"""Helpers shared by the decoder tests: the twins under test (the decoder's, the
stream ledger's booking loop and the client's delivery), feeding, splitting.

The compiled twin is under test whenever it is built, and always when
``SSEWIRE_REQUIRE_EXTENSIONS=1`` (as in CI): then a missing ``CDecoder`` fails the
tests instead of dropping them. Only a pure install (built or imported with
``SSEWIRE_NO_EXTENSIONS=1``) runs the pure twin alone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from typing import Any

import pytest

import ssewire
from ssewire import EventTooLarge, _env
from ssewire.mcp.client import _delivery
from ssewire.mcp.streams import _books, ledger

_CLASSES = {"py": ssewire.PyDecoder, "c": ssewire.CDecoder}
_RAW_CLASSES = {"py": ssewire.PyRawDecoder, "c": ssewire.CRawDecoder}
TWINS = [name for name, cls in _CLASSES.items() if cls is not None or _env.flag(_env.REQUIRE_EXTENSIONS)]


def _under_test(modules: dict[str, Any]) -> list[str]:
    """The twins of ``modules`` under test: both where the compiled one is built, and
    always when it is required (its absence then fails the tests that ask for it)."""
    return [
        name for name, module in modules.items() if module is not None or _env.flag(_env.REQUIRE_EXTENSIONS)
    ]


def _picked(modules: dict[str, Any], name: str, compiled: str) -> Any:
    module = modules[name]
    if module is None:
        pytest.fail(f"SSEWIRE_REQUIRE_EXTENSIONS=1 but {compiled} is not built")
    return module


_BOOKS = {"py": _books.py_twin, "c": _books.c_twin}
BOOK_TWINS = _under_test(_BOOKS)
_DELIVERIES = {"py": _delivery.py_twin, "c": _delivery.c_twin}
DELIVERY_TWINS = _under_test(_DELIVERIES)


def book_twin(name: str):
    """The stream ledger's booking twin ``name``: the module ``_books_py`` / ``_books_c``."""
    return _picked(_BOOKS, name, "ssewire.mcp.streams._books_c")


def delivery_twin(name: str):
    """The client's delivery twin ``name``: the module ``_delivery_py`` / ``_delivery_c``."""
    return _picked(_DELIVERIES, name, "ssewire.mcp.client._delivery_c")


def assert_switches_choose(module: str) -> None:
    """The twin the selector ``module`` picks, in a fresh interpreter, is the one the
    decoder's switches say: the pure one (``module`` + ``_py``) when switched off, the
    compiled one (``_c``) where built, and a loud failure when required but not built."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SSEWIRE_")}
    code = f"import {module} as chosen; print(chosen.IMPLEMENTATION, chosen.twin.__name__)"

    def chosen(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=60
        )

    pure = chosen(SSEWIRE_NO_EXTENSIONS="1")
    assert pure.returncode == 0, pure.stderr
    assert pure.stdout.split() == ["python", f"{module}_py"]
    built = find_spec(f"{module}_c") is not None  # (maybe switched off here)
    picked = chosen()
    assert picked.returncode == 0, picked.stderr
    assert picked.stdout.split() == (["cython", f"{module}_c"] if built else ["python", f"{module}_py"])
    required = chosen(SSEWIRE_REQUIRE_EXTENSIONS="1")
    if built:
        assert required.returncode == 0 and required.stdout.split()[0] == "cython", required.stderr
    else:  # a pure install: the first compiled module it looks for is missing, loudly
        assert required.returncode != 0 and "No module named" in required.stderr


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
