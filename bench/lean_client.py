"""The relays' load client (G3, G4): raw JSON-RPC over aiohttp, so the cores go to what is
measured rather than to the client.

A `LeanSession` is one MCP session on an aiohttp client of its own (one keep-alive
connection, as a separate client would have): ``initialize``, ``notifications/initialized``,
short calls one at a time, ``DELETE`` at the end. A call is ``tools/call countdown {count:
3, size: 10}`` with a progress token, its answer read whole and checked: the 3 progress
notifications of that token (1, 2, 3, in order), then the result for that id with the
upstream's text, and nothing meant for another call. A relay that loses, repeats or mixes
up a message raises `WrongAnswer`, which fails the bench instead of letting it win.

``python bench/lean_client.py --cpu N`` is G4's load generator, a process of its own pinned
to core N (see `serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import aiohttp
import orjson

from ssewire import RawDecoder

PROTOCOL = "2025-11-25"
PROGRESS = 3  # progress notifications a call asks for
SIZE = 10  # bytes of the result's text
SDK_TEXT = "x" * SIZE  # what sdk_upstream.py answers (cheap_server.py: cheap_server.text(SIZE))
CALL_TIMEOUT = 60.0  # seconds: a call that takes longer is refused
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "ssewire-bench-lean", "version": "0"},
        },
    }
)
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
CALL = (
    b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown",'
    b'"arguments":{"count":%d,"size":%d},"_meta":{"progressToken":"call-%d"}}}'
)


class WrongAnswer(AssertionError):
    """An answer that is not the call's: what no relay may do, under any load."""


class Refused(Exception):
    """A call that got no answer (a status other than 200, a broken connection, a
    timeout): what an overloaded relay may do, counted against the level it happened at."""


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (the client's own cost, small), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(work: Coroutine[Any, Any, Any]) -> Any:
    loop = new_loop()
    try:
        return loop.run_until_complete(work)
    finally:
        loop.close()


def messages(media: str, body: bytes) -> list[dict]:
    if media == "application/json":
        return [orjson.loads(body)]
    if media != "text/event-stream":
        raise WrongAnswer(f"an answer of type {media!r}")
    return [orjson.loads(event.data) for event in RawDecoder().feed(body) if event.data]


def check(ident: int, text: str, media: str, body: bytes) -> None:
    """The answer is the call's own, whole: its progress, then its result, and no
    message of another call."""
    token = f"call-{ident}"
    progress, results = [], []
    for message in messages(media, body):
        if message.get("method") == "notifications/progress":
            if message["params"].get("progressToken") != token:
                raise WrongAnswer(f"call {ident} got another call's progress: {message}")
            progress.append(message["params"]["progress"])
        elif "id" in message:
            if message["id"] != ident:
                raise WrongAnswer(f"call {ident} got another call's answer: {message}")
            results.append(message)
    if progress != list(range(1, PROGRESS + 1)):
        raise WrongAnswer(f"call {ident}: progress {progress}")
    if len(results) != 1 or "result" not in results[0]:
        raise WrongAnswer(f"call {ident}: {results}")
    result = results[0]["result"]
    if result.get("isError") or result["content"][0].get("text") != text:
        raise WrongAnswer(f"call {ident}: {result}")


class LeanSession:
    def __init__(self, http: aiohttp.ClientSession, url: str, headers: dict[str, str], text: str) -> None:
        self.http, self.url, self.headers, self.text = http, url, headers, text
        self.last_id = 1  # initialize's

    @classmethod
    async def open(cls, url: str, text: str = SDK_TEXT) -> LeanSession:
        http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT))
        try:
            async with http.post(url, data=INITIALIZE, headers=HEADERS) as response:
                body = await response.read()
                session_id = response.headers.get("mcp-session-id")
                if response.status != 200 or session_id is None:
                    raise Refused(f"initialize: {response.status} {body[:200]!r}")
                if "result" not in messages(response.content_type, body)[-1]:
                    raise WrongAnswer(f"initialize: {body[:200]!r}")
            headers = {**HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": PROTOCOL}
            async with http.post(url, data=INITIALIZED, headers=headers) as response:
                await response.read()
                if response.status != 202:
                    raise Refused(f"notifications/initialized: {response.status}")
        except BaseException:
            await http.close()
            raise
        return cls(http, url, headers, text)

    async def call(self) -> None:
        self.last_id += 1
        ident = self.last_id
        try:
            async with self.http.post(
                self.url, data=CALL % (ident, PROGRESS, SIZE, ident), headers=self.headers
            ) as response:
                body = await response.read()
                if response.status != 200:
                    raise Refused(f"tools/call: {response.status} {body[:200]!r}")
                media = response.content_type
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise Refused(f"tools/call: {error!r}") from error
        check(ident, self.text, media, body)

    async def close(self) -> None:
        try:
            async with self.http.delete(self.url, headers=self.headers) as response:
                await response.read()
        finally:
            await self.http.close()


async def open_sessions(url: str, count: int, text: str = SDK_TEXT) -> list[LeanSession]:
    """``count`` sessions, opened one after the other (none is timed)."""
    opened: list[LeanSession] = []
    try:
        for _ in range(count):
            opened.append(await LeanSession.open(url, text))
    except BaseException:
        await close_sessions(opened)
        raise
    return opened


async def close_sessions(opened: list[LeanSession]) -> None:
    await asyncio.gather(*(session.close() for session in opened), return_exceptions=True)


async def calls_in_turn(opened: list[LeanSession], calls: int) -> list[float]:
    """Every session making ``calls`` calls one after the other, all sessions at once
    (closed loop, G3): each call's latency in seconds."""
    latencies: list[float] = []

    async def calling(session: LeanSession) -> None:
        for _ in range(calls):
            start = time.perf_counter()
            await session.call()
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(calling(session) for session in opened))
    return latencies


