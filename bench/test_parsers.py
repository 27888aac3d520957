"""Large JSON-RPC messages parsed by each JSON parser, side by side: time and peak memory.

``ssewire.jsonrpc`` hands each complete event's data, as bytes, to ``orjson.loads``.
Whether another parser would be worth an optional hook is measured here, not assumed:
the same bytes for every parser, one MCP tool result in four shapes and five sizes.

Time: every parser in turn, round after round (as in test_side_by_side.py), each keeping
its minimum. Peak: one parse in a fresh child process, read from the kernel's RSS
high-water mark, because tracemalloc does not see what a Rust crate allocates with the
system allocator.

``python bench/test_parsers.py PARSER SHAPE NBYTES`` is the child: it prints one JSON line.
"""

from __future__ import annotations

import functools
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import report
from workloads import KIB, MIB, ROUNDS, SCALE, _scaled

Parse = Callable[[bytes], Any]

PARSERS = ("orjson.loads", "msgspec.json.decode", "jiter.from_json", "json.loads")
OURS = "orjson.loads"  # what ssewire.jsonrpc calls: the one the others are read against

SHAPES = {
    "ascii": "ASCII text",
    "utf8": "UTF-8 text (CJK, accents, emoji)",
    "escapes": "escaped text (code, logs)",
    "objects": "many small objects",
}
SIZES = {"1 KiB": KIB, "64 KiB": 64 * KIB, "1 MiB": MIB, "4 MiB": 4 * MIB, "16 MiB": 16 * MIB}

# Small payloads are parsed this many bytes' worth a round, so a round outlasts the timer's noise.
BATCH_BYTES = _scaled(4 * MIB, KIB)
# One child process per parser for these sizes: a small parse's peak is lost in page granularity.
PEAK_FROM = MIB
CHILD_TIMEOUT = 120  # seconds; the largest parse takes about one
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def parser(name: str) -> Parse:
    """The parse function ``name`` stands for; an optional one not installed skips."""
    if name == "orjson.loads":
        import orjson  # a dependency of ssewire: missing is an error, not a skip

        return orjson.loads
    if name == "msgspec.json.decode":
        return pytest.importorskip("msgspec.json", reason="msgspec is not installed").decode
    if name == "jiter.from_json":
        return pytest.importorskip("jiter", reason="jiter is not installed").from_json
    if name == "json.loads":
        return json.loads
    raise KeyError(name)


# -- the payloads: deterministic, built once per process -------------------------------

_HEAD = b'{"jsonrpc":"2.0","id":7,"result":{"content":['
_TEXT_HEAD = _HEAD + b'{"type":"text","text":"'
_TEXT_TAIL = b'"}]}}'
_BLOCK = 64 * KIB  # text shapes repeat one block of seeded pieces: building stays quick

# Words the text shapes are drawn from, split by the generators (spaces separate them).
_LOREM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut "
    "labore et dolore magna aliqua ut enim ad minim veniam quis nostrud exercitation ullamco"
)
_UNICODE = (
    "the result of the query was café naïve façade Straße Ærøskøbing señor żółć crème brûlée "
    "Ångström 東京 数据库 日本語のテキスト 검색 결과 結果を表示 中文文本 한국어 Привет Ελληνικά "
    "مرحبا עברית हिन्दी 😀 🚀 👍🏽 🎉 ✅ 🇯🇵"
)


def _ascii_pieces(rng: random.Random) -> Iterator[bytes]:
    words = _LOREM.split()
    while True:
        yield (rng.choice(words) + rng.choice(("", "", "", ",", ".", ";", ":", "!", "?")) + " ").encode()


def _unicode_pieces(rng: random.Random) -> Iterator[bytes]:
    words = _UNICODE.split()
    while True:
        yield (rng.choice(words) + " ").encode()


def _escaped_pieces(rng: random.Random) -> Iterator[bytes]:
    """Lines of source code and logs, JSON-encoded: quotes, backslashes, \\n, \\t, \\u00xx."""
    lines = (
        'def load(path="C:\\\\data\\\\{n}.json"):\n\treturn json.loads(open(path).read())  # "{n}"\n',
        '\tif line.endswith("\\\\"):\n\t\tline = line[:-1] + "\\n"\n',
        '2024-05-{d:02d}T12:{d:02d}:07Z\tINFO\t\x1b[32mok\x1b[0m request={n} path="/api/v1/items"\r\n',
        '2024-05-{d:02d}T12:{d:02d}:08Z\tERROR\t\x1b[31mfailed\x1b[0m: "{n}" \x07\x00\x1f\\x{n}\f\b\n',
        '\tprintf("%s\\t%d\\n", name, {n});\n',
    )
    while True:
        line = rng.choice(lines).format(n=rng.randrange(100_000), d=rng.randrange(1, 29))
        yield json.dumps(line, ensure_ascii=False)[1:-1].encode()


