"""``ssewire gateway --config FILE``: a config the gateway cannot serve is refused at start-up
with one stderr line naming the key and exit code 2 (never a traceback, never the value of a
variable that may hold a secret); ``--config`` and ``--upstream`` exclude each other; and
``--help`` shows every default."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import pytest

from ssewire import cli
from tests.support.processes import free_port

URL = "http://127.0.0.1:9/mcp"  # never reached: every config here is refused before any connection
SECRET = "hunter2-s3cret"  # in a variable's value: must never be echoed


def gateway(*argv: str, env: dict[str, str] | None = None, unset: tuple[str, ...] = ()) -> tuple[int, str]:
    """``ssewire gateway ARGV`` as a process (bounded: 30 s); its exit code and stderr."""
    environment = {**os.environ, **(env or {})}
    for name in unset:
        environment.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "ssewire", "gateway", "--port", str(free_port()), *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env=environment,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stderr


def refused(tmp_path, config: str, **options) -> str:
    """The one stderr line of the gateway refusing ``config`` with exit 2."""
    path = tmp_path / "gateway.toml"
    path.write_text(config)
    code, err = gateway("--config", str(path), **options)
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ssewire gateway: "), err
    return lines[0]


def server(name: str = "search", body: str = f'upstream = "{URL}"\n') -> str:
    return f"[servers.{name}]\n{body}"


# (config, what the line must name)
CASES = {
    "unknown key": (
        server(body=f'upstream = "{URL}"\ntimeoutt = 3\n'),
        ["servers.search.timeoutt", "unknown"],
    ),
    "unknown top-level key": (f"listen = 1\n{server()}", ["listen", "unknown"]),
    "unknown limit": (
        server(body=f'upstream = "{URL}"\n[servers.search.limits]\ncallz = 1\n'),
        ["servers.search.limits.callz"],
    ),
    "unknown tools key": (
        server(body=f'upstream = "{URL}"\ntools = {{ allow = ["a"], only = ["b"] }}\n'),
        ["servers.search.tools"],
    ),
    "missing upstream": (server(body="timeout = 3.0\n"), ["servers.search", "upstream"]),
    "upstream and upstream_env": (
        server(body=f'upstream = "{URL}"\nupstream_env = "SSEWIRE_T_URL"\n'),
        ["servers.search", "upstream_env"],
    ),
    "a name with a space": (server(name='"Search Box"'), ["Search Box"]),
    "a name in capitals": (server(name="Search"), ["Search"]),
    "a name starting with a dash": (server(name='"-search"'), ["-search"]),
    "a name of 64 characters": (server(name="s" * 64), ["s" * 64]),
    "allow and deny": (
        server(body=f'upstream = "{URL}"\ntools = {{ allow = ["a"], deny = ["b"] }}\n'),
        ["servers.search.tools"],
    ),
    "an unknown revision": (
        server(body=f'upstream = "{URL}"\nrevision = "1999-01-01"\n'),
        ["servers.search.revision"],
    ),
    "a revision the bridge does not map": (
        server(body=f'upstream = "{URL}"\nrevision = "2025-06-18"\n'),
        ["servers.search.revision"],
    ),
    "upstream not a string": (server(body="upstream = 5\n"), ["servers.search.upstream"]),
    "upstream not http": (server(body='upstream = "ftp://127.0.0.1/mcp"\n'), ["servers.search.upstream"]),
    "timeout a string": (server(body=f'upstream = "{URL}"\ntimeout = "fast"\n'), ["servers.search.timeout"]),
    "timeout a boolean": (server(body=f'upstream = "{URL}"\ntimeout = true\n'), ["servers.search.timeout"]),
    "timeout zero": (server(body=f'upstream = "{URL}"\ntimeout = 0\n'), ["servers.search.timeout"]),
    "keepalive negative": (
        server(body=f'upstream = "{URL}"\nkeepalive = -1.0\n'),
        ["servers.search.keepalive"],
    ),
    "max_message_size a fraction": (
        server(body=f'upstream = "{URL}"\nmax_message_size = 1.5\n'),
        ["servers.search.max_message_size"],
    ),
    "principals a string": (
        server(body=f'upstream = "{URL}"\nprincipals = "alice"\n'),
        ["servers.search.principals"],
    ),
    "headers_env a string": (
        server(body=f'upstream = "{URL}"\nheaders_env = "SSEWIRE_T_AUTH"\n'),
        ["servers.search.headers_env"],
    ),
    "tools a list": (server(body=f'upstream = "{URL}"\ntools = ["echo"]\n'), ["servers.search.tools"]),
    "tools.allow a string": (
        server(body=f'upstream = "{URL}"\ntools = {{ allow = "echo" }}\n'),
        ["servers.search.tools.allow"],
    ),
    "a limit of zero": (
        server(body=f'upstream = "{URL}"\n[servers.search.limits]\ncalls = 0\n'),
        ["servers.search.limits.calls"],
    ),
    "a limit a string": (
        server(body=f'upstream = "{URL}"\n[servers.search.limits]\nsessions = "many"\n'),
        ["servers.search.limits.sessions"],
    ),
    "reissue an unknown word": (
        server(body=f'upstream = "{URL}"\nreissue = "always"\n'),
        ["servers.search.reissue", "off"],
    ),
    "reissue an unknown key": (
        server(body=f'upstream = "{URL}"\nreissue = {{ tool = ["a"] }}\n'),
        ["servers.search.reissue"],
    ),
    "reissue.annotations not a boolean": (
        server(body=f'upstream = "{URL}"\nreissue = {{ annotations = "yes" }}\n'),
        ["servers.search.reissue.annotations"],
    ),
    "reissue.never a string": (
        server(body=f'upstream = "{URL}"\nreissue = {{ never = "wipe" }}\n'),
        ["servers.search.reissue.never"],
    ),
    "servers not a table": ("servers = 3\n", ["servers"]),
    "no servers": ("", ["servers"]),
    "a server not a table": ("[servers]\nsearch = 1\n", ["servers.search"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_config_is_refused_naming_the_key(tmp_path, case):
    config, named = CASES[case]
    line = refused(tmp_path, config)
    for part in named:
        assert part in line, line


def test_principals_without_authentication_are_refused(tmp_path):
    """A route's principals need auth on: without it nobody is a principal."""
    line = refused(tmp_path, server(body=f'upstream = "{URL}"\nprincipals = ["alice"]\n'))
    assert "principals" in line, line


