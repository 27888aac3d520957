"""The ``ssewire decode`` command, run as a user would: in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ssewire.cli import checkout, install_line
from tests.support import ROOT

EXAMPLE = ROOT / "examples" / "stream.sse"


def ssewire_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ssewire", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
    )


# examples/stream.sse, read by hand: a priming event (empty data), a progress
# notification, a two-line log event (comments skipped) and the result
EXAMPLE_LINES = [
    {"type": "message", "data": "", "id": "1"},
    {
        "type": "message",
        "data": '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t1","progress":1,"total":2}}',
        "id": "2",
    },
    {"type": "log", "data": "first line\nsecond line \u2028 still the second", "id": "3"},  # U+2028 is data
    {
        "type": "message",
        "data": '{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done \u00e9\U0001f600"}]}}',
        "id": "4",
    },
]


def parse(stdout: bytes) -> list[dict[str, str]]:
    # split on LF only: the data may hold U+2028, which str.splitlines() would split on
    return [json.loads(line) for line in stdout.decode("utf-8").split("\n")[:-1]]


@pytest.mark.parametrize("chunk_size", ["1", "7", "65536"])
def test_decode_example_file(chunk_size):
    result = ssewire_cli("decode", str(EXAMPLE), "--chunk-size", chunk_size)
    assert result.returncode == 0, result.stderr
    lines = parse(result.stdout)
    assert lines == EXAMPLE_LINES
    assert json.loads(lines[-1]["data"])["result"]["content"][0]["text"] == "done é😀"


def test_decode_stdin_is_the_default():
    result = ssewire_cli("decode", stdin=b"data: a\r\n\r\nevent: e\rdata: b\r\r")
    assert result.returncode == 0
    assert parse(result.stdout) == [
        {"type": "message", "data": "a", "id": ""},
        {"type": "e", "data": "b", "id": ""},
    ]


def test_torn_stream_exits_1_after_printing_complete_events():
    result = ssewire_cli("decode", "-", stdin=b"data: a\n\ndata: torn")
    assert result.returncode == 1
    assert parse(result.stdout) == [{"type": "message", "data": "a", "id": ""}]
    assert b"ended inside an event (10 bytes" in result.stderr


def test_oversized_event_is_reported_and_later_events_kept():
    result = ssewire_cli("decode", "--max-event-size", "4", stdin=b"data: big!\n\ndata: ok\n\n")
    assert result.returncode == 1
    assert parse(result.stdout) == [{"type": "message", "data": "ok", "id": ""}]
    assert b"max_event_size=4" in result.stderr


@pytest.mark.parametrize("target", ["missing.sse", "."])
def test_unreadable_input_exits_2_with_one_line(tmp_path, target):
    result = ssewire_cli("decode", str(tmp_path / target))
    assert result.returncode == 2
    assert result.stdout == b""
    assert len(result.stderr.decode().strip().splitlines()) == 1
    assert result.stderr.startswith(b"ssewire decode: cannot read")


def test_bad_usage_exits_2():
    assert ssewire_cli("decode", "--chunk-size", "0").returncode == 2
    assert ssewire_cli().returncode == 2


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("ssewire")
    result = subprocess.run([str(script), "decode", str(EXAMPLE)], capture_output=True, timeout=60)
    assert result.returncode == 0
    assert parse(result.stdout) == EXAMPLE_LINES


def _without(modules: list[str], *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``ssewire ARGS`` as if ``modules`` were not installed (None in sys.modules blocks an import)."""
    code = f"import sys\nfor m in {modules!r}: sys.modules[m] = None\nfrom ssewire.cli import main\nsys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)


def _installs_mcp_from(where: str) -> str:
    """The line's pip command: from the checkout the tests run from when ssewire was
    installed from it (an editable install, or ``pip install .`` as .ci/run does), else
    from the index."""
    return f"pip install '{where}[mcp]'" if checkout() == ROOT else "pip install 'ssewire[mcp]'"


@pytest.mark.parametrize(
    ("missing", "args"),
    [
        (["uvicorn"], ["probe", "--idle-check", "1", "--format", "markdown"]),  # the quick start's command
        (["httpx"], ["probe", "http://127.0.0.1:9/mcp"]),
        (["uvicorn"], ["serve", "--port", "0"]),
    ],
)
def test_a_missing_extra_is_one_line_naming_it_and_exit_2(missing, args):
    done = _without(missing, *args)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr
        == f"ssewire {args[0]}: needs {missing[0]}, which is not installed: {_installs_mcp_from('.')}\n"
    )


def test_the_install_line_names_the_checkout_by_its_path_from_another_folder(tmp_path):
    done = _without(["uvicorn"], "serve", "--port", "0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith(f": {_installs_mcp_from(str(ROOT))}\n"), done.stderr


def test_the_tests_run_from_the_checkout_they_were_installed_from():
    # .ci/run and the venvs of the docs install this checkout (`pip install .`, `-e .`):
    # the line above is then the checkout's, never the index's, which has no ssewire yet
    assert checkout() == ROOT


@pytest.mark.parametrize(
    ("source", "cwd", "line"),
    [
        (None, "/anywhere", "pip install 'ssewire[redis]'"),  # from an index: the package's name
        ("/src/ssewire", "/src/ssewire", "pip install '.[redis]'"),  # in the checkout
        ("/src/ssewire", "/home/me", "pip install '/src/ssewire[redis]'"),  # elsewhere: its path
        ("/src/it's", "/", "pip install '/src/it'\"'\"'s[redis]'"),  # quoted for the shell
    ],
)
def test_the_install_line_works_from_where_it_is_run(source, cwd, line):
    assert install_line("redis", None if source is None else Path(source), Path(cwd)) == line


def test_a_missing_package_outside_the_extra_is_a_bug_with_its_traceback():
    done = _without(["orjson"], "probe", "http://127.0.0.1:9/mcp")
    assert done.returncode == 1 and "Traceback" in done.stderr and "orjson" in done.stderr
