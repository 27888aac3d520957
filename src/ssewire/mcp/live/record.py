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

from typing import Any

import httpx
import orjson

from ..transcript import TranscriptWriter


class Recorder:
    def __init__(self, client: httpx.Client, *, max_chunks: int = 10_000) -> None:
        self.client = client
        self.max_chunks = max_chunks
        self.writer = TranscriptWriter()

    def exchange(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        body: Any = None,
        *,
        read_timeout: float | None = None,
        name: str | None = None,
        idempotent: bool | None = None,
    ) -> dict[str, Any]:
        """Send one request, record it with its response, and return the record.

        ``read_timeout``: for a stream the server keeps open, stop reading after this
        many idle seconds, close it, and mark the response ``disconnected``. ``name``: the
        exchange id (default ``e1``, ``e2``, ...).
        """
        content = None if body is None else orjson.dumps(body)
        request = self.client.build_request(method, url, headers=headers, content=content)
        if read_timeout is not None:
            request.extensions["timeout"] = httpx.Timeout(
                self.client.timeout.connect or 10.0, read=read_timeout
            ).as_dict()
        record = self.writer.request(
            method, url, request.headers.multi_items(), content, name=name, idempotent=idempotent
        )
        response = self.client.send(request, stream=True)
        record.respond(response.status_code, response.headers.multi_items())
        try:
            pieces = response.iter_raw()
            for _ in range(self.max_chunks):
                try:
                    record.chunk(next(pieces))
                except StopIteration:
                    record.end()
                    break
                except httpx.ReadTimeout:
                    if read_timeout is None:
                        raise
                    break  # still open: recorded as disconnected
        finally:
            response.close()
        return record.as_dict()

    def document(self, profile: str, **tuple_: str) -> dict[str, Any]:
        return self.writer.document(profile, **tuple_)
