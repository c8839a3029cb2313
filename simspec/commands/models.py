"""`simspec models`: list the catalog's target models and drafters."""

from __future__ import annotations

import argparse

from simspec import catalog
from simspec.commands import table

NAME = "models"
HELP = "List the catalog's target models and drafters."
EXAMPLE = "simspec models"


def configure(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def execute(args: argparse.Namespace) -> int:
    """Print the models table, then the drafters table."""
    rows = []
    for name in catalog.model_names():
        m = catalog.get_model(name)
        moe = m.moe
        experts = f"{moe.experts_per_token}/{moe.num_experts}" if m.is_moe else "dense"
        shared = str(moe.num_shared_experts) if m.is_moe else "-"
        rows.append(
            (
                name,
                experts,
                shared,
                m.num_layers,
                m.shape.num_moe_layers,
                m.attention.kind,
                f"{m.total_params_b:g}",
                f"{m.active_params_b:g}",
                f"{m.shape.total_weight_bytes / 1e9:.1f}",
            )
        )
    print(
        table(
            (
                "model",
                "experts k/N",
                "shared",
                "layers",
                "MoE layers",
                "attention",
                "total B",
                "active B",
                "weights GB",
            ),
            rows,
        )
    )
    print()
    drows = []
    for name in catalog.drafter_names():
        d = catalog.get_drafter(name)
        targets = "every target" if d.kind == "ngram" else ", ".join(d.targets)
        drows.append((name, d.kind, d.max_draft_tokens, targets))
    print(table(("drafter", "kind", "max draft", "targets"), drows))
    return 0
