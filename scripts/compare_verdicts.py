"""Old against new: run one checkout's ssewire over every target the MCP tooling has and
write what it said as one normalized JSON document; diff two such documents.

    python scripts/compare_verdicts.py capture OUT.json [--checkout DIR]
    python scripts/compare_verdicts.py diff OLD.json NEW.json [--strict]

``capture`` uses the ssewire installed in the running interpreter (its ``-m ssewire``
command) and the test helpers of the checkout (``tests/...``, default: this script's own),
so an old checkout is captured by running this script with that checkout's venv and
``--checkout``. The targets:

- probe/reference/...: ``ssewire serve`` clean, with each fault of ``--list-faults``, under
  2026-07-28 (SSE and JSON answers), stateless, with JSON answers, each probed by
  ``ssewire probe URL --format json --record FILE`` as tests/mcp/probe/test_probe.py does;
- probe/python-sdk/..., probe/typescript-sdk/...: the official SDK servers in the modes of
  tests/mcp/probe/test_probe_sdk.py and test_probe_ts.py (started from tests/support/sdk_servers.py
  and ts_servers.py);
- recording/...: each probe's recording through ``ssewire validate``;
- validate/...: the shipped examples, the conformant sessions of tests/support/conformant_sessions.py and
  every fault case of tests/support/fault_cases.py through ``ssewire validate --format json``, under
  their own profile and (the examples and sessions) every other revision and an alias;
- client/reset-table: the rows of scripts/reset_table.py (its seeded cuts, ``--resets``);
- client/sdk-server-tests: each outcome of tests/mcp/client/test_client_sdk.py (the client against
  both official SDK servers in their modes).

What a run says is kept as verdicts, codes, levels, statuses, exit codes and counts; times,
ports, session and event ids are dropped. Each output kind has one normalizing function
(``normalize_*``): if a report's shape changes, that function alone is adapted. Wording
(messages with digits masked, input digests) is kept under ``notes`` and items known to
depend on load are listed in ``unstable``: ``diff`` prints differences in both but fails
(exit 1) only on the rest, unless ``--strict``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "ssewire-compare/1"
HERE = Path(__file__).resolve().parent.parent
# The comparison's fixed matrix: the published revisions and one alias (the package keeps
# its own list; the harness must not change with what it compares)
REVISIONS = ("2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
ALIAS = "stable-2025-11-25"
PROBE_TOOLS = "countdown,structured"  # what tests/mcp/probe/test_probe*.py let the probe call
PROBE_TIMEOUT = 240.0  # one probe process, a 16 s idle window included, on a loaded machine
VALIDATE_TIMEOUT = 60.0
SERVER_START = 30.0
RESET_TABLE_TIMEOUT = 420.0

# What differed between two captures of one commit: a difference here is printed as
# unstable, not failed on. Keys: glob patterns on target names; values: globs on the paths
# inside a target. The SDK client's columns of the reset table follow timing (when its
# reconnection gives up, whether a cut lands before its 1 MiB cap fails the call: "cuts"
# was 6 in one run and 7 in the next); the ssewire Client's column stays exact.
UNSTABLE: dict[str, tuple[str, ...]] = {
    "client/reset-table": ("columns/`mcp` SDK client*", "errors_said/`mcp` SDK client*"),
}


# -- normalizing: one function per output kind -------------------------------------------


def mask(text: str) -> str:
    """Wording without what changes from run to run: numbers (times, ports, counts), ids."""
    text = re.sub(r"https?://127\.0\.0\.1:\d+", "http://LOOPBACK:PORT", text)
    text = re.sub(r"\b[0-9a-f]{16,}\b", "HEX", text)
    # a revision date and a whole number (a status, a count) are wording; a decimal is a time
    parts = re.split(r"(\b\d{4}-\d{2}-\d{2}\b)", text)
    return "".join(p if i % 2 else re.sub(r"\d+\.\d+", "#", p) for i, p in enumerate(parts))


def _failure(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return mask(lines[-1]) if lines else ""


def normalize_probe(stdout: str, stderr: str, exit_code: int | str) -> dict[str, Any]:
    """``ssewire probe --format json``: each verdict's status and level, the outcome, the exit."""
    if exit_code not in (0, 1):
        return {"exit": exit_code, "notes": {"error": _failure(stderr)}}
    report = json.loads(stdout)
    verdicts = report.get("verdicts", report.get("findings", []))
    summary = {k: v for k, v in report.get("summary", {}).items() if k != "requests"}  # requests: load
    return {
        "exit": exit_code,
        "protocol_version": report.get("protocol_version"),
        "release": report.get("release"),
        "valid": report.get("valid"),
        "summary": summary,
        "verdicts": {
            v.get("id", v.get("code")): {"status": v["status"], "level": v["level"]} for v in verdicts
        },
        "notes": {
            "messages": {v.get("id", v.get("code")): mask(v.get("message", "")) for v in verdicts},
            "requests": report.get("summary", {}).get("requests"),
        },
    }