def test_an_unset_variable_is_named(tmp_path):
    line = refused(
        tmp_path, server(body='upstream_env = "SSEWIRE_T_UNSET_URL"\n'), unset=("SSEWIRE_T_UNSET_URL",)
    )
    assert "SSEWIRE_T_UNSET_URL" in line and "servers.search.upstream_env" in line, line
    line = refused(
        tmp_path,
        server(body=f'upstream = "{URL}"\nheaders_env = ["SSEWIRE_T_UNSET_AUTH"]\n'),
        unset=("SSEWIRE_T_UNSET_AUTH",),
    )
    assert "SSEWIRE_T_UNSET_AUTH" in line and "servers.search.headers_env" in line, line


@pytest.mark.parametrize(
    ("body", "env"),
    [
        pytest.param(
            'upstream_env = "SSEWIRE_T_URL"\n', {"SSEWIRE_T_URL": f"not a url {SECRET}"}, id="not a URL"
        ),
        pytest.param(
            'upstream_env = "SSEWIRE_T_URL"\n',
            {"SSEWIRE_T_URL": f"ftp://user:{SECRET}@127.0.0.1/mcp"},
            id="not http",
        ),
        pytest.param(
            f'upstream = "{URL}"\nheaders_env = ["SSEWIRE_T_AUTH"]\n',
            {"SSEWIRE_T_AUTH": f"Bearer {SECRET}"},
            id="a header without a name",
        ),
        pytest.param(
            f'upstream = "{URL}"\nheaders_env = ["SSEWIRE_T_AUTH"]\n',
            {"SSEWIRE_T_AUTH": f"Bad Name: {SECRET}"},
            id="a header name with a space",
        ),
    ],
)
def test_a_bad_variable_is_named_and_its_value_never_echoed(tmp_path, body, env):
    line = refused(tmp_path, server(body=body), env=env)
    key = "servers.search.upstream_env" if "upstream_env" in body else "servers.search.headers_env"
    assert key in line or next(iter(env)) in line, line  # the key, or the variable it names
    assert SECRET not in line and "user:" not in line, line


