"""`simspec run`: run a scenario's policies and print one row per policy."""

from __future__ import annotations

import argparse
import sys

from simspec.commands import (
    add_allow_large_option,
    add_set_option,
    check_work,
    check_writable,
    table,
    write_output,
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
    add_set_option(parser)
    add_allow_large_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Load, simulate, print, and optionally write the results JSON."""
    from simspec.analysis.experiment import run_experiment
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    # With `--json -` stdout carries the JSON alone; the table goes to stderr.
    report = sys.stderr if args.json == "-" else sys.stdout
    check_work([scenario], oracle=False, allow_large=args.allow_large)
    if args.json:
        check_writable(args.json, "--json")
    with Progress("run") as progress:
        result = run_experiment(scenario, progress=progress)
    rows = [
        (
            p.label,
            f"{p.tokens_per_s:.1f}",
            f"{p.tpot_ms:.3f}",
            f"{p.ttft_ms:.1f}",
            f"{p.acceptance_length:.3f}",
            f"{p.mean_k:.2f}",
            f"{p.verify_over_decode:.3f}",
            f"{p.unique_experts_per_layer:.1f}",
            f"{p.speedup_vs_no_spec:.3f}",
        )
        for p in result.policies
    ]
    print(
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop",
        file=report,
    )
    headers = (
        "policy",
        "tokens/s",
        "TPOT ms",
        "TTFT ms",
        "accept len",
        "mean k",
        "verify/decode",
        "experts/layer",
        "speedup",
    )
    print(table(headers, rows), file=report)
    if args.json:
        write_output(args.json, result.to_json(), "--json")
        if args.json != "-":
            print(f"wrote {args.json}")
    return 0
