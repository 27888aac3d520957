"""The one catalogue: every validator finding code and every probe diagnostic, one `Entry` each.

An entry is declared beside the check that reports it (``rule(...)`` in
``ssewire.mcp.validator.rules``, ``diagnostic(...)`` in ``ssewire.mcp.probe.checks``), so adding a
rule or a diagnostic is one edit in one module; registration puts it here. This layer
cannot import those modules (they sit above it), so the catalogue is complete once they
are imported, which ``import ssewire.mcp`` does first for any of its modules.

Ids are a contract (baselines, ``--fail-on`` gates and CI parsers match on them): never
rename or reuse one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..._strenum import StrEnum


class Level(StrEnum):
    """How much a finding matters (a ``str``: ``Level.ERROR == "error"``)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Status(StrEnum):
    """How sure a finding is."""

    DETECTED = "detected"  # seen in the bytes
    SUSPECTED = "suspected"  # inferred, not proven
    NOT_CHECKED = "not-checked"  # the check could not run (the message says why)
    PASS = "pass"  # checked and conformant


class Kind(StrEnum):
    """Which tool reports an entry."""

    CODE = "code"  # a validator finding code (``ssewire validate``: a recorded transcript)
    DIAGNOSTIC = "diagnostic"  # a probe diagnostic (``ssewire probe``: a live server)


# The stacks a diagnostic's fixes are written for, in report order.
STACKS = ("typescript-sdk", "python-sdk", "plain-handler")

# 2026-07-28 split the transport page and renamed its sections.
SECTIONS_2026 = {
    "Sending Messages to the Server": "Sending Messages",
    "Multiple Connections": "Sending Messages",
    "Protocol Version Header": "Request Metadata > Protocol Version Header",
    "Backward Compatibility": "Backward Compatibility > Earlier Streamable HTTP Revisions",
}


@dataclass(frozen=True)
class Entry:
    """One check's meaning: its id, level, the requirement it rests on, and how to fix it.

    A validator code's requirement is a ``keyword`` (MUST, SHOULD NOT, ..., or
    ``convention``) in a ``section`` of the transport page, named per revision when
    reported; a probe diagnostic states its requirement in words (``statement``), because
    many rest on several sections or on SDK convention with a reason.
    """

    id: str
    kind: Kind
    level: Level  # the usual level; one finding may be raised or lowered by its check
    fixes: Mapping[str, str]  # a code: {"hint": ...}; a diagnostic: one fix per stack in STACKS
    keyword: str = ""  # codes: MUST, MUST NOT, SHOULD, ..., or "convention"
    section: str = ""  # codes: the transport page's section ("" for transcript hygiene)
    statement: str = ""  # diagnostics: "<section>: <KEYWORD> ..." or "convention (...)"
    judged_by: str | None = None  # a diagnostic judged by this validator code on the probe's recording

    @property
    def code(self) -> str:
        """The id (a validator code's name)."""
        return self.id

    @property
    def hint(self) -> str:
        """The fix, in one line (a diagnostic's fixes joined by stack)."""
        if self.kind == Kind.CODE:
            return self.fixes["hint"]
        return "; ".join(f"{stack}: {fix}" for stack, fix in self.fixes.items())

    def hints(self) -> dict[str, str]:
        """The fixes by stack (a diagnostic's report shape)."""
        return dict(self.fixes)

    def requirement(self, spec_page: str | None = None, modern: bool = False) -> str:
        """Where the rule is written: ``"<page>, <section>: <KEYWORD>"``, ``"convention"``, or
        the diagnostic's statement. ``modern``: name 2026-07-28's sections."""
        if self.kind == Kind.DIAGNOSTIC:
            return self.statement
        section = SECTIONS_2026.get(self.section, self.section) if modern else self.section
        if self.keyword == "convention":
            return "convention" if not section else f"convention ({spec_page}, {section})"
        return f"{spec_page}, {section}: {self.keyword}"


class Catalogue(Mapping[str, Entry]):
    """Entries by id, in registration order; `of_kind` gives them in report order."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def define(self, entry: Entry) -> Entry:
        if entry.id in self._entries:
            raise ValueError(f"{entry.id!r} is defined twice")
        if entry.kind == Kind.DIAGNOSTIC and tuple(entry.fixes) != STACKS:
            raise ValueError(f"diagnostic {entry.id!r}: give a fix for each of {', '.join(STACKS)}")
        if entry.kind == Kind.CODE and (not entry.keyword or set(entry.fixes) != {"hint"}):
            raise ValueError(f"code {entry.id!r}: a definition needs its keyword and hint")
        if entry.judged_by is not None:
            judge = self._entries.get(entry.judged_by)
            if judge is None or judge.kind != Kind.CODE:
                raise ValueError(f"diagnostic {entry.id!r}: {entry.judged_by!r} is not a validator code")
        self._entries[entry.id] = entry
        return entry

    def of_kind(self, kind: Kind) -> Mapping[str, Entry]:
        """The entries of one kind, a live view (it sees entries registered later)."""
        return _View(self, kind)

    def expect(self, ident: str, kind: Kind) -> Entry:
        """The entry ``ident`` of ``kind``; ValueError when there is none (a typo fails at import)."""
        entry = self._entries.get(ident)
        if entry is None or entry.kind != kind:
            raise ValueError(f"unknown {kind} {ident!r}")
        return entry

    def __getitem__(self, ident: str) -> Entry:
        return self._entries[ident]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class _View(Mapping[str, Entry]):
    def __init__(self, catalogue: Catalogue, kind: Kind) -> None:
        self._catalogue, self._kind = catalogue, kind

    def __getitem__(self, ident: str) -> Entry:
        entry = self._catalogue[ident]
        if entry.kind != self._kind:
            raise KeyError(ident)
        return entry

    def __iter__(self) -> Iterator[str]:
        """Report order: grouped by area (the id up to its first dot, e.g. ``transport``), the
        areas in the order they are first defined, each area's entries as defined (a diagnostic
        judged in the probe's wrap-up still reads beside its area's others)."""
        ids = [ident for ident, entry in self._catalogue.items() if entry.kind == self._kind]
        areas = {ident.partition(".")[0]: None for ident in ids}  # ordered, unique
        rank = {area: n for n, area in enumerate(areas)}
        return iter(sorted(ids, key=lambda ident: rank[ident.partition(".")[0]]))  # stable

    def __len__(self) -> int:
        return sum(1 for _ in self)


CATALOGUE = Catalogue()
CODES = CATALOGUE.of_kind(Kind.CODE)  # the validator's, in report order
DIAGNOSTICS = CATALOGUE.of_kind(Kind.DIAGNOSTIC)  # the probe's, in report order


def diagnostic(
    ident: str,
    level: Level,
    requirement: str,
    *,
    typescript: str,
    python: str,
    plain: str,
    judged_by: str | None = None,
) -> str:
    """Define a probe diagnostic: its requirement in words and the fix on each stack.
    Returns the id, for the ``check`` that reports it."""
    fixes = dict(zip(STACKS, (typescript, python, plain), strict=True))
    CATALOGUE.define(Entry(ident, Kind.DIAGNOSTIC, level, fixes, statement=requirement, judged_by=judged_by))
    return ident


def code(ident: str, level: Level, keyword: str, section: str, hint: str) -> Entry:
    """Define a validator finding code (``rule`` calls this on a code's first use)."""
    return CATALOGUE.define(Entry(ident, Kind.CODE, level, {"hint": hint}, keyword=keyword, section=section))
