"""Generated tables in the docs: each page holds one between two marker comments, and a
script rewrites only what lies between them."""

from __future__ import annotations

from pathlib import Path


def splice(page: Path, start: str, end: str, text: str) -> None:
    """Put ``text`` between the markers ``start`` and ``end`` of ``page``."""
    whole = page.read_text(encoding="utf-8")
    head, rest = whole.split(start, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{start}\n{text}\n{end}{tail}", encoding="utf-8")