def _text_of(pieces: Iterator[bytes], nbytes: int) -> bytes:
    """``nbytes`` of JSON string content: a block of whole pieces, repeated, then whole
    pieces from its start and spaces (never half an escape or half a character)."""
    chosen, size = [], 0
    for piece in pieces:
        if size + len(piece) > min(nbytes, _BLOCK):
            break
        chosen.append(piece)
        size += len(piece)
    block = b"".join(chosen)
    count, rest = divmod(nbytes, len(block))
    tail, size = [], 0
    for piece in chosen:
        if size + len(piece) > rest:
            break
        tail.append(piece)
        size += len(piece)
    return b"".join([block] * count + tail + [b" " * (rest - size)])


def _objects_of(rng: random.Random, nbytes: int) -> bytes:
    """Text blocks and rows of dicts (numbers, bools, nulls, short strings, each distinct
    as in a real result) up to ``nbytes``, joined a few hundred at a time so building
    leaves no heap of small temporaries for the parse to reuse."""
    tail = b'],"structuredContent":{"rows":[%s],"total":%d},"isError":false}}'
    budget = nbytes - len(_HEAD) - len(tail)
    words = _LOREM.split()
    blocks, rows, part, size, i = [], [], [], 0, 0
    while True:
        block = b'{"type":"text","text":"row %d: %s, %d of %d"}' % (
            i,
            " ".join(rng.choices(words, k=rng.randint(2, 8))).encode(),
            i,
            budget // 150,
        )
        row = (
            b'{"id":%d,"sku":"SKU-%08d","price":%d.%02d,"qty":%d,"in_stock":%s,"discontinued":%s,'
            b'"parent":%s,"weight":%.3e,"score":%r,"tags":["%s","%s"]}'
            % (
                i,
                rng.randrange(10**8),
                rng.randrange(1000),
                rng.randrange(100),
                rng.randrange(-5, 500),
                rng.choice((b"true", b"false")),
                rng.choice((b"true", b"false")),
                rng.choice((b"null", b"%d" % rng.randrange(i + 1))),
                rng.uniform(1e-4, 1e4),
                rng.random(),
                rng.choice(words).encode(),
                rng.choice(words).encode(),
            )
        )
        if i and size + len(block) + len(row) + 2 > budget:
            break
        part.append((block, row))
        size += len(block) + len(row) + 2
        i += 1
        if len(part) == 256:
            blocks.append(b",".join(b for b, _ in part))
            rows.append(b",".join(r for _, r in part))
            part = []
    if part:
        blocks.append(b",".join(b for b, _ in part))
        rows.append(b",".join(r for _, r in part))
    return b"".join([_HEAD, b",".join(blocks), tail % (b",".join(rows), i)])


def document(shape: str, nbytes: int) -> bytes:
    """One JSON-RPC response carrying an MCP tool result of about ``nbytes`` (the text
    shapes exactly), the same bytes in every process for the same arguments."""
    rng = random.Random(nbytes * 10 + list(SHAPES).index(shape))
    if shape == "objects":
        return _objects_of(rng, nbytes)
    pieces = {"ascii": _ascii_pieces, "utf8": _unicode_pieces, "escapes": _escaped_pieces}[shape](rng)
    text = _text_of(pieces, nbytes - len(_TEXT_HEAD) - len(_TEXT_TAIL))
    return b"".join([_TEXT_HEAD, text, _TEXT_TAIL])


@functools.cache
def payload(shape: str, nbytes: int) -> bytes:
    """``document``, built once per run (each child builds its own)."""
    return document(shape, nbytes)


def _signature(message: Any) -> tuple[int, int]:
    """Enough of a parsed message to tell each timed round parsed all of it: the deep
    comparison with json.loads is made once, before the rounds."""
    result = message["result"]
    return len(result["content"]), len(result["content"][-1]["text"])


# -- time -------------------------------------------------------------------------------


