"""The names a virtual server shows (``Names``: prefixed, shortened past ``max_length``,
read back to their member) and the cursors of its merged listings, alone (sans-IO)."""

from __future__ import annotations

import base64
import re

import orjson
import pytest

from ssewire.mcp.virtual import names as names_module
from ssewire.mcp.virtual.names import BadCursor, Names, NamesRefused, cursor, read_cursor

LONG = "x" * 80  # a tool name no 64-character shown name holds


def encoded(value: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).decode()


# -- shown names and what they read back to


def test_a_shown_name_is_the_prefix_the_separator_and_the_name_and_reads_back():
    names = Names({"search": "s", "files": "fs"})
    assert names.shown("search", "echo") == "s__echo"
    assert names.shown("files", "read") == "fs__read"
    assert names.of("s__echo") == ("search", "echo")
    assert names.of("fs__read") == ("files", "read")


def test_the_separator_is_the_one_given():
    names = Names({"search": "s"}, separator=".")
    assert names.shown("search", "echo") == "s.echo"
    assert names.of("s.echo") == ("search", "echo")
    assert names.of("s__echo") is None  # the default separator is no longer one


def test_a_name_holding_the_separator_reads_back_whole_split_at_the_first_separator():
    names = Names({"m": "p"})
    assert names.shown("m", "a__b") == "p__a__b"
    assert names.of("p__a__b") == ("m", "a__b")


@pytest.mark.parametrize(
    "shown",
    ["q__echo", "pecho", "p", "p__", "", "__echo"],
    ids=["unknown-prefix", "no-separator", "prefix-alone", "empty-name", "empty", "empty-prefix"],
)
def test_a_name_of_no_member_reads_as_none(shown):
    assert Names({"m": "p"}).of(shown) is None


def test_a_prefix_ending_in_part_of_the_separator_reads_back_or_is_refused():
    try:
        names = Names({"m": "a_"})
    except ValueError:  # refusing the prefix is a fix as good as reading it back
        return
    assert names.of(names.shown("m", "x")) == ("m", "x")


def test_two_members_names_never_meet_even_when_one_prefix_ends_in_part_of_the_separator():
    try:
        names = Names({"one": "a", "two": "a_"})
    except ValueError:
        return
    assert names.shown("one", "_x") != names.shown("two", "x")
    assert names.of(names.shown("two", "x")) == ("two", "x")


# -- what the constructor refuses


@pytest.mark.parametrize("separator", ["", "/", "a b", "::", "é"])
def test_a_separator_outside_the_tool_name_characters_is_refused(separator):
    with pytest.raises(ValueError, match="separator"):
        Names({"m": "p"}, separator=separator)


@pytest.mark.parametrize("separator", ["-", ".", "_", "--", "X9"])
def test_a_separator_of_tool_name_characters_is_taken(separator):
    names = Names({"m": "p"}, separator=separator)
    assert names.of(names.shown("m", "echo")) == ("m", "echo")


def test_a_prefix_holding_the_separator_is_refused():
    for prefixes, separator in (({"m": "a__b"}, "__"), ({"m": "a.b"}, ".")):
        with pytest.raises(NamesRefused, match="a prefix is") as refused:
            Names(prefixes, separator=separator)
        assert (refused.value.key, refused.value.member) == ("prefix", "m")
    Names({"m": "a.b"})  # the same prefix under another separator is one


@pytest.mark.parametrize("prefix", ["a b", "a/b", "a:b", "é"])
def test_a_prefix_outside_the_tool_name_characters_is_refused(prefix):
    with pytest.raises(NamesRefused, match="a prefix is") as refused:
        Names({"m": prefix})
    assert (refused.value.key, refused.value.member) == ("prefix", "m")


def test_two_members_with_one_prefix_are_refused():
    with pytest.raises(ValueError, match="one prefix"):
        Names({"one": "p", "two": "p"})


def test_a_max_length_leaving_no_room_after_the_longest_prefix_is_refused():
    # the longest prefix (5), two separators (4), the digest (8) and one character: 18
    prefixes = {"a": "a", "b": "bbbbb"}
    with pytest.raises(NamesRefused, match="17 leaves no room") as refused:
        Names(prefixes, max_length=17)
    assert refused.value.key == "max_length"
    assert Names(prefixes, max_length=18).max_length == 18
    with pytest.raises(NamesRefused, match="leaves no room"):
        Names({"b": "bbbbb"}, separator="---", max_length=19)  # a longer separator needs more


# -- shortened names


def test_a_long_name_is_shortened_to_max_length_ending_in_the_separator_and_a_digest():
    short = Names({"m": "p"}).shown("m", LONG)
    assert len(short) == 64
    assert short.startswith("p__xxx")
    assert re.fullmatch(r"__[0-9a-f]{8}", short[-10:]), short
    assert len(Names({"m": "p"}, max_length=30).shown("m", LONG)) == 30


