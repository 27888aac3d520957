"""Release engineering that cannot run here, checked for what it says: the workflows are
valid YAML that run what .ci/run runs, cibuildwheel covers the claimed Pythons, and the
version lives in one place."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import subprocess
import sys

import yaml

import ssewire
from tests.support import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CI_RUN = (ROOT / ".ci" / "run").read_text()
INSTALLS = re.compile(r"\b(pip|pip3|uv|apt-get|apt|npm)\b.*\b(install|ci)\b")


def _readme_commands() -> list[str]:
    """The two lines of the README's first ``sh`` block, comments dropped."""
    block = re.search(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines() if line.strip()]


README_COMMANDS = _readme_commands()


def _load(path: pathlib.Path) -> dict:
    document = yaml.safe_load(path.read_text())
    document["on"] = document.pop(True, document.get("on"))  # YAML 1.1 reads `on:` as true
    return document


def _runs(job: dict) -> list[str]:
    return [line.strip() for step in job["steps"] if "run" in step for line in step["run"].splitlines()]


def test_every_workflow_is_valid_and_its_actions_are_pinned():
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "wheels.yml"]
    for path in WORKFLOWS:
        document = _load(path)
        assert document["on"] and document["jobs"], path.name
        for name, job in document["jobs"].items():
            assert job["runs-on"] and job["steps"], (path.name, name)
            for step in job["steps"]:
                assert ("uses" in step) != ("run" in step), (path.name, name, step)
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@v[\d.]+", step["uses"]), step["uses"]


def test_the_test_matrix_runs_the_readme_command_on_every_platform_python_and_twin():
    job = _load(ROOT / ".github" / "workflows" / "ci.yml")["jobs"]["test"]
    matrix = job["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert matrix["python"] == ["3.10", "3.11", "3.12", "3.13"]
    assert matrix["twin"] == ["compiled", "pure"]
    readme_command = "pip install '.[test]' && python -m pytest"
    assert readme_command in README_COMMANDS
    assert readme_command in _runs(job) and readme_command in CI_RUN
    assert not any("npm" in line for line in _runs(job)), "the tests provision node packages themselves"


def test_ci_runs_the_readme_commands_verbatim_first_in_a_fresh_environment():
    assert len(README_COMMANDS) == 2
    lines = [
        line.strip() for line in CI_RUN.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    installs = [i for i, line in enumerate(lines) if INSTALLS.search(line)]
    first = installs[0]
    # verbatim, each followed only by `|| exit 1` (set -e does not stop on a failure left of `&&`)
    assert lines[first : first + 2] == [f"{command} || exit 1" for command in README_COMMANDS], (
        "nothing may be installed before the README's commands"
    )
    before = lines[:first]
    assert any(line.startswith("python3 -m venv ") for line in before)
    assert any(line.startswith(". ") and line.endswith('/bin/activate"') for line in before)
    assert "export SSEWIRE_REQUIRE_NODE=1" in " ".join(before), "a skipped node-backed test must fail CI"
    assert "export SSEWIRE_REQUIRE_CONFORMANCE=1" in " ".join(before), "so must a skipped conformance run"
    assert "export SSEWIRE_REQUIRE_EXTENSIONS=1" in before


def test_the_lint_docs_and_bench_jobs_mirror_ci_run():
    jobs = _load(ROOT / ".github" / "workflows" / "ci.yml")["jobs"]
    for command in ("lint-imports", "ruff check .", "ruff format --check .", "mypy --strict src"):
        assert command in _runs(jobs["lint"]) and command in CI_RUN, command
    for command in (
        "python scripts/peer_semantics.py --check",
        "python scripts/mcp_codes.py --check",
        "python bench/render.py bench/results.json --check",
    ):
        assert command in _runs(jobs["docs"]) and command in CI_RUN, command
    assert "mkdocs build --strict" in _runs(jobs["docs"]) and "mkdocs build --strict" in CI_RUN
    assert "python scripts/check_site.py site --browser" in _runs(jobs["docs"])
    assert 'python scripts/check_site.py "$work/site" --browser' in CI_RUN
    assert any("pytest bench --benchmark-disable" in line for line in _runs(jobs["bench-smoke"]))


def test_wheels_cover_the_pythons_the_package_claims():
    build = PYPROJECT["tool"]["cibuildwheel"]["build"].split()
    assert build == ["cp310-*", "cp311-*", "cp312-*", "cp313-*"]
    assert PYPROJECT["project"]["requires-python"] == ">=3.10"
    assert PYPROJECT["tool"]["cibuildwheel"]["environment"] == {"SSEWIRE_REQUIRE_EXTENSIONS": "1"}
    jobs = _load(ROOT / ".github" / "workflows" / "wheels.yml")["jobs"]
    assert {"wheels", "pure-wheel", "sdist"} <= set(jobs)


def test_the_version_lives_in_one_place():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert importlib.metadata.version("ssewire") == ssewire.__version__
    done = subprocess.run(
        [sys.executable, "-m", "ssewire", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"ssewire {ssewire.__version__}")
    assert f"## {ssewire.__version__}" in (ROOT / "CHANGELOG.md").read_text()


def test_the_install_page_lists_every_extra_and_what_it_brings():
    page = (ROOT / "docs" / "install.md").read_text()
    table = page.split("<!-- extras:start -->")[1].split("<!-- extras:end -->")[0]
    rows = [line.strip("| ").split(" | ") for line in table.strip().splitlines()[2:]]
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert [row[0].strip("`") for row in rows] == list(extras)
    for name, brings, _ in rows:
        wanted = {re.match(r"[\w.-]+", req).group(0).lower() for req in extras[name.strip("`")]}
        listed = {word.strip(",").lower() for word in brings.split() if word.strip(",").lower() in wanted}
        if name.strip("`") in ("httpx", "aiohttp", "asgi", "mcp"):  # the runtime extras: every package named
            assert listed == wanted, (name, listed, wanted)
        else:
            assert listed, name  # the tooling extras: named by their main packages


def test_the_claimed_pythons_are_the_classifiers_and_the_wheels():
    classifiers = PYPROJECT["project"]["classifiers"]
    claimed = [
        c.rsplit(" ", 1)[1]
        for c in classifiers
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert claimed == ["3.10", "3.11", "3.12", "3.13"]
    assert [f"cp3{v.split('.')[1]}-*" for v in claimed] == PYPROJECT["tool"]["cibuildwheel"]["build"].split()
    assert "CPython 3.10, 3.11, 3.12 and 3.13" in (ROOT / "docs" / "install.md").read_text()


def test_the_changelog_counts_what_the_registries_hold():
    from ssewire.mcp.checks.catalogue import DIAGNOSTICS as CATALOGUE
    from ssewire.mcp.reference.faults import FAULTS

    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.findall(r"(\d+) diagnostics", text) == [str(len(CATALOGUE))]
    assert re.findall(r"(\d+) switchable faults", text) == [str(len(FAULTS))]


def test_the_readme_says_how_many_processes_the_tests_run_on():
    from tests.conftest import WORKERS

    assert f"The tests run on {WORKERS} processes at once (pytest-xdist" in (ROOT / "README.md").read_text()
    assert any(
        req.startswith("pytest-xdist") for req in PYPROJECT["project"]["optional-dependencies"]["test"]
    )
