"""Notes about the transcript as a whole: which profile it was checked against."""

from __future__ import annotations

from collections.abc import Iterator

from ...checks.findings import Level
from ..model import Model
from ._registry import TRANSCRIPT, Hit, rule


@rule(
    "profile_alias",
    Level.INFO,
    "convention",
    "",
    "name the published revision in the transcript",
    on=TRANSCRIPT,
)
def profile_alias(m: Model) -> Iterator[Hit]:
    if m.alias_note:
        yield Hit("/profile", f"profile {m.name!r}: {m.alias_note}")


@rule(
    "profile_overridden",
    Level.INFO,
    "convention",
    "",
    "the --profile option replaced the transcript's profile",
    on=TRANSCRIPT,
)
def profile_overridden(m: Model) -> Iterator[Hit]:
    declared = m.transcript.profile
    if m.override and declared and m.override != declared:
        yield Hit("/profile", f"checked as {m.profile.name}, not {declared!r}")
