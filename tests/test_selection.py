"""Which twin ``ssewire.Decoder`` is, chosen by the environment at import (checked in a
fresh interpreter each time), and the one parser behind both switches."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from ssewire import _env

# Whether this install has the compiled module at all (it may still be disabled here).
BUILT = importlib.util.find_spec("ssewire._decoder_c") is not None or _env.flag(_env.REQUIRE_EXTENSIONS)

PROBE = (
    "import ssewire; "
    "print(ssewire.IMPLEMENTATION, ssewire.Decoder.__name__, ssewire.RawDecoder.__name__, "
    "ssewire.CDecoder is None, ssewire.CRawDecoder is None)"
)


def _import_with(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SSEWIRE_")}
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_no_extensions_selects_the_pure_twin(value):
    result = _import_with(SSEWIRE_NO_EXTENSIONS=value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["python", "PyDecoder", "PyRawDecoder", "True", "True"]


def test_default_selects_the_compiled_twin_when_built():
    result = _import_with()
    assert result.returncode == 0, result.stderr
    expected = ["cython", "CDecoder", "CRawDecoder", "False", "False"] if BUILT else ["python", "PyDecoder", "PyRawDecoder", "True", "True"]
    assert result.stdout.split() == expected


def test_require_extensions_imports_the_compiled_twin_or_fails():
    result = _import_with(SSEWIRE_REQUIRE_EXTENSIONS="1")
    if not BUILT:
        assert result.returncode != 0 and "_decoder_c" in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["cython", "CDecoder", "CRawDecoder", "False", "False"]


def test_contradictory_or_unclear_switches_fail_loudly():
    both = _import_with(SSEWIRE_NO_EXTENSIONS="1", SSEWIRE_REQUIRE_EXTENSIONS="1")
    assert both.returncode != 0 and "both set" in both.stderr
    unclear = _import_with(SSEWIRE_NO_EXTENSIONS="maybe")
    assert unclear.returncode != 0 and "SSEWIRE_NO_EXTENSIONS='maybe'" in unclear.stderr


@pytest.mark.parametrize(
    "environ, mode",
    [
        ({}, "optional"),
        ({"SSEWIRE_NO_EXTENSIONS": "0"}, "optional"),
        ({"SSEWIRE_NO_EXTENSIONS": "1"}, "off"),
        ({"SSEWIRE_NO_EXTENSIONS": "off", "SSEWIRE_REQUIRE_EXTENSIONS": "True"}, "required"),
        ({"SSEWIRE_REQUIRE_EXTENSIONS": ""}, "optional"),
    ],
)
def test_extension_mode(environ, mode):
    assert _env.extension_mode(environ) == mode


def test_importing_ssewire_pulls_in_no_io_libraries():
    code = (
        "import sys, ssewire; "
        "print(sorted(m for m in ('asyncio', 'httpx', 'orjson', 'aiohttp') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr
