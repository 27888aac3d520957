"""The virtual routes of the gateway's config file (``[servers.NAME]`` with ``members``):
what `config.load` reads of a route and of each member, and each mistake refused with an
`InputError` naming its key, never echoing a URL or an environment variable's value."""

from __future__ import annotations

import pytest

from ssewire._errors import InputError
from ssewire.mcp.gateway.config import STDIO_URL, VIRTUAL_URL, load
from ssewire.mcp.protocol.reissue import OFF

URL = "http://127.0.0.1:9/mcp"  # never reached: the config is only read
SECRET = "hunter2-s3cret"  # a variable's value: never in a message
FILES = '["python", "-m", "files_server", "--root", "/srv"]'
ENVIRON = {"FILES_TOKEN": SECRET, "SEARCH_AUTH": f"Authorization: Bearer {SECRET}", "SEARCH_URL": URL}

FULL = f"""
[servers.all]
separator = "."
max_name_length = 48
timeout = 7
principals = ["alice", "bob"]

[servers.all.limits]
calls = 4

[[servers.all.rules]]
principals = ["alice"]
allow = ["fs.*"]

[[servers.all.rates]]
rate = "10/second"

[servers.all.members.search]
upstream = "{URL}"
headers_env = ["SEARCH_AUTH"]
timeout = 3
tools = {{ allow = ["echo"] }}

[servers.all.members.files]
command = {FILES}
env = ["FILES_TOKEN"]
cwd = "/srv"
prefix = "fs"
reissue = "off"

[servers.plain]
upstream = "{URL}"
"""


