"""The validator's rules, one module per area; importing this package registers them all.

To add a rule: write a small function in the module of its area, decorated with
`rule` (its code, level, keyword, spec section and fix hint on first use). It gets an
`ExchangeView` and the `Model` (facts
only) and yields `Hit`s. The code catalogue, the docs table and the tests follow
from the registry.
"""

from __future__ import annotations

# The import order is the registry order, and so the order of findings within an exchange.
# isort: off
from . import transcript, hygiene, post, sessions, headers, get_delete, streams  # noqa: F401  (registers)

# isort: on
from ._registry import CATALOGUE, CHECKS, EVERY, TRANSCRIPT, Check, Code, Hit, rule

__all__ = ["CATALOGUE", "CHECKS", "EVERY", "TRANSCRIPT", "Check", "Code", "Hit", "rule"]
