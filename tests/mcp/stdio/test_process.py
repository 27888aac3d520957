"""``ssewire.mcp.stdio.process``: a stdio server's lines, bounded (split at LF, a CR before it
dropped, blank lines skipped, a line over the bound an `Oversize` of its size, head and tail,
bytes after the last newline a `Torn`); its environment (the base names and the named ones,
never the gateway's secrets); `send` (a `ConnectionError` once the process is gone); `stop`
(stdin closed, then SIGTERM, then SIGKILL).

Each child is a small ``python -c`` program, stopped (killed at worst) whatever the test's
outcome; each test is bounded by `run` (10 s)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from ssewire.mcp.stdio.process import BASE_ENVIRONMENT, EDGE, READ_SIZE, Child, Oversize, Torn, environment

# the start of every child program: ``out(data)`` writes exact bytes to stdout, flushed, and
# ``pattern(n)`` is ``n`` bytes without a newline where every offset is recognisable
PRELUDE = """\
import json, os, signal, sys, time
def out(data):
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
def pattern(n):
    return b"".join(b"%07d," % i for i in range(n // 8 + 1))[:n]
"""
SECRET = "s3cret-gateway-log-key"  # a value of the gateway's own, never to reach a child


def pattern(n: int) -> bytes:
    """The child's ``pattern``: ``0000000,0000001,...`` cut at ``n`` bytes."""
    return b"".join(b"%07d," % i for i in range(n // 8 + 1))[:n]


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 10))  # a hang fails, it never blocks the suite


def program(body: str) -> list[str]:
    return [sys.executable, "-c", PRELUDE + body]


@asynccontextmanager
async def started(body: str, *, max_line: int = 1000, **options: Any) -> AsyncIterator[Child]:
    """The child running ``body``; killed on the way out if it is still running."""
    options.setdefault("env", environment())
    child = await Child.start(program(body), max_line=max_line, **options)
    try:
        yield child
    finally:
        if child.returncode is None:
            child.process.kill()
            await child.process.wait()


async def everything(body: str, *, max_line: int = 1000) -> list[bytes | Oversize | Torn]:
    """What ``lines`` gives of the child running ``body``, to the end of its stdout."""
    async with started(body, max_line=max_line) as child:
        return [line async for line in child.lines()]


# lines


def test_lines_are_split_at_lf_and_a_cr_before_lf_is_dropped():
    written = b'{"a":1}\n{"b":2}\r\nin\rside\n x \n'
    lines = run(everything(f"out({written!r})"))
    # a CR elsewhere, and spaces around a line's text, are the line's
    assert lines == [b'{"a":1}', b'{"b":2}', b"in\rside", b" x "]


def test_blank_and_whitespace_only_lines_are_skipped():
    written = b"\n\r\n   \n\t \r\nfirst\n\n \nsecond\n\n"
    assert run(everything(f"out({written!r})")) == [b"first", b"second"]


def test_a_message_written_in_many_small_pieces_comes_out_whole():
    message = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"text": "x" * 400}}).encode()
    data = message + b"\r"
    body = f"""
data = {data!r}
for at in range(0, len(data), 7):
    out(data[at:at + 7])
    time.sleep(0.002)
out(b"\\n")  # the CR and its LF in two writes
out(b"next\\n")
"""
    assert run(everything(body)) == [message, b"next"]


def test_a_line_over_max_line_is_an_oversize_with_its_size_head_and_tail_and_the_next_lines_follow():
    size = 200_000  # more than one read: never whole in one chunk
    assert size > READ_SIZE
    body = f"""
out(b"before\\n")
line = pattern({size})
for at in range(0, len(line), 50_000):
    out(line[at:at + 50_000])
    time.sleep(0.01)
out(b"\\nafter\\n")
"""
    line = pattern(size)
    assert run(everything(body)) == [
        b"before",
        Oversize(size=size, head=line[:EDGE], tail=line[-EDGE:]),
        b"after",
    ]


def test_a_5_mb_line_is_an_oversize_and_is_never_held_whole():
    size = 5_000_000
    body = f'out(pattern({size}) + b"\\nafter\\n")'

    async def read() -> tuple[list[bytes | Oversize | Torn], int]:
        async with started(body, max_line=1000) as child:
            tracemalloc.start()
            try:
                lines = [line async for line in child.lines()]
                return lines, tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    lines, peak = run(read())
    line = pattern(size)
    assert lines == [Oversize(size=size, head=line[:EDGE], tail=line[-EDGE:]), b"after"]
    # the reads in flight (the pipe's and the stream's buffers), never the line: a copy of it
    # would be 5 MB at least
    assert peak < 2_000_000, peak


