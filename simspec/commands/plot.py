"""`simspec plot`: figures from a sweep folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from simspec.errors import InputError

NAME = "plot"
HELP = "Draw the figures of a sweep folder (PNG and SVG) into DIR/figures."
EXAMPLE = "simspec plot runs/b"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec plot`."""
    parser.add_argument("folder", metavar="DIR", help="a folder written by `simspec sweep`")
    parser.add_argument("--out", metavar="FIGDIR", help="where to write (default: DIR/figures)")


def execute(args: argparse.Namespace) -> int:
    """Read results.csv / summary.csv and draw every figure the sweep's axes allow."""
    from simspec.plots.sweep import plot_folder

    folder = Path(args.folder)
    if not (folder / "summary.csv").exists():
        raise InputError(
            args.folder, "summary.csv", "a folder written by `simspec sweep`", "no summary.csv"
        )
    written = plot_folder(folder, Path(args.out) if args.out else folder / "figures")
    if not written:
        print("no figure applies to this sweep's axes")
    for path in written:
        print(f"wrote {path}")
    return 0
