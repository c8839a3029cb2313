"""`simspec recommend --engine-flags sglang|vllm`: the flags to paste, per batch size.

The search is :mod:`simspec.analysis.shape_search`; this module checks the flags, prints one row
per batch size (``--format table|md|csv|json``), the answer in words, the guardrail warnings on
standard error, and writes ``--markdown`` and ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING

from simspec.commands import (
    Column,
    Output,
    check_format_output,
    check_outputs,
    check_range,
    check_work,
    check_writable,
    emit_rows,
    scenario_inputs,
    write_output,
)
from simspec.commands._hints import analytic_routing_hint
from simspec.commands._words import count
from simspec.errors import InputError

if TYPE_CHECKING:
    from simspec.analysis.shape_search import ShapeRecommendation
    from simspec.config.scenario import Scenario

#: The rows of ``--format csv|md|json|table``: one per batch size.
ROW_COLUMNS = (
    Column("batch", "batch"),
    Column("flags", "flags"),
    Column("steps", "steps"),
    Column("topk", "topk"),
    Column("num_draft_tokens", "draft tokens"),
    Column("expected_speedup", "speedup", ".3f"),
    Column("expected_speedup_ci_low", "95% low", ".3f"),
    Column("expected_speedup_ci_high", "95% high", ".3f"),
    Column("within_noise", "within noise"),
    Column("shapes_screened", "screened"),
)


def _values(
    text: str | None, flag: str, default: tuple[int, ...], low: int, high: int
) -> tuple[int, ...]:
    """``1,2,4`` -> (1, 2, 4): distinct integers in [low, high] (``default`` without the flag)."""
    if text is None:
        return default
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(not low <= v <= high for v in values) or len(set(values)) < len(values):
        raise InputError(
            "command line",
            flag,
            f"distinct integers in [{low}, {high}] separated by commas",
            repr(text),
        )
    return tuple(sorted(values))


def execute_flags(
    args: argparse.Namespace, scenario: Scenario, batches: list[int], engine: str
) -> int:
    """Search every batch size in ``engine``'s flags; print and write the answer."""
    from simspec.analysis.guardrails import at_batch, print_warnings
    from simspec.analysis.recommend import batch_scenario
    from simspec.analysis.shape_search import (
        ShapeGrid,
        markdown_table,
        planned_runs,
        search_batches,
    )
    from simspec.analysis.shapes import TOPKS, TREE_SIZES
    from simspec.io.progress import Progress

    def refuse(flags: tuple[tuple[str, object], ...], expected: str, found: str) -> None:
        """An input error for the first of ``flags`` given (``found``: what it came with)."""
        for flag, value in flags:
            if value is not None:
                raise InputError("command line", flag, expected, f"{flag} with {found}")

    tree_flags = (("--topk", args.topk), ("--num-draft-tokens", args.num_draft_tokens))
    refuse(
        (("--plot", args.plot), ("--policies", args.policies)),
        "--engine-flags k (online policies and plots are k's)",
        f"--engine-flags {engine}",
    )
    if engine == "vllm":
        refuse(
            tree_flags,
            "--engine-flags sglang (vLLM's tree is the scenario's [speculation] table)",
            "--engine-flags vllm",
        )
    if scenario.drafter.kind == "ngram":
        refuse(
            tree_flags,
            "no tree flags with an n-gram drafter (it drafts chains: steps only)",
            f"model.drafter = {scenario.drafter.name!r}",
        )
    cap = scenario.drafter.max_draft_tokens
    max_k = cap if args.max_k is None else args.max_k
    check_range("--max-k", max_k, 1, cap, "the drafter's max_draft_tokens")
    shape_grid = ShapeGrid(
        engine,
        max_k,
        _values(args.topk, "--topk", TOPKS, 1, 64),
        _values(args.num_draft_tokens, "--num-draft-tokens", TREE_SIZES, 2, 1024),
    )
    runs = [(b, batch_scenario(scenario, b, max_k, [])) for b in batches]

    # the work guard counts a scenario's policies + 1 runs: as many copies as the search runs
    def copies(per_batch: int) -> list[Scenario]:
        """As many copies of each batch's scenario as ``per_batch`` runs make."""
        return [s for _, s in runs for _ in range(math.ceil(per_batch / (max_k + 1)))]

    check_work(
        copies(planned_runs(scenario, shape_grid, args.replications)),
        oracle=False,
        allow_large=args.allow_large,
    )
    # The hint counts the runs in the scenario's own routing: the screen's are analytic.
    sampled = copies(planned_runs(scenario, shape_grid, args.replications, screen=False))
    rows_as_data = args.format != "table" or args.output != "-"
    outputs: list[Output] = [
        ("--markdown", args.markdown),
        ("--json", args.json),
        ("--output", args.output if rows_as_data else None),
    ]
    check_outputs(outputs, scenario_inputs(args.scenario, scenario))
    for path, flag in ((args.markdown, "--markdown"), (args.json, "--json")):
        if path:
            check_writable(path, flag)
    if rows_as_data:
        check_format_output(args)
    to_stderr = "-" in (args.json, args.markdown) or (args.output == "-" and args.format != "table")
    report = sys.stderr if to_stderr else sys.stdout
    from simspec.commands._hints import sweep_table_hint

    for hint in (
        sweep_table_hint(args.scenario, "recommend"),
        analytic_routing_hint(sampled, False),
    ):
        if hint:
            print(hint, file=sys.stderr, flush=True)
    with Progress("recommend") as progress:
        recs = search_batches(runs, args.replications, shape_grid, progress)
    print_warnings(at_batch(w, rec.batch) for rec in recs for w in rec.warnings)
    headline = (
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop; {engine} flags, steps 1..{max_k}"
        + (
            f", topk {', '.join(map(str, shape_grid.topks))}, tree sizes "
            f"{', '.join(map(str, shape_grid.sizes))}"
            if engine == "sglang" and scenario.drafter.kind != "ngram"
            else ""
        )
        + f"; {args.replications} replications per batch size, speedups over no speculation "
        "with 95 % CIs"
    )
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
            "engine_flags": engine,
            "grid": shape_grid.to_dict(),
            "batches": [rec.to_dict() for rec in recs],
        }
        write_output(args.json, json.dumps(data, indent=2, allow_nan=False) + "\n", "--json")
    for path in (args.markdown, args.json):
        if path and path != "-":
            print(f"wrote {path}", file=report)
    return 0


def _row(rec: ShapeRecommendation) -> list[object]:
    """One batch size's answer as raw values in :data:`ROW_COLUMNS` order."""
    s, best = rec.expected_speedup, rec.best
    return [
        rec.batch,
        best.flags,
        best.shape.steps,
        best.shape.topk,
        best.shape.num_draft_tokens,
        s.mean,
        s.low,
        s.high,
        " ".join(f.shape.text.replace(" ", "") for f in rec.runners_up),
        rec.shapes_screened,
    ]


def _sentence(rec: ShapeRecommendation) -> str:
    """One line per batch size: the answer in words."""
    text = f"batch {rec.batch}: {rec.best.flags} (expected speedup {rec.expected_speedup.text()}x)"
    ties = [f.shape.text for f in rec.runners_up]
    if ties:
        text += f"; {', '.join(ties)} within noise"
    return (
        text + f"; {rec.shapes_screened} of {count(rec.shapes_in_grid, 'shape')} screened, "
        f"{count(len(rec.finalists), 'finalist')}"
    )
