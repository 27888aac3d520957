"""Which twin ``ssewire.Decoder`` is, chosen by the environment at import (checked in a
fresh interpreter each time), and the one parser behind both switches."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

import ssewire
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
    expected = (
        ["cython", "CDecoder", "CRawDecoder", "False", "False"]
        if BUILT
        else ["python", "PyDecoder", "PyRawDecoder", "True", "True"]
    )
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
    assert _env.extension_mode(environ, "cpython") == mode


@pytest.mark.parametrize("implementation", ["pypy", "graalpy"])
def test_other_interpreters_get_the_pure_twin(implementation):
    # the compiled module writes CPython object internals: never built or imported elsewhere
    assert _env.extension_mode({}, implementation) == "off"
    with pytest.raises(ValueError, match=f"needs CPython, not {implementation}"):
        _env.extension_mode({"SSEWIRE_REQUIRE_EXTENSIONS": "1"}, implementation)


def test_the_package_root_only_re_exports_the_selector():
    from ssewire import _select

    assert (ssewire.Decoder, ssewire.RawDecoder, ssewire.IMPLEMENTATION) == (
        _select.Decoder,
        _select.RawDecoder,
        _select.IMPLEMENTATION,
    )


def _loaded_after(imports: str, watched: tuple[str, ...]) -> list[str]:
    code = (
        f"import json, sys, {imports}; print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


IO = ("asyncio", "httpx", "httpx2", "aiohttp", "socket", "uvicorn")


def test_importing_ssewire_pulls_in_no_io_libraries():
    assert _loaded_after("ssewire", (*IO, "orjson")) == []


def test_importing_the_mcp_tooling_pulls_in_no_io_libraries():
    # the sans-IO part: only the I/O components (transport, server, client, the probe's
    # driver, reference, gateway) may talk to the network
    modules = "ssewire.mcp, ssewire.mcp.validator.baseline, ssewire.mcp.transcript.redact, ssewire.mcp.streams.ledger"
    components = ("transport", "server", "client", "probe.driver", "reference", "gateway", "live")
    assert _loaded_after(modules, (*IO, *(f"ssewire.mcp.{name}" for name in components))) == []


def test_the_cli_loads_a_commands_libraries_only_when_it_runs():
    assert _loaded_after("ssewire.cli", ("orjson", "ssewire.mcp", "ssewire.jsonrpc", *IO)) == []


@pytest.mark.parametrize(
    ("environ", "installed", "expected"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"SSEWIRE_NO_EXTENSIONS": "1"}, True, False),  # the same switch turns off the fast HTTP
        ({"SSEWIRE_REQUIRE_EXTENSIONS": "1"}, True, True),
        ({"SSEWIRE_REQUIRE_EXTENSIONS": "1"}, False, ImportError),
    ],
)
def test_an_accelerated_library_is_used_when_installed_unless_switched_off(environ, installed, expected):
    module = "json" if installed else "ssewire_no_such_module"
    if expected is ImportError:
        with pytest.raises(ImportError, match=module):
            _env.accelerated(module, environ)
    else:
        assert _env.accelerated(module, environ) is expected


def test_a_build_without_a_name_its_selector_asks_for_is_not_built(monkeypatch):
    """An older compiled module (a stale build) lacking a name: the pure twin serves, as
    for a module not built; required, it is the ImportError naming what is missing."""
    monkeypatch.delenv(_env.NO_EXTENSIONS, raising=False)
    monkeypatch.delenv(_env.REQUIRE_EXTENSIONS, raising=False)
    assert _env.compiled("json", "no_such_name") is None
    assert _env.compiled("json", "loads", "dumps") is not None
    monkeypatch.setenv(_env.REQUIRE_EXTENSIONS, "1")
    with pytest.raises(ImportError, match="no_such_name"):
        _env.compiled("json", "no_such_name")