async def paced(opened: list[LeanSession], rate: float, seconds: float) -> dict[str, Any]:
    """Calls started at ``rate`` a second for ``seconds``, whatever the answers do (open
    loop, G4), each on the next idle session: a call waits for one when all are busy.
    Its latency runs from when it was due, not from when it got a session or was sent,
    so a relay falling behind shows as the queue it builds (no coordinated omission);
    the generator's own lag counts too, which is why direct is measured alike (uvloop's
    timers tick in milliseconds: calls due within one tick start together). Calls still
    unanswered ``seconds`` (5 at least) after the last one started are cancelled and
    counted as ``late``."""
    idle: asyncio.Queue[LeanSession] = asyncio.Queue()
    for session in opened:
        idle.put_nowait(session)
    latencies: list[float] = []
    refused: list[str] = []

    async def one(due: float) -> None:
        session = await idle.get()
        try:
            await session.call()
        except Refused as error:
            refused.append(str(error))
            return
        finally:
            idle.put_nowait(session)
        latencies.append(time.perf_counter() - due)

    total = max(1, round(rate * seconds))
    start = time.perf_counter() + 0.005
    started = []
    for n in range(total):
        due = start + n / rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        started.append(asyncio.ensure_future(one(due)))
    done, late = await asyncio.wait(started, timeout=max(seconds, 5.0))
    for task in late:
        task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    for task in done:
        error = task.exception()
        if error is not None:
            raise error  # a wrong answer fails the bench
    return {"latencies": latencies, "refused": refused, "late": len(late)}


def serve(cpu: int) -> None:
    """G4's load generator, pinned to core ``cpu``: one JSON command a line on stdin, one
    JSON answer a line on stdout, the sessions kept between commands (so a level's pool
    is warm and opening it is never timed):

    - ``{"do": "open", "url": U, "sessions": N, "text": T}``: N sessions to U;
    - ``{"do": "level", "url": U, "rate": R, "seconds": S}``: `paced` on U's sessions,
      plus ``cpu``, the seconds this process ran;
    - ``{"do": "close"}``: every session closed; the process then ends.

    An exception answers ``{"error": ...}``."""
    os.sched_setaffinity(0, {cpu})
    loop = new_loop()
    pools: dict[str, list[LeanSession]] = {}

    async def do_open(url: str, sessions: int, text: str) -> dict[str, Any]:
        pools[url] = await open_sessions(url, sessions, text)
        return {"opened": sessions}

    async def do_level(url: str, rate: float, seconds: float) -> dict[str, Any]:
        before = time.process_time()
        answer = await paced(pools[url], rate, seconds)
        return {**answer, "cpu": time.process_time() - before}

    async def do_close() -> dict[str, Any]:
        for opened in pools.values():
            await close_sessions(opened)
        return {}

    commands: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
        "open": do_open,
        "level": do_level,
        "close": do_close,
    }
    for line in sys.stdin.buffer:
        command = orjson.loads(line)
        name = command.pop("do")
        try:
            answer = loop.run_until_complete(commands[name](**command))
        except Exception as error:
            answer = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.buffer.write(orjson.dumps(answer) + b"\n")
        sys.stdout.buffer.flush()
        if name == "close":
            break
    loop.close()


class Generator:
    """`serve` in its process, seen from the bench: ``ask`` sends a command, returns its
    answer, and raises the generator's error (a wrong answer among them)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(orjson.dumps(command) + b"\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the load generator ended ({self.process.wait(10)})")
        answer: dict[str, Any] = orjson.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the load generator: {answer['error']}")
        return answer


@contextlib.contextmanager
def generator(core: int) -> Iterator[Generator]:
    """The load generator pinned to ``core``, until the block ends (its sessions closed)."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--cpu", str(core)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    running = Generator(process)
    try:
        yield running
        running.ask(do="close")
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--cpu":
        sys.exit("usage: python bench/lean_client.py --cpu N")
    serve(int(sys.argv[2]))
