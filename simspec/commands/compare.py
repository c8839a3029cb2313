"""`simspec compare`: every policy of a scenario against the k = 0 baseline and the oracle."""

from __future__ import annotations

import argparse
import sys

from simspec.commands import (
    Column,
    add_allow_large_option,
    add_format_option,
    add_set_option,
    add_trace_option,
    check_folder,
    check_format_output,
    check_work,
    check_writable,
    emit_rows,
    write_output,
    write_trace_out,
)
from simspec.commands._replications import (
    add_replication_options,
    check_replication_options,
    report_replications,
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
    add_format_option(parser)
    add_trace_option(parser)
    add_replication_options(parser)
    add_set_option(parser)
    add_allow_large_option(parser)


#: The columns `simspec compare` prints (``--format csv|json`` names them by key).
COLUMNS = (
    Column("policy", "policy"),
    Column("tokens_per_s", "tokens/s", ".1f"),
    Column("tpot_ms", "TPOT ms", ".3f"),
    Column("acceptance_length", "accept len", ".3f"),
    Column("mean_k", "mean k", ".2f"),
    Column("speedup_vs_no_spec", "speedup", ".3f"),
    Column("gap_to_oracle_pct", "gap to oracle %", ".1f"),
)


def execute(args: argparse.Namespace) -> int:
    """Run the comparison, print the table, write JSON and figures."""
    from simspec.analysis.replications import replicate
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    # With `--json -` stdout carries the JSON alone; the table goes to stderr.
    report = sys.stderr if args.json == "-" else sys.stdout
    check_work([scenario] * args.replications, oracle=True, allow_large=args.allow_large)
    check_replication_options(args)
    if args.json:
        check_writable(args.json, "--json")
    if args.plot:
        check_folder(args.plot, "--plot")
    check_format_output(args)
    if args.trace_out:
        check_writable(args.trace_out, "--trace-out")
    with Progress("compare") as progress:
        replicated = replicate(
            scenario,
            args.replications,
            oracle=True,
            progress=progress,
            keep_logs=bool(args.trace_out or args.requests_csv),
        )
    result = replicated.runs[0]
    rows = [(p.label, *(getattr(p, c.key) or 0.0 for c in COLUMNS[1:])) for p in result.policies]
    emit_rows(
        args,
        COLUMNS,
        rows,
        [f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}"],
    )
    # The oracle summary follows the rows wherever the human notes go.
    report = (
        sys.stderr
        if args.json == "-" or (args.output == "-" and args.format != "table")
        else report
    )
    oracle = result.oracle
    assert oracle is not None  # run_experiment(oracle=True) always finds one
    print(f"oracle: {'exact' if oracle.exact else 'approximate'} — {oracle.method}", file=report)
    d = dict(oracle.delta)
    if d:
        from simspec.analysis.delta import describe

        print(f"delta space: {describe(d)}", file=report)
    report_replications(args, replicated)
    write_trace_out(args, result, scenario)
    if args.trace_out and args.trace_out != "-":
        print(f"wrote {args.trace_out}", file=report)
    if args.json:
        write_output(args.json, replicated.to_json(), "--json")
        if args.json != "-":
            print(f"wrote {args.json}")
    if args.plot:
        from simspec.plots.policies import delta_space, policy_bars

        written = policy_bars(result, f"{args.plot}/policies.png")
        if d and result.delta_points is not None:
            written += delta_space(result.delta_points, d, f"{args.plot}/delta-space.png")
        print("wrote " + ", ".join(str(p) for p in written), file=report)
    return 0
