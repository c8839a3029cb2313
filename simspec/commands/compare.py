"""`simspec compare`: every policy of a scenario against the k = 0 baseline and the oracle."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from simspec.commands import Column, check_folder, emit_rows, notes_stream
from simspec.commands._replications import (
    add_experiment_options,
    simulate_replicated,
    write_experiment_outputs,
)

NAME = "compare"
HELP = "Compare a scenario's policies with no speculation and the hindsight oracle."
EXAMPLE = "simspec compare scenarios/limits-of-speculation.toml --json cmp.json --plot figures/"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec compare`."""

    def plot_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--plot", metavar="DIR", help="write policies.png and delta-space.png into DIR"
        )

    add_experiment_options(parser, plot_option)


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

    def check_plot_folder() -> None:
        if args.plot:
            check_folder(args.plot, "--plot")

    scenario, replicated = simulate_replicated(
        args,
        "compare",
        oracle=True,
        checks=check_plot_folder,
        header=lambda s: f"scenario {s.name} ({s.digest()}), seed {s.seed}",
    )
    result = replicated.runs[0]
    rows = [(p.label, *(getattr(p, c.key) or 0.0 for c in COLUMNS[1:])) for p in result.policies]
    emit_rows(args, COLUMNS, rows)
    # The oracle summary follows the rows wherever the human notes go.
    report = notes_stream(args)
    oracle = result.oracle
    assert oracle is not None  # run_experiment(oracle=True) always finds one
    print(f"oracle: {'exact' if oracle.exact else 'approximate'} — {oracle.method}", file=report)
    d = dict(oracle.delta)
    if d:
        from simspec.analysis.delta import describe

        print(f"delta space: {describe(d)}", file=report)
    write_experiment_outputs(args, scenario, replicated)
    if args.plot:
        from simspec.plots import save
        from simspec.plots.policies import delta_space, policy_bars_figure

        folder = Path(args.plot)
        fresh = not folder.exists()
        written: list[Path] = []
        try:
            written += save(policy_bars_figure(result), folder / "policies.png")
            if d and result.delta_points is not None:
                written += delta_space(result.delta_points, d, folder / "delta-space.png")
        except BaseException:
            if fresh:  # a folder this command made holds nothing half-done
                for path in written:
                    path.unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
        print("wrote " + ", ".join(str(p) for p in written), file=report)
    return 0
