"""The gateway's attack suite harness: ``ssewire serve`` and ``ssewire gateway`` each in a
process of its own on 127.0.0.1 (so the gateway's memory is its own), two principals
(``attacker``, ``victim``) in an ``--auth-tokens`` file made by ``ssewire hash-token``, a
victim's probe call running while an attack does, raw sockets for what httpx will not send,
tiny hostile upstreams (one that wants a bearer token, one that answers JSON nested too
deep to re-encode), a spying one (the requests it got, the sessions it opened), the
victim's call read as a client reads it through a fault (`WatchedCall`: event ids, resumed
with ``Last-Event-ID`` when cut, a hang named), and one report row per attack.

Figures: the gateway's peak resident memory is its VmHWM (/proc/<pid>/status, Linux), reset
to the present VmRSS at the start of each attack (``clear_refs``), read again at its end.
With ``SSEWIRE_ATTACK_REPORT=PATH`` every row recorded is written there as JSON (a list);
``scripts/attack_table.py`` prints them as a Markdown table.

Every socket has a timeout, every wait a deadline, every process is stopped (SIGTERM, then
SIGKILL) when its ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from ssewire import Decoder
from ssewire.mcp.reference import ReferenceServer
from tests.support.mcp_helpers import INITIALIZE
from tests.support.processes import accepts, free_port, stop

MIB = 1 << 20
BOTH = "application/json, text/event-stream"
JSON_TYPE = "application/json"
VERSION = "2025-11-25"
TOKENS = {"attacker": "attacker-token-5f1d0c9e", "victim": "victim-token-83a2b7c4"}
START_WITHIN = 20.0
SOCKET_TIMEOUT = 10.0

# the gateway's bounds for the suite: small, so that each attack meets them within seconds
MAX_BYTES_IN_FLIGHT = 64 * MIB
BODY_TIMEOUT = 2.0
HEAD_TIMEOUT = 1.0
MAX_CONNECTIONS = 200
LIMIT_SESSIONS = 100
LIMIT_STREAMS = 8
LIMIT_CALLS = 64
GATEWAY_OPTIONS = (
    "--max-bytes-in-flight",
    str(MAX_BYTES_IN_FLIGHT),
    "--body-timeout",
    str(BODY_TIMEOUT),
    "--head-timeout",
    str(HEAD_TIMEOUT),
    "--max-connections",
    str(MAX_CONNECTIONS),
    "--limit-sessions",
    str(LIMIT_SESSIONS),
    "--limit-streams",
    str(LIMIT_STREAMS),
    "--limit-calls",
    str(LIMIT_CALLS),
    "--keepalive",
    "2",
    "--timeout",
    "30",
)


# -- memory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    rss: int  # VmRSS: resident now, bytes
    hwm: int  # VmHWM: the peak since the process started (or since reset_peak), bytes


def memory(pid: int) -> Memory:
    figures: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                figures[name] = int(value.split()[0]) * 1024
    return Memory(figures["VmRSS"], figures["VmHWM"])


def reset_peak(pid: int) -> bool:
    """VmHWM back to the present VmRSS (Linux >= 4.0: ``5`` to clear_refs); False if refused."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


# -- processes -------------------------------------------------------------------------


def _started(argv: Sequence[str], port: int, name: str, log: Path, env: dict[str, str] | None) -> Any:
    with open(log, "wb") as out:
        process = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=out, env=env)
    deadline = time.monotonic() + START_WITHIN
    while not accepts(port):
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            said = log.read_text(errors="replace")[-800:].strip()
            raise RuntimeError(f"{name} did not start on 127.0.0.1:{port}: {said}")
        time.sleep(0.05)
    return process


@dataclass
class Upstream:
    url: str
    port: int
    pid: int


@contextlib.contextmanager
def upstream(*options: str) -> Iterator[Upstream]:
    """``ssewire serve`` on 127.0.0.1 in its own process (room for the floods' sessions)."""
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        argv = [sys.executable, "-m", "ssewire", "serve", "--port", str(port), "--max-sessions", "4096"]
        process = _started([*argv, *options], port, "ssewire serve", Path(scratch) / "serve.log", None)
        try:
            yield Upstream(f"http://127.0.0.1:{port}/mcp", port, process.pid)
        finally:
            stop(process)


def token_lines() -> str:
    """The ``--auth-tokens`` file of both principals, each line from ``ssewire hash-token``."""
    lines = []
    for principal, token in TOKENS.items():
        made = subprocess.run(
            [sys.executable, "-m", "ssewire", "hash-token", principal],
            input=token + "\n",
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        lines.append(made.stdout.strip())
    return "\n".join(lines) + "\n"


_TOKEN_FILE: str | None = None


def _token_file(directory: Path) -> Path:
    global _TOKEN_FILE
    if _TOKEN_FILE is None:
        _TOKEN_FILE = token_lines()
    path = directory / "tokens"
    path.write_text(_TOKEN_FILE)
    return path


@dataclass
class GatewayProcess:
    url: str  # the MCP endpoint, http://127.0.0.1:PORT/mcp
    port: int
    pid: int
    log: Path  # its stderr
    process: Any = field(repr=False)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def memory(self) -> Memory:
        return memory(self.pid)


@contextlib.contextmanager
def gateway(
    upstream_url: str,
    *options: str,
    auth: bool = True,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
) -> Iterator[GatewayProcess]:
    """``python -m ssewire gateway`` in its own process with the suite's bounds (``options``
    after them, so they can override), the two principals' tokens unless ``auth`` is False."""
    port = free_port()
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        argv = [sys.executable, "-m", "ssewire", "gateway", "--upstream", upstream_url]
        argv += ["--host", host, "--port", str(port), *GATEWAY_OPTIONS]
        if auth:
            argv += ["--auth-tokens", str(_token_file(directory))]
        log = directory / "gateway.log"
        environment = {**os.environ, **(env or {})}
        process = _started([*argv, *options], port, "ssewire gateway", log, environment)
        try:
            yield GatewayProcess(f"http://127.0.0.1:{port}/mcp", port, process.pid, log, process)
        finally:
            stop(process)


# -- HTTP steps ------------------------------------------------------------------------


def bearer(principal: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}"} if principal else {}


def post_headers(principal: str | None, sid: str | None = None) -> dict[str, str]:
    headers = {"Accept": BOTH, "Content-Type": JSON_TYPE, **bearer(principal)}
    if sid is not None:
        headers |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}
    return headers


def initialize(http: httpx.Client, url: str, principal: str | None) -> httpx.Response:
    return http.post(url, json=INITIALIZE, headers=post_headers(principal))


def open_session(http: httpx.Client, url: str, principal: str | None) -> dict[str, str]:
    """A session opened and initialized; the headers of its POSTs."""
    answer = initialize(http, url, principal)
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    headers = post_headers(principal, answer.headers["mcp-session-id"])
    done = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202, (done.status_code, done.text[:300])
    return headers


