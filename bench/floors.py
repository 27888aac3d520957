"""What no decoder can beat on the same bytes: copying them once, with no parsing at all.

A decoder that hands out each event's data must copy every data byte at least once, from
the chunks into the object it returns. These floors are timed like the contenders, in the
same run, so a table shows how close a workload lets any decoder come: W2 and growth are
bound by memory, not by parsing.

W1's floors are objects instead: a million small events, each of which any decoder must
build (its data, the event, a place in a list) before the consumer's loop sees it.
"""

from __future__ import annotations

import gc
from array import array
from collections.abc import Sequence
from itertools import repeat

from ssewire._events import Event

NAME = "floor: one copy, no parsing"
PYTHON_OBJECTS = "floor: Events built from Python, no parsing"
OBJECTS = "floor: Events built compiled, no parsing"
RAW_OBJECTS = "floor: RawEvents built compiled, no parsing"
OBJECT_FLOORS = (PYTHON_OBJECTS, OBJECTS, RAW_OBJECTS)


def copy_through(region: int):
    """``run(chunks)``: memcpy every chunk, in order, into one ``region``-byte buffer,
    starting over when it is full (as a decoder reuses one block for event after event
    of about that size)."""

    def run(chunks: Sequence[bytes]) -> int:
        """Returns the bytes copied."""
        buffer = memoryview(bytearray(region + max(map(len, chunks), default=0)))
        at = copied = 0
        for chunk in chunks:
            n = len(chunk)
            if at + n > region:
                copied += at
                at = 0
            buffer[at : at + n] = chunk
            at += n
        return copied + at

    return run


def join(chunks: Sequence[bytes]) -> int:
    """One new object holding every byte: what handing out one whole event costs."""
    return len(b"".join(chunks))


def _dispatched(chunks: Sequence[bytes]) -> list[list[bytes]]:
    """Each one-line event's data (``data: X`` then a blank line, LF ends), listed under
    the chunk its blank line arrives in: where a decoder can first hand it out."""
    out: list[list[bytes]] = []
    tail = b""
    for chunk in chunks:
        blocks = (tail + chunk).split(b"\n\n")
        tail = blocks.pop()
        out.append([block.removeprefix(b"data: ") for block in blocks])
    assert not tail, "ends inside an event"
    return out


def _tally(events, n: int, size: int) -> tuple[int, int]:
    for event in events:  # the runners' own loop (peers._ssewire)
        n += 1
        size += len(event.data)
    return n, size


def python_objects(chunks: Sequence[bytes]):
    """``(run, plan)``: the least a decoder written in Python must do to hand out W1's
    one-line events as Events, with the parsing already done.

    ``plan`` (built here, untimed) holds per chunk the data of the events dispatched in
    it, as one ``str`` joined with LF. Timed, per chunk: one ``split`` into the data
    strs (one copy of every data byte; its scan for LF is the only search), one
    ``tuple.__new__(Event, (...))`` per event (the pure twin's call) into a new list,
    then the runners' tally. The collector is paused, as the compiled twin untracks its
    events. ``tuple.__new__`` called from Python costs more than the compiled twin's
    whole per-event path: this bounds pure-Python decoders, not a compiled one."""
    plan = tuple("\n".join(d.decode() for d in datas) for datas in _dispatched(chunks) if datas)
    new = tuple.__new__

    def run(plan: Sequence[str]) -> tuple[int, int]:
        """Returns (events, data size), as the decoders' runners do."""
        n = size = 0
        enabled = gc.isenabled()
        gc.disable()
        try:
            for joined in plan:
                fields = zip(repeat("message"), joined.split("\n"), repeat(""), repeat(None))
                n, size = _tally(list(map(new, repeat(Event), fields)), n, size)
        finally:
            if enabled:
                gc.enable()
        return n, size

    return run, plan


def compiled_objects(chunks: Sequence[bytes], *, raw: bool = False):
    """``(run, plan)``: the least a compiled decoder must do to hand out W1's one-line
    events, with the parsing already done; ``None`` without the compiled twin.

    ``plan`` (untimed) holds per chunk the data of the events dispatched in it, joined
    with LF, and each one's (start, length). Timed, per chunk: ``_object_floor`` in
    the compiled twin's module builds each event as the decoders do (a str after the
    same ASCII check, or bytes for ``raw``: one copy; the event through the same
    allocation; one list append), then the runners' tally over the list. Everything
    the decoder does on W1 but finding the lines and fields."""
    try:
        from ssewire._decoder_c import _object_floor
    except ImportError:
        return None
    plan = []
    for datas in _dispatched(chunks):
        if datas:
            cuts, at = array("q"), 0
            for d in datas:
                cuts.extend((at, len(d)))
                at += len(d) + 1
            plan.append((b"\n".join(datas), cuts.tobytes()))

    def run(plan: Sequence[tuple[bytes, bytes]]) -> tuple[int, int]:
        """Returns (events, data size), as the decoders' runners do."""
        n = size = 0
        for window, at in plan:
            n, size = _tally(_object_floor(window, at, raw), n, size)
        return n, size

    return run, tuple(plan)
