"""`simspec fit`: fit the cost model to your own serving benchmark numbers, write a profile.

Reads a measurements file (CSV or TOML: :mod:`simspec.fit.measurements`), simulates each
row with the scenario, fits the chosen cost parameters by least squares
(:mod:`simspec.fit.serving`), prints the fitted values with their one-sigma
uncertainty and every row's residual, and writes the profile atomically
(:func:`simspec.fit.profiles.fitted_profile`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from simspec.commands import (
    add_set_option,
    check_outputs,
    check_range,
    check_writable,
    scenario_inputs,
    table,
    write_output,
)
from simspec.commands._words import count

NAME = "fit"
HELP = "Fit overheads and efficiencies to measured serving numbers (vLLM/SGLang bench)."
EXAMPLE = (
    "simspec fit calibration/measurements-example.csv "
    "--scenario scenarios/qwen3-30b-h100-batch32.toml --out calibration/my-h100.json"
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec fit`."""
    parser.add_argument(
        "measurements",
        metavar="MEASUREMENTS",
        help="CSV (or .toml) of measured rows: batch, quantity, value, prompt_tokens, "
        "output_tokens[, draft_tokens, acceptance_length, ...] (see the README)",
    )
    parser.add_argument(
        "--scenario", metavar="S", help="scenario TOML of the served setup (default: embedded)"
    )
    parser.add_argument("--out", required=True, metavar="PROFILE.json", help="profile to write")
    parser.add_argument(
        "--params",
        metavar="NAME,...",
        help="cost parameters to fit, comma-separated (default: pass_overhead_s, the MoE "
        "(or dense-weight) efficiency, and draft_step_overhead_s when rows are speculative)",
    )
    parser.add_argument(
        "--output-cap",
        type=int,
        default=256,
        metavar="TOKENS",
        help="output tokens simulated per request for per-token rows",
    )
    add_set_option(parser)


def _params(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [name.strip() for name in text.split(",") if name.strip()]


def _command(args: argparse.Namespace) -> str:
    parts = ["simspec", "fit", args.measurements]
    if args.scenario:
        parts += ["--scenario", args.scenario]
    if args.params:
        parts += ["--params", args.params]
    if args.output_cap != 256:
        parts += ["--output-cap", str(args.output_cap)]
    for item in args.set:
        parts += ["--set", item]
    return " ".join([*parts, "--out", args.out])


def profile_date() -> str:
    """The profile's ``metadata.date``: ``SOURCE_DATE_EPOCH`` (seconds since 1970, the
    reproducible-builds convention) when set, so that a fit run twice writes the same bytes;
    else now."""
    from simspec.errors import InputError

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return datetime.now(UTC).isoformat(timespec="seconds")
    try:
        moment = datetime.fromtimestamp(int(epoch), UTC)
    except (ValueError, OverflowError, OSError):
        raise InputError(
            "environment", "SOURCE_DATE_EPOCH", "an integer number of seconds", repr(epoch[:40])
        ) from None
    return moment.isoformat(timespec="seconds")


def _number(value: float) -> str:
    return f"{value:.4g}"


def _precedence_note(preset: str, values: Mapping[str, float], out: str) -> str | None:
    """Which preset values a run with the profile replaces by fitted ones (precedence:
    Scenario.roofline); None when the preset sets none of the fitted parameters."""
    from simspec import catalog

    overrides = catalog.get_engine(preset).overrides()
    replaced = [
        f"{name} {_number(overrides[name])} -> {_number(values[name])}"
        for name in values
        if name in overrides
    ]
    if not replaced:
        return None
    return (
        f'note: a scenario with costs.profile = "{out}" uses the fitted values; they outrank '
        f"the engine preset's, and a key set in [costs] outranks both (over the {preset} "
        "preset: " + ", ".join(replaced) + ")"
    )


def execute(args: argparse.Namespace) -> int:
    """Read, fit, print the table, write the profile."""
    from simspec.commands.calibrate import _git_sha
    from simspec.config.load import load_scenario
    from simspec.fit import FitSettings, fit_measurements, fitted_profile, read_measurements
    from simspec.profile import profile_json

    check_range("--output-cap", args.output_cap, 1, 1_000_000)
    date = profile_date()
    check_writable(args.out, "--out", stdout=False)
    measurements = read_measurements(args.measurements)
    scenario = load_scenario(args.scenario, args.set)
    inputs = [("measurements", Path(args.measurements)), *scenario_inputs(args.scenario, scenario)]
    check_outputs([("--out", args.out)], inputs)
    settings = FitSettings(output_cap_tokens=args.output_cap)
    started = time.perf_counter()
    last = [started]

    def progress(evaluations: int, rms: float) -> None:
        # a line every 10 s on stderr: fitting 6 rows takes about a minute
        now = time.perf_counter()
        if now - last[0] >= 10.0:
            last[0] = now
            print(
                f"fit: running, {evaluations} evaluations of {len(measurements.rows)} rows "
                f"so far (rms log residual {rms:.4f}, {now - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    result = fit_measurements(
        scenario,
        measurements.rows,
        _params(args.params),
        source=measurements.source,
        settings=settings,
        progress=progress,
    )
    elapsed = time.perf_counter() - started
    data = fitted_profile(
        scenario,
        measurements,
        result,
        date=date,
        command=_command(args),
        git_sha=_git_sha(),
        settings=settings,
    )
    print(
        f"fitted {count(len(result.names), 'parameter')} to {count(len(result.rows), 'row')} of "
        f"{measurements.source} on {scenario.model.target} / {scenario.hardware.gpu} "
        f"({result.evaluations} evaluations, {elapsed:.1f} s)"
    )
    prows = []
    for name in result.names:
        sigma = result.uncertainty[name]
        prows.append(
            (
                name,
                _number(result.start[name]),
                _number(result.values[name]),
                _number(sigma) if sigma is not None else "-",
            )
        )
    print(table(("parameter", "start", "fitted", "+- 1 sigma"), prows))
    print()
    rrows = [
        (
            fit.row.where.partition(" (")[0],
            fit.row.batch,
            fit.row.draft_tokens,
            fit.row.quantity,
            _number(fit.row.value),
            _number(fit.predicted),
            f"{(fit.predicted / fit.row.value - 1) * 100:+.2f}%",
        )
        for fit in result.rows
    ]
    headers = ("row", "batch", "k", "quantity", "measured", "predicted", "error")
    print(table(headers, rrows))
    print(f"rms of log(predicted / measured): {result.rms_residual:.4f}")
    explicit = scenario.costs.explicit()
    for name in result.names:
        if name in explicit:
            print(
                f"warning: the scenario sets costs.{name}; remove it there to use the fitted "
                "value from the profile",
                file=sys.stderr,
            )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    note = _precedence_note(scenario.engine.preset, result.values, args.out)
    if note:
        print(note, file=sys.stderr)
    write_output(args.out, profile_json(data), "--out")
    print(f"wrote {args.out}")
    return 0