def tool_call(ident: int, name: str, arguments: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def call(http: httpx.Client, url: str, headers: dict[str, str], message: dict[str, Any]) -> tuple[int, list]:
    """POST one request; its status and its messages (an SSE stream's, or the JSON one)."""
    with http.stream("POST", url, json=message, headers=headers) as answer:
        body = b"".join(answer.iter_bytes())
        kind = answer.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        return answer.status_code, [json.loads(e.data) for e in Decoder().feed(body) if e.data]
    try:
        return answer.status_code, [json.loads(body)] if body else []
    except ValueError:
        return answer.status_code, [{"text": body.decode(errors="replace")}]


def answered_echo(url: str, principal: str = "victim", text: str = "still here") -> bool:
    """A fresh request of ``principal``: a new session, an echo answered with its text."""
    with httpx.Client(timeout=SOCKET_TIMEOUT) as http:
        try:
            headers = open_session(http, url, principal)
            status, got = call(http, url, headers, tool_call(1, "echo", {"text": text}))
        except (httpx.HTTPError, AssertionError):
            return False
    results = [m for m in got if "result" in m]
    return status == 200 and bool(results) and text in json.dumps(results[0])


class _VictimCall(threading.Thread):
    """The victim's ``countdown`` call (request id 7) as a thread: what it got of it."""

    count: int
    progress: list[int]
    answer: dict[str, Any] | None
    started: threading.Event

    def _got(self, message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/progress":
            self.progress.append(int(message["params"]["progress"]))
            self.started.set()
        elif message.get("id") == 7:
            self.answer = message

    @property
    def whole(self) -> bool:
        """Every notification in order, then the result."""
        return (
            self.progress == list(range(1, self.count + 1))
            and self.answer is not None
            and "result" in self.answer
        )


class Probe(_VictimCall):
    """The victim's session calling ``countdown`` (``count`` progress notifications
    ``delay`` s apart) while an attack runs: ``served`` when every notification came, in
    order, then the answer. ``started`` is set at the first notification."""

    def __init__(self, url: str, count: int = 60, delay: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.url, self.count, self.delay = url, count, delay
        self.progress: list[int] = []
        self.answer: dict[str, Any] | None = None
        self.failure: str | None = None
        self.started = threading.Event()

    def run(self) -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(SOCKET_TIMEOUT, read=30.0)) as http:
                headers = open_session(http, self.url, "victim")
                message = tool_call(
                    7, "countdown", {"count": self.count, "delay": self.delay, "size": 64}, "p"
                )
                decoder = Decoder()
                with http.stream("POST", self.url, json=message, headers=headers) as answer:
                    if answer.status_code != 200:
                        self.failure = f"status {answer.status_code}"
                        return
                    for chunk in answer.iter_bytes():
                        for event in decoder.feed(chunk):
                            if event.data:
                                self._got(json.loads(event.data))
        except Exception as failed:  # the probe says what broke it: the test asserts on it
            self.failure = f"{type(failed).__name__}: {failed}"
        finally:
            self.started.set()

    @property
    def served(self) -> bool:
        return self.whole

    def wait_started(self, within: float = 10.0) -> None:
        if not self.started.wait(within) or self.failure:
            raise AssertionError(f"the probe call did not start: {self.failure}")

    def finish(self, within: float = 30.0) -> bool:
        self.join(within)
        return self.served

    def said(self) -> str:
        return f"{len(self.progress)}/{self.count} progress, answer={self.answer is not None}, {self.failure}"


@contextlib.contextmanager
def probing(url: str, count: int = 60, delay: float = 0.1) -> Iterator[Probe]:
    probe = Probe(url, count, delay)
    probe.start()
    probe.wait_started()
    try:
        yield probe
    finally:
        probe.join(count * delay + 20)


class WatchedCall(_VictimCall):
    """The victim's ``countdown`` call read as a client reads it, through a fault: every
    event's id and message, resumed (GET with ``Last-Event-ID``, at most ``resumes`` times)
    when its stream is cut before the answer. It ends at the answer, a refused resumption,
    or a hang: ``quiet`` seconds with nothing but keep-alive comments (or nothing at all).

    ``progress`` holds the progress values in the order they came, ``ids`` every event id,
    ``answer`` the message answering the call (a result, or an error such as the gateway's
    explicit ``data.gateway == "store"``)."""

    def __init__(
        self, url: str, count: int = 60, delay: float = 0.1, *, quiet: float = 15.0, resumes: int = 3
    ) -> None:
        super().__init__(daemon=True)
        self.url, self.count, self.delay, self.quiet, self.resumes = url, count, delay, quiet, resumes
        self.progress: list[int] = []
        self.ids: list[str] = []
        self.answer: dict[str, Any] | None = None
        self.resumed: list[int] = []  # the status of each resumption
        self.hang: str | None = None
        self.failure: str | None = None
        self.seconds = 0.0  # from the POST to the end
        self.started = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        try:
            timeout = httpx.Timeout(SOCKET_TIMEOUT, read=self.quiet + 1)
            with httpx.Client(timeout=timeout) as http:
                headers = open_session(http, self.url, "victim")
                message = tool_call(
                    7, "countdown", {"count": self.count, "delay": self.delay, "size": 64}, "p"
                )
                start = time.monotonic()
                request = http.build_request("POST", self.url, json=message, headers=headers)
                while True:
                    status = self._read(http, request)
                    if status is not None:
                        self.resumed.append(status)
                    if (
                        self.answer is not None
                        or self.hang
                        or self.failure
                        or len(self.resumed) > self.resumes
                    ):
                        return
                    if status is not None and status != 200:
                        return
                    if not self.ids:
                        self.failure = "the stream was cut before any event id"
                        return
                    get = {
                        **{k: v for k, v in headers.items() if k != "Content-Type"},
                        "Accept": "text/event-stream",
                        "Last-Event-ID": self.ids[-1],
                    }
                    request = http.build_request("GET", self.url, headers=get)
                    time.sleep(0.5)  # the gateway's retry field
        except Exception as failed:  # what broke it: the test asserts on it
            self.failure = f"{type(failed).__name__}: {failed}"
        finally:
            self.seconds = time.monotonic() - start
            self.started.set()

    def _read(self, http: httpx.Client, request: httpx.Request) -> int | None:
        """One stream read to its end; its status when it is a resumption's."""
        decoder = Decoder()
        last = time.monotonic()
        resuming = request.method == "GET"
        try:
            answer = http.send(request, stream=True)
        except httpx.TransportError as failed:
            self.failure = f"{type(failed).__name__}: {failed}"
            return None
        try:
            if answer.status_code != 200:
                if not resuming:
                    self.failure = f"status {answer.status_code}: {answer.read()[:200]!r}"
                return answer.status_code if resuming else None
            for chunk in answer.iter_bytes():
                for event in decoder.feed(chunk):
                    if event.id:
                        self.ids.append(event.id)
                    if event.data:
                        last = time.monotonic()
                        self._got(json.loads(event.data))
                if self.answer is not None:
                    break
                if time.monotonic() - last > self.quiet:
                    self.hang = f"only keep-alives for {self.quiet:g} s"
                    break
        except httpx.ReadTimeout:
            self.hang = f"nothing at all for {self.quiet + 1:g} s"
        except httpx.TransportError:
            pass  # cut: resumed by the caller
        finally:
            answer.close()
        return 200 if resuming else None

    @property
    def gateway_error(self) -> str | None:
        """The ``data.gateway`` of an explicit gateway error answering the call."""
        error = (self.answer or {}).get("error")
        data = error.get("data") if isinstance(error, dict) else None
        return data.get("gateway") if isinstance(data, dict) else None

    @property
    def in_order(self) -> bool:
        """Progress 1, 2, ... with no gap and no duplicate; event ids never repeated, their
        sequence numbers rising (a resumption's priming event aside)."""
        seqs = [int(i.rpartition("-")[2]) for i in self.ids if i.rpartition("-")[2].isdigit()]
        rising = all(b > a for a, b in itertools.pairwise(seqs))
        return self.progress == list(range(1, len(self.progress) + 1)) and rising

    def wait_started(self, within: float = 10.0) -> None:
        if not self.started.wait(within) or self.failure:
            raise AssertionError(f"the victim's call did not start: {self.failure}")

    def finish(self, within: float) -> None:
        self.join(within)
        if self.is_alive():
            raise AssertionError(f"the victim's call did not end within {within:g} s: {self.said()}")

    def said(self) -> str:
        answer = "none" if self.answer is None else ("result" if "result" in self.answer else "error")
        if self.gateway_error:
            answer += f" ({self.gateway_error})"
        extra = f", resumed {self.resumed}" if self.resumed else ""
        extra += f", {self.hang}" if self.hang else ""
        extra += f", {self.failure}" if self.failure else ""
        return f"{len(self.progress)}/{self.count} progress, answer {answer} in {self.seconds:.1f} s{extra}"


def watched(url: str, count: int = 60, delay: float = 0.1, **options: Any) -> WatchedCall:
    """A `WatchedCall` started, once its first notification came."""
    call = WatchedCall(url, count, delay, **options)
    call.start()
    call.wait_started()
    return call


def whole_call(url: str, count: int = 20, delay: float = 0.05, within: float = 20.0) -> WatchedCall:
    """A new session of the victim and one ``countdown`` call, read to its end."""
    call = WatchedCall(url, count, delay, quiet=8.0, resumes=2)
    call.start()
    call.finish(within)
    return call


# -- raw sockets -----------------------------------------------------------------------


def head(method: str, port: int, headers: dict[str, str | bytes], path: str = "/mcp") -> bytes:
    lines = [f"{method} {path} HTTP/1.1".encode(), f"Host: 127.0.0.1:{port}".encode()]
    for name, value in headers.items():
        lines.append(name.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    return b"\r\n".join(lines) + b"\r\n\r\n"


def connect(
    port: int, host: str = "127.0.0.1", timeout: float = SOCKET_TIMEOUT, source: str | None = None
) -> socket.socket:
    """A connection to the gateway, from ``source`` (another loopback address, 127.0.0.2:
    an attacker whose address is not the victim's) when given."""
    return socket.create_connection(
        (host, port), timeout=timeout, source_address=(source, 0) if source else None
    )


def read_status(sock: socket.socket) -> tuple[int | None, bytes]:
    """The status of the answer on ``sock`` and what came of it (None: closed, or no answer
    before its timeout)."""
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    if not got.startswith(b"HTTP/1.1 "):
        return None, got
    return int(got[9:12]), got


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the peer closed ``sock`` (whatever it sent first), None if it did not
    within ``seconds``."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            if time.monotonic() - start > seconds:
                return None
    except TimeoutError:
        return None
    except OSError:
        pass  # a reset is a close too
    return time.monotonic() - start


@dataclass
class Upload:
    status: int | None  # the answer's, None when none came
    sent: int  # body bytes sent before the answer came (or the connection went)
    early: bool  # answered before the whole body was sent
    seconds: float  # from the head sent to the answer
    answer: bytes = b""


def upload(
    port: int,
    headers: dict[str, str | bytes],
    body: bytes,
    *,
    declared: int | None = None,
    stall: bool = False,
    piece: int = 1 << 20,
    wait: float = SOCKET_TIMEOUT,
) -> Upload:
    """POST ``body`` in pieces on a socket of its own, watching for an answer between them;
    ``stall``: send only ``body`` of a ``declared`` Content-Length, then wait for the answer."""
    length = len(body) if declared is None else declared
    with connect(port, timeout=wait) as sock:
        start = time.monotonic()
        sock.sendall(head("POST", port, {**headers, "Content-Length": str(length)}))
        sent = 0
        try:
            for offset in range(0, len(body), piece):
                if sent and select.select([sock], [], [], 0.5 if sent == piece else 0)[0]:
                    break  # answered already: the rest is never needed
                sock.sendall(body[offset : offset + piece])
                sent += len(body[offset : offset + piece])
        except OSError:
            pass  # the gateway closed the connection: its answer, if any, is read below
        status, answer = read_status(sock)
        return Upload(
            status, sent, sent < len(body) or (stall and sent < length), time.monotonic() - start, answer
        )


def within(seconds: float, work: Any, *args: Any) -> Any:
    """``work(*args)`` in a daemon thread; AssertionError when it takes over ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work(*args)
        except BaseException as failed:  # handed to the caller
            box["error"] = failed

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise AssertionError(f"no outcome within {seconds:g} s (a hang)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


TCP_STATES = {
    "01": "ESTABLISHED",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "06": "TIME_WAIT",
    "08": "CLOSE_WAIT",
}


def server_side(port: int, peer: int) -> tuple[str, int] | None:
    """The state and the send queue (bytes) of the server's end ``127.0.0.1:port`` of the
    connection from local port ``peer`` (Linux /proc/net/tcp), None once it is gone."""
    wanted = (f"0100007F:{port:04X}", f"0100007F:{peer:04X}")
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if (fields[1], fields[2]) == wanted:
                return TCP_STATES.get(fields[3], fields[3]), int(fields[4].split(":")[0], 16)
    return None


def objects_body(size: int) -> bytes:
    """``[{},{},...]`` of ``size`` bytes: the most objects a body that size can name."""
    count = (size - 1) // 3
    return b"[" + b"{}," * (count - 1) + b"{}]"


# -- hostile upstreams (in this process, on 127.0.0.1) ---------------------------------

CHALLENGE = 'Bearer realm="up", resource_metadata="http://127.0.0.1:1/.well-known/oauth-protected-resource"'
UPSTREAM_SECRET = "Bearer up-secret"


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def _answer(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BearerUpstream:
    """The reference server behind a bearer token: 401 with `CHALLENGE` unless
    ``Authorization: Bearer up-secret``. ``seen`` holds every Authorization it was sent."""

    def __init__(self) -> None:
        self.inner = ReferenceServer(keepalive=1.0)
        self.seen: list[str | None] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        given = _header(scope, b"authorization")
        self.seen.append(given)
        if given != UPSTREAM_SECRET:
            body = b'{"error":"invalid_token"}'
            headers = [(b"content-type", b"application/json"), (b"www-authenticate", CHALLENGE.encode())]
            await _answer(send, 401, body, headers)
            return
        await self.inner(scope, receive, send)


DEPTH = 300  # orjson reads up to 1024 levels, and writes at most 254


def nested(depth: int = DEPTH) -> bytes:
    return b"[" * depth + b"]" * depth


class DeepUpstream:
    """The reference server, but a ``tools/call`` of ``deep`` is answered with a result
    holding JSON nested `DEPTH` deep (valid; orjson reads it and cannot write it again), as
    JSON, and of ``deep-sse`` the same in an SSE event."""

    def __init__(self) -> None:
        self.inner = ReferenceServer(keepalive=1.0)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            request = None
        name = request.get("params", {}).get("name") if isinstance(request, dict) else None
        if request and request.get("method") == "tools/call" and name in ("deep", "deep-sse"):
            answer = (
                b'{"jsonrpc":"2.0","id":'
                + orjson.dumps(request.get("id"))
                + b',"result":{"content":[{"type":"text","text":"deep"}],"deep":'
                + nested()
                + b"}}"
            )
            if name == "deep":
                await _answer(send, 200, answer, [(b"content-type", b"application/json")])
            else:
                event = b"id: 1\nevent: message\ndata: " + answer + b"\n\n"
                await _answer(send, 200, event, [(b"content-type", b"text/event-stream")])
            return
        replayed = False

        async def again() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.inner(scope, again, send)


class SpyUpstream:
    """The reference server, recording every request's method and ``Mcp-Session-Id``
    (``requests``) and the session ids its answers gave (``opened``)."""

    def __init__(self) -> None:
        self.inner = ReferenceServer(keepalive=1.0)
        self.requests: list[tuple[str, str | None]] = []
        self.opened: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        self.requests.append((scope["method"], _header(scope, b"mcp-session-id")))

        async def spied(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        self.opened.append(value.decode("latin-1"))
            await send(message)

        await self.inner(scope, receive, spied)

    def deleted(self) -> list[str | None]:
        """The session ids of the DELETE requests it was sent."""
        return [sid for method, sid in self.requests if method == "DELETE"]

    def open_sessions(self) -> int:
        return len(self.inner.sessions)


# -- the report ------------------------------------------------------------------------


@dataclass
class Row:
    attack: str
    outcome: str = ""
    seconds: float = 0.0
    rss_baseline_mib: float = 0.0
    rss_peak_mib: float = 0.0
    probe_served: bool | None = None


ROWS: list[Row] = []
REPORT_ENV = "SSEWIRE_ATTACK_REPORT"


def record(row: Row) -> None:
    ROWS.append(row)
    path = os.environ.get(REPORT_ENV)
    if path:
        Path(path).write_text(json.dumps([asdict(r) for r in ROWS], indent=1))


class Case:
    """One attack's figures: the time from its start, the gateway's VmRSS at its start and
    its VmHWM at its end; ``outcome`` and ``served`` are set by the test."""

    def __init__(self, attack: str, pid: int | None) -> None:
        self.row = Row(attack)
        self.pid = pid
        if pid is not None:
            reset_peak(pid)
            self.baseline = memory(pid)
            self.row.rss_baseline_mib = round(self.baseline.rss / MIB, 1)
        self.start = time.monotonic()

    @property
    def outcome(self) -> str:
        return self.row.outcome

    @outcome.setter
    def outcome(self, text: str) -> None:
        self.row.outcome = text

    def served(self, value: bool | None) -> None:
        self.row.probe_served = value

    def peak(self) -> int:
        """The gateway's peak resident memory since the attack began, bytes."""
        assert self.pid is not None
        return memory(self.pid).hwm

    def growth(self) -> int:
        """How far the peak rose above the baseline, bytes."""
        return self.peak() - self.baseline.rss

    def snapshot(self) -> None:
        """The peak so far into the row (before the gateway is stopped: then it is gone)."""
        if self.pid is not None:
            with contextlib.suppress(OSError, KeyError):
                self.row.rss_peak_mib = round(self.peak() / MIB, 1)

    def close(self, failure: BaseException | None) -> None:
        self.row.seconds = round(time.monotonic() - self.start, 2)
        self.snapshot()
        if failure is not None:
            self.row.outcome = f"FAILED: {self.row.outcome} {str(failure)[:160]}".replace("\n", " ")
        record(self.row)


@contextlib.contextmanager
def attack(name: str, pid: int | None) -> Iterator[Case]:
    case = Case(name, pid)
    try:
        yield case
    except BaseException as failure:
        case.close(failure)
        raise
    case.close(None)


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine beyond loopback (the route out), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.254", 9))  # no packet is sent: the route's source address
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address