def interleave_parses(
    parsers: dict[str, Parse], data: bytes, rounds: int, repeats: int, expected: tuple[int, int]
) -> dict[str, tuple[float, float]]:
    """``{name: (min, median)}`` seconds per parse, as test_side_by_side's ``interleave``
    (each round starts one parser further along), except that a round parses ``repeats``
    times and every result is freed after the clock stops: each parser builds the same
    objects, and freeing them is no part of parsing."""
    names = list(parsers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            parse, kept = parsers[name], [None] * repeats
            gc.collect()
            start = time.perf_counter()
            for i in range(repeats):
                kept[i] = parse(data)
            times[name].append((time.perf_counter() - start) / repeats)
            assert _signature(kept[-1]) == expected, name
            del kept
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


# -- peak memory --------------------------------------------------------------------------


def _peak_why_not() -> str:
    if not _STATUS.exists() or not _CLEAR_REFS.exists():
        return "needs Linux's /proc/self/status and /proc/self/clear_refs"
    return ""


def _vm(field: str) -> int:
    """One ``Vm*`` line of /proc/self/status, in bytes."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _release_free_heap() -> None:
    """Hand freed malloc memory back to the OS, so the parse cannot reuse pages that the
    build left resident (and hide part of its peak); glibc only, a no-op elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_of_one_parse(name: str, shape: str, nbytes: int) -> dict[str, int]:
    """In a fresh process: the RSS high-water of one parse above the input bytes (the
    result kept alive, so it counts), and what stays resident after it."""
    parse = parser(name)
    parse(document(shape, KIB))  # first-call tables and caches are not this message's cost
    data = document(shape, nbytes)
    gc.collect()
    _release_free_heap()
    _CLEAR_REFS.write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
    before = _vm("VmHWM")
    result = parse(data)
    peak, kept = _vm("VmHWM") - before, _vm("VmRSS") - before
    assert _signature(result) == _signature(json.loads(data))  # after the readings
    return {"peak": peak, "kept": kept, "bytes": len(data)}


def _peak_in_child(name: str, shape: str, nbytes: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, __file__, name, shape, str(nbytes)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (name, shape, nbytes, done.stderr[-2000:])
    return json.loads(done.stdout.splitlines()[-1])


# -- the tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_parsers_side_by_side(benchmark, shape, size):
    """Every installed parser on one (shape, size): first the same value as json.loads,
    then interleaved timings, then (from 1 MiB) each one's peak in a child process."""
    nominal = SIZES[size]
    data = payload(shape, _scaled(nominal, KIB))
    parsers, missing = {}, []
    for name in PARSERS:
        try:
            parsers[name] = parser(name)
        except pytest.skip.Exception as exc:
            missing.append(f"{name}: {exc.msg}")

    reference = json.loads(data)
    for name, parse in parsers.items():
        assert parse(data) == reference, f"{name} parsed {shape} {size} differently from json.loads"
    expected = _signature(reference)
    del reference

    result: dict[str, tuple[float, float]] = {}
    rounds = 1 if benchmark.disabled else ROUNDS
    repeats = max(1, BATCH_BYTES // len(data))
    benchmark.pedantic(
        lambda: result.update(interleave_parses(parsers, data, rounds, repeats, expected)),
        rounds=1,
        iterations=1,
    )

    # From 1 MiB; in a scaled-down run only the largest size, so the child still runs.
    peaks: dict[str, dict[str, int]] = {}
    wanted = nominal >= PEAK_FROM and (SCALE >= 1 or nominal == max(SIZES.values()))
    if wanted and _peak_why_not():
        missing.append(f"peak memory: {_peak_why_not()}")
    elif wanted:
        peaks = {name: _peak_in_child(name, shape, len(data)) for name in parsers}
    info = {
        "kind": "parser",
        "workload": f"{shape} {size}",
        "title": SHAPES[shape],
        "shape": shape,
        "size": nominal,
        "bytes": len(data),
        "events": 1,
        "repeats": repeats,
        "missing": missing,
        "rows": [
            {
                "contender": name,
                "ours": name == OURS,
                "reference": name == "json.loads",
                "min": low,
                "median": mid,
                "peak": peaks.get(name, {}).get("peak"),
                "kept": peaks.get(name, {}).get("kept"),
            }
            for name, (low, mid) in result.items()
        ],
    }
    benchmark.extra_info.update(info)
    report.RECORDS.extend(report.side_by_side_records(info))


# What each parser makes of what ssewire.jsonrpc must refuse, as measured with orjson 3.13,
# msgspec 0.23, jiter 0.19: (reads NaN / Infinity / -Infinity, reads 1e400 as inf, reads
# 2**64 as an exact int). orjson reads integers beyond 64 bits as floats, which the
# layer's id check then refuses; a parser with exact ints would let such an id through.
NON_STANDARD = (b"NaN", b"Infinity", b"-Infinity", b'{"x":[NaN]}')
FACTS = {
    "orjson.loads": (False, False, False),
    "msgspec.json.decode": (False, False, True),
    "jiter.from_json": (True, True, True),  # allow_inf_nan=True is its default
    "json.loads": (True, True, True),
}


def _reads(parse: Parse, data: bytes) -> bool:
    try:
        parse(data)
    except ValueError:  # orjson's, msgspec's and json's errors all derive from it; jiter raises it
        return False
    return True


@pytest.mark.parametrize("name", PARSERS)
def test_what_each_parser_makes_of_non_standard_json(name):
    """Not a timing: a parser behind a hook must refuse what orjson refuses, or the
    layer must check it itself."""
    parse = parser(name)
    literals = {_reads(parse, data) for data in NON_STANDARD}
    assert len(literals) == 1, (name, "reads some NaN/Infinity literals and not others")
    beyond = 2**64
    big = parse(b"%d" % beyond) if _reads(parse, b"%d" % beyond) else None
    seen = (literals.pop(), _reads(parse, b"1e400"), type(big) is int and big == beyond)
    assert seen == FACTS[name]


if __name__ == "__main__":
    print(json.dumps(peak_of_one_parse(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
