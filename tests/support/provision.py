"""Components from outside pip that the tests start, found or provisioned from the project's
own files, never installed by hand.

Absent, a component's tests skip with a reason that names what to install; its
``SSEWIRE_REQUIRE_*`` switch (set by .ci/run) turns that skip into a failure. A component
that is present but cannot be provisioned (an unreachable registry, say) fails in one line,
not a traceback per test.
"""

from __future__ import annotations

import contextlib
import hashlib
import pathlib
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import NoReturn

import pytest

from ssewire import _env

NPM_TIMEOUT = 240.0  # seconds for one `npm ci` (about 10 s here), under pytest-timeout's 300 a test
NODE_MAJOR = 20  # the oldest Node.js the pinned SDK runs on
STAMP = ".ssewire-provisioned"  # in node_modules: the digest of the lockfile it was installed from


def unavailable(reason: str, switch: str) -> NoReturn:
    """Skip (at module level too), or fail when ``switch`` is set: CI must not skip."""
    if _env.flag(switch):
        pytest.fail(f"{switch}=1 but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@contextlib.contextmanager
def _exclusive(path: pathlib.Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path``: a second test process waits for the first's install."""
    with open(path, "a+b") as handle:
        if sys.platform == "win32":  # pragma: no cover - exercised by the Windows CI leg only
            import msvcrt

            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)  # retries for 10 s, then raises
                    break
                except OSError:
                    time.sleep(0.1)
            try:
                yield
            finally:
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _npm_reason(output: str) -> str:
    """The one line of npm's error output that says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.split(None, 2)[2] for line in lines if line.startswith(("npm error ", "npm ERR! "))]
    errors = [e for e in errors if e.split(" ", 1)[0] not in ("code", "syscall", "errno", "A", "Log")]
    others = [line for line in lines if not line.startswith(("npm warn", "npm WARN", "npm notice"))]
    return (errors or others or ["no output"])[0]


def npm_ci(directory: pathlib.Path, *, npm: str, timeout: float = NPM_TIMEOUT) -> str | None:
    """Install ``directory``'s package-lock.json with ``npm ci``, once per checkout.

    Returns None when node_modules matches the lockfile (installed now or before), else one
    line saying why it could not be installed. Safe when two test processes start at once.
    """
    digest = hashlib.sha256((directory / "package-lock.json").read_bytes()).hexdigest()
    stamp = directory / "node_modules" / STAMP
    with _exclusive(directory / ".provision.lock"):
        if stamp.is_file() and stamp.read_text(encoding="ascii") == digest:
            return None
        command = [npm, "ci", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=30000"]
        try:
            done = subprocess.run(
                command, cwd=directory, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return f"npm ci in {directory} did not finish within {timeout:.0f} s"
        except OSError as exc:
            return f"npm ci in {directory} could not start: {exc}"
        if done.returncode != 0:
            reason = _npm_reason(done.stderr + "\n" + done.stdout)
            return f"npm ci in {directory} failed (exit {done.returncode}): {reason}"
        stamp.write_text(digest, encoding="ascii")  # last: an interrupted install is redone
    return None


def _node_version(node: str) -> tuple[int, ...] | None:
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    digits = done.stdout.strip().lstrip("v").split(".")
    return tuple(int(d) for d in digits) if all(d.isdigit() for d in digits) and digits[0] else None


def _outcome(directory: pathlib.Path, node: str | None, npm: str | None) -> tuple[bool, str] | None:
    """None when the packages are installed, else ``(missing, reason)``: missing node or npm
    (a skip, or a failure under the switch), or an install that failed (always a failure)."""
    if node is None or npm is None:
        missing = " and ".join(name for name, path in (("node", node), ("npm", npm)) if path is None)
        return True, f"{missing} not on the PATH: install Node.js {NODE_MAJOR} or newer with npm"
    version = _node_version(node)
    if version is None or version[0] < NODE_MAJOR:
        found = "an unreadable version" if version is None else ".".join(map(str, version))
        return True, f"node {found} at {node}: install Node.js {NODE_MAJOR} or newer"
    reason = npm_ci(directory, npm=npm)
    return None if reason is None else (False, reason)


# one look (node's version, the install) per directory, node and npm, and test process
_outcomes: dict[tuple[pathlib.Path, str | None, str | None], tuple[bool, str] | None] = {}


def require_npm_packages(directory: pathlib.Path, *, node: str | None, npm: str | None, switch: str) -> None:
    """The node packages pinned in ``directory``, installed, or this test skipped (or failed)."""
    key = (directory, node, npm)
    if key not in _outcomes:
        _outcomes[key] = _outcome(directory, node, npm)
    outcome = _outcomes[key]
    if outcome is None:
        return
    missing, reason = outcome
    if missing:
        unavailable(reason, switch)
    pytest.fail(reason, pytrace=False)
