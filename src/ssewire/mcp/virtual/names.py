"""The names a virtual server shows, and the cursors of its merged listings (sans-IO).

A member's tool or prompt ``name`` is shown as ``<prefix><separator><name>``. A prefix holds
no separator, so the first separator in a shown name ends its prefix: two members' names
never meet, whatever they are. A shown name longer than ``max_length`` (clients refuse tool
names over 64 characters) is shortened to its first characters and a digest of the whole,
``<prefix><separator><head><separator><digest>``: the same name for every session and replica,
never two for one; what it stands for is remembered when a listing shows it (a call under a
shortened name no listing showed here makes the server list that member first).

A member may have no prefix (one at most): its names are shown as they are, and one that
would read as another member's is not shown (that member's reading wins).

A merged listing holds every member's page at once (a client that never follows a cursor
still sees every member); its cursor holds the cursor of each member that has more.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping

import orjson

NAME = re.compile(r"[A-Za-z0-9_.-]+")  # what the 2025-11-25 tool names hold (and so a prefix)
DIGEST = 8  # hex characters of a shortened name's digest
MAX_REMEMBERED = 65_536  # shortened names held (a member listing more is refused past it)


class BadCursor(ValueError):
    """A cursor this server did not give (or one of a configuration since changed)."""


class NamesRefused(ValueError):
    """Names that could meet, or no room for one: ``key`` says which setting (``separator``,
    ``prefix`` of ``member``, ``max_length``)."""

    def __init__(self, key: str, text: str, member: str | None = None) -> None:
        super().__init__(text)
        self.key, self.member = key, member


class Names:
    """The shown names of ``prefixes`` (member name -> prefix)."""

    def __init__(self, prefixes: Mapping[str, str], *, separator: str = "__", max_length: int = 64) -> None:
        if not separator or not NAME.fullmatch(separator):
            raise NamesRefused("separator", "a separator is one or more of A-Z a-z 0-9 _ . -")
        for member, prefix in prefixes.items():
            # the first separator of a shown name must end its prefix: none inside it, and
            # none that begins in its last characters ("a_" + "__"); "" (one member's at most):
            # its names as they are
            if prefix and (not NAME.fullmatch(prefix) or (prefix + separator).find(separator) != len(prefix)):
                text = (
                    f"a prefix is letters, digits, _ . - and neither holds nor ends in part of {separator!r}"
                )
                raise NamesRefused("prefix", text, member)
        if len(set(prefixes.values())) != len(prefixes):
            raise NamesRefused("prefix", "two members have one prefix: their names would meet")
        longest = max((len(prefix) for prefix in prefixes.values()), default=0)
        if max_length < longest + 2 * len(separator) + DIGEST + 1:
            raise NamesRefused(
                "max_length", f"{max_length} leaves no room for a name after the longest prefix"
            )
        self.prefixes, self.separator, self.max_length = dict(prefixes), separator, max_length
        self._members = {prefix: member for member, prefix in prefixes.items()}
        self._shortened: dict[str, tuple[str, str]] = {}

    def shown(self, member: str, name: str) -> str | None:
        """How ``member``'s ``name`` is shown; None for a name of the member without a prefix
        that reads as another member's (that member's reading wins: it is listed once)."""
        prefix = self.prefixes[member]
        if not prefix and self._prefixed(name) is not None:
            return None
        whole = f"{prefix}{self.separator}{name}" if prefix else name
        if len(whole) <= self.max_length:
            return whole
        digest = hashlib.sha256(whole.encode()).hexdigest()[:DIGEST]
        keep = self.max_length - len(self.separator) - DIGEST
        short = f"{whole[:keep]}{self.separator}{digest}"
        if short not in self._shortened and len(self._shortened) >= MAX_REMEMBERED:
            raise ValueError("too many shortened names to remember")
        self._shortened[short] = (member, name)
        return short

    def of(self, shown: str) -> tuple[str, str] | None:
        """The member and its own name behind ``shown``; None when it is no member's. A
        shortened name not yet seen in a listing reads as a plain one: see `unseen`."""
        if shown in self._shortened:
            return self._shortened[shown]
        found = self._prefixed(shown)
        if found is None and "" in self._members and shown:
            return self._members[""], shown  # the member shown without a prefix
        return found

    def _prefixed(self, shown: str) -> tuple[str, str] | None:
        prefix, separator, name = shown.partition(self.separator)
        member = self._members.get(prefix) if prefix else None
        return (member, name) if separator and member is not None and name else None

    def unseen(self, shown: str) -> bool:
        """``shown`` has a shortened name's shape and no listing here showed it: list its
        member first (a name of exactly ``max_length`` that was never shortened stays as it is)."""
        return (
            shown not in self._shortened
            and len(shown) == self.max_length
            and re.fullmatch(f"[0-9a-f]{{{DIGEST}}}", shown[-DIGEST:]) is not None
            and shown[-DIGEST - len(self.separator) : -DIGEST] == self.separator
        )


def cursor(pages: dict[int, str]) -> str:
    """The merged listing's cursor: each member (by index) with a next page, and its cursor."""
    return base64.urlsafe_b64encode(orjson.dumps(sorted(pages.items()))).decode()


def read_cursor(text: object, members: int) -> dict[int, str]:
    """The members' cursors a merged cursor holds; `BadCursor` for one this server did not give."""
    try:
        pairs = orjson.loads(base64.urlsafe_b64decode(str(text).encode()))
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise BadCursor("not a cursor of this server") from None
    if not isinstance(pairs, list) or not pairs:
        raise BadCursor("not a cursor of this server")
    pages: dict[int, str] = {}
    for pair in pairs:
        if not (
            isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and isinstance(pair[1], str)
        ):
            raise BadCursor("not a cursor of this server")
        if not 0 <= pair[0] < members or pair[0] in pages:
            raise BadCursor("not a cursor of this server")
        pages[pair[0]] = pair[1]
    return pages