def test_a_line_of_exactly_max_line_bytes_is_a_line():
    line = pattern(1000)
    assert run(everything('out(pattern(1000) + b"\\n")', max_line=1000)) == [line]


def test_a_line_over_max_line_that_arrives_in_one_read_is_an_oversize():
    # 2,020 bytes in one write (under PIPE_BUF: one read has them all)
    lines = run(everything('out(b"first\\n" + pattern(2000) + b"\\nafter\\n")', max_line=1000))
    line = pattern(2000)
    assert lines == [b"first", Oversize(size=2000, head=line[:EDGE], tail=line[-EDGE:]), b"after"]


def test_an_oversize_tail_is_its_last_256_bytes_when_the_bound_is_crossed_near_its_end():
    body = """
line = pattern(1200)
out(line[:990])
time.sleep(0.3)  # the reader takes these 990 bytes (under the bound) on their own
out(line[990:] + b"\\nafter\\n")
"""
    lines = run(everything(body, max_line=1000))
    line = pattern(1200)
    assert lines == [Oversize(size=1200, head=line[:EDGE], tail=line[-EDGE:]), b"after"]


def test_bytes_after_the_last_newline_are_a_torn_line():
    assert run(everything('out(b"done\\npartial")')) == [b"done", Torn(7)]


def test_an_oversize_line_cut_by_the_end_is_a_torn_line_of_its_size():
    assert run(everything('out(b"done\\n" + pattern(200_000))')) == [b"done", Torn(200_000)]


# environment


def test_environment_is_the_base_names_and_the_named_ones_only():
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/gw",
        "LANG": "C.UTF-8",
        "SSEWIRE_GATEWAY_LOG_KEY": SECRET,
        "FILES_TOKEN": "files-token",
        "OTHER": "other",
    }
    assert environment(["FILES_TOKEN"], source) == {
        "PATH": "/usr/bin",
        "HOME": "/home/gw",
        "LANG": "C.UTF-8",
        "FILES_TOKEN": "files-token",
    }
    assert environment([], source) == {"PATH": "/usr/bin", "HOME": "/home/gw", "LANG": "C.UTF-8"}
    # a name the source does not have is left out, not an error
    assert environment(["ABSENT"], {"PATH": "/usr/bin"}) == {"PATH": "/usr/bin"}
    # every base name passes as it is
    everything_base = {name: f"value of {name}" for name in BASE_ENVIRONMENT}
    assert environment([], {**everything_base, "OTHER": "x"}) == everything_base


def test_environment_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv("SSEWIRE_GATEWAY_LOG_KEY", SECRET)
    monkeypatch.setenv("SSEWIRE_TEST_NAMED", "named")
    chosen = environment(["SSEWIRE_TEST_NAMED"])
    assert chosen["SSEWIRE_TEST_NAMED"] == "named"
    assert "SSEWIRE_GATEWAY_LOG_KEY" not in chosen
    assert set(chosen) <= {*BASE_ENVIRONMENT, "SSEWIRE_TEST_NAMED"}


def test_a_child_sees_only_its_environment():
    source = {
        "PATH": os.environ.get("PATH", "/usr/bin"),
        "SSEWIRE_GATEWAY_LOG_KEY": SECRET,
        "FILES_TOKEN": "files-token",
        "OTHER": "other",
    }

    async def seen() -> dict[str, str]:
        body = 'out(json.dumps(dict(os.environ)).encode() + b"\\n")'
        async with started(body, env=environment(["FILES_TOKEN"], source)) as child:
            lines = [line async for line in child.lines()]
        assert len(lines) == 1 and isinstance(lines[0], bytes), lines
        return json.loads(lines[0])

    child_environment = run(seen())
    assert "SSEWIRE_GATEWAY_LOG_KEY" not in child_environment
    assert SECRET not in child_environment.values()
    assert child_environment["FILES_TOKEN"] == "files-token"
    assert child_environment["PATH"] == source["PATH"]
    # Python itself may set LC_CTYPE in a child whose locale is C (PEP 538)
    assert set(child_environment) - {"LC_CTYPE"} == {"PATH", "FILES_TOKEN"}


def test_a_child_runs_in_its_cwd(tmp_path):
    async def where() -> list[bytes | Oversize | Torn]:
        async with started('out(os.getcwd().encode() + b"\\n")', cwd=str(tmp_path)) as child:
            return [line async for line in child.lines()]

    assert run(where()) == [os.path.realpath(tmp_path).encode()]


