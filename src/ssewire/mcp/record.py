"""Record HTTP exchanges with httpx as an ``ssewire-transcript/1`` document.

The body is kept exactly as it came off the connection (``iter_raw``, one chunk per read),
so the transcript shows the framing a client really saw. A stream still open when its
read timeout or chunk budget runs out is closed by the recorder and marked
``disconnected``. Needs httpx (``pip install 'ssewire[httpx]'``).

    with httpx.Client(base_url=url) as client:
        recorder = Recorder(client)
        recorder.exchange("POST", "/mcp", headers, body)
        document = recorder.document("2025-11-25")
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from .transcript import FORMAT


class Recorder:
    def __init__(self, client: Any, *, max_chunks: int = 10_000) -> None:
        self.client = client  # an httpx.Client
        self.max_chunks = max_chunks
        self.exchanges: list[dict[str, Any]] = []

    def exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
        *,
        read_timeout: float | None = None,
        idempotent: bool | None = None,
    ) -> dict[str, Any]:
        """Send one request, record it with its response, and return the record.

        ``read_timeout``: for a stream the server keeps open, stop reading after this
        many idle seconds, close it, and mark the response ``disconnected``.
        """
        import httpx

        content = None if body is None else orjson.dumps(body)
        request = self.client.build_request(method, url, headers=headers, content=content)
        if read_timeout is not None:
            request.extensions["timeout"] = httpx.Timeout(
                self.client.timeout.connect or 10.0, read=read_timeout
            ).as_dict()
        chunks: list[bytes] = []
        disconnected = False
        response = self.client.send(request, stream=True)
        try:
            pieces = response.iter_raw()
            while True:
                if len(chunks) >= self.max_chunks:
                    disconnected = True
                    break
                try:
                    chunks.append(next(pieces))
                except StopIteration:
                    break
                except httpx.ReadTimeout:
                    if read_timeout is None:
                        raise
                    disconnected = True
                    break
        finally:
            response.close()
        record: dict[str, Any] = {"id": f"e{len(self.exchanges) + 1}"}
        if idempotent is not None:
            record["idempotent"] = idempotent
        record["request"] = {"method": method, "url": url, "headers": _fields(request.headers)}
        if body is not None:
            record["request"]["body"] = body
        record["response"] = {
            "status": response.status_code,
            "headers": _fields(response.headers),
            **_body(chunks),
        }
        record["response"]["disconnected"] = disconnected
        self.exchanges.append(record)
        return record

    def document(self, profile: str, **tuple_: str) -> dict[str, Any]:
        document: dict[str, Any] = {"format": FORMAT, "profile": profile}
        if tuple_:
            document["tuple"] = tuple_
        document["exchanges"] = self.exchanges
        return document


def _fields(headers: Any) -> dict[str, Any]:
    """httpx headers as transcript headers: a repeated field becomes an array."""
    out: dict[str, Any] = {}
    for name, value in headers.multi_items():
        if name in out:
            out[name] = [*out[name], value] if isinstance(out[name], list) else [out[name], value]
        else:
            out[name] = value
    return out


def _body(chunks: list[bytes]) -> dict[str, Any]:
    try:
        return {"chunks": [chunk.decode("utf-8") for chunk in chunks]}
    except UnicodeDecodeError:  # a chunk split inside a character, or not UTF-8 at all
        return {"chunks_b64": [base64.b64encode(chunk).decode("ascii") for chunk in chunks]}