def test_a_name_of_exactly_max_length_is_not_shortened():
    name = "y" * (64 - len("p__"))
    assert Names({"m": "p"}).shown("m", name) == "p__" + name
    assert Names({"m": "p"}).shown("m", name + "y") != "p__" + name + "y"


def test_a_shortened_name_is_the_same_for_every_instance():
    assert Names({"m": "p"}).shown("m", LONG) == Names({"m": "p"}).shown("m", LONG)


def test_two_long_names_sharing_their_head_are_shortened_apart():
    names = Names({"m": "p"})
    one, two = names.shown("m", LONG + "1"), names.shown("m", LONG + "2")
    assert one != two
    assert one[:-8] == two[:-8]  # the same head: the digest alone tells them apart


def test_the_same_long_name_of_two_members_is_shortened_apart():
    names = Names({"one": "p", "two": "q"})
    assert names.shown("one", LONG) != names.shown("two", LONG)


def test_a_shortened_name_reads_back_to_its_member_and_whole_name_once_shown():
    names = Names({"one": "p", "two": "q"})
    short = names.shown("two", LONG)
    assert names.of(short) == ("two", LONG)
    assert not names.unseen(short)


def test_a_shortened_name_no_listing_showed_here_is_unseen_and_reads_as_a_plain_split():
    short = Names({"m": "p"}).shown("m", LONG)
    fresh = Names({"m": "p"})
    assert fresh.unseen(short)
    # hence the server lists the member first: read as it is, the name is the shortened one
    assert fresh.of(short) == ("m", short[len("p__") :])
    fresh.shown("m", LONG)
    assert not fresh.unseen(short) and fresh.of(short) == ("m", LONG)


def test_a_plain_name_of_max_length_never_shortened_is_not_unseen():
    names = Names({"m": "p"})
    plain = names.shown("m", "y" * 61)
    assert len(plain) == 64 and not names.unseen(plain)
    assert not names.unseen(plain[:-10] + "__zzzzzzzz")  # not hex
    assert not names.unseen(plain[:-10] + "_x1234abcd")  # no separator before the digest
    assert not names.unseen("p__" + "y" * 50 + "__1234abcd")  # shorter than max_length


def test_shortened_names_are_remembered_up_to_a_bound(monkeypatch):
    monkeypatch.setattr(names_module, "MAX_REMEMBERED", 2)
    names = Names({"m": "p"})
    first = names.shown("m", LONG + "1")
    names.shown("m", LONG + "2")
    assert names.shown("m", LONG + "1") == first  # one already remembered is no more
    assert names.shown("m", "short") == "p__short"  # nor is a name not shortened
    with pytest.raises(ValueError, match="too many"):
        names.shown("m", LONG + "3")


# -- the cursors of merged listings


def test_a_cursor_reads_back_to_each_members_cursor():
    pages = {2: "c-two", 0: "c-zero"}
    assert read_cursor(cursor(pages), 3) == {0: "c-zero", 2: "c-two"}
    assert cursor(pages) == cursor({0: "c-zero", 2: "c-two"})  # the order given does not count
    assert read_cursor(cursor({0: ""}), 1) == {0: ""}


@pytest.mark.parametrize(
    "text",
    [
        "abc",  # not base64 (its padding)
        base64.urlsafe_b64encode(b"not json").decode(),
        encoded([]),
        encoded({"0": "c"}),
        encoded("c"),
        encoded([["0", "c"]]),
        encoded([[True, "c"]]),
        encoded([[0.0, "c"]]),
        encoded([[2, "c"]]),
        encoded([[-1, "c"]]),
        encoded([[0, "a"], [0, "b"]]),
        encoded([[0, 5]]),
        encoded([[0, None]]),
        encoded([[0]]),
        encoded([[0, "c", "d"]]),
        encoded(["0c"]),
        None,
    ],
    ids=[
        "not-base64",
        "not-json",
        "empty-list",
        "an-object",
        "a-string",
        "string-index",
        "bool-index",
        "float-index",
        "index-past-the-members",
        "negative-index",
        "repeated-index",
        "number-cursor",
        "null-cursor",
        "short-pair",
        "long-pair",
        "no-pair",
        "none",
    ],
)
def test_a_cursor_this_server_did_not_give_is_refused(text):
    with pytest.raises(BadCursor):
        read_cursor(text, 2)


def test_a_member_without_a_prefix_shows_its_names_as_they_are_unless_they_read_as_anothers():
    names = Names({"plain": "", "s": "s"})
    assert names.shown("plain", "echo") == "echo" and names.of("echo") == ("plain", "echo")
    assert names.of("s__echo") == ("s", "echo")  # the prefixed member's reading wins
    assert names.shown("plain", "s__echo") is None  # so the plain one's is not shown
    assert names.shown("plain", "x__y") == "x__y" and names.of("x__y") == ("plain", "x__y")
    long = "n" * 80
    short = names.shown("plain", long)
    assert short is not None and len(short) == 64 and names.of(short) == ("plain", long)
    assert Names({"only": ""}).of("anything") == ("only", "anything")
    assert Names({"s": "s"}).of("echo") is None  # without a member of no prefix: no one's
