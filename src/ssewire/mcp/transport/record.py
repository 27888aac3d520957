"""Record HTTP exchanges as an ``ssewire-transcript/1`` document, on the one
transport path (``http.py``), so a recording reads bodies as the client and the probe do.

The body is kept as it was read, one chunk per read, after content-encoding is undone (what
an SSE parser sees; a compressing proxy changes the bytes on the wire, not the events). A
stream still open when its ``read_timeout`` passes with nothing, or its chunk budget runs
out, is closed by the recorder and marked ``disconnected``.

Bounded: a recording keeps at most ``max_answer_bytes`` of each body and ``max_total_bytes``
over all of them (whole chunks, the body's first ones); a body cut short is marked
``truncated`` with the bytes left out, and the validator reports it as cut by the recorder
(``recording_truncated``), not as torn events. Needs httpx
(``pip install 'ssewire[httpx]'``).

    async with httpx.AsyncClient(base_url=url) as client:
        recorder = Recorder(client)
        await recorder.exchange("POST", "/mcp", headers, body)
        document = recorder.document("2025-11-25")
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from ..transcript import TranscriptWriter
from .http import Broken, Idle, send

# What a recording keeps of response bodies. Per answer: one message at the official SDK
# server's 4 MB cap, with its SSE framing; in total: eight such, far above the few hundred
# KiB a probe's hundred-odd small exchanges need, and a constant under any hostile peer.
RECORD_MAX_ANSWER = (4 << 20) + (64 << 10)  # 4 MiB + 64 KiB
RECORD_MAX_TOTAL = 32 << 20  # 32 MiB


class Recorder:
    """Sends requests with ``client`` and records each with its response."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        max_chunks: int = 10_000,
        timeout: float = 10.0,
        max_answer_bytes: int | None = RECORD_MAX_ANSWER,
        max_total_bytes: int | None = RECORD_MAX_TOTAL,
    ) -> None:
        self.client = client
        self.max_chunks = max_chunks
        self.timeout = timeout  # seconds for an answer's head, and for each read of a body
        self.writer = TranscriptWriter(max_answer_bytes=max_answer_bytes, max_total_bytes=max_total_bytes)

    async def exchange(
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
        many idle seconds, close it, and mark the response ``disconnected`` (without it, a
        body silent for ``timeout`` seconds raises ``transport.Idle``). ``name``: the
        exchange id (default ``e1``, ``e2``, ...).
        """
        content = None if body is None else orjson.dumps(body)
        sent = dict(headers or {})
        shown = self.client.build_request(method, url, headers=sent, content=content).headers
        record = self.writer.request(
            method, url, shown.multi_items(), content, name=name, idempotent=idempotent
        )
        answer = await send(self.client, method, url, sent, content, head_timeout=self.timeout, record=record)
        record.respond(answer.status, answer.headers.multi_items())
        try:
            reads = 0
            async for _ in answer.chunks(idle=read_timeout if read_timeout is not None else self.timeout):
                reads += 1
                if reads >= self.max_chunks:
                    break
        except Idle:
            if read_timeout is None:
                raise
        except Broken:
            pass  # recorded as it ended: disconnected
        finally:
            await answer.aclose()
        return record.as_dict()

    def document(self, profile: str, **tuple_: str) -> dict[str, Any]:
        return self.writer.document(profile, **tuple_)
