"""Tool arguments mirrored into HTTP headers (2026-07-28, "custom headers from tool
parameters"), sans-IO: a tool's ``inputSchema`` may mark a property with ``x-mcp-header``,
and a client calling that tool over Streamable HTTP then sends the argument's value as
``Mcp-Param-{Name}``.

- only properties reached through ``properties`` keys count; an annotation anywhere else
  (``items``, a composition, a conditional, ``$defs``...) makes the tool definition invalid;
- the name is an HTTP token (RFC 9110 5.6.2), unique in the tool whatever its letter case;
- only ``string``, ``integer`` and ``boolean`` properties may carry one;
- a client sets aside a tool whose annotations break these rules;
- a null or absent argument sends no header; a value that cannot travel as a plain field
  value (non-ASCII, control characters, surrounding whitespace, or one that looks like the
  wrapper) goes as ``=?base64?{UTF-8 in Base64}?=``, the form `wire.decode_value` reads;
- a server that reads the body refuses a call (400 / -32020) whose header is missing while
  its argument has a value, cannot be decoded, or disagrees with the argument (`mismatch`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .wire import decode_value

ANNOTATION = "x-mcp-header"
PREFIX = "Mcp-Param-"
ANNOTATED_TYPES = frozenset({"string", "integer", "boolean"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PLAIN = re.compile(r"[\x20-\x7e]*")
_WRAPPED = re.compile(r"=\?base64\?.*\?=", re.DOTALL)
_NUMBER = re.compile(r"-?[0-9]{1,32}(\.[0-9]{1,32})?([eE][+-]?[0-9]{1,3})?")  # a header compared as a number
MAX_NODES = 10_000  # schema nodes walked: a hostile schema costs no more
MAX_DEPTH = 64


class InvalidAnnotation(ValueError):
    """A tool's ``x-mcp-header`` annotations break the rules: the tool is set aside."""


@dataclass(frozen=True)
class Binding:
    """One annotated parameter: its header name and where its value sits in the arguments."""

    header: str  # the annotation's value, e.g. "Region" (sent as Mcp-Param-Region)
    path: tuple[str, ...]  # property names from the arguments' top level


def bindings(schema: Any) -> tuple[Binding, ...]:
    """The annotated parameters of a tool's ``inputSchema``, or `InvalidAnnotation` naming
    the first rule broken."""
    reachable: dict[tuple[str, ...], Any] = {}  # path -> the annotated property's schema
    found: list[tuple[tuple[Any, ...], Any]] = []  # every annotation anywhere: (json path, its node)
    for nodes, (path, node) in enumerate(_walk(schema), 1):
        if nodes > MAX_NODES:
            raise InvalidAnnotation(f"the inputSchema has over {MAX_NODES} nodes")
        if ANNOTATION in node:
            found.append((path, node))
    for path, node in found:
        chain = _property_chain(path)
        if chain is None:
            where = "/".join(str(part) for part in path) or "the schema's root"
            raise InvalidAnnotation(f"{ANNOTATION} at {where} is not reached through properties alone")
        reachable[chain] = node
    seen: dict[str, str] = {}
    out = []
    for chain, node in reachable.items():
        name = node[ANNOTATION]
        if not isinstance(name, str) or not name:
            raise InvalidAnnotation(f"{ANNOTATION} of {'.'.join(chain)} is not a non-empty string")
        if not _TOKEN.fullmatch(name):
            raise InvalidAnnotation(f"{ANNOTATION} {name!r} of {'.'.join(chain)} is not an HTTP token")
        if name.lower() in seen:
            raise InvalidAnnotation(f"{ANNOTATION} {name!r} is given twice ({seen[name.lower()]!r})")
        seen[name.lower()] = name
        kind = node.get("type")
        if not isinstance(kind, str) or kind not in ANNOTATED_TYPES:
            raise InvalidAnnotation(
                f"{ANNOTATION} {name!r} is on a property of type {kind!r}: only string, integer, boolean"
            )
        out.append(Binding(name, chain))
    return tuple(out)


def _walk(
    node: Any, path: tuple[Any, ...] = (), depth: int = 0
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every schema object in ``node`` with its JSON path (bounded in depth)."""
    if depth > MAX_DEPTH:
        raise InvalidAnnotation(f"the inputSchema nests deeper than {MAX_DEPTH}")
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                yield from _walk(value, (*path, key), depth + 1)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, index), depth + 1)


def _property_chain(path: tuple[Any, ...]) -> tuple[str, ...] | None:
    """("properties", "a", "properties", "b") -> ("a", "b"); None for any other path."""
    if not path or len(path) % 2:
        return None
    chain = []
    for keyword, name in zip(path[::2], path[1::2], strict=True):
        if keyword != "properties" or not isinstance(name, str):
            return None
        chain.append(name)
    return tuple(chain)


def encode(value: str) -> str:
    """A header value as it travels: as it is when it is plain visible ASCII with inner
    spaces only, else the Base64 wrapper."""
    if _PLAIN.fullmatch(value) and value == value.strip(" ") and not _WRAPPED.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def value_text(value: Any) -> str | None:
    """An argument's value as its ``Mcp-Param-*`` header says it, before encoding; None: no
    header is due (null, or not a primitive)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    """The header text of an argument's value as it travels (`encode`d)."""
    text = value_text(value)
    return None if text is None else encode(text)


def _argument(arguments: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in the call's arguments (None when any step is missing)."""
    value = arguments
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    return value


def headers(bound: tuple[Binding, ...], arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of one call: one per annotated argument present and not null."""
    out: dict[str, str] = {}
    for binding in bound:
        text = _text(_argument(arguments, binding.path))
        if text is not None:
            out[PREFIX + binding.header] = text
    return out


def mismatch(bound: tuple[Binding, ...], arguments: Any, sent: Mapping[str, str]) -> str | None:
    """Why a server that reads the body must refuse this call (2026-07-28 Server Behavior for
    Custom Headers: 400 / -32020), or None. ``sent``: the request's headers by lower-case
    name. Each annotated argument with a value must come as its header, decodable and equal
    to it (an integer compared as a number: ``42.0`` is 42); a null or absent one expects none."""
    for binding in bound:
        value = _argument(arguments, binding.path)
        expected = value_text(value)
        if expected is None:
            continue
        header, where = PREFIX + binding.header, ".".join(binding.path)
        field = sent.get(header.lower())
        if field is None:
            return f"{header} is missing, but the argument {where} has a value"
        got = decode_value(field)
        if got is None:
            return f"{header} is malformed: invalid characters, or a =?base64?...?= form that does not decode"
        if got != expected and not _same_number(got, value):
            return f"{header} disagrees with the argument {where}"
    return None


def _same_number(text: str, value: Any) -> bool:
    """``text`` is the number ``value`` (an integer argument: the spec asks for a numeric
    comparison, so ``42.0`` and ``42`` agree); never for a string or a boolean argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _NUMBER.fullmatch(text):
        return False
    return Decimal(text) == Decimal(value)
