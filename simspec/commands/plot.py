"""`simspec plot`: figures from one sweep folder, or several set side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from simspec.commands import check_folder
from simspec.errors import InputError

NAME = "plot"
HELP = "Draw the figures of sweep folders, or an offloaded scenario's speedup vs k (PNG, SVG)."
EXAMPLE = "simspec plot runs/prior runs/full --labels 'prior work,simspec' --out figures/"
#: ``--vary`` names: the scenario key each varies.
VARY = {"link": "offload.link_gb_per_s", "cache": "offload.cache_experts_per_layer"}


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec plot`."""
    parser.add_argument(
        "folders", nargs="*", metavar="DIR", help="folder(s) written by `simspec sweep`"
    )
    parser.add_argument(
        "--offload",
        metavar="SCENARIO",
        help="instead of sweep folders: a scenario with [offload]; draws its speedup against "
        "the draft length, one curve per --vary value (offload-speedup-vs-k.png)",
    )
    parser.add_argument(
        "--vary",
        metavar="link=4,8,16,25 | cache=8,16,32",
        default="link=4,8,16,25,50",
        help="with --offload: the curves, host link bandwidths in GB/s or expert-cache slots "
        "per layer (default: link=4,8,16,25,50)",
    )
    parser.add_argument(
        "--draft-lengths",
        metavar="K,K,...",
        default="0,1,2,3,4,6,8",
        help="with --offload: the draft lengths on the x axis (default: 0,1,2,3,4,6,8)",
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

    if args.offload is not None:
        return _offload(args)
    if not args.folders:
        raise InputError("DIR", "", "a sweep folder, or --offload SCENARIO", "nothing")
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


def _numbers(flag: str, text: str, kind: type) -> list:
    """Comma-separated numbers of ``flag`` (an InputError naming it otherwise)."""
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 0 for v in values):
        raise InputError(flag, text, f"comma-separated {kind.__name__}s >= 0", text)
    return values


def _offload(args: argparse.Namespace) -> int:
    """``--offload SCENARIO``: speedup vs draft length, one curve per ``--vary`` value."""
    import simspec
    from simspec.plots.offload import draw_offload_figure, offload_curves

    name, _, numbers = args.vary.partition("=")
    if name not in VARY:
        raise InputError("--vary", args.vary, "link=GB/s,... or cache=slots,...", args.vary)
    values = _numbers("--vary", numbers, float if name == "link" else int)
    ks = _numbers("--draft-lengths", args.draft_lengths, int)
    out = Path(args.out) if args.out else Path(args.offload).parent / "figures"
    check_folder(str(out), "--out" if args.out else "SCENARIO")
    curves = offload_curves(simspec.load_scenario(args.offload), VARY[name], values, ks)
    for path in draw_offload_figure(curves, out / f"offload-speedup-vs-k-{name}.png"):
        print(f"wrote {path}")
    print("best draft length: " + ", ".join(f"{v:g}: k = {k}" for v, k in curves.best().items()))
    return 0
