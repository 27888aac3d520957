"""The fork server the conformance tests start their client from: each command is a process
of its own, with the argv, environment, directory, streams and exit status it was run with;
a signal to the command reaches its process; a command killed takes its process with it,
and the server goes on serving."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tests.support.forkserver import forking


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _echo(command: list[str], *args: str, cwd, env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env={**os.environ, "FORK_ECHO": env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_each_command_is_a_process_of_its_own_with_its_argv_env_directory_and_status(tmp_path):
    with forking("tests.support.fork_echo") as command:
        runs = [_echo(command, "say", str(code), cwd=tmp_path, env=f"run{code}") for code in (0, 3)]
    pids = set()
    for code, run in zip((0, 3), runs, strict=True):
        pid, cwd, env, *argv = run.stdout.split()
        assert (run.returncode, cwd, env, argv) == (code, str(tmp_path), f"run{code}", ["say", str(code)])
        assert run.stderr == "to stderr\n"
        pids.add(pid)
    assert len(pids) == 2


def test_a_signal_reaches_the_process_and_a_killed_command_takes_its_process_along(tmp_path):
    with forking("tests.support.fork_echo") as command:
        statuses, children = [], []
        for sent in (signal.SIGTERM, signal.SIGKILL):
            shim = subprocess.Popen([*command, "sleep"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
            assert shim.stdout is not None
            child = int(shim.stdout.readline().split()[0])
            assert child != shim.pid and _alive(child)
            shim.send_signal(sent)  # SIGTERM is passed on; SIGKILL ends the shim alone
            statuses.append(shim.wait(10))
            children.append(child)
            deadline = time.monotonic() + 5
            while _alive(child) and time.monotonic() < deadline:
                time.sleep(0.02)
        after = _echo(command, "say", "0", cwd=tmp_path, env="after")  # the server still serves
    assert statuses == [128 + signal.SIGTERM, -signal.SIGKILL]
    assert not any(_alive(child) for child in children)
    assert after.returncode == 0 and after.stdout.split()[2] == "after"