def normalize_validation(stdout: str, stderr: str, exit_code: int | str) -> dict[str, Any]:
    """``ssewire validate --format json``: findings as (code, exchange, path) -> levels and
    statuses, recovery actions, counts, the exit."""
    if exit_code not in (0, 1):
        return {"exit": exit_code, "notes": {"error": _failure(stderr)}}
    report = json.loads(stdout)
    findings: dict[str, list[list[str]]] = {}
    messages: dict[str, list[str]] = {}
    for f in report.get("findings", []):
        key = f"{f['code']} @{f.get('exchange')} {f.get('path')}"
        findings.setdefault(key, []).append([f["level"], f["status"]])
        messages.setdefault(key, []).append(mask(f.get("message", "")))
    recovery = Counter(f"{r.get('exchange')} {r.get('action')}" for r in report.get("recovery", []))
    return {
        "exit": exit_code,
        "valid": report.get("valid"),
        "profile": report.get("profile"),
        "summary": report.get("summary", {}),
        "findings": {key: sorted(pairs) for key, pairs in sorted(findings.items())},
        "recovery": dict(sorted(recovery.items())),
        "notes": {"messages": {key: sorted(texts) for key, texts in sorted(messages.items())}},
    }


def normalize_reset_table(stdout: str, stderr: str, exit_code: int | str) -> dict[str, Any]:
    """``scripts/reset_table.py --print``: one column per client, outcome rows but seconds;
    what the explicit errors said, counted."""
    if exit_code != 0:
        return {"exit": exit_code, "notes": {"error": _failure(stderr)}}
    rows = [line for line in stdout.splitlines() if line.startswith("|") and not line.startswith("|---")]
    clients = [cell.strip() for cell in rows[0].strip("|").split("|")][1:]
    columns: dict[str, dict[str, str]] = {client: {} for client in clients}
    for line in rows[1:]:
        measure, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        if measure == "seconds":  # time
            continue
        for client, cell in zip(clients, cells, strict=True):
            columns[client][measure] = cell
    said: dict[str, dict[str, int]] = {}
    for match in re.finditer(r"^- (.+?): (\d+) × (.*)$", stdout, re.M):
        said.setdefault(match[1], {})[match[3]] = int(match[2])
    return {"exit": exit_code, "columns": columns, "errors_said": said}


def normalize_fault_list(stdout: str, stderr: str, exit_code: int | str) -> dict[str, Any]:
    """``ssewire serve --list-faults``: each fault and the diagnostic it names."""
    faults = {}
    for line in stdout.splitlines():
        if "->" in line:
            name, rest = line.split("->", 1)
            faults[name.strip()] = rest.split(":", 1)[0].strip()
    return {"exit": exit_code, "faults": faults}


