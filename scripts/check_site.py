"""Check the built docs site as a reader meets it: every internal link and anchor resolves,
and no raw reStructuredText role (":class:`Event`") shows through.

    python scripts/check_site.py site/                 # the HTML files as built
    python scripts/check_site.py site/ --browser       # and each page as headless Chromium renders it

With --browser, each page is loaded by Chromium (``chromium --headless --dump-dom``) and the
rendered DOM is checked again: what a reader's browser shows, after the theme's scripts
ran. Exit 0: clean; 1: problems, one line each; 2: no site, or no browser where asked.
"""

from __future__ import annotations

import argparse
import html.parser
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from urllib.parse import unquote, urlsplit

# a role name (Sphinx's and docutils' own: :class:, :func:, :ref:, :envvar:, :py:meth:, ...)
# right before its backquoted target, as text or as Markdown turned it into <code>
RAW_ROLE = re.compile(r"(?<![\w:]):(?:[a-z]+:)?[a-z]+:(?:`|<code>)")
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# no network, no first-run work: this machine reaches no other host (see the env notes)
BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=3000",  # let the theme's scripts run before the DOM is dumped
)


class _Page(html.parser.HTMLParser):
    """The ids a page defines and the local references it makes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if found.get(key):
                self.ids.add(str(found[key]))
        for key in ("href", "src"):
            value = found.get(key)
            if value and not (tag == "link" and found.get("rel") in ("canonical", "alternate")):
                self.refs.append(value)


def _local(ref: str) -> bool:
    parts = urlsplit(ref)
    return not parts.scheme and not parts.netloc and not ref.startswith("//")


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def check_links(
    site: pathlib.Path, built: dict[pathlib.Path, _Page], checked: dict[pathlib.Path, _Page]
) -> list[str]:
    """Every local href/src of the ``checked`` pages resolves to a file, and its #fragment to
    an id of the ``built`` page it names (pages keyed by resolved path)."""
    problems = []
    for path, page in checked.items():
        for ref in page.refs:
            if not _local(ref):
                continue
            parts = urlsplit(ref)
            base = site.resolve() if parts.path.startswith("/") else path.parent  # 404.html: root-absolute
            target = path if not parts.path else (base / unquote(parts.path).lstrip("/")).resolve()
            if target.is_dir() or parts.path.endswith("/"):
                target = target / "index.html"
            name = path.relative_to(site.resolve())
            if not target.is_file():
                problems.append(f"{name}: broken link {ref}")
            elif parts.fragment and target.suffix == ".html":
                known = built.get(target)
                if known is not None and unquote(parts.fragment) not in known.ids:
                    problems.append(
                        f"{name}: no anchor #{parts.fragment} in {target.relative_to(site.resolve())}"
                    )
    return problems


def check_roles(name: str, text: str) -> list[str]:
    """Raw reStructuredText roles that reached the page (a docstring the renderer did not read)."""
    return [f"{name}: raw role {match.group(0)!r}" for match in RAW_ROLE.finditer(text)]


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def render(browser: str, page: pathlib.Path) -> str:
    """The page's DOM after Chromium loaded it and ran its scripts."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    if done.returncode != 0 or "<body" not in done.stdout:
        raise RuntimeError(f"{browser} could not render {page}: exit {done.returncode}")
    return done.stdout


def check(site: pathlib.Path, *, browser: str | None = None) -> list[str]:
    texts = {path.resolve(): path.read_text(encoding="utf-8") for path in sorted(site.rglob("*.html"))}
    built = {path: _parse(text) for path, text in texts.items()}
    problems = check_links(site, built, built)
    rendered: dict[pathlib.Path, _Page] = {}
    for path, text in texts.items():
        name = str(path.relative_to(site.resolve()))
        problems += check_roles(name, text)
        if browser is None:
            continue
        try:
            dom = render(browser, path)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{name}: {exc}")
            continue
        rendered[path] = _parse(dom)
        problems += [f"{line} (in the rendered page)" for line in check_roles(name, dom)]
        if 'class="md-content"' not in dom:
            problems.append(f"{name}: the rendered page has no content area")
    problems += [f"{line} (in the rendered page)" for line in check_links(site, built, rendered)]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=pathlib.Path)
    parser.add_argument("--browser", action="store_true", help="also check each page as Chromium renders it")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"check_site: no built site at {args.site}", file=sys.stderr)
        return 2
    browser = find_browser() if args.browser else None
    if args.browser and browser is None:
        print(f"check_site: --browser, but none of {', '.join(BROWSERS)} is on the PATH", file=sys.stderr)
        return 2
    problems = check(args.site, browser=browser)
    for line in problems:
        print(line)
    pages = sum(1 for _ in args.site.rglob("*.html"))
    print(f"{pages} pages, {len(problems)} problems" + (f", rendered by {browser}" if browser else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
