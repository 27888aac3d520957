"""The published MCP protocol revisions a transcript is checked against.

A profile is a set of facts about one revision's Streamable HTTP transport, so that a
check asks "does this revision have sessions?" rather than comparing dates. Unknown names
fail closed: [`resolve`][ssewire.mcp.protocol.profiles.resolve] raises, and the CLI treats that as an input error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..._errors import InputError


@dataclass(frozen=True)
class Profile:
    """A published revision, as the facts the checks ask about (never its date)."""

    name: str  # the revision, e.g. "2025-11-25"
    sessions: bool  # Mcp-Session-Id, initialize, DELETE
    get_stream: bool  # the standalone GET stream
    resumability: bool  # SSE event ids as cursors, GET + Last-Event-ID
    batches: bool  # JSON-RPC batches in a POST body
    version_header: bool  # MCP-Protocol-Version after initialize (2025-06-18 on)
    request_headers: bool  # Mcp-Method / Mcp-Name and the header on every POST (2026-07-28)
    priming: bool  # a stream may open with an id + empty data event (2025-11-25)

    @property
    def spec_page(self) -> str:
        if self.request_headers:
            return f"MCP {self.name} basic/transports/streamable-http"
        return f"MCP {self.name} basic/transports"


_LEGACY = {"sessions": True, "get_stream": True, "resumability": True, "request_headers": False}

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("2025-03-26", batches=True, version_header=False, priming=False, **_LEGACY),
        Profile("2025-06-18", batches=False, version_header=True, priming=False, **_LEGACY),
        Profile("2025-11-25", batches=False, version_header=True, priming=True, **_LEGACY),
        Profile(
            "2026-07-28",
            sessions=False,
            get_stream=False,
            resumability=False,
            batches=False,
            version_header=True,
            request_headers=True,
            priming=False,
        ),
    )
}

# Accepted spellings and what to tell the user about them.
ALIASES: dict[str, tuple[str, str]] = {
    "stable-2025-11-25": ("2025-11-25", "alias of the published revision 2025-11-25"),
    "draft-2026-07-28": (
        "2026-07-28",
        "the 2026-07-28 draft is now the published revision 2026-07-28; checked against it",
    ),
}

# Revisions a server may support; anything else in MCP-Protocol-Version is unsupported.
KNOWN_VERSIONS = frozenset({"2024-11-05", *PROFILES})

# Revision names sort as dates: the newest revision a client tries first (2026-07-28: no
# handshake, ``server/discover``), and the newest with sessions, which ``initialize`` asks for.
NEWEST = PROFILES[max(PROFILES)]
NEWEST_WITH_SESSIONS = PROFILES[max(name for name, p in PROFILES.items() if p.sessions)]


class UnknownProfile(InputError):
    """The profile names no published revision: the validator refuses to guess."""


def named(name: str | None) -> Profile | None:
    """The profile a revision name or alias stands for; None for no name or an unknown one
    (a version a server answers with is data, not an input error)."""
    if name in PROFILES:
        return PROFILES[name]
    if name in ALIASES:
        return PROFILES[ALIASES[name][0]]
    return None


def resolve(name: str) -> tuple[Profile, str | None]:
    """The profile for ``name`` and, for an alias, a note saying what it resolved to."""
    if name in PROFILES:
        return PROFILES[name], None
    if name in ALIASES:
        target, note = ALIASES[name]
        return PROFILES[target], note
    known = ", ".join([*PROFILES, *ALIASES])
    raise UnknownProfile(f"unknown profile {name!r} (known: {known})")
