"""The rule registry: every check is registered with the code it reports.

The catalogue of codes (`CATALOGUE`: level, keyword, section, hint) is derived from
the registrations, so a rule is written in one place: its module. A code is defined once,
by the first `rule` that gives its metadata; further checks of the same code name
only the code. Codes are a contract (baselines match on them): never rename or reuse one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ...checks.findings import Level


class Hit(NamedTuple):
    """One finding as a check reports it; the validator adds code, requirement and hint."""

    path: str  # relative to the exchange (``/request/...``), or absolute for the transcript
    message: str
    level: Level | None = None  # None: the code's usual level


@dataclass(frozen=True)
class Code:
    """A catalogue entry: what the code means and where the requirement is written."""

    code: str
    level: Level  # the usual level; a check may lower or raise it for one finding
    keyword: str  # MUST, MUST NOT, SHOULD, ..., or "convention"
    section: str  # the section of the transport page ("" for transcript hygiene)
    hint: str  # how to fix it

    def requirement(self, spec_page: str, modern: bool = False) -> str:
        """Where the rule is written: ``"<page>, <section>: <KEYWORD>"`` or ``"convention"``."""
        section = SECTIONS_2026.get(self.section, self.section) if modern else self.section
        if self.keyword == "convention":
            return "convention" if not section else f"convention ({spec_page}, {section})"
        return f"{spec_page}, {section}: {self.keyword}"


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


CATALOGUE: dict[str, Code] = {}
CHECKS: list[Check] = []

# 2026-07-28 split the transport page and renamed its sections.
SECTIONS_2026 = {
    "Sending Messages to the Server": "Sending Messages",
    "Multiple Connections": "Sending Messages",
    "Protocol Version Header": "Request Metadata > Protocol Version Header",
    "Backward Compatibility": "Backward Compatibility > Earlier Streamable HTTP Revisions",
}


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
        if code in CATALOGUE:
            raise ValueError(f"code {code!r} is defined twice")
        if keyword is None or hint is None:
            raise ValueError(f"code {code!r}: a definition needs its keyword and hint")
        CATALOGUE[code] = Code(code, level, keyword, section, hint)
    elif code not in CATALOGUE:
        raise ValueError(f"code {code!r} is not defined yet: give its level, keyword and hint")

    def register(func: Callable[..., Iterable[Hit]]) -> Callable[..., Iterable[Hit]]:
        CHECKS.append(Check(code, on, func))
        return func

    return register
