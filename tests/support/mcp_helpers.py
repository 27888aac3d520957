"""Helpers shared by the MCP tests: running the CLI in-process, writing documents, reading
findings in short form, re-cutting SSE bodies, inputs the loader must refuse, and waiting
for a client's GET stream, reading a test server's request body."""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import random
from typing import Any

from ssewire import cli
from ssewire.mcp import from_document, validate
from tests.support.transcripts import exchange


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, document, name="t.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return str(path)


def codes(document: dict, profile: str | None = None) -> list[tuple[str, str, str | None]]:
    """(code, level, exchange) of every finding, in report order."""
    return [(f.code, f.level, f.exchange) for f in validate(from_document(document), profile).findings]


def summary(document: dict) -> tuple[list[tuple], list[dict]]:
    """Everything a finding says but its hint and requirement, and the recovery lines."""
    result = validate(from_document(document))
    return [(f.code, f.level, f.exchange, f.path, f.message) for f in result.findings], [
        r.as_dict() for r in result.recovery
    ]


def rechunk(document: dict, rnd: random.Random) -> dict:
    """Cut every SSE body anew at random byte offsets (inside characters too)."""
    document = copy.deepcopy(document)
    for item in document["exchanges"]:
        response = item.get("response") or {}
        if "chunks" not in response:
            continue
        whole = "".join(response.pop("chunks")).encode()
        cuts = (
            sorted(rnd.sample(range(1, len(whole)), min(len(whole) - 1, rnd.randint(0, 12))))
            if len(whole) > 1
            else []
        )
        if rnd.random() < 0.2:
            cuts = list(range(1, len(whole)))  # byte by byte
        bounds = [0, *cuts, len(whole)]
        response["chunks_b64"] = [
            base64.b64encode(whole[a:b]).decode() for a, b in itertools.pairwise(bounds)
        ]
    return document


# -- inputs the loader refuses (exit 2, never a finding) ---------------------------------

BAD_INPUTS = {
    "nan": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [], "x-n": NaN}',
    "infinity": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [], "x-n": -Infinity}',
    "not json": "{",
    "duplicate key": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "profile": "2026-07-28", "exchanges": []}',
    "wrong format": '{"format": "har/1.2", "profile": "2025-11-25", "exchanges": []}',
    "exchanges not a list": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": {}}',
    "unknown profile": '{"format": "ssewire-transcript/1", "profile": "2024-01-01", "exchanges": []}',
    "no profile": '{"format": "ssewire-transcript/1", "exchanges": []}',
    "top-level array": "[]",
}


def one_exchange(**response) -> dict:
    """A transcript of one POST whose response has these fields."""
    item = exchange("notify", "POST", {}, 200, body={"jsonrpc": "2.0", "method": "n"})
    item["response"].update(response)
    return {"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [item]}


BAD_DOCUMENTS = {
    "duplicate exchange ids": {
        "format": "ssewire-transcript/1",
        "profile": "2025-11-25",
        "exchanges": [exchange("listen", "GET", {}, 405), exchange("listen", "GET", {}, 405)],
    },
    "status not an int": one_exchange(status="200"),
    "status out of range": one_exchange(status=1000),
    "two bodies": one_exchange(chunks=["a"], body={}),
    "bad base64": one_exchange(chunks_b64=["%%%"]),
    "chunk not a string": one_exchange(chunks=[1]),
    "header value not a string": one_exchange(headers={"Content-Type": 1}),
    "unknown field": one_exchange(chunk=["typo"]),
    "disconnected not a bool": one_exchange(disconnected="yes"),
}

# Strings JSON can carry but a transcript cannot hold (exit 2 for validate and redact).
UNREPRESENTABLE = {
    "surrogate id": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "\\ud800", "request": {"method": "GET"}}]}',
    "surrogate body": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "post", "request": {"method": "POST", "body": {"x": "\\udfff"}}}]}',
    "control char id": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "a\\u0000b", "request": {"method": "GET"}}]}',
    "non-token header name": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "get", "request": {"method": "GET", "headers": {"caf\\u00e9": "x"}}}]}',
    "number out of range": '{"format": "ssewire-transcript/1", "profile": "2025-11-25", "exchanges": [{"id": "post", "request": {"method": "POST", "body": {"id": 1e400}}}]}',
}


async def until_listening(client, within: float = 10.0) -> None:
    """Wait (bounded) until the client's standalone GET stream is open."""
    for _ in range(int(within / 0.01)):
        if client.listening:
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"the GET stream did not open within {within} s")


# an initialize request as a 2025-11-25 client sends it, for tests speaking raw HTTP
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


async def request_body(receive: Any) -> bytes:
    """An ASGI request's whole body (the test servers' one read loop)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