def written(tmp_path, text: str, name: str = "gateway.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal(tmp_path, text: str, environ: dict[str, str] | None = None) -> str:
    """The message of the `InputError` that loading ``text`` raises."""
    with pytest.raises(InputError) as refused:
        load(written(tmp_path, text), environ=ENVIRON if environ is None else environ)
    return str(refused.value)


def member(body: str, name: str = "x") -> str:
    """A virtual route ``all`` of one member ``name`` whose table is ``body``."""
    return f"[servers.all.members.{name}]\n{body}"


def test_a_virtual_route_loads_its_members_and_its_own_keys(tmp_path):
    route, plain = load(written(tmp_path, FULL), environ=ENVIRON)
    assert route.name == "all" and route.path == "/servers/all/mcp"
    assert route.upstream == VIRTUAL_URL
    assert route.revision == "2025-11-25"  # served as 2025-11-25, bridged for the newer
    assert route.command is None and route.headers == {}
    assert (route.separator, route.max_name_length) == (".", 48)
    assert route.timeout == 7.0 and route.principals == ["alice", "bob"]
    assert route.limits == {"calls": 4}
    assert [(rate.per_second, rate.tools) for rate in route.rates] == [(10.0, None)]
    assert route.tools is not None and len(route.tools.rules) == 1
    assert route.members is not None
    search, files = route.members
    assert [(m.name, m.prefix) for m in route.members] == [("search", "search"), ("files", "fs")]
    # an HTTP member: its upstream, headers and keys, its revision its own
    assert search.upstream == URL and search.command is None and search.revision is None
    assert list(search.headers.values()) == [f"Bearer {SECRET}"]
    assert search.timeout == 3.0 and search.tools is not None and search.tools.allow is not None
    # a stdio member: started, served as 2025-11-25
    assert files.upstream == STDIO_URL
    assert files.command == ["python", "-m", "files_server", "--root", "/srv"]
    assert (files.env, files.cwd, files.revision) == (["FILES_TOKEN"], "/srv", "2025-11-25")
    assert files.reissue is OFF
    # an ordinary route beside it is one as ever
    assert plain.upstream == URL and plain.members is None


def test_a_virtual_route_without_separator_or_max_name_length_gets_the_defaults(tmp_path):
    (route,) = load(written(tmp_path, member('upstream_env = "SEARCH_URL"\n')), environ=ENVIRON)
    assert (route.separator, route.max_name_length) == ("__", 64)
    assert route.members is not None and [(m.name, m.prefix, m.upstream) for m in route.members] == [
        ("x", "x", URL)
    ]


def test_a_stdio_member_may_say_its_revision_2025_11_25_and_no_other(tmp_path):
    text = member(f'command = {FILES}\nrevision = "2025-11-25"\n')
    (route,) = load(written(tmp_path, text), environ={})
    assert route.members is not None and route.members[0].revision == "2025-11-25"
    message = refusal(tmp_path, member(f'command = {FILES}\nrevision = "2026-07-28"\n'))
    assert "servers.all.members.x.revision" in message, message


def test_the_source_is_the_same_for_the_same_file_and_changes_with_a_members_table(tmp_path):
    (first,) = [r for r in load(written(tmp_path, FULL, "a.toml"), environ=ENVIRON) if r.name == "all"]
    (again,) = [r for r in load(written(tmp_path, FULL, "b.toml"), environ=ENVIRON) if r.name == "all"]
    assert first.source and first.source == again.source
    changed = FULL.replace("timeout = 3", "timeout = 4")
    (other,) = [r for r in load(written(tmp_path, changed, "c.toml"), environ=ENVIRON) if r.name == "all"]
    assert other.source != first.source
    renamed = FULL.replace('prefix = "fs"', 'prefix = "files2"')
    (other,) = [r for r in load(written(tmp_path, renamed, "d.toml"), environ=ENVIRON) if r.name == "all"]
    assert other.source != first.source


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param(
            f'[servers.all]\nupstream = "{URL}"\n' + member(f'upstream = "{URL}"\n'),
            ["servers.all.upstream"],
            id="upstream-on-the-route",
        ),
        pytest.param(
            f"[servers.all]\ncommand = {FILES}\n" + member(f'upstream = "{URL}"\n'),
            ["servers.all.command"],
            id="command-on-the-route",
        ),
        pytest.param(
            '[servers.all]\nheaders_env = ["SEARCH_AUTH"]\n' + member(f'upstream = "{URL}"\n'),
            ["servers.all.headers_env"],
            id="headers_env-on-the-route",
        ),
        pytest.param(
            '[servers.all]\nrevision = "2025-11-25"\n' + member(f'upstream = "{URL}"\n'),
            ["servers.all.revision"],
            id="revision-on-the-route",
        ),
        pytest.param("[servers.all]\nmembers = []\n", ["servers.all.members"], id="members-empty-list"),
        pytest.param("[servers.all]\nmembers = {}\n", ["servers.all.members"], id="members-empty-table"),
        pytest.param('[servers.all]\nmembers = "x"\n', ["servers.all.members"], id="members-not-a-table"),
        pytest.param(
            "[servers.all.members]\nx = 5\n", ["servers.all.members.x", "a table"], id="member-not-a-table"
        ),
        pytest.param(
            member(f'upstream = "{URL}"\nfoo = 1\n'), ["servers.all.members.x.foo"], id="unknown-member-key"
        ),
        pytest.param(
            member(f'upstream = "{URL}"\nkeepalive = 5\n'),
            ["servers.all.members.x.keepalive"],
            id="route-key-on-a-member",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\nprincipals = ["alice"]\n'),
            ["servers.all.members.x.principals"],
            id="principals-on-a-member",
        ),
        pytest.param(
            member("timeout = 5\n"), ["servers.all.members.x", "upstream"], id="member-without-upstream"
        ),
        pytest.param(
            member(f'upstream = "{URL}"\ncommand = {FILES}\n'),
            ["servers.all.members.x", "upstream", "command"],
            id="member-with-upstream-and-command",
        ),
        pytest.param(
            member('upstream = "ftp://example.invalid/mcp"\n'),
            ["servers.all.members.x.upstream"],
            id="member-upstream-not-http",
        ),
        pytest.param(
            member('upstream_env = "UNSET_URL"\n'),
            ["servers.all.members.x.upstream_env", "UNSET_URL"],
            id="member-upstream_env-unset",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\ntimeout = 0\n'),
            ["servers.all.members.x.timeout"],
            id="member-timeout-zero",
        ),
        pytest.param(
            member(f'command = {FILES}\nheaders_env = ["SEARCH_AUTH"]\n'),
            ["servers.all.members.x.headers_env"],
            id="headers_env-on-a-stdio-member",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\n', name="X"),
            ["servers.all.members.X: a member name is"],
            id="member-name",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\n', name="a")
            + member(f'upstream = "{URL}"\nprefix = "a"\n', name="b"),
            ["servers.all", "one prefix"],
            id="two-members-one-prefix",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\nprefix = "a__b"\n'),
            ["servers.all.members.x.prefix", "a prefix is"],
            id="prefix-holding-the-separator",
        ),
        pytest.param(
            '[servers.all]\nseparator = "-"\n' + member(f'upstream = "{URL}"\nprefix = "a-b"\n'),
            ["servers.all.members.x.prefix", "a prefix is"],
            id="prefix-holding-a-separator-given",
        ),
        pytest.param(
            member(f'upstream = "{URL}"\nprefix = "a/b"\n'),
            ["servers.all.members.x.prefix", "a prefix is"],
            id="prefix-not-tool-name-characters",
        ),
        pytest.param(
            '[servers.all]\nseparator = "/"\n' + member(f'upstream = "{URL}"\n'),
            ["servers.all", "separator"],
            id="separator-not-tool-name-characters",
        ),
        pytest.param(
            '[servers.all]\nseparator = ""\n' + member(f'upstream = "{URL}"\n'),
            ["servers.all.separator: a string, not empty"],
            id="separator-empty",
        ),
        pytest.param(
            "[servers.all]\nmax_name_length = 0\n" + member(f'upstream = "{URL}"\n'),
            ["servers.all.max_name_length"],
            id="max_name_length-zero",
        ),
    ],
)
def test_a_virtual_route_mistake_is_refused_naming_its_key(tmp_path, text, named):
    message = refusal(tmp_path, text)
    for word in named:
        assert word in message, message
    assert SECRET not in message and URL not in message, message


