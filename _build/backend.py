"""In-tree PEP 517 backend: scikit-build-core, steered by ssewire's two switches.

- ``SSEWIRE_NO_EXTENSIONS=1``: a pure wheel (CMake is not run; no Cython needed).
- default: build the Cython twin; if that fails, warn and fall back to a pure wheel.
- ``SSEWIRE_REQUIRE_EXTENSIONS=1``: a failed compile fails the build.

The switches are read by ``src/ssewire/_env.py``, the same parser the package uses at
import time.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from scikit_build_core import build as _skbuild

_ENV_PATH = Path(__file__).resolve().parent.parent / "src" / "ssewire" / "_env.py"
_spec = importlib.util.spec_from_file_location("_ssewire_env", _ENV_PATH)
assert _spec is not None and _spec.loader is not None
_env = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_env)

_COMPILE_REQUIRES = ["cython>=3.0", "cython-cmake>=0.2"]
_PURE = {"wheel.cmake": "false"}


def _settings(config_settings, pure):
    settings = dict(config_settings or {})
    if pure:
        settings.update(_PURE)
    return settings


def _pure() -> bool:
    return _env.extension_mode() == "off"


def get_requires_for_build_wheel(config_settings=None):
    pure = _pure()
    requires = _skbuild.get_requires_for_build_wheel(_settings(config_settings, pure))
    return requires if pure else [*requires, *_COMPILE_REQUIRES]


def get_requires_for_build_editable(config_settings=None):
    pure = _pure()
    requires = _skbuild.get_requires_for_build_editable(_settings(config_settings, pure))
    return requires if pure else [*requires, *_COMPILE_REQUIRES]


def get_requires_for_build_sdist(config_settings=None):
    return _skbuild.get_requires_for_build_sdist(config_settings)


def build_sdist(sdist_directory, config_settings=None):
    return _skbuild.build_sdist(sdist_directory, config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_wheel(
        metadata_directory, _settings(config_settings, _pure())
    )


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_editable(
        metadata_directory, _settings(config_settings, _pure())
    )


def _build(builder, wheel_directory, config_settings, metadata_directory):
    mode = _env.extension_mode()
    if mode == "off":
        return builder(wheel_directory, _settings(config_settings, True), metadata_directory)
    try:
        return builder(wheel_directory, _settings(config_settings, False), metadata_directory)
    except (Exception, SystemExit) as exc:
        if mode == "required":
            raise
        print(
            f"ssewire: compiling the Cython twin failed ({exc!r}); "
            "building the pure-Python twin instead "
            "(set SSEWIRE_REQUIRE_EXTENSIONS=1 to make this an error)",
            file=sys.stderr,
        )
        # The prepared metadata names a platform wheel; let the pure build write its own.
        return builder(wheel_directory, _settings(config_settings, True), None)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(_skbuild.build_wheel, wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _build(_skbuild.build_editable, wheel_directory, config_settings, metadata_directory)
