"""The 2026-07-28 header rules: a request's MCP-Protocol-Version, Mcp-Method and Mcp-Name
must agree with its body (and the version must be one the server knows). The reference
server answers by them and the validator's model judges recorded answers by them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .profiles import KNOWN_VERSIONS
from .wire import META_VERSION, NAME_FIELDS, decode_name

HEADER_MISMATCH = -32020  # the JSON-RPC errors 2026-07-28 names for these rejections
UNSUPPORTED_VERSION = -32022


class Fields(Protocol):
    """Header fields looked up by lower-case name (a dict of them, or httpx's Headers)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class ModernHeaders:
    """A 2026-07-28 request's MCP headers against its body (a request POSTed alone)."""

    body_method: str | None  # the request's method
    version: str | None  # MCP-Protocol-Version, trimmed
    meta_version: Any  # the body's _meta protocolVersion
    method: str | None  # Mcp-Method, trimmed
    name_field: str | None  # "name" or "uri" for methods that need Mcp-Name
    name: str | None  # Mcp-Name, base64 form decoded
    expected_name: Any

    @classmethod
    def of(cls, headers: Fields, message: Any) -> ModernHeaders:
        """``headers`` with lower-case names (or a case-insensitive mapping), ``message`` the body."""
        method = message.get("method") if isinstance(message, dict) else None
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        name_field = NAME_FIELDS.get(method) if isinstance(method, str) else None
        return cls(
            body_method=method if isinstance(method, str) else None,
            version=_stripped(headers.get("mcp-protocol-version")),
            meta_version=meta.get(META_VERSION) if isinstance(meta, dict) else None,
            method=_stripped(headers.get("mcp-method")),
            name_field=name_field,
            name=decode_name(headers.get("mcp-name")),
            expected_name=params.get(name_field) if name_field and isinstance(params, dict) else None,
        )

    @property
    def version_differs(self) -> bool:
        return (
            self.version is not None and self.meta_version is not None and self.version != self.meta_version
        )

    @property
    def method_differs(self) -> bool:
        return self.method != self.body_method

    @property
    def name_differs(self) -> bool:
        return self.name_field is not None and self.name != self.expected_name

    @property
    def problem(self) -> bool:
        """A header disagreeing with the body: the server must answer 400 / -32020."""
        return self.version_differs or self.method_differs or self.name_differs

    @property
    def unsupported(self) -> bool:
        return self.version is not None and self.version not in KNOWN_VERSIONS

    def rejection(self) -> tuple[int, str] | None:
        """The error a server answers with (400 and this JSON-RPC code), or None to serve it."""
        if not self.version or self.version_differs:
            return HEADER_MISMATCH, "MCP-Protocol-Version is missing or disagrees with the body"
        if self.method_differs:
            return HEADER_MISMATCH, "Mcp-Method disagrees with the body"
        if self.name_differs:
            return HEADER_MISMATCH, "Mcp-Name disagrees with the body"
        if self.unsupported:
            return UNSUPPORTED_VERSION, f"Unsupported protocol version: {self.version}"
        return None


def _stripped(value: str | None) -> str | None:
    """Without the whitespace HTTP does not count (RFC 9110 5.5); an empty field stays "" (present)."""
    return None if value is None else value.strip(" \t")
