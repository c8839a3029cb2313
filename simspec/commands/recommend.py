"""`simspec recommend`: per batch size, the speculative setting to run and what it buys.

``--engine-flags sglang`` (the default, except under the vllm preset) answers in SGLang's
(steps, topk, num_draft_tokens), ``vllm`` in vLLM's ``--speculative-config``
(:mod:`simspec.analysis.shape_search`, printed by :mod:`simspec.commands._recommend_flags`).
``--engine-flags k`` answers in simspec's fixed draft length: each batch size is run with fixed
k = 0..K, the online policies and the hindsight oracle, under R seeds (replications);
:mod:`simspec.analysis.recommend` picks the best k by mean speedup, lists the k within noise of
it (paired 95 % CI of the difference contains 0), the best online policy and the oracle's bound.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from simspec.commands import (
    Column,
    Output,
    add_allow_large_option,
    add_format_option,
    add_set_option,
    check_folder,
    check_format_output,
    check_outputs,
    check_range,
    check_work,
    check_writable,
    emit_rows,
    scenario_inputs,
    write_output,
)
from simspec.commands._hints import analytic_routing_hint, routing_overlap_hint
from simspec.errors import InputError

if TYPE_CHECKING:
    from simspec.analysis.recommend import BatchRecommendation

NAME = "recommend"
HELP = (
    "Recommend speculative flags (SGLang, vLLM) or a draft length k per batch size, with 95 % CIs."
)
EXAMPLE = "simspec recommend --batch 1,8,32,128 --engine-flags sglang --markdown rec.md"

#: Largest k tried when --max-k is not given (capped by the drafter's max_draft_tokens).
DEFAULT_MAX_K = 6


def _batches(text: str) -> list[int]:
    """``1,8,32`` -> [1, 8, 32]: distinct integers in [1, 65536], in the given order."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(not 1 <= v <= 65536 for v in values) or len(set(values)) < len(values):
        raise InputError(
            "command line",
            "--batch",
            "distinct integers in [1, 65536] separated by commas, e.g. 1,8,32,128",
            repr(text),
        )
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec recommend`."""
    parser.add_argument(
        "scenario", nargs="?", help="scenario TOML file (default: the embedded one)"
    )
    parser.add_argument(
        "--batch",
        default="1,8,32,128",
        help="batch sizes, comma-separated (closed loop: concurrency; open: max batch size)",
    )
    parser.add_argument(
        "--policies",
        metavar="NAMES",
        help="online policies to compare, comma-separated registry names with their defaults "
        "(default: the scenario's non-fixed policies, else threshold,cost_aware)",
    )
    parser.add_argument(
        "--max-k",
        type=int,
        metavar="K",
        help="largest draft steps / fixed k tried (default: the drafter's max_draft_tokens with "
        f"--engine-flags sglang|vllm, {DEFAULT_MAX_K} with k; at most max_draft_tokens)",
    )
    parser.add_argument(
        "--engine-flags",
        choices=("sglang", "vllm", "k"),
        help="answer in SGLang's (steps, topk, num_draft_tokens), vLLM's --speculative-config, "
        "or simspec's fixed k with online policies and the oracle (default: vllm under "
        "engine.preset = vllm, else sglang)",
    )
    parser.add_argument(
        "--topk",
        metavar="LIST",
        help="SGLang topk values searched (default: 1,2,4,8)",
    )
    parser.add_argument(
        "--num-draft-tokens",
        metavar="LIST",
        help="tree sizes searched, root included (default: 3,4,6,8,12,16,24,32,48,64; a chain "
        "verifies steps + 1)",
    )
    parser.add_argument(
        "--replications",
        type=int,
        default=3,
        metavar="R",
        help="seeds per batch size (>= 2: the confidence intervals need two)",
    )
    parser.add_argument("--markdown", metavar="OUT", help="write the markdown table to OUT")
    parser.add_argument("--json", metavar="OUT", help="write the recommendation as JSON to OUT")
    parser.add_argument(
        "--plot", metavar="DIR", help="write speedup-vs-k-b<BATCH>.png per batch size into DIR"
    )
    add_format_option(parser)
    add_set_option(parser)
    add_allow_large_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Simulate every batch size, print the answer, write the table, JSON and figures."""
    import json

    from simspec.analysis.guardrails import at_batch, print_warnings
    from simspec.analysis.recommend import (
        batch_scenario,
        markdown_table,
        online_policy_data,
        recommend_batches,
    )
    from simspec.commands._hints import sweep_table_hint
    from simspec.config.load import load_scenario
    from simspec.io.progress import Progress

    scenario = load_scenario(args.scenario, args.set)
    batches = _batches(args.batch)
    check_range("--replications", args.replications, 2, 10_000)
    engine = args.engine_flags or ("vllm" if scenario.engine.preset == "vllm" else "sglang")
    if engine != "k":
        from simspec.commands._recommend_flags import execute_flags

        return execute_flags(args, scenario, batches, engine)
    for flag, value in (("--topk", args.topk), ("--num-draft-tokens", args.num_draft_tokens)):
        if value is not None:
            raise InputError("command line", flag, "--engine-flags sglang", f"{flag} with k")
    cap = scenario.drafter.max_draft_tokens
    max_k = min(DEFAULT_MAX_K, cap) if args.max_k is None else args.max_k
    check_range("--max-k", max_k, 1, cap, "the drafter's max_draft_tokens")
    names = [n.strip() for n in args.policies.split(",")] if args.policies else None
    online = online_policy_data(scenario, names)
    runs = [(b, batch_scenario(scenario, b, max_k, online)) for b in batches]
    planned = [s for _, s in runs for _ in range(args.replications)]
    check_work(planned, oracle=True, allow_large=args.allow_large)
    rows_as_data = args.format != "table" or args.output != "-"
    outputs: list[Output] = [
        ("--markdown", args.markdown),
        ("--json", args.json),
        ("--output", args.output if rows_as_data else None),
    ]
    if args.plot is not None:
        outputs += [("--plot", args.plot and _plot_path(args.plot, b)) for b in batches]
    check_outputs(outputs, scenario_inputs(args.scenario, scenario))
    for path, flag in ((args.markdown, "--markdown"), (args.json, "--json")):
        if path:
            check_writable(path, flag)
    if args.plot:
        check_folder(args.plot, "--plot")
    if rows_as_data:
        check_format_output(args)
    to_stderr = "-" in (args.json, args.markdown) or (args.output == "-" and args.format != "table")
    report = sys.stderr if to_stderr else sys.stdout
    for hint in (
        sweep_table_hint(args.scenario, "recommend"),
        analytic_routing_hint(planned, True),
        routing_overlap_hint(scenario, speculates=True),
    ):
        if hint:
            print(hint, file=sys.stderr, flush=True)
    with Progress("recommend") as progress:
        recs = recommend_batches(runs, args.replications, progress)
    print_warnings(at_batch(w, rec.batch) for rec in recs for w in rec.warnings)
    headline = (
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop; fixed k = 0..{max_k}, "
        f"{args.replications} replications per batch size, speedups over k = 0 with 95 % CIs"
    )
    # --format table and md print the same columns (ROW_COLUMNS); the answer in words follows
    # a table on the terminal
    emit_rows(args, ROW_COLUMNS, [_row(rec) for rec in recs], [headline])
    if not rows_as_data:
        for rec in recs:
            print(_sentence(rec), file=report)
    if args.markdown:
        write_output(args.markdown, markdown_table(recs), "--markdown")
    if args.json:
        data = {
            "scenario": scenario.to_dict(),
            "scenario_digest": scenario.digest(),
            "seed": scenario.seed,
            "max_k": max_k,
            "batches": [rec.to_dict() for rec in recs],
        }
        write_output(args.json, json.dumps(data, indent=2, allow_nan=False) + "\n", "--json")
    if args.plot:
        from simspec.plots import save
        from simspec.plots.recommend import speedup_vs_k_figure

        written = []
        for rec in recs:
            path = _plot_path(args.plot, rec.batch)
            written += save(speedup_vs_k_figure(rec, scenario.name), path)
        print("wrote " + ", ".join(str(p) for p in written), file=report)
    for path in (args.markdown, args.json):
        if path and path != "-":
            print(f"wrote {path}", file=report)
    return 0


def _plot_path(folder: str, batch: int) -> str:
    """The figure of batch size ``batch`` in the ``--plot`` folder."""
    return f"{folder}/speedup-vs-k-b{batch}.png"


#: The rows of ``--format csv|md|json|table --output PATH``: one per batch size.
ROW_COLUMNS = (
    Column("batch", "batch"),
    Column("best_k", "best k"),
    Column("expected_speedup", "speedup", ".3f"),
    Column("expected_speedup_ci_low", "95% low", ".3f"),
    Column("expected_speedup_ci_high", "95% high", ".3f"),
    Column("within_noise_k", "within noise"),
    Column("best_online", "best online"),
    Column("best_online_speedup", "online speedup", ".3f"),
    Column("oracle_speedup", "oracle bound", ".3f"),
)


def _row(rec: BatchRecommendation) -> list[object]:
    """One batch size's answer as raw values in :data:`ROW_COLUMNS` order."""
    best, online = rec.expected_speedup, rec.best_online
    return [
        rec.batch,
        rec.best_k,
        best.mean,
        best.low,
        best.high,
        " ".join(str(k) for k, _ in rec.runners_up),
        online.label if online else "",
        online.speedup.mean if online else None,
        rec.oracle.mean if rec.oracle else None,
    ]


def _sentence(rec: BatchRecommendation) -> str:
    """One line per batch size: the answer in words."""
    s = rec.expected_speedup
    text = f"batch {rec.batch}: run k = {rec.best_k} (expected speedup {s.text()}x)"
    ties = [k for k, _ in rec.runners_up]
    if ties:
        text += f"; k = {', '.join(map(str, ties))} within noise"
    online = rec.best_online
    if online is not None:
        verdict = "within noise of"
        if not online.within_noise:
            verdict = "better than" if online.diff_vs_best.mean > 0 else "worse than"
        d = online.diff_vs_best
        half = "" if math.isnan(d.half_width) else f" ± {d.half_width:.3f}"
        text += f"; {online.label} is {verdict} it ({d.mean:+.3f}{half})"
    if rec.oracle is not None:
        text += f"; oracle bound {rec.oracle.text()}x"
    return text
