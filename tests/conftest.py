"""One fixture runs every decoder test on both twins (see ``helpers.TWINS``), the
hypothesis profiles (``SSEWIRE_HYPOTHESIS_PROFILE=long`` runs the property tests 100x longer,
for fuzzing sessions), and the parallel run.

The suite runs on ``WORKERS`` pytest-xdist processes unless ``-n`` says otherwise (``-n 0``:
one process, as before; so do ``-p no:xdist``, ``--pdb`` and ``-s``, whose output a worker
would not show), with ``--dist loadgroup``: the tests of one ``xdist_group`` run in one
worker, one after another (a module-scoped server made once, a report written by one
process). Set here, not in ``addopts``: the bench suite shares pyproject.toml's options, and
neither runs on xdist nor has it installed.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support.budget import DEFAULT_EXAMPLES
from tests.support.twins import TWINS, twin

settings.register_profile(
    "default", max_examples=DEFAULT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", parent=settings.get_profile("default"), max_examples=100 * DEFAULT_EXAMPLES)
settings.load_profile(os.environ.get("SSEWIRE_HYPOTHESIS_PROFILE", "default"))

# Most of the suite waits (on servers, subprocesses, deadlines) rather than computes, so more
# workers than cores pay. Measured on 2 cores, the whole suite with nginx and Redis: 4 workers
# 5 min 34 s, 6 workers 4 min 14 s, 8 workers 5 min 42 s (each worker collects the suite again,
# about 13 s of CPU, and the timing-bound tests share the cores with more neighbours). The
# official suite's client runs and the drain tests are one group (xdist_group "processes"): side
# by side, under load, the clients' dozens of processes made them miss their deadlines.
WORKERS = 6


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n WORKERS`` unless ``-n`` (or ``--tx``, ``--pdb``, ``-s``) was given, and ``--dist
    loadgroup`` unless ``--dist`` was; runs before xdist's own hook (an initial conftest's
    ``tryfirst`` is called before a plugin's)."""
    option = config.option
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # a worker parses the command line again, where loadgroup is not
        if workerinput.get(LOADGROUP):
            option.loadgroup = True  # what xdist's worker sets from --dist loadgroup
        return
    if not hasattr(option, "numprocesses"):  # -p no:xdist
        return
    shows_output = option.capture == "no"  # -s: a worker's output would not be shown
    if option.numprocesses is None and not (option.tx or option.usepdb or shows_output):
        option.numprocesses = WORKERS
    if option.numprocesses and option.dist == "no":  # -n N alone (xdist would take --dist load)
        option.dist = "loadgroup"
        option.loadscopereorder = False  # the order the workers sort below, not by group size


LOADGROUP = "ssewire_loadgroup"


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist, never called
def pytest_configure_node(node: Any) -> None:
    """Tell each worker the controller's --dist (a worker groups the tests it collects)."""
    node.workerinput[LOADGROUP] = node.config.option.dist == "loadgroup"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a worker: the ``slow`` tests first, then the groups, then the rest (a stable sort: the
    same order on every worker), so that no long test starts near the end and ends the run
    alone. A worker whose xdist lost the groups fails at once, not silently ungrouped (xdist
    marks a grouped test's node id with ``@group``; pytest 9.2 keeps node ids where that mark
    is lost)."""
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: 0 if item.get_closest_marker("slow") else 1 if "@" in item.nodeid else 2)
    if not getattr(config.option, "loadgroup", False):
        return
    lost = [
        item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
    ]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup lost the xdist_group of {len(lost)} tests ({lost[0]}): this pytest and "
            "pytest-xdist do not group (install the test extra's pytest, or run with -n 0)"
        )


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-twin")
def decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param)


@pytest.fixture(scope="module", params=TWINS, ids=lambda name: f"{name}-raw-twin")
def raw_decoder_cls(request: pytest.FixtureRequest) -> type:
    return twin(request.param, raw=True)
