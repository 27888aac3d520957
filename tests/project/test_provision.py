"""The tests provision what they need from outside pip themselves (``provision.py``): once per
checkout, safe when two test processes start at once, and a registry that cannot be reached
is one clear line."""

from __future__ import annotations

import pathlib
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

from tests.support import ROOT
from tests.support.provision import STAMP, npm_ci, require_npm_packages, unavailable

# the fake npm below is a #! script, which Windows cannot start (the real npm is npm.cmd there)
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="the fake npm is a #! script")
LOCKED = ROOT / "tests" / "ts_server"


def _fake_npm(tmp_path: pathlib.Path, *, exit_code: int = 0, stderr: str = "") -> pathlib.Path:
    """An ``npm`` that counts its runs, takes a moment (so two callers overlap) and installs nothing."""
    script = tmp_path / "npm"
    script.write_text(
        textwrap.dedent(f"""\
            #!{sys.executable}
            import os, pathlib, sys, time
            with open("runs", "a") as runs:
                runs.write(" ".join(sys.argv[1:]) + "\\n")
            time.sleep(1.0)
            pathlib.Path("node_modules").mkdir(exist_ok=True)
            sys.stderr.write({stderr!r})
            sys.exit({exit_code})
            """)
    )
    script.chmod(0o755)
    return script


def _project(tmp_path: pathlib.Path) -> pathlib.Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("package.json", "package-lock.json"):
        shutil.copy(LOCKED / name, project / name)
    return project


@posix_only
def test_two_processes_starting_at_once_install_once(tmp_path):
    project, npm = _project(tmp_path), _fake_npm(tmp_path)
    code = f"import pathlib; from tests.support.provision import npm_ci; print(npm_ci(pathlib.Path({str(project)!r}), npm={str(npm)!r}))"
    both = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=60)[0].strip() for process in both]
    assert outputs == ["None", "None"]
    assert (project / "runs").read_text().splitlines() == [
        "ci --no-audit --no-fund --fetch-retries=1 --fetch-timeout=30000"
    ]
    assert (project / "node_modules" / STAMP).is_file()


@posix_only
def test_a_changed_lockfile_is_installed_again(tmp_path):
    project, npm = _project(tmp_path), _fake_npm(tmp_path)
    assert npm_ci(project, npm=str(npm)) is None
    assert npm_ci(project, npm=str(npm)) is None  # the stamp matches: nothing to do
    with open(project / "package-lock.json", "a") as lockfile:
        lockfile.write("\n")
    assert npm_ci(project, npm=str(npm)) is None
    assert len((project / "runs").read_text().splitlines()) == 2


@posix_only
def test_a_failed_install_is_one_line_and_leaves_no_stamp(tmp_path):
    noise = "npm error code E500\nnpm error 500 Internal Server Error - GET http://registry/zod\nnpm error A complete log of this run can be found in: /x.log\n"
    project, npm = _project(tmp_path), _fake_npm(tmp_path, exit_code=1, stderr=noise)
    reason = npm_ci(project, npm=str(npm))
    assert (
        reason == f"npm ci in {project} failed (exit 1): 500 Internal Server Error - GET http://registry/zod"
    )
    assert not (project / "node_modules" / STAMP).exists()


def test_an_unreachable_registry_is_named_in_one_line(tmp_path, monkeypatch):
    if shutil.which("npm") is None:
        unavailable("npm not on the PATH: install Node.js 20 or newer with npm", "SSEWIRE_REQUIRE_NODE")
    with socket.socket() as closed:  # a port nothing listens on: connections are refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{port}/")
    monkeypatch.setenv(
        "npm_config_cache", str(tmp_path / "empty-cache")
    )  # no cached tarballs to fall back on
    # npm_ci's one retry, after 0.1 s rather than npm's default 10 s: refused again at once
    monkeypatch.setenv("npm_config_fetch_retry_mintimeout", "100")
    monkeypatch.setenv("npm_config_fetch_retry_maxtimeout", "100")
    reason = npm_ci(_project(tmp_path), npm=shutil.which("npm"), timeout=120)
    assert reason is not None and "\n" not in reason
    assert "failed" in reason and f"127.0.0.1:{port}" in reason, reason


def test_a_missing_node_skips_naming_it_or_fails_when_required(monkeypatch):
    monkeypatch.delenv("SSEWIRE_REQUIRE_NODE", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"node not on the PATH: install Node\.js 20"):
        require_npm_packages(LOCKED, node=None, npm="/usr/bin/npm", switch="SSEWIRE_REQUIRE_NODE")
    monkeypatch.setenv("SSEWIRE_REQUIRE_NODE", "1")
    with pytest.raises(
        pytest.fail.Exception, match="SSEWIRE_REQUIRE_NODE=1 but node and npm not on the PATH"
    ):
        require_npm_packages(LOCKED, node=None, npm=None, switch="SSEWIRE_REQUIRE_NODE")


@posix_only
def test_a_node_too_old_skips_naming_the_version_it_found(tmp_path, monkeypatch):
    old = tmp_path / "node"
    old.write_text(f"#!{sys.executable}\nprint('v18.19.1')\n")
    old.chmod(0o755)
    monkeypatch.delenv("SSEWIRE_REQUIRE_NODE", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"node 18\.19\.1 at .*: install Node\.js 20 or newer"):
        require_npm_packages(LOCKED, node=str(old), npm="/usr/bin/npm", switch="SSEWIRE_REQUIRE_NODE")
