"""One module per CLI subcommand.

Each module defines ``NAME``, ``HELP`` (one line), ``EXAMPLE`` (a full command line), and two
functions: ``configure(parser)`` adds its arguments, ``execute(args) -> int`` runs it and returns
the exit code. Adding a command = adding a module here and its name to ``simspec.cli.COMMANDS``.
Commands raise :class:`simspec.errors.InputError` for bad input; ``simspec.cli.main`` turns it
into exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.rjust(w) if n and i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """The shared ``--set KEY=VALUE`` option (repeatable scenario overrides)."""
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a scenario key, e.g. --set routing.overlap=0.5 (repeatable)",
    )


def check_writable(path: str, flag: str) -> None:
    """Fail before a long run, not after it, when ``path`` cannot be written."""
    import os
    from pathlib import Path

    from simspec.errors import InputError

    target = Path(path)
    if target.is_dir():
        raise InputError(flag, path, "a file path", "an existing folder")
    parent = target.parent if str(target.parent) else Path(".")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise InputError(flag, path, "a path in a writable folder", f"{parent} is not writable")


def write_output(path: str, text: str, flag: str) -> None:
    """Write ``text`` atomically, turning OS errors into input errors that name ``flag``."""
    from simspec.errors import InputError
    from simspec.io import write_atomic

    try:
        write_atomic(path, text)
    except OSError as err:
        raise InputError(flag, path, "a writable file path", err.strerror or str(err)) from None