def normalize_junit(xml_text: str, stderr: str, exit_code: int | str) -> dict[str, Any]:
    """pytest's JUnit XML: each test's outcome (passed, failed, error, skipped), the exit."""
    import xml.etree.ElementTree as ElementTree

    if not xml_text:
        return {"exit": exit_code, "notes": {"error": _failure(stderr)}}
    outcomes: dict[str, str] = {}
    for case in ElementTree.fromstring(xml_text).iter("testcase"):
        outcome = next(
            (child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed"
        )
        outcomes[f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"] = outcome
    return {"exit": exit_code, "tests": dict(sorted(outcomes.items()))}


# -- running, bounded ----------------------------------------------------------------------


@dataclass
class Run:
    stdout: str
    stderr: str
    exit_code: int | str  # "timeout" when it was killed at its deadline


def run(
    command: list[str], *, timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Run:
    """A child process in its own group, killed with its children at the deadline."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
        return Run(out, err, process.returncode)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        out, err = process.communicate(timeout=10)
        return Run(out, err, "timeout")


def _kill_group(process: subprocess.Popen[Any]) -> None:
    """Stop the group this script started (the process and what it spawned): TERM, then KILL."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(5)


def ssewire(*args: str) -> list[str]:
    return [sys.executable, "-m", "ssewire", *args]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(process: subprocess.Popen[Any], port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with socket.socket() as client:
            client.settimeout(0.5)
            if client.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def reference_server(*flags: str) -> Iterator[str]:
    """``ssewire serve`` on a free loopback port (another port if that one was taken meanwhile)."""
    said = ""
    for _ in range(3):
        port = _free_port()
        command = ssewire("serve", "--host", "127.0.0.1", "--port", str(port), *flags)
        # stderr to a file, not a pipe: a pipe nobody reads would stall a server that logs much
        with tempfile.TemporaryFile("w+") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
            )
            try:
                if _wait_listening(process, port, time.monotonic() + SERVER_START):
                    yield f"http://127.0.0.1:{port}/mcp"
                    return
            finally:
                _kill_group(process)
                log.seek(0)
                said = _failure(log.read())
    raise RuntimeError(f"ssewire serve {' '.join(flags)} did not start: {said}")


PY_SDK_RUNNER = """
import json, socket, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
sys.path.insert(0, sys.argv[1])
import uvicorn
from tests.support.sdk_servers import probe_app
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
print(json.dumps({"port": listener.getsockname()[1]}), flush=True)
config = uvicorn.Config(probe_app(**json.loads(sys.argv[2])), log_level="warning", lifespan="on",
                        timeout_graceful_shutdown=1)
uvicorn.Server(config).run(sockets=[listener])
"""


@contextlib.contextmanager
def python_sdk_server(checkout: Path, mode: dict[str, bool]) -> Iterator[str]:
    """tests/support/sdk_servers.py's app (as test_probe_sdk.py builds it) under uvicorn in a
    process of its own, on a socket it bound itself (no port race)."""
    process = subprocess.Popen(
        [sys.executable, "-c", PY_SDK_RUNNER, str(checkout), json.dumps(mode)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = _readline(process, SERVER_START)
        port = int(json.loads(line)["port"])
        if not _wait_listening(process, port, time.monotonic() + SERVER_START):
            raise RuntimeError(f"the Python SDK server {mode} did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _kill_group(process)
        assert process.stdout is not None
        process.stdout.close()


def _readline(process: subprocess.Popen[str], seconds: float) -> str:
    """One line of the child's stdout within ``seconds`` (a reader thread: no select on pipes)."""
    assert process.stdout is not None
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(seconds)
    if not got or not got[0]:
        raise RuntimeError("the server printed no port")
    return got[0]


def typescript_sdk_server(checkout: Path, flags: list[str]) -> contextlib.AbstractContextManager[str]:
    """tests/support/ts_servers.py's server (node, the pinned SDK it installs with npm ci)."""
    from tests.support.ts_servers import ts_server

    return ts_server(*flags)


# -- the targets ---------------------------------------------------------------------------


@dataclass
class Capture:
    checkout: Path
    work: Path
    jobs: int
    resets: int
    only: set[str] | None
    targets: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def keep(self, name: str, value: dict[str, Any]) -> None:
        with self.lock:
            self.targets[name] = value
        print(f"  {name}: exit {value.get('exit')}", file=sys.stderr, flush=True)

    def wanted(self, section: str) -> bool:
        return self.only is None or section in self.only


def _file_name(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name)


def probe_target(
    cap: Capture, name: str, serve: Callable[[], contextlib.AbstractContextManager[str]], *options: str
) -> None:
    """Start the server, probe it with a recording, stop it; validate the recording."""
    record = cap.work / f"{_file_name(name)}.recording.json"
    try:
        with serve() as url:
            done = run(
                ssewire("probe", url, "--format", "json", "--record", str(record), *options),
                timeout=PROBE_TIMEOUT,
            )
    except BaseException as exc:  # a server that would not start, or tests' skip (node absent)
        if isinstance(exc, KeyboardInterrupt):
            raise
        cap.keep(name, {"exit": "not-run", "notes": {"error": mask(f"{type(exc).__name__}: {exc}")}})
        return
    cap.keep(name, normalize_probe(done.stdout, done.stderr, done.exit_code))
    if record.is_file():
        validate_file(cap, "recording/" + name.removeprefix("probe/"), record, own_only=True)


def validate_file(cap: Capture, name: str, path: Path, *, own_only: bool) -> None:
    """The transcript under its own profile (and with --fail-on warning); unless ``own_only``,
    under every revision and the alias too."""
    runs: list[tuple[str, list[str]]] = [("own", []), ("own fail-on-warning", ["--fail-on", "warning"])]
    if not own_only:
        runs += [(profile, ["--profile", profile]) for profile in (*REVISIONS, ALIAS)]
    for label, options in runs:
        done = run(ssewire("validate", str(path), "--format", "json", *options), timeout=VALIDATE_TIMEOUT)
        cap.keep(f"{name} [{label}]", normalize_validation(done.stdout, done.stderr, done.exit_code))


def reference_targets(cap: Capture) -> list[Callable[[], None]]:
    """As tests/mcp/probe/test_probe.py: keep-alive 0.25 s, an idle window of 0.8 s, 5 s a request."""
    listed = run(ssewire("serve", "--list-faults"), timeout=VALIDATE_TIMEOUT)
    faults = normalize_fault_list(listed.stdout, listed.stderr, listed.exit_code)
    cap.keep("serve/list-faults", faults)
    fast = ("--keepalive", "0.25")
    probe = ("--call-tools", PROBE_TOOLS, "--idle-check", "0.8", "--timeout", "5")

    def job(name: str, server_flags: tuple[str, ...], *options: str) -> Callable[[], None]:
        return lambda: probe_target(cap, name, lambda: reference_server(*fast, *server_flags), *options)

    jobs = [job("probe/reference/clean", (), *probe)]
    jobs += [job(f"probe/reference/fault={f}", ("--fault", f), *probe) for f in faults["faults"]]
    jobs += [
        job(f"probe/reference/clean --profile {p}", (), *probe, "--profile", p)
        for p in ("2025-11-25", "2026-07-28", ALIAS)
    ]
    jobs += [
        job("probe/reference/2026-07-28 sse", ("--profile", "2026-07-28"), *probe),
        job("probe/reference/2026-07-28 json", ("--profile", "2026-07-28", "--json-response"), *probe),
        job("probe/reference/json-response", ("--json-response",), *probe),
        job(
            "probe/reference/stateless --session-resilience", ("--stateless",), *probe, "--session-resilience"
        ),
        job("probe/reference/clean --session-resilience", (), *probe, "--session-resilience"),
        job(
            "probe/reference/fault=no-keepalives --fail-on warning",
            ("--fault", "no-keepalives"),
            *probe,
            "--fail-on",
            "warning",
        ),
    ]

    def embedded() -> None:  # no URL: the probe serves its own reference server
        record = cap.work / "embedded.recording.json"
        done = run(
            ssewire("probe", "--idle-check", "0.8", "--format", "json", "--record", str(record)),
            timeout=PROBE_TIMEOUT,
        )
        cap.keep("probe/embedded", normalize_probe(done.stdout, done.stderr, done.exit_code))
        if record.is_file():
            validate_file(cap, "recording/embedded", record, own_only=True)

    def unreachable() -> None:  # nothing listens on port 9
        done = run(
            ssewire("probe", "http://127.0.0.1:9/mcp", "--timeout", "2", "--format", "json"),
            timeout=PROBE_TIMEOUT,
        )
        cap.keep("probe/unreachable", normalize_probe(done.stdout, done.stderr, done.exit_code))

    return [*jobs, embedded, unreachable]


SDK_MODES = {  # tests/mcp/probe/test_probe_sdk.py's modes (sdk_servers.probe_app's keywords)
    "stateful-sse": {"stateless": False, "json_response": False},
    "stateful-sse-store": {"stateless": False, "json_response": False, "store": True},
    "stateful-json": {"stateless": False, "json_response": True},
    "stateless-sse": {"stateless": True, "json_response": False},
    "stateless-json": {"stateless": True, "json_response": True},
}
TS_MODES = {  # tests/mcp/probe/test_probe_ts.py's modes (server.mjs's flags)
    "stateful-sse": [],
    "stateful-sse-store": ["--store"],
    "stateful-json": ["--json"],
    "stateless-sse": ["--stateless"],
    "stateless-json": ["--stateless", "--json"],
}


def sdk_targets(cap: Capture) -> list[Callable[[], None]]:
    """As test_probe_sdk.py / test_probe_ts.py: idle window 1 s (and one of 16 s), 5 s a request;
    the Python SDK under 2025-11-25 and negotiated (2026-07-28) in every mode."""
    probe = ("--call-tools", PROBE_TOOLS, "--timeout", "5")
    checkout = cap.checkout
    jobs: list[Callable[[], None]] = []

    def job(name: str, serve: Callable[[], contextlib.AbstractContextManager[str]], *options: str) -> None:
        jobs.append(lambda: probe_target(cap, name, serve, *probe, *options))

    for mode, keywords in SDK_MODES.items():
        serve = lambda k=keywords: python_sdk_server(checkout, k)  # noqa: E731
        job(
            f"probe/python-sdk/{mode} --profile 2025-11-25",
            serve,
            "--profile",
            "2025-11-25",
            "--idle-check",
            "1",
        )
        job(f"probe/python-sdk/{mode} negotiated", serve, "--idle-check", "1")
    job(
        "probe/python-sdk/stateful-sse --profile 2025-11-25 idle 16 s",
        lambda: python_sdk_server(checkout, SDK_MODES["stateful-sse"]),
        "--profile",
        "2025-11-25",
        "--idle-check",
        "16",
    )
    for mode, flags in TS_MODES.items():
        job(
            f"probe/typescript-sdk/{mode}",
            lambda f=flags: typescript_sdk_server(checkout, f),
            "--idle-check",
            "1",
        )
    job(
        "probe/typescript-sdk/stateful-sse idle 16 s",
        lambda: typescript_sdk_server(checkout, []),
        "--idle-check",
        "16",
    )
    return jobs


def transcript_targets(cap: Capture) -> list[Callable[[], None]]:
    """The shipped examples and the test suite's sessions under every profile; each fault case
    of tests/support/fault_cases.py under its own."""
    from tests.support.conformant_sessions import BASES
    from tests.support.fault_cases import CASES

    jobs: list[Callable[[], None]] = []
    for path in sorted((cap.checkout / "examples").rglob("*.json")):
        document = _transcript(path)
        if document is None:
            continue
        name = f"validate/examples/{path.relative_to(cap.checkout / 'examples').as_posix()}"
        jobs.append(lambda n=name, p=path: validate_file(cap, n, p, own_only=False))
        cap.keep(name + " [input]", {"notes": {"sha256": _digest(document)}})

    def written(name: str, document: dict[str, Any], *, own_only: bool) -> Callable[[], None]:
        path = cap.work / f"{_file_name(name)}.json"
        path.write_text(json.dumps(document, indent=1, ensure_ascii=False), encoding="utf-8")
        cap.keep(name + " [input]", {"notes": {"sha256": _digest(document)}})
        return lambda: validate_file(cap, name, path, own_only=own_only)

    for base, build in sorted(BASES.items()):
        jobs.append(written(f"validate/sessions/{base}", build(), own_only=False))
    for case in CASES:
        jobs.append(written(f"validate/cases/{case.name}", case.invalid(), own_only=True))
    return jobs


def _transcript(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(document, dict) and str(document.get("format", "")).startswith("ssewire-transcript")
    return document if ok else None


def _digest(document: Any) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def reset_table(cap: Capture) -> None:
    done = run(
        [
            sys.executable,
            str(cap.checkout / "scripts" / "reset_table.py"),
            "--resets",
            str(cap.resets),
            "--print",
        ],
        timeout=RESET_TABLE_TIMEOUT,
        cwd=cap.checkout,
    )
    cap.keep("client/reset-table", normalize_reset_table(done.stdout, done.stderr, done.exit_code))


def client_tests(cap: Capture) -> None:
    """The client against the official SDK servers: the checkout's own test file, each test's
    outcome (node is required, as under .ci/run, so a missing node fails instead of skipping)."""
    report = cap.work / "client-sdk.xml"
    done = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            f"--junitxml={report}",
            "tests/mcp/client/test_client_sdk.py",
        ],
        timeout=RESET_TABLE_TIMEOUT,
        cwd=cap.checkout,
        env={**os.environ, "SSEWIRE_REQUIRE_NODE": "1"},
    )
    xml_text = report.read_text(encoding="utf-8") if report.is_file() else ""
    cap.keep("client/sdk-server-tests", normalize_junit(xml_text, done.stderr + done.stdout, done.exit_code))


def _in_parallel(cap: Capture, jobs: list[Callable[[], None]]) -> None:
    with ThreadPoolExecutor(cap.jobs) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def capture(args: argparse.Namespace) -> int:
    checkout = Path(args.checkout).resolve()
    sys.path.insert(0, str(checkout))  # the checkout's test helpers (servers, sessions, cases)
    import ssewire as installed

    meta = {
        "checkout": str(checkout),
        "commit": run(["git", "-C", str(checkout), "rev-parse", "HEAD"], timeout=30).stdout.strip(),
        "ssewire": str(Path(installed.__file__).resolve().parent),
        "python": platform.python_version(),
        "node": shutil.which("node") and run(["node", "--version"], timeout=30).stdout.strip(),
        "resets": args.resets,
    }
    if not meta["ssewire"].startswith(str(checkout)):
        print(f"warning: ssewire is imported from {meta['ssewire']}, not from {checkout}", file=sys.stderr)
    only = set(args.only.split(",")) if args.only else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="compare-") as work:
        cap = Capture(checkout, Path(work), args.jobs, args.resets, only)
        # the timing-sensitive probes first and alone; then the static validations; then the
        # CPU-heavy reset table by itself, so neither disturbs the probes' timings
        probes: list[Callable[[], None]] = []
        if cap.wanted("reference"):
            probes += reference_targets(cap)
        if cap.wanted("sdk"):
            probes = sdk_targets(cap) + probes  # the longest first
        _in_parallel(cap, probes)
        if cap.wanted("transcripts"):
            _in_parallel(cap, transcript_targets(cap))
        if cap.wanted("client"):
            reset_table(cap)
            client_tests(cap)
    meta["seconds"] = round(time.monotonic() - started)
    document = {
        "format": FORMAT,
        "meta": meta,
        "unstable": {name: list(items) for name, items in UNSTABLE.items()},
        "targets": dict(sorted(cap.targets.items())),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{len(cap.targets)} targets in {meta['seconds']} s -> {args.out}", file=sys.stderr)
    return 0


# -- diff ------------------------------------------------------------------------------------


ABSENT = ("<absent>", {})


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths of nested dicts ("verdicts/stream.buffered/status"); lists are leaves."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}/{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _unstable(target: str, path: str, unstable: dict[str, list[str]]) -> bool:
    import fnmatch

    for pattern, items in unstable.items():
        if fnmatch.fnmatchcase(target, pattern) and any(
            path == item or path.startswith(item + "/") or fnmatch.fnmatchcase(path, item) for item in items
        ):
            return True
    return False


def diff(args: argparse.Namespace) -> int:
    old = json.loads(Path(args.old).read_text(encoding="utf-8"))
    new = json.loads(Path(args.new).read_text(encoding="utf-8"))
    unstable = {**UNSTABLE, **old.get("unstable", {}), **new.get("unstable", {})}
    failing: list[str] = []
    soft: list[str] = []
    for side, doc in (("old", old), ("new", new)):
        meta = doc.get("meta", {})
        print(f"{side}: {meta.get('commit', '?')[:10]} {meta.get('checkout')} ({meta.get('seconds')} s)")
    a, b = old["targets"], new["targets"]
    for target in sorted(a.keys() | b.keys()):
        if target not in b:
            failing.append(f"{target}: removed")
            continue
        if target not in a:
            failing.append(f"{target}: added")
            continue
        left, right = _flatten(a[target]), _flatten(b[target])
        for path in sorted(left.keys() | right.keys()):
            was, now = left.get(path, "<absent>"), right.get(path, "<absent>")
            if was == now or (was in ABSENT and now in ABSENT):  # an emptied table: its entries say it
                continue
            line = f"{target}: {path}: {json.dumps(was, ensure_ascii=False)} -> {json.dumps(now, ensure_ascii=False)}"
            if path.startswith("notes") or path.split("/")[0] == "notes":
                soft.append("note      " + line)
            elif _unstable(target, path, unstable):
                soft.append("unstable  " + line)
            else:
                failing.append(line)
    for line in failing:
        print("DIFF      " + line)
    for line in soft:
        print(line)
    print(f"{len(failing)} differences, {len(soft)} in notes or unstable items")
    return 1 if failing or (args.strict and soft) else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    take = commands.add_parser("capture", help="run every target, write the normalized results")
    take.add_argument("out")
    take.add_argument("--checkout", default=str(HERE), help="the checkout whose tests/ and scripts/ to use")
    take.add_argument("--jobs", type=int, default=3, help="probes and validations at once (default 3)")
    take.add_argument("--resets", type=int, default=30, help="the reset table's planned resets a column")
    take.add_argument("--only", help="comma-separated sections: reference,sdk,transcripts,client")
    compare = commands.add_parser("diff", help="print every difference; exit 1 if any")
    compare.add_argument("old")
    compare.add_argument("new")
    compare.add_argument("--strict", action="store_true", help="notes and unstable items fail too")
    args = parser.parse_args()
    return capture(args) if args.command == "capture" else diff(args)


if __name__ == "__main__":
    sys.exit(main())
