"""`simspec run`: run a scenario's policies and print one row per policy."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from simspec.commands import Column, emit_rows
from simspec.commands._replications import (
    add_experiment_options,
    simulate_replicated,
    write_experiment_outputs,
)

if TYPE_CHECKING:
    from simspec.config.scenario import Scenario

NAME = "run"
HELP = "Run a scenario's policies and print one row per policy."
EXAMPLE = (
    "simspec run scenarios/qwen3-30b-h100-batch32.toml --set workload.concurrency=8 --json out.json"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec run`."""
    add_experiment_options(parser)


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
#: Columns added when ``[offload]`` puts the experts in host memory.
OFFLOAD_COLUMNS = (
    Column("expert_hit_rate", "hit rate", ".3f"),
    Column("link_busy_fraction", "link busy", ".3f"),
    Column("link_gb", "link GB", ".1f"),
    Column("exposed_copy_s", "exposed copy s", ".2f"),
)


def _header(scenario: Scenario) -> str:
    """The run's first note: scenario, models, GPUs, and the acceptance fit if there is one
    (its line is also ``acceptance_fit`` in the results JSON's scenario)."""
    header = (
        f"scenario {scenario.name} ({scenario.digest()}), seed {scenario.seed}: "
        f"{scenario.model.target} + {scenario.model.drafter} on {scenario.hardware.num_gpus}x "
        f"{scenario.hardware.gpu}, {scenario.workload.loop} loop"
    )
    if scenario.acceptance_fit is not None:
        header += "\n" + scenario.acceptance_note
    return header


def execute(args: argparse.Namespace) -> int:
    """Load, simulate, print, and optionally write the results JSON."""
    scenario, replicated = simulate_replicated(args, "run", oracle=False, header=_header)
    result = replicated.runs[0]
    columns = COLUMNS + (OFFLOAD_COLUMNS if scenario.offload.enabled else ())
    rows = [(p.label, *(getattr(p, c.key) for c in columns[1:])) for p in result.policies]
    emit_rows(args, columns, rows)
    write_experiment_outputs(args, scenario, replicated)
    return 0
