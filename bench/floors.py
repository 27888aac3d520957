"""What no decoder can beat on the same bytes: copying them once, with no parsing at all.

A decoder that hands out each event's data must copy every data byte at least once, from
the chunks into the object it returns. These floors are timed like the contenders, in the
same run, so a table shows how close a workload lets any decoder come: W2 and growth are
bound by memory, not by parsing.
"""

from __future__ import annotations

from collections.abc import Sequence

NAME = "floor: one copy, no parsing"


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
