"""`simspec validate`: check a scenario file without running it."""

from __future__ import annotations

import argparse

from simspec.commands import add_set_option

NAME = "validate"
HELP = "Check a scenario file without running it."
EXAMPLE = "simspec validate scenarios/qwen3-235b-h200-open-loop.toml"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec validate`."""
    parser.add_argument("scenario", help="scenario TOML file")
    add_set_option(parser)


def execute(args: argparse.Namespace) -> int:
    """Load the scenario (raising InputError if it is bad) and print a one-line summary."""
    from simspec.scenario import load_scenario

    s = load_scenario(args.scenario, args.set)
    print(
        f"{args.scenario}: ok — {s.name} ({s.digest()}), {len(s.policies)} policies, "
        f"{s.model.target} + {s.model.drafter} on {s.hardware.num_gpus}x {s.hardware.gpu}"
    )
    return 0