def test_a_max_name_length_leaving_no_room_after_a_prefix_is_refused(tmp_path):
    text = "[servers.all]\nmax_name_length = 20\n" + member(f'upstream = "{URL}"\nprefix = "abcdefgh"\n')
    message = refusal(tmp_path, text)
    assert message.startswith("servers.all") and "20" in message, message
    # the same prefix with room enough: 8 + 2 * 2 + 8 + 1
    (route,) = load(written(tmp_path, text.replace("= 20", "= 21")), environ=ENVIRON)
    assert route.max_name_length == 21


def test_a_max_name_length_too_small_is_refused_naming_its_key(tmp_path):
    text = "[servers.all]\nmax_name_length = 20\n" + member(f'upstream = "{URL}"\nprefix = "abcdefgh"\n')
    message = refusal(tmp_path, text)
    assert "servers.all.max_name_length" in message, message


def test_a_members_env_naming_an_unset_variable_is_refused_naming_it_and_no_value(tmp_path):
    text = member(f'command = {FILES}\nenv = ["FILES_ROOT", "FILES_TOKEN"]\n')
    environ = {"FILES_ROOT": SECRET + "-root", "OTHER": SECRET, "PATH": "/usr/bin"}
    message = refusal(tmp_path, text, environ)
    assert "servers.all.members.x.env" in message and "FILES_TOKEN" in message, message
    assert "FILES_ROOT" not in message, message  # the one that is set is not the one named
    for value in environ.values():
        assert value not in message, message


def test_one_member_may_have_no_prefix_and_two_may_not(tmp_path):
    path = tmp_path / "routes.toml"
    head = '[servers.all]\n[servers.all.members.a]\nupstream = "http://127.0.0.1:1/mcp"\nprefix = ""\n'
    path.write_text(head + '[servers.all.members.b]\nupstream = "http://127.0.0.1:2/mcp"\n')
    (route,) = load(path, {})
    assert [(m.name, m.prefix) for m in route.members] == [("a", ""), ("b", "b")]
    path.write_text(head + '[servers.all.members.b]\nupstream = "http://127.0.0.1:2/mcp"\nprefix = ""\n')
    with pytest.raises(InputError, match="one prefix"):
        load(path, {})
