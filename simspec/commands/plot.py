"""`simspec plot`: figures from one sweep folder, or several set side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from simspec.commands import check_folder
from simspec.errors import InputError

NAME = "plot"
HELP = "Draw the figures of sweep folders (PNG and SVG)."
EXAMPLE = "simspec plot runs/prior runs/full --labels 'prior work,simspec' --out figures/"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec plot`."""
    parser.add_argument(
        "folders", nargs="+", metavar="DIR", help="folder(s) written by `simspec sweep`"
    )
    parser.add_argument(
        "--labels",
        metavar="A,B,...",
        help="names of the folders in the legend (with several folders)",
    )
    parser.add_argument(
        "--out", metavar="FIGDIR", help="where to write (default: DIR/figures of the first folder)"
    )


def execute(args: argparse.Namespace) -> int:
    """One folder: every figure its axes allow. Several: speedup vs batch, one panel per case."""
    from simspec.plots.sweep import plot_folder, speedup_by_case

    folders = [Path(f) for f in args.folders]  # read_sweep names a folder that is no sweep
    out = Path(args.out) if args.out else folders[0] / "figures"
    check_folder(str(out), "--out" if args.out else "DIR")
    if len(folders) == 1:
        written = plot_folder(folders[0], out)
    else:
        labels = args.labels.split(",") if args.labels else [f.name for f in folders]
        if len(labels) != len(folders):
            raise InputError("--labels", args.labels, f"{len(folders)} names", str(len(labels)))
        written = speedup_by_case(folders, labels, out / "speedup-vs-batch-by-model.png")
    if not written:
        print("no figure applies to this sweep's axes")
    for path in written:
        print(f"wrote {path}")
    return 0
