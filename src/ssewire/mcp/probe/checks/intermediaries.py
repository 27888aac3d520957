"""Intermediaries: what a proxy in front of the server does to event streams, judged over
every answer the probe received (so it runs after the checks that stream)."""

from __future__ import annotations

from ...checks.catalogue import diagnostic
from ...checks.findings import Level, Status
from ._intermediary import named_by
from ._plan import Context, check

diagnostic(
    "stream.compressed",
    Level.WARNING,
    "convention (a compressor holds events back until its buffer fills unless it flushes each one)",
    typescript="leave text/event-stream out of compression (compression({ filter })); behind nginx: gzip off for the MCP location",
    python="do not wrap the MCP endpoint in GZipMiddleware; behind nginx: gzip off and proxy_buffering off for the MCP location",
    plain="send text/event-stream without Content-Encoding; behind nginx: gzip off (or gzip_types without text/event-stream) and proxy_buffering off",
)


@check("stream.compressed")
def compression(ctx: Context) -> None:
    """An SSE answer with a Content-Encoding is a buffering risk even where its events came
    in time (this nginx flushes per upstream read; many compressors do not). The transport
    undoes the encoding, so the events themselves are judged as usual."""
    streams = [a for a in ctx.received if a.succeeded and a.is_sse]
    compressed = [a for a in streams if _encodings(a.headers.get("content-encoding"))]
    if not streams:
        ctx.passed("stream.compressed", "not applicable: no SSE answer came")
    elif compressed:
        used = sorted({e for a in compressed for e in _encodings(a.headers.get("content-encoding"))})
        ctx.verdict(
            "stream.compressed",
            Status.DETECTED,
            f"{len(compressed)} of {len(streams)} SSE answers came compressed ({', '.join(used)}): "
            "a compressor that does not flush each event holds them back",
            {
                **compressed[0].evidence(),
                "encodings": used,
                "intermediary": named_by(compressed[0].headers) or "none named",
            },
        )
    else:
        ctx.passed("stream.compressed", f"{len(streams)} SSE answers, none compressed")


def _encodings(value: str | None) -> list[str]:
    """The content codings of a Content-Encoding value, without the no-op ``identity``."""
    codings = (c.strip().lower() for c in (value or "").split(","))
    return [c for c in codings if c and c != "identity"]
