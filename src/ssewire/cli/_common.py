"""What every command shares: exit codes, the input-error exit, ``--fail-on``, and writing to stdout."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any, Protocol

from .._errors import InputError

EXIT_OK, EXIT_FINDINGS, EXIT_INPUT = 0, 1, 2

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_INPUT",
    "EXIT_OK",
    "Command",
    "InputError",
    "add_report_options",
    "extra_provides",
    "input_error",
    "positive_int",
    "write",
]


class Command(Protocol):
    """What a command module provides (``cli/decode.py`` and its siblings)."""

    NAME: str
    EXTRA: str | None  # the extra of ssewire whose packages ``run`` imports, if any

    def add_parser(self, commands: Any) -> None: ...
    def run(self, args: argparse.Namespace) -> int: ...


REPORT_FORMATS = ("text", "json", "markdown", "junit")  # ssewire.mcp.checks.report.FORMATS
FAIL_ON = ("error", "warning")


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """``--format`` and ``--fail-on``, the same for every command that reports findings.

    ``--fail-on``: the lowest level of a detected finding that fails the run (exit 1).
    Plain strings here, so parsing a command line loads no MCP module.
    """
    parser.add_argument("--format", choices=REPORT_FORMATS, default="text")
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="error",
        help="the lowest level that fails the run: error (default), or warning (errors and warnings)",
    )


def input_error(command: str, error: Exception | str) -> int:
    """Say what is wrong with the input on one stderr line; exit code 2."""
    print(f"ssewire {command}: {error}", file=sys.stderr)
    return EXIT_INPUT


def extra_provides(extra: str, module: str | None) -> bool:
    """Whether ssewire's ``extra`` brings the package ``module`` belongs to.

    Read from the installed package's metadata, so the extras are listed in one place
    (pyproject.toml's optional dependencies).
    """
    import importlib.metadata  # here, not at the top: it loads socket, and `ssewire decode` needs none

    wanted = (module or "").partition(".")[0].lower().replace("_", "-")
    try:
        requirements = importlib.metadata.requires("ssewire") or []
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return False
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        marker = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if name and marker and marker.group(1) == extra and name.group(0).lower().replace("_", "-") == wanted:
            return True
    return False


def cannot(action: str, path: str, error: OSError) -> InputError:
    """An OSError as an input error that names the file (``cannot read x: No such file``)."""
    return InputError(f"cannot {action} {path}: {error.strerror or error}")


def write(data: bytes | str) -> bool:
    """Write to stdout and flush; False when the reader went away (``| head``).

    Then stdout is pointed at /dev/null, so the interpreter's final flush stays quiet too.
    """
    try:
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return False
    return True


def positive_int(text: str) -> int:
    return _int_from(text, 1)


def non_negative_int(text: str) -> int:
    return _int_from(text, 0)


def _int_from(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}: {value}")
    return value


def header_options(lines: list[str], variables: list[str], flag: str) -> dict[str, str]:
    """``FLAG 'NAME: VALUE'`` and ``FLAG-env VAR`` options as one mapping of headers to send;
    InputError (exit 2) for a bad one, naming the option, never echoing a value."""
    from .._http import header_field

    given = [(f"{flag} #{n}", line) for n, line in enumerate(lines, 1)]
    for variable in variables:
        if variable not in os.environ:
            raise InputError(f"{flag}-env {variable}: the environment variable is not set")
        given.append((f"{flag}-env {variable}", os.environ[variable]))
    from ..mcp.protocol.wire import caller_headers

    fields: list[tuple[str, str]] = []
    for origin, line in given:
        try:
            fields.append(header_field(line))
        except ValueError as exc:
            raise InputError(f"{origin}: {exc}") from None
    try:
        return caller_headers(fields)  # pairs, not a dict: a name given twice is refused there
    except ValueError as exc:  # a header the MCP transport sets itself, or one given twice
        raise InputError(str(exc)) from None
