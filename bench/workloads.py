"""The benchmark workloads: pre-built chunk lists, the same bytes for every decoder.

``SSEWIRE_BENCH_SCALE`` (default 1) scales the event counts, so CI can run the whole
suite once on small inputs (e.g. 0.01) without it rotting.
"""

from __future__ import annotations

import functools
import os
import random
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
SCALE = float(os.environ.get("SSEWIRE_BENCH_SCALE", "1"))
ROUNDS = int(os.environ.get("SSEWIRE_BENCH_ROUNDS", "5"))  # timed rounds a contender, where set here


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    chunks: tuple[bytes, ...]
    events: int
    data_size: int  # sum of every event's data length (each is ASCII: bytes = characters)
    payloads: tuple[bytes, ...] = ()  # the JSON data of each event, where it is JSON

    @property
    def nbytes(self) -> int:
        return sum(map(len, self.chunks))


def _scaled(count: int, minimum: int = 1) -> int:
    return max(minimum, int(count * SCALE))


def _fixed_chunks(stream: bytes, size: int) -> tuple[bytes, ...]:
    return tuple(stream[i : i + size] for i in range(0, len(stream), size))


def _random_chunks(stream: bytes, low: int, high: int, seed: int) -> tuple[bytes, ...]:
    rng = random.Random(seed)
    chunks, i = [], 0
    while i < len(stream):
        n = rng.randint(low, high)
        chunks.append(stream[i : i + n])
        i += n
    return tuple(chunks)


def _notification(i: int) -> bytes:
    """A ~120-byte JSON-RPC progress notification."""
    return (
        b'{"jsonrpc":"2.0","method":"notifications/progress",'
        b'"params":{"progressToken":"tok-%06d","progress":%d,"total":1000000}}' % (i % 1000000, i)
    )


def _small_size(count: int) -> int:
    return sum(len(_notification(i)) for i in range(count))


@functools.cache
def small_events(count: int, eol: bytes = b"\n") -> bytes:
    return b"".join(b"data: " + _notification(i) + eol + eol for i in range(count))


def tool_result(i: int, size: int) -> bytes:
    """A JSON-RPC response carrying one text block of about ``size`` bytes."""
    line = b'lorem ipsum dolor sit amet, consectetur adipiscing elit \\"quoted\\" \\n '
    text = (line * (size // len(line) + 1))[: size - 100]
    if text.endswith(b"\\"):
        text = text[:-1] + b"."
    return b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"' % i + text + b'"}]}}'


@functools.cache
def workload(name: str) -> Workload:
    if name == "W1":
        n = _scaled(1_000_000)
        return Workload(
            name,
            f"{n:,} small JSON-RPC events, 64 KiB chunks",
            _fixed_chunks(small_events(n), 64 * KIB),
            n,
            _small_size(n),
        )
    if name == "W2":
        n = _scaled(100)
        payloads = tuple(tool_result(i, 4 * MIB) for i in range(n))
        stream = b"".join(b"data: " + p + b"\n\n" for p in payloads)
        return Workload(
            name,
            f"{n} events of 4 MiB (one data line), 64 KiB chunks",
            _fixed_chunks(stream, 64 * KIB),
            n,
            sum(map(len, payloads)),
            payloads,
        )
    if name == "W3":
        n = _scaled(20_000)
        values = [b"line %02d of a multi-line event, some payload text" % j for j in range(50)]
        stream = (b"".join(b"data: " + v + b"\n" for v in values) + b"\n") * n
        size = n * (sum(map(len, values)) + len(values) - 1)  # the lines joined with LF
        return Workload(
            name, f"{n:,} events of 50 data lines, 64 KiB chunks", _fixed_chunks(stream, 64 * KIB), n, size
        )
    if name == "W4":
        n = _scaled(1_000_000)
        return Workload(
            name,
            "W1 with CRLF line ends",
            _fixed_chunks(small_events(n, b"\r\n"), 64 * KIB),
            n,
            _small_size(n),
        )
    if name == "W5":
        n = _scaled(1_000_000)
        chunks = _random_chunks(small_events(n), 1, 4096, seed=5)
        return Workload(name, "W1 in random chunks of 1..4096 bytes", chunks, n, _small_size(n))
    if name == "W5-1B":
        n = _scaled(20_000)
        return Workload(
            name, f"{n:,} small events in 1-byte chunks", _fixed_chunks(small_events(n), 1), n, _small_size(n)
        )
    raise KeyError(name)


THROUGHPUT = ("W1", "W2", "W3", "W4", "W5", "W5-1B")


@functools.cache
def single_event(size: int, chunk: int) -> Workload:
    """One event of ``size`` bytes of data fed in ``chunk``-byte pieces (growth, memory)."""
    stream = b"data: " + b"x" * size + b"\n\n"
    return Workload(
        f"{size // MIB} MiB", f"one {size // MIB} MiB event", _fixed_chunks(stream, chunk), 1, size
    )
