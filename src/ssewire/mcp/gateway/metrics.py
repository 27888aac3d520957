"""The gateway's figures in the Prometheus text format (``GET /metrics``): counters,
gauges and one histogram, with no client library (the format is a few lines of text)."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from ..protocol.reissue import REASONS
from ..server.asgi import plain, respond

# seconds a message spends in the gateway: from its arrival (complete, past the guard) to
# its write downstream; the buckets straddle the 5 ms goal for small messages
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
RECENT = 65536  # the newest latencies kept for exact quantiles (a summary beside the histogram)
QUANTILES = (0.5, 0.99)

PREFIX = "ssewire_gateway_"
COUNTERS = {
    "sessions_opened_total": "downstream sessions opened",
    "upstream_reinitializations_total": "upstream sessions re-initialized after a 404",
    "upstream_resets_absorbed_total": "upstream streams that broke and were resumed or re-issued",
    "resumptions_total": "upstream resumptions with Last-Event-ID",
    "unsafe_resumptions_total": "upstream resumptions refused as unsafe (the call got an explicit error)",
    "reissues_total": "requests sent upstream again after a broken answer, by why they were safe to repeat",
    "bridge_resets_absorbed_total": "upstream answers of bridged calls that broke and were resumed or re-issued",
    "bridge_resumptions_total": "upstream resumptions with Last-Event-ID of bridged calls",
    "bridge_unsafe_resumptions_total": "bridged calls ended with an explicit error: their resumption was unsafe",
    "takeovers_total": "calls of a stopped replica taken up here and resumed upstream",
    "downstream_resumptions_total": "downstream GETs with Last-Event-ID served from the gateway's store",
    "messages_total": "messages written downstream",
    "downstream_bytes_total": "bytes of events (and of 2026-07-28 JSON answers) written downstream",
    "calls_failed_total": "calls answered with the gateway's own JSON-RPC error",
    "refused_total": "downstream requests refused (bad body, unknown session, foreign Origin...)",
    "undeliverable_total": "upstream messages with no downstream stream open to take them",
    "stalled_readers_total": "downstream streams cut because their client read nothing for write_timeout",
    "unauthenticated_total": "downstream requests refused 401 or 403 (no, bad or insufficient credentials)",
    "budget_refusals_total": "downstream requests refused 503 because the bytes in flight were at the budget",
    "rate_limited_total": "downstream requests refused 429 by a rate limit of their route",
}
# counters whose samples carry a label of their own beside the route's: name -> (the label,
# its values: each always rendered, 0 until counted, so no series appears or vanishes)
LABELLED = {"reissues_total": ("reason", REASONS)}
GAUGES = {
    "sessions_open": "downstream sessions held by this process",
    "streams_open": "downstream streams being written now",
    "bytes_in_flight": "bytes of request bodies being read and parsed now (at their parse cost)",
    "bytes_in_flight_peak": "the most bytes in flight at once since start",
    "held_sessions": "per-principal quotas: sessions held (all principals)",
    "held_calls": "per-principal quotas: calls in flight (all principals)",
    "held_streams": "per-principal quotas: GET and subscriptions/listen streams open (all principals)",
    "held_bytes": "per-principal quotas: bytes of request bodies being read (all principals)",
}


class Metrics:
    """Counters and gauges by name (without the prefix), the latency histogram, and
    ``collect``: callables adding figures read at scrape time (the upstream clients')."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTERS, 0.0)
        self.gauges = dict.fromkeys(GAUGES, 0.0)
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.latency_sum = 0.0
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.collect: list[Callable[[], dict[str, float]]] = []

    def add(self, name: str, value: float = 1.0) -> None:
        self.counts[name] += value

    def add_labelled(self, name: str, label: str, value: float = 1.0) -> None:
        """One of the `LABELLED` counters, under its label's value (``reason="read-only"``)."""
        key = f"{name}:{label}"
        self.counts[key] = self.counts.get(key, 0.0) + value

    def observe(self, seconds: Iterable[float]) -> None:
        for value in seconds:
            self.buckets[bisect.bisect_left(BUCKETS, value)] += 1
            self.latency_sum += value
            self.recent.append(value)

    def snapshot(self) -> dict[str, float]:
        """Counters and gauges, the collected figures added in (a `LABELLED` counter as its
        parts, ``reissues_total:read-only``, and their total)."""
        figures = {**self.counts, **self.gauges}
        for collect in self.collect:
            for name, value in collect().items():
                figures[name] = figures.get(name, 0.0) + value
        for name in LABELLED:  # the total beside its labelled parts
            figures[name] = sum(value for key, value in figures.items() if key.startswith(name + ":"))
        return figures

    def render(self) -> bytes:
        return render([("", self)])


def render(routes: list[tuple[str, Metrics]]) -> bytes:
    """The figures of several gateways in one exposition, each sample labelled with its
    route (none for a route named ""): each family's HELP and TYPE once, as the format asks."""
    figures = [(_labels(route), metrics, metrics.snapshot()) for route, metrics in routes]
    lines: list[str] = []
    for kind, table in (("counter", COUNTERS), ("gauge", GAUGES)):
        for name, text in table.items():
            lines += [f"# HELP {PREFIX}{name} {text}", f"# TYPE {PREFIX}{name} {kind}"]
            for labels, _, snapshot in figures:
                if name in LABELLED:
                    lines += _labelled(name, labels, snapshot)
                else:
                    lines.append(f"{PREFIX}{name}{_braced(labels)} {snapshot.get(name, 0.0):g}")
    name = f"{PREFIX}added_latency_seconds"
    lines += [
        f"# HELP {name} time from a message's arrival to its write downstream",
        f"# TYPE {name} histogram",
    ]
    for labels, metrics, _ in figures:
        total = 0
        for bound, count in zip((*BUCKETS, float("inf")), metrics.buckets, strict=True):
            total += count
            label = "+Inf" if bound == float("inf") else f"{bound:g}"
            bucket = _braced([*labels, 'le="' + label + '"'])
            lines.append(f"{name}_bucket{bucket} {total}")
        lines += [
            f"{name}_sum{_braced(labels)} {metrics.latency_sum:.6f}",
            f"{name}_count{_braced(labels)} {total}",
        ]
    name = f"{PREFIX}recent_latency_seconds"
    lines += [f"# HELP {name} the newest {RECENT} added latencies", f"# TYPE {name} summary"]
    for labels, metrics, _ in figures:
        ordered = sorted(metrics.recent)
        for q in QUANTILES:
            value = ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
            quantile = _braced([*labels, 'quantile="' + f"{q:g}" + '"'])
            lines.append(f"{name}{quantile} {value:.6f}")
        lines += [
            f"{name}_sum{_braced(labels)} {sum(ordered):.6f}",
            f"{name}_count{_braced(labels)} {len(ordered)}",
        ]
    return ("\n".join(lines) + "\n").encode()


def _labelled(name: str, labels: list[str], snapshot: dict[str, float]) -> list[str]:
    """A `LABELLED` counter's samples: one per label value (``name:value`` in the snapshot)."""
    label, values = LABELLED[name]
    lines = []
    for value in values:  # the values are the code's own names (reissue.REASONS): nothing to escape
        pair = label + '="' + value + '"'
        lines.append(f"{PREFIX}{name}{_braced([*labels, pair])} {snapshot.get(name + ':' + value, 0.0):g}")
    return lines


def _labels(route: str) -> list[str]:
    # route names are the config's ([a-z0-9_-]): nothing in them needs escaping
    return [f'route="{route}"'] if route else []


def _braced(labels: list[str]) -> str:
    return "{" + ",".join(labels) + "}" if labels else ""


async def expose(send: Any, exposition: bytes) -> None:
    """Answer a scrape with ``exposition``."""
    await respond(send, 200, exposition, [("content-type", "text/plain; version=0.0.4")])


def metrics_app(exposition: Callable[[], bytes]) -> Any:
    """An ASGI app answering only ``GET /metrics`` (with ``exposition()``), for a loopback
    port of its own."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/metrics" and scope["method"] == "GET":
            await expose(send, exposition())
        else:
            await plain(send, 404, "not found")

    return app


def render_process(generation: int, reload_failures: int) -> bytes:
    """The figures of the process's routes file: which reading of it runs, and how many
    readings were refused (their routes never served: the old ones kept)."""
    return (
        f"# HELP {PREFIX}config_generation the reading of the routes file that is served (1: at start)\n"
        f"# TYPE {PREFIX}config_generation gauge\n"
        f"{PREFIX}config_generation {generation}\n"
        f"# HELP {PREFIX}config_reload_failures_total readings of the routes file refused (the routes kept)\n"
        f"# TYPE {PREFIX}config_reload_failures_total counter\n"
        f"{PREFIX}config_reload_failures_total {reload_failures}\n"
    ).encode()
