"""The fork server the conformance tests start their client from: each command is a process
of its own, with the argv, environment, directory, streams and exit status it was run with."""

from __future__ import annotations

import os
import subprocess

from tests.support.forkserver import forking


def test_each_command_is_a_process_of_its_own_with_its_argv_env_directory_and_status(tmp_path):
    with forking("tests.support.fork_echo") as command:
        runs = [
            subprocess.run(
                [*command, "say", str(code)],
                cwd=tmp_path,
                env={**os.environ, "FORK_ECHO": f"run{code}"},
                capture_output=True,
                text=True,
                timeout=30,
            )
            for code in (0, 3)
        ]
    pids = set()
    for code, run in zip((0, 3), runs, strict=True):
        pid, cwd, env, *argv = run.stdout.split()
        assert (run.returncode, cwd, env, argv) == (code, str(tmp_path), f"run{code}", ["say", str(code)])
        assert run.stderr == "to stderr\n"
        pids.add(pid)
    assert len(pids) == 2 and str(os.getpid()) not in pids
