"""`simspec compare`: every policy of a scenario against the k = 0 baseline and the oracle."""

from __future__ import annotations

import argparse
import sys

from simspec.commands import (
    add_allow_large_option,
    add_set_option,
    check_folder,
    check_work,
    check_writable,
    table,
    write_output,
)

NAME = "compare"
HELP = "Compare a scenario's policies with no speculation and the hindsight oracle."
EXAMPLE = "simspec compare scenarios/limits-of-speculation.toml --json cmp.json --plot figures/"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec compare`."""
    parser.add_argument(
        "scenario", nargs="?", help="scenario TOML file (default: the embedded one)"
    )
    parser.add_argument("--json", metavar="OUT", help="write the results JSON to OUT (atomically)")
    parser.add_argument(
        "--plot", metavar="DIR", help="write policies.png and delta-space.png into DIR"
    )
    add_set_option(parser)
    add_allow_large_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Run the comparison, print the table, write JSON and figures."""
    from simspec.analysis.experiment import run_experiment
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    # With `--json -` stdout carries the JSON alone; the table goes to stderr.
    report = sys.stderr if args.json == "-" else sys.stdout
    check_work([scenario], oracle=True, allow_large=args.allow_large)
    if args.json:
        check_writable(args.json, "--json")
    if args.plot:
        check_folder(args.plot, "--plot")
    with Progress("compare") as progress:
        result = run_experiment(scenario, oracle=True, progress=progress)
    rows = [
        (
            p.label,
            f"{p.tokens_per_s:.1f}",
            f"{p.tpot_ms:.3f}",
            f"{p.acceptance_length:.3f}",
            f"{p.mean_k:.2f}",
            f"{p.speedup_vs_no_spec:.3f}",
            f"{p.gap_to_oracle_pct or 0.0:.1f}",
        )
        for p in result.policies
    ]
    print(f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}", file=report)
    print(
        table(
            ("policy", "tokens/s", "TPOT ms", "accept len", "mean k", "speedup", "gap to oracle %"),
            rows,
        ),
        file=report,
    )
    oracle = result.oracle
    assert oracle is not None  # run_experiment(oracle=True) always finds one
    print(f"oracle: {'exact' if oracle.exact else 'approximate'} — {oracle.method}", file=report)
    d = dict(oracle.delta)
    if d:
        from simspec.analysis.delta import describe

        print(f"delta space: {describe(d)}", file=report)
    if args.json:
        write_output(args.json, result.to_json(), "--json")
        if args.json != "-":
            print(f"wrote {args.json}")
    if args.plot:
        from simspec.plots.policies import delta_space, policy_bars

        written = policy_bars(result, f"{args.plot}/policies.png")
        if d and result.delta_points is not None:
            written += delta_space(result.delta_points, d, f"{args.plot}/delta-space.png")
        print("wrote " + ", ".join(str(p) for p in written), file=report)
    return 0
