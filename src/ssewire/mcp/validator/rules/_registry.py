"""The rule registry: every check is registered with the code it reports.

A code's catalogue entry (level, keyword, section, hint) is defined by the first `rule`
that gives it, in the one catalogue (`ssewire.mcp.checks.catalogue`), so a rule is
written in one place: its module. Further checks of the same code name only the code.
Codes are a contract (baselines match on them): never rename or reuse one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ...checks.catalogue import CODES, Entry, Level
from ...checks.catalogue import code as define_code


class Hit(NamedTuple):
    """One finding as a check reports it; the validator adds code, requirement and hint."""

    path: str  # relative to the exchange (``/request/...``), or absolute for the transcript
    message: str
    level: Level | None = None  # None: the code's usual level


Code = Entry  # a validator code's catalogue entry (kind "code")


# Which exchanges a check looks at: the transcript once, every exchange, or some methods.
TRANSCRIPT, EVERY = "transcript", "every"
POST, GET, DELETE = ("POST",), ("GET",), ("DELETE",)
MCP_METHODS = ("POST", "GET", "DELETE")  # the methods of the transport


@dataclass(frozen=True)
class Check:
    code: str
    on: str | tuple[str, ...]  # TRANSCRIPT, EVERY, or the HTTP methods it looks at
    func: Callable[..., Iterable[Hit]]

    def applies(self, method: str) -> bool:
        return self.on == EVERY or (self.on != TRANSCRIPT and method in self.on)


CATALOGUE = CODES  # the catalogue's validator codes, in registration order
CHECKS: list[Check] = []


def rule(
    code: str,
    level: Level | None = None,
    keyword: str | None = None,
    section: str = "",
    hint: str | None = None,
    *,
    on: str | tuple[str, ...],
) -> Callable[[Callable[..., Iterable[Hit]]], Callable[..., Iterable[Hit]]]:
    """Register the decorated check as reporting ``code``.

    Exchange checks are called ``check(exchange_view, model)``, transcript checks
    ``check(model)``; each yields `Hit`s.
    """
    if level is not None:
        if keyword is None or hint is None:
            raise ValueError(f"code {code!r}: a definition needs its keyword and hint")
        define_code(code, level, keyword, section, hint)
    elif code not in CATALOGUE:
        raise ValueError(f"code {code!r} is not defined yet: give its level, keyword and hint")

    def register(func: Callable[..., Iterable[Hit]]) -> Callable[..., Iterable[Hit]]:
        CHECKS.append(Check(code, on, func))
        return func

    return register
