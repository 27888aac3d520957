"""scripts/check_site.py, which .ci/run points at the built docs: it must find what a reader
would trip on (a dead link, a missing anchor, a raw reStructuredText role), and pass a clean
site. The real site is checked by .ci/run, in Chromium too."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from tests.support import ROOT

spec = importlib.util.spec_from_file_location("check_site", ROOT / "scripts" / "check_site.py")
assert spec is not None and spec.loader is not None
check_site = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_site)

PAGE = '<html><body><div class="md-content"><h2 id="{anchor}">x</h2>{body}</div></body></html>'


def _site(tmp_path: pathlib.Path, body: str) -> pathlib.Path:
    (tmp_path / "api").mkdir()
    (tmp_path / "index.html").write_text(PAGE.format(anchor="top", body=body))
    (tmp_path / "api" / "index.html").write_text(
        PAGE.format(anchor="ssewire.Decoder", body='<a href="../#top">home</a>')
    )
    (tmp_path / "404.html").write_text(PAGE.format(anchor="nf", body='<a href="/api/">api</a>'))
    return tmp_path


def test_a_clean_site_passes(tmp_path):
    text = "<p>a field: <code>data: x</code>, a comment <code>: keep-alive</code>, a URL http://x:80/</p>"
    site = _site(
        tmp_path, '<a href="api/#ssewire.Decoder">Decoder</a> <a href="https://example.org/x">out</a>' + text
    )
    assert check_site.check(site) == []
    assert check_site.main([str(site)]) == 0


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('<a href="client/">client</a>', "index.html: broken link client/"),
        ('<a href="api/#ssewire.Encoder">x</a>', "index.html: no anchor #ssewire.Encoder in api/index.html"),
        ('<a href="#nowhere">x</a>', "index.html: no anchor #nowhere in index.html"),
        ("<p>bytes in, :class:<code>Event</code> s out</p>", "index.html: raw role ':class:<code>'"),
        ("<p>see :func:`validate`</p>", "index.html: raw role ':func:`'"),
        ("<p>set :envvar:<code>SSEWIRE_NO_EXTENSIONS</code></p>", "index.html: raw role ':envvar:<code>'"),
        ("<p>call :py:meth:`feed`</p>", "index.html: raw role ':py:meth:`'"),
    ],
)
def test_what_a_reader_trips_on_is_found(tmp_path, body, problem):
    site = _site(tmp_path, body)
    assert check_site.check(site) == [problem]
    assert check_site.main([str(site)]) == 1


def test_no_site_is_exit_2(tmp_path):
    assert check_site.main([str(tmp_path / "missing")]) == 2
