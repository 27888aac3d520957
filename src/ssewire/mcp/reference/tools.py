"""The reference server's tools, as data (``TOOLS``, what ``tools/list`` answers) and the
small pure helpers their handlers use: arguments read as JSON Schema reads them, results of
one text block, and filler text that tells where it was cut."""

from __future__ import annotations

import json
import math
from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {
        "name": "countdown",
        "description": "Send `count` progress notifications `delay` seconds apart, then a result of `size` bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "delay": {"type": "number"},
                "size": {"type": "integer"},
            },
        },
    },
    {
        "name": "big",
        "description": "Return one text block of `size` bytes (default 4 MiB).",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
    {
        "name": "ask",
        "description": "Ask the client a question (sampling/createMessage) and return its answer.",
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}},
    },
    {
        "name": "structured",
        "description": "Return `n` as structured content.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"value": {"type": "integer"}},
            "required": ["value"],
            "additionalProperties": False,
        },
    },
]


def filler(size: int) -> str:
    """``size`` bytes of text that tell where they were cut: a torn copy never looks whole."""
    line = "".join(f"{n:07d} " for n in range(1, 129))  # 1 KiB, counting
    return (line * (size // len(line) + 1))[:size] if size else "done"


def as_object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def text_result(text: str) -> dict[str, Any]:  # a tool result of one text block
    return {"content": [{"type": "text", "text": text}]}


class InvalidArgument(ValueError):
    """A tool argument of the wrong type: the call is answered -32602 (Invalid params)."""


def integer_argument(arguments: dict[str, Any], name: str, default: int, *, high: int | None = None) -> int:
    """An integer argument (JSON Schema's: 2.0 is one), clamped to ``[0, high]`` when
    ``high`` is given; a bool, a fraction or a string is refused."""
    value = arguments.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an integer, not {json.dumps(value)[:40]}")
    return value if high is None else max(0, min(value, high))


def number_argument(arguments: dict[str, Any], name: str, default: float, *, high: float) -> float:
    """A number argument, clamped to ``[0, high]``."""
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{name} must be a number, not {json.dumps(value)[:40]}")
    return max(0.0, min(float(value), high))