# send

ECHO = """
for line in sys.stdin:
    print(line, end="", flush=True)
sys.exit(7)
"""


def test_send_writes_one_line_the_child_reads():
    async def echoed() -> tuple[list[bytes | Oversize | Torn], int | None]:
        async with started(ECHO) as child:
            lines = child.lines()
            await child.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
            first = await anext(lines)
            await child.send(b'{"jsonrpc":"2.0","id":2,"method":"ping"}')
            second = await anext(lines)
            return [first, second], await child.stop(grace=3)

    lines, code = run(echoed())
    assert lines == [b'{"jsonrpc":"2.0","id":1,"method":"ping"}', b'{"jsonrpc":"2.0","id":2,"method":"ping"}']
    assert code == 7


def test_send_to_a_child_that_ended_is_a_connection_error():
    async def sent() -> tuple[int, list[BaseException]]:
        async with started("sys.exit(3)") as child:
            assert [line async for line in child.lines()] == []
            code = await child.process.wait()
            failures: list[BaseException] = []
            for ident in (1, 2):  # and again: the pipe stays broken
                with pytest.raises(ConnectionError) as failed:
                    await child.send(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % ident)
                failures.append(failed.value)
            return code, failures

    code, failures = run(sent())
    assert code == 3
    assert len(failures) == 2


# stop


def test_stop_closes_stdin_and_a_child_that_exits_on_eof_stops_with_its_code_without_signals():
    async def stopped() -> tuple[int | None, float]:
        async with started(ECHO) as child:
            lines = child.lines()
            await child.send(b"hello")
            assert await anext(lines) == b"hello"  # it runs, reading stdin
            began = time.monotonic()
            code = await child.stop(grace=3)
            return code, time.monotonic() - began

    code, took = run(stopped())
    assert code == 7  # its own exit: a signal would be negative
    assert took < 2.5, took  # no grace waited out


@pytest.mark.parametrize(
    ("ignores", "code", "graces"),
    [
        ("", -15, 1),  # SIGTERM, after the grace that follows closing stdin
        ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n", -9, 2),  # SIGKILL, one grace later
    ],
    ids=["ignores-eof", "ignores-eof-and-sigterm"],
)
def test_stop_escalates_to_sigterm_then_sigkill_for_a_child_that_does_not_exit(ignores, code, graces):
    body = f"""
{ignores}out(b"ready\\n")  # (its handler is in place)
while True:
    time.sleep(0.05)
"""

    async def stopped() -> tuple[int | None, float]:
        async with started(body) as child:
            assert await anext(child.lines()) == b"ready"
            began = time.monotonic()
            said = await child.stop(grace=0.2)
            return said, time.monotonic() - began

    said, took = run(stopped())
    assert said == code
    assert 0.2 * graces - 0.01 <= took < 2, took


def test_stop_ends_the_whole_process_group_so_its_stdout_ends():
    """A grandchild that inherited the stdout (a wrapper script's server, a shell's job)
    would keep the reader waiting forever after its parent is gone."""
    body = """
import subprocess
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
out(b"ready\\n")
sys.stdin.read()  # exits once its stdin is closed; the grandchild holds the stdout on
"""

    async def stopped() -> tuple[int | None, list[bytes | Oversize | Torn]]:
        async with started(body) as child:
            lines = child.lines()
            assert await anext(lines) == b"ready"
            code = await child.stop(grace=0.5)
            rest = await asyncio.wait_for(_rest(lines), 3)  # the stdout ended: nothing holds it
            return code, rest

    code, rest = run(stopped())
    assert code == 0 and rest == []


async def _rest(lines: AsyncIterator[bytes | Oversize | Torn]) -> list[bytes | Oversize | Torn]:
    return [line async for line in lines]


def test_stop_of_a_child_that_already_ended_is_its_exit_code():
    async def stopped() -> tuple[int | None, int | None, float]:
        async with started("sys.exit(5)") as child:
            await child.process.wait()
            began = time.monotonic()
            first = await child.stop(grace=3)
            second = await child.stop(grace=3)
            return first, second, time.monotonic() - began

    first, second, took = run(stopped())
    assert first == second == 5
    assert took < 1, took


# start


def test_starting_a_program_that_does_not_exist_is_an_oserror(tmp_path):
    missing = str(tmp_path / "no-such-program")
    with pytest.raises(FileNotFoundError):
        run(Child.start([missing], env=environment(), max_line=1000))
