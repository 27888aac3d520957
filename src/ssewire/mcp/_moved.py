"""How a moved module keeps its old path for one release: a warning, then its names."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def forward(old: str, *new: str) -> Callable[[str], Any]:
    """Warn that ``old`` moved, and a module ``__getattr__`` that reads names from ``new``."""
    warnings.warn(
        f"{old} moved to {' and '.join(new)}; the old path is removed in the next release",
        DeprecationWarning,
        stacklevel=3,
    )

    def __getattr__(name: str) -> Any:
        for target in new:
            module = importlib.import_module(target)
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r}")

    return __getattr__
