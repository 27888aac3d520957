"""The ``ssewire`` command line: one module per command, each with ``add_parser`` and ``run``.

Thin by design: arguments and file I/O around the library. A command's heavy imports
happen inside its ``run``, so ``ssewire decode`` never loads the MCP tooling. Every
``InputError`` becomes one stderr line and exit code 2, and so does a package of a missing
extra (``ssewire probe`` without ``ssewire[mcp]``): the line says what to install, as it
works from where this ssewire came from (`install_line`).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Sequence

from .. import __version__
from . import decode, gateway, hash_token, probe, redact, serve, validate
from ._common import Command, InputError, extra_provides, input_error

COMMANDS: dict[str, Command] = {
    module.NAME: module for module in (decode, validate, redact, probe, serve, gateway, hash_token)
}

DESCRIPTION = "Exact, fast Server-Sent Events decoding, and MCP Streamable HTTP transport checks."
EPILOG = """exit codes:
  0  clean
  1  findings: a dropped or torn event (decode), a failing finding or stale baseline entry
     (validate), a failing diagnostic (probe)
  2  unreadable or invalid input, a target that cannot be probed, or bad usage

Run 'ssewire COMMAND --help' for a command's options."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ssewire",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ssewire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return parser


def checkout() -> pathlib.Path | None:
    """The source checkout this ssewire runs from (``src/`` on the path, or an editable
    install) or was installed from (``pip install .``: the folder pip records in the
    distribution's ``direct_url.json``, PEP 610), while it is still there; None for a
    package from an index or a wheel."""
    import importlib.metadata  # here, not at start-up: only a missing extra's message needs them
    import json
    import urllib.parse
    import urllib.request

    source = pathlib.Path(__file__).resolve().parents[3]  # src/ssewire/cli/__init__.py
    if (source / "pyproject.toml").is_file():
        return source
    try:
        origin = json.loads(importlib.metadata.distribution("ssewire").read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None
    if not isinstance(origin, dict) or "dir_info" not in origin:
        return None
    url = origin.get("url")
    if not isinstance(url, str) or not url.startswith("file:"):
        return None
    folder = pathlib.Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    return folder if (folder / "pyproject.toml").is_file() else None


def install_line(extra: str, source: pathlib.Path | None, cwd: pathlib.Path) -> str:
    """The pip command that installs ``extra``: from the checkout ``source`` (``.`` when
    that is ``cwd``), else from the package index."""
    import shlex

    if source is None:
        return f"pip install 'ssewire[{extra}]'"
    where = "." if source == cwd.resolve() else str(source)
    return "pip install " + shlex.quote(f"{where}[{extra}]")


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["gateway", hash_token.NAME]:  # spelt as a gateway command: the same one
        words = words[1:]
    args = build_parser().parse_args(words)
    command = COMMANDS[args.command]
    try:
        return command.run(args)
    except InputError as exc:
        return input_error(args.command, exc)
    except ModuleNotFoundError as exc:
        if command.EXTRA is None or not extra_provides(command.EXTRA, exc.name):
            raise  # not a package of the command's extra: a bug, with its traceback
        line = install_line(command.EXTRA, checkout(), pathlib.Path.cwd())
        return input_error(args.command, f"needs {exc.name}, which is not installed: {line}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
