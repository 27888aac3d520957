"""The stdio routes of the gateway's config file (``command``, ``env``, ``cwd``): what
`config.load` reads of them, and each mistake refused with an `InputError` naming its key,
never echoing the value of an environment variable."""

from __future__ import annotations

import pytest

from ssewire._errors import InputError
from ssewire.mcp.gateway.config import STDIO_URL, load

URL = "http://127.0.0.1:9/mcp"  # never reached: the config is only read
SECRET = "hunter2-s3cret"  # a variable's value: never in a message
FILES = '["python", "-m", "files_server", "--root", "/srv"]'


def written(tmp_path, text: str):
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def refusal(tmp_path, text: str, environ: dict[str, str] | None = None) -> str:
    """The message of the `InputError` that loading ``text`` raises."""
    with pytest.raises(InputError) as refused:
        load(written(tmp_path, text), environ={} if environ is None else environ)
    return str(refused.value)


def test_a_stdio_route_loads_its_command_env_and_cwd(tmp_path):
    path = written(
        tmp_path,
        f"""
[servers.files]
command = {FILES}
env = ["SSEWIRE_TEST_FILES_TOKEN", "SSEWIRE_TEST_FILES_ROOT"]
cwd = "/srv"
timeout = 5

[servers.search]
upstream = "{URL}"
""",
    )
    environ = {"SSEWIRE_TEST_FILES_TOKEN": SECRET, "SSEWIRE_TEST_FILES_ROOT": "/srv", "OTHER": "x"}
    files, search = load(path, environ=environ)
    assert files.name == "files" and files.path == "/servers/files/mcp"
    assert files.command == ["python", "-m", "files_server", "--root", "/srv"]
    assert files.env == ["SSEWIRE_TEST_FILES_TOKEN", "SSEWIRE_TEST_FILES_ROOT"]  # names, not values
    assert files.cwd == "/srv"
    assert files.upstream == STDIO_URL
    assert files.revision == "2025-11-25"  # served as a 2025-11-25 server, bridged for the newer
    assert files.headers == {}
    assert files.timeout == 5.0  # the other keys still read
    # an HTTP route beside it is untouched
    assert search.upstream == URL
    assert (search.command, search.env, search.cwd, search.revision) == (None, [], None, None)


def test_a_stdio_route_without_env_or_cwd_gets_none(tmp_path):
    (route,) = load(written(tmp_path, f"[servers.files]\ncommand = {FILES}\n"), environ={})
    assert route.command == ["python", "-m", "files_server", "--root", "/srv"]
    assert (route.env, route.cwd) == ([], None)
    assert route.upstream == STDIO_URL and route.revision == "2025-11-25"


def test_a_stdio_route_may_say_its_revision_2025_11_25(tmp_path):
    text = f'[servers.files]\ncommand = {FILES}\nrevision = "2025-11-25"\n'
    (route,) = load(written(tmp_path, text), environ={})
    assert route.revision == "2025-11-25"


def test_env_is_checked_against_the_environ_given_not_the_process_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SSEWIRE_TEST_FILES_TOKEN", SECRET)
    text = f'[servers.files]\ncommand = {FILES}\nenv = ["SSEWIRE_TEST_FILES_TOKEN"]\n'
    message = refusal(tmp_path, text, environ={"PATH": "/usr/bin"})
    assert "servers.files.env" in message and "SSEWIRE_TEST_FILES_TOKEN" in message, message


@pytest.mark.parametrize(
    ("body", "named"),
    [
        pytest.param(
            f'command = {FILES}\nupstream = "{URL}"\n', ["command", "upstream"], id="command-and-upstream"
        ),
        pytest.param(
            f'command = {FILES}\nupstream_env = "SEARCH_URL"\n',
            ["command", "upstream_env"],
            id="command-and-upstream_env",
        ),
        pytest.param("timeout = 5\n", ["command", "upstream"], id="neither"),
        pytest.param("command = []\n", ["servers.files.command"], id="empty-command"),
        pytest.param('command = "python"\n', ["servers.files.command"], id="command-not-a-list"),
        pytest.param('command = ["python", 3]\n', ["servers.files.command"], id="command-not-strings"),
        pytest.param(f'command = {FILES}\nenv = "FILES_TOKEN"\n', ["servers.files.env"], id="env-not-a-list"),
        pytest.param(f'command = {FILES}\ncwd = ""\n', ["servers.files.cwd"], id="empty-cwd"),
        pytest.param(
            f'upstream = "{URL}"\nenv = ["PATH"]\n', ["servers.files", "env", "command"], id="env-on-http"
        ),
        pytest.param(
            f'upstream = "{URL}"\ncwd = "/srv"\n', ["servers.files", "cwd", "command"], id="cwd-on-http"
        ),
        pytest.param(
            f'command = {FILES}\nheaders_env = ["SEARCH_AUTH"]\n',
            ["servers.files.headers_env"],
            id="headers_env-on-stdio",
        ),
        pytest.param(
            f'command = {FILES}\nrevision = "2026-07-28"\n',
            ["servers.files.revision", "2025-11-25"],
            id="newer-revision",
        ),
    ],
)
def test_a_stdio_route_mistake_is_refused_naming_its_key(tmp_path, body, named):
    environ = {"PATH": "/usr/bin", "SEARCH_URL": URL, "SEARCH_AUTH": f"Authorization: Bearer {SECRET}"}
    message = refusal(tmp_path, f"[servers.files]\n{body}", environ)
    for word in named:
        assert word in message, message
    assert SECRET not in message and URL not in message, message


def test_env_naming_an_unset_variable_is_refused_naming_it_and_no_value(tmp_path):
    text = f'[servers.files]\ncommand = {FILES}\nenv = ["FILES_ROOT", "FILES_TOKEN"]\n'
    environ = {"FILES_ROOT": SECRET + "-root", "SSEWIRE_GATEWAY_LOG_KEY": SECRET, "PATH": "/usr/bin"}
    message = refusal(tmp_path, text, environ)
    assert "servers.files.env" in message and "FILES_TOKEN" in message, message
    assert "FILES_ROOT" not in message, message  # the one that is set is not the one named
    for value in environ.values():
        assert value not in message, message