def test_not_toml_and_a_missing_file_are_refused(tmp_path):
    refused(tmp_path, "[servers.search\nupstream = 1\n")
    code, err = gateway("--config", str(tmp_path / "missing.toml"))
    assert code == 2 and err.startswith("ssewire gateway: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_config_and_upstream_exclude_each_other(tmp_path):
    path = tmp_path / "gateway.toml"
    path.write_text(server())
    code, err = gateway("--config", str(path), "--upstream", URL)
    assert code == 2, err
    assert "--config" in err and "--upstream" in err, err
    assert "Traceback" not in err
    code, err = gateway()  # neither: nothing to relay
    assert code == 2, err
    assert "--config" in err or "--upstream" in err, err


# -- --help ----------------------------------------------------------------------------------


def _gateway_parser() -> argparse.ArgumentParser:
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices["gateway"]


def _help_blocks(text: str) -> dict[str, str]:
    """Each option's entry of the help (its lines joined), by each of its option strings: an
    entry starts on a line indented two spaces with a dash; its help goes on below."""
    blocks: dict[str, str] = {}
    names: list[str] = []
    for line in text.splitlines():
        if re.match(r"  -", line):
            head = line.strip()
            names = re.findall(r"(?<![\w-])(--?\w[\w-]*)", re.split(r"\s{2,}", head, maxsplit=1)[0])
            for name in names:
                blocks[name] = head
        elif names and line.startswith("    ") and line.strip():
            for name in names:
                blocks[name] += " " + line.strip()
        else:
            names = []
    return blocks


def test_help_shows_every_default():
    done = subprocess.run(
        [sys.executable, "-m", "ssewire", "gateway", "--help"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    blocks = _help_blocks(done.stdout)
    missing = []
    for action in _gateway_parser()._actions:
        if not action.option_strings or action.default in (None, False, [], argparse.SUPPRESS):
            continue
        entry = blocks[action.option_strings[-1]]
        if "default" not in entry or str(action.default) not in entry:
            missing.append(f"{action.option_strings[-1]} (default {action.default!r}): {entry}")
    assert missing == [], "\n".join(missing)
    # the defaults the SPEC and the docs name, whatever argparse holds for them
    for option, shown in {
        "--port": "8080",
        "--host": "127.0.0.1",
        "--store": "memory",
        "--drain": "30",
        "--log-format": "text",
        "--max-message-size": "16 MiB",
    }.items():
        assert option in blocks, f"{option} is not in --help"
        assert shown in blocks[option], f"{option}: {blocks[option]}"
    assert "--config" in blocks and "--upstream" in blocks


def test_a_routes_reissue_policy_is_read_as_written(tmp_path):
    from ssewire.mcp.gateway.config import load
    from ssewire.mcp.protocol.reissue import OFF, SAFE_TOOLS, ReissuePolicy

    path = tmp_path / "gateway.toml"
    path.write_text(
        server("plain")
        + server("none", f'upstream = "{URL}"\nreissue = "off"\n')
        + server(
            "chosen",
            f'upstream = "{URL}"\nreissue = {{ annotations = false, tools = ["a"], never = ["b"] }}\n',
        )
    )
    routes = {route.name: route.reissue for route in load(path)}
    assert routes == {
        "plain": SAFE_TOOLS,
        "none": OFF,
        "chosen": ReissuePolicy(annotations=False, tools=frozenset({"a"}), never=frozenset({"b"})),
    }


def test_reissue_on_the_command_line_is_for_the_one_upstream_form_only(tmp_path):
    path = tmp_path / "gateway.toml"
    path.write_text(server())
    code, err = gateway("--config", str(path), "--reissue", "off")
    assert code == 2 and "--reissue: give it per route in the config file" in err, err
