"""`simspec validate`: check a scenario file without running it."""

from __future__ import annotations

import argparse

from simspec.commands import add_set_option, check_work
from simspec.commands._hints import analytic_routing_hint, routing_overlap_hint
from simspec.commands._words import count
from simspec.errors import InputError

NAME = "validate"
HELP = "Check a scenario file without running it."
EXAMPLE = "simspec validate scenarios/qwen3-235b-h200-open-loop.toml"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec validate`."""
    parser.add_argument("scenario", help="scenario TOML file")
    add_set_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Load the scenario (and every point of its [sweep], if any); InputError if bad."""
    from simspec.analysis.guardrails import planned_warnings, print_warnings
    from simspec.config.load import read_with_overrides, scenario_from_dict
    from simspec.costs.parallel import Parallelism
    from simspec.sweep.spec import expand, read_spec

    data, source, base = read_with_overrides(args.scenario, args.set)
    if args.set:
        source += " (with --set overrides)"
    s = scenario_from_dict(data, source, base_dir=base)
    points = (
        expand(data, source, read_spec(data, source), base_dir=base) if "sweep" in data else None
    )
    print(
        f"{args.scenario}: ok — {s.name} ({s.digest()}), {count(len(s.policies), 'policy')}, "
        f"{s.model.target} + {s.model.drafter} on {s.hardware.num_gpus}x {s.hardware.gpu}"
    )
    print(s.acceptance_note)
    hw = s.hardware
    split = Parallelism.of(hw.num_gpus, hw.tensor_parallel, hw.expert_parallel)
    if split.attention_groups > 1:
        print(
            f"parallelism: data-parallel attention, {split.attention_groups} groups of TP "
            f"{split.tensor} (each its own requests), routed experts over EP {split.expert} "
            "(simspec/costs/parallel.py)"
        )
    elif hw.num_gpus > split.tensor:
        print(
            f"parallelism: {hw.num_gpus // split.tensor} data-parallel replicas of TP "
            f"{split.tensor} are not modelled: the whole batch runs on one group of "
            f"{split.tensor} GPUs (the KV cache counts every GPU's memory); for one replica set "
            "num_gpus = tensor_parallel and its share of the concurrency"
        )
    if points is not None:
        print(f"sweep: {count(len(points), 'point')}, all valid")
    scenarios = [p.scenario for p in points] if points else [s]
    # What the runs will warn about their preset's fit, said before they run (each once).
    print_warnings(w for scenario in scenarios for w in planned_warnings(scenario))
    for hint in (analytic_routing_hint(scenarios, False), routing_overlap_hint(s)):
        if hint:
            print(hint)
    try:  # a valid scenario may still be hours of work: say so now, not after the run starts
        check_work([p.scenario for p in points] if points else [s], False, allow_large=False)
    except InputError as err:
        print(f"note: run, compare and sweep will need --allow-large: {err.found} simulated tokens")
    return 0
