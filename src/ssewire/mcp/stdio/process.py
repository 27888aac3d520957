"""One stdio MCP server process: started, read a line at a time under a bound, stopped.

The MCP stdio transport: JSON-RPC messages on the child's stdin and stdout, one per line
(UTF-8, no newline inside a message); its stderr is for its logs, and is inherited here (the
operator's log, as the official clients do). The child is a peer like any other:

- a line over ``max_line`` bytes is never held whole: the bytes past the bound are skipped
  to the next newline and the line comes out as an `Oversize` (its size, head and tail, so
  the caller can tell whose answer it was);
- what it wrote after its last newline when it ended is a `Torn` line, never a message;
- its environment is the few variables a program needs to run (`BASE_ENVIRONMENT`) plus
  those the operator names: the gateway's own secrets (tokens, the store's password) never
  reach a child that did not ask for them.

Stopping follows the stdio transport's shutdown: stdin closed, then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass

READ_SIZE = 64 * 1024
EDGE = 256  # bytes of an oversize line kept at each end: where its "id" is
STOP_GRACE = 2.0  # seconds after closing stdin (then after SIGTERM) before the next step
OFFER_BOUND = 1024 * 1024  # bytes an unread stdin may hold before `Child.offer` writes nothing
# what a program needs to run, and nothing of the gateway's own (the official SDKs pass a
# similar short list to the servers they start)
BASE_ENVIRONMENT = (
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "USER",
)


_KILL = getattr(signal, "SIGKILL", signal.SIGTERM)  # (Windows: SIGTERM is TerminateProcess)
_killpg = getattr(os, "killpg", None)


@dataclass(frozen=True)
class Oversize:
    """A line of ``size`` bytes (at least) over the bound: only its first and last bytes kept."""

    size: int
    head: bytes
    tail: bytes


@dataclass(frozen=True)
class Torn:
    """Bytes the process wrote after its last newline before its stdout ended."""

    size: int


def environment(names: Iterable[str] = (), source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: `BASE_ENVIRONMENT` and ``names``, as ``source`` has them."""
    source = os.environ if source is None else source
    return {name: source[name] for name in (*BASE_ENVIRONMENT, *names) if name in source}


class Child:
    """A started stdio server: `send` a line, iterate `lines`, `stop`; ``returncode`` once ended."""

    def __init__(self, process: asyncio.subprocess.Process, max_line: int) -> None:
        self.process, self.max_line = process, max_line
        self.pid = process.pid

    @classmethod
    async def start(
        cls, command: Sequence[str], *, env: Mapping[str, str], cwd: str | None = None, max_line: int
    ) -> Child:
        """Start ``command`` (its own session: a signal to the gateway's group is the
        gateway's to pass on). ``OSError`` when it cannot be started."""
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            limit=READ_SIZE,
        )
        return cls(process, max_line)

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    def offer(self, line: bytes, bound: int = OFFER_BOUND) -> bool:
        """Write one message without waiting for the pipe, unless ``bound`` bytes wait in it
        already (False: not written). For answers written by the reader of stdout, which may
        not wait on a child that is itself waiting for its stdout to be read."""
        stdin = self.process.stdin
        assert stdin is not None
        if stdin.is_closing() or stdin.transport.get_write_buffer_size() > bound:
            return False
        stdin.write(line + b"\n")
        return True

    async def send(self, line: bytes) -> None:
        """Write one message (``line`` holds no newline) and wait until the pipe took it.
        ``ConnectionError`` once the process no longer reads."""
        stdin = self.process.stdin
        assert stdin is not None
        if stdin.is_closing():
            raise ConnectionResetError("the stdio server's stdin is closed")
        stdin.write(line + b"\n")
        await stdin.drain()

    async def lines(self) -> AsyncIterator[bytes | Oversize | Torn]:
        """Each line the process writes (without its newline; a CR before it dropped), until
        its stdout ends. Memory: at most ``max_line`` plus one read."""
        stdout = self.process.stdout
        assert stdout is not None
        line = bytearray()
        over, skipped = False, 0  # inside an oversize line, this many bytes of it seen
        head = tail = b""
        while chunk := await stdout.read(READ_SIZE):
            start = 0
            while start < len(chunk):
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                start = len(chunk) if end < 0 else end + 1
                if not over and len(line) + len(piece) > self.max_line:
                    over, skipped = True, len(line)
                    head, tail = bytes(line[:EDGE]), bytes(line[-EDGE:])
                    line.clear()
                if over:
                    skipped += len(piece)
                    head = head if len(head) >= EDGE else (head + piece)[:EDGE]
                    tail = (tail + piece)[-EDGE:]
                else:
                    line += piece
                if end < 0:
                    continue
                if over:
                    yield Oversize(skipped, head, tail.rstrip(b"\r"))
                    over = False
                elif line.strip():
                    yield bytes(line[:-1] if line.endswith(b"\r") else line)
                line.clear()
        if over or line:
            yield Torn(skipped if over else len(line))

    async def stop(self, grace: float = STOP_GRACE) -> int | None:
        """Close stdin, then SIGTERM, then SIGKILL to its process group, each after ``grace``
        seconds without an exit; then SIGKILL to what is left of the group (a grandchild
        holding the stdout would keep its reader waiting forever). The exit status."""
        process = self.process
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        code: int | None = None
        for step in (None, signal.SIGTERM, _KILL):
            if step is not None and process.returncode is None:
                self._signal_group(step)
            try:
                code = await asyncio.wait_for(process.wait(), grace)
                break
            except asyncio.TimeoutError:
                continue
        else:
            code = await process.wait()
        self._signal_group(_KILL)
        return code

    def _signal_group(self, sig: signal.Signals) -> None:
        """``sig`` to every process of the child's group (its own session: `start`); where
        there are no process groups (Windows), to the child alone while it runs."""
        try:
            if _killpg is not None:
                _killpg(self.pid, sig)
            elif self.process.returncode is None:
                self.process.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass  # none left (or the id went to someone else's group: never signalled)
