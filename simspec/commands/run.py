"""`simspec run`: run a scenario's policies and print one row per policy."""

from __future__ import annotations

import argparse
import sys

from simspec.commands import (
    Column,
    add_allow_large_option,
    add_format_option,
    add_set_option,
    add_trace_option,
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

NAME = "run"
HELP = "Run a scenario's policies and print one row per policy."
EXAMPLE = (
    "simspec run scenarios/qwen3-30b-h100-batch32.toml --set workload.concurrency=8 --json out.json"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec run`."""
    parser.add_argument(
        "scenario", nargs="?", help="scenario TOML file (default: the embedded one)"
    )
    parser.add_argument("--json", metavar="OUT", help="write the results JSON to OUT (atomically)")
    add_format_option(parser)
    add_trace_option(parser)
    add_replication_options(parser)
    add_set_option(parser)
    add_allow_large_option(parser)


#: The columns `simspec run` prints (``--format csv|json`` names them by key).
COLUMNS = (
    Column("policy", "policy"),
    Column("tokens_per_s", "tokens/s", ".1f"),
    Column("tpot_ms", "TPOT ms", ".3f"),
    Column("ttft_ms", "TTFT ms", ".1f"),
    Column("acceptance_length", "accept len", ".3f"),
    Column("mean_k", "mean k", ".2f"),
    Column("verify_over_decode", "verify/decode", ".3f"),
    Column("unique_experts_per_layer", "experts/layer", ".1f"),
    Column("speedup_vs_no_spec", "speedup", ".3f"),
)


def execute(args: argparse.Namespace) -> int:
    """Load, simulate, print, and optionally write the results JSON."""
    from simspec.analysis.replications import replicate
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    # With `--json -` stdout carries the JSON alone; the table goes to stderr.
    report = sys.stderr if args.json == "-" else sys.stdout
    check_work([scenario] * args.replications, oracle=False, allow_large=args.allow_large)
    check_replication_options(args)
    if args.json:
        check_writable(args.json, "--json")
    check_format_output(args)
    if args.trace_out:
        check_writable(args.trace_out, "--trace-out")
    with Progress("run") as progress:
        replicated = replicate(
            scenario,
            args.replications,
            progress=progress,
            keep_logs=bool(args.trace_out or args.requests_csv),
        )
    result = replicated.runs[0]
    rows = [(p.label, *(getattr(p, c.key) for c in COLUMNS[1:])) for p in result.policies]
    note = (
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop"
    )
    emit_rows(args, COLUMNS, rows, [note])
    report_replications(args, replicated)
    write_trace_out(args, result, scenario)
    if args.trace_out and args.trace_out != "-":
        print(f"wrote {args.trace_out}", file=report)
    if args.json:
        write_output(args.json, replicated.to_json(), "--json")
        if args.json != "-":
            print(f"wrote {args.json}")
    return 0
