"""`simspec fidelity`: predict every published measurement, write the fidelity report.

Reads a cases file (``validation/cases.toml``: :mod:`simspec.validation.cases`), predicts every
row with the simulator and writes ``REPORT.md`` and ``summary.json`` (:mod:`simspec.validation`).
``--fit-kernels`` first fits the MoE kernel forms to the kernel rows (``KERNEL_FIT.md``,
``kernel_fit.json``: :mod:`simspec.fit.kernels`); ``--fit-presets`` first fits the engine
presets' overheads to each engine's rows (``preset_fit.json``: :mod:`simspec.fit.presets`) and,
with ``--catalog DIR``, writes the presets' TOML files there (``simspec/catalog/engines`` in a
checkout), so the shipped catalog data is produced by this command. Unless ``--in-sample-only``,
every reporter (else source) is then held out in turn with everything fitted or chosen refit
without it (:mod:`simspec.fit.nested`): the report and ``summary.json`` lead with those
out-of-sample errors and ``folds.json`` holds the fold table, reused while the hash of its
inputs (:func:`simspec.validation.holdout.inputs_hash`) is current.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simspec.commands import check_folder, check_range, check_writable

NAME = "fidelity"
HELP = "Predict published GPU measurements and write the fidelity report (REPORT.md)."
EXAMPLE = "simspec fidelity --cases validation/cases.toml --out validation --workers 2"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec fidelity`."""
    parser.add_argument(
        "--cases",
        default="validation/cases.toml",
        metavar="CASES.toml",
        help="published measurements, one [[cases]] table per series",
    )
    parser.add_argument(
        "--out",
        default="validation",
        metavar="DIR",
        help="folder for REPORT.md, summary.json and the fits' files",
    )
    parser.add_argument(
        "--workers", type=int, default=1, metavar="N", help="processes that simulate the rows"
    )
    parser.add_argument(
        "--fit-kernels",
        action="store_true",
        help="first fit the MoE kernel forms to the kernel rows (KERNEL_FIT.md, kernel_fit.json)",
    )
    parser.add_argument(
        "--fit-presets",
        action="store_true",
        help="first fit the engine presets' overheads to each engine's rows (preset_fit.json)",
    )
    parser.add_argument(
        "--catalog",
        metavar="DIR",
        help="with --fit-presets: write the fitted presets' TOML files to DIR "
        "(simspec/catalog/engines in a checkout)",
    )
    parser.add_argument(
        "--probes",
        metavar="FILE.json",
        help="with --fit-presets: cache of the probe runs, read if it exists (only missing runs "
        "are simulated; delete it when the model or the cases change), then written",
    )
    parser.add_argument(
        "--in-sample-only",
        action="store_true",
        help="skip the nested leave-one-group-out refits (no out-of-sample errors)",
    )
    parser.add_argument(
        "--accuracy",
        metavar="FILE.json",
        help="also write each engine preset's out-of-sample errors there (the table a run's "
        "within-error warning reads: simspec/catalog/accuracy.json in a checkout); needs the "
        "out-of-sample refits",
    )
    parser.add_argument(
        "--without",
        metavar="KEY,...",
        help="with --fit-presets: overheads held at 0 (not fitted), comma-separated",
    )
    parser.add_argument(
        "--keys",
        action="store_true",
        help="print the keys a cases file's tables take (to write one of your own) and exit",
    )


def case_keys() -> list[str]:
    """The keys of a cases file: ``[sources.KEY]`` and every key of a ``[[cases]]`` table, with
    its type, default (none: required) and help, as :class:`~simspec.validation.cases.Case`
    declares them (what :func:`~simspec.validation.cases.load_cases` checks)."""
    import dataclasses

    from simspec.validation.cases import Case

    lines = [
        "[sources.KEY]  url (required), title, reporter: where the numbers come from",
        "[[cases]]      one measured series; a list-valued key makes one row per element "
        "(every list of a table as long), a scalar applies to every row:",
    ]
    for f in dataclasses.fields(Case):
        meta = f.metadata
        if f.default is not dataclasses.MISSING:
            default = f"default {f.default!r}"
        elif f.default_factory is not dataclasses.MISSING:
            default = f"default {f.default_factory()!r}"
        else:
            default = "required"
        choices = f"; one of {', '.join(map(repr, meta['choices']))}" if meta.get("choices") else ""
        kind = getattr(f.type, "__name__", str(f.type))
        lines.append(f"  {f.name} ({kind}, {default}): {meta.get('help', '')}{choices}")
    return lines


def _check(args: argparse.Namespace) -> list[str]:
    from simspec.errors import InputError
    from simspec.fit.presets import BOUNDS

    check_range("--workers", args.workers, 1, 256)
    for flag in ("catalog", "probes", "without"):
        if getattr(args, flag) and not args.fit_presets:
            raise InputError(f"--{flag}", getattr(args, flag), "--fit-presets as well", "none")
    without = [key.strip() for key in (args.without or "").split(",") if key.strip()]
    for key in without:
        if key not in BOUNDS:
            raise InputError("--without", key, "one of " + ", ".join(BOUNDS), repr(key))
    check_folder(args.out, "--out")
    if args.accuracy is not None:
        if args.in_sample_only:
            raise InputError(
                "--accuracy", args.accuracy, "the out-of-sample refits", "--in-sample-only"
            )
        check_writable(args.accuracy, "--accuracy", stdout=False)
    if args.catalog:
        check_folder(args.catalog, "--catalog")
    return without


def execute(args: argparse.Namespace) -> int:
    """Fit what was asked, then predict every row and write the report."""
    from simspec.errors import InputError
    from simspec.io import write_atomic
    from simspec.io.progress import Progress
    from simspec.validation import CATEGORIES, fidelity_report, load_cases

    if args.keys:
        print("\n".join(case_keys()))
        return 0
    without = _check(args)
    cases = load_cases(args.cases)  # a bad file fails before any simulation
    out = Path(args.out)
    if args.fit_kernels:
        from simspec.fit.kernels import kernel_fit

        data, text = kernel_fit(cases)
        write_atomic(out / "kernel_fit.json", json.dumps(data, indent=2) + "\n")
        write_atomic(out / "KERNEL_FIT.md", text)
        print(f"kernel forms: {data['winner']} wins -> {out / 'KERNEL_FIT.md'}")
    if args.fit_presets:
        from simspec.fit.presets import fit_presets, preset_toml
        from simspec.validation.consistency import source_reporters

        probes: dict[str, Any] = {}
        if args.probes and Path(args.probes).exists():
            try:
                probes = json.loads(Path(args.probes).read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise InputError(args.probes, "", "a probe cache (JSON)", str(err)) from None
        with Progress("preset probes") as progress:
            results = fit_presets(
                cases.cases,
                workers=args.workers,
                probes=probes,
                without=without,
                progress=progress,
                reporters=cases.reporters() | source_reporters(cases.cases),
            )
        if args.probes:
            write_atomic(args.probes, json.dumps(probes, indent=0) + "\n")
        write_atomic(out / "preset_fit.json", json.dumps(results, indent=1) + "\n")
        for engine, result in results.items():
            print(
                f"{engine}: {result['values']} on {result['fitted_rows']} rows, "
                f"median |err| {result['median_abs_relative_error']:.1%}"
            )
            if args.catalog:
                write_atomic(Path(args.catalog) / f"{engine}.toml", preset_toml(engine, result))
        if args.catalog:  # what follows prices and classifies rows with the presets just written
            from simspec import catalog

            catalog.forget_parsed()
    folds = None
    if not args.in_sample_only:
        from simspec.fit.nested import nested_folds
        from simspec.validation.holdout import inputs_hash, read_folds

        current = inputs_hash(args.cases)
        folds = read_folds(out / "folds.json", current)
        if folds is not None:
            print(f"fold table current ({out / 'folds.json'}): reused")
        else:
            with Progress("held-out folds") as progress:
                folds = nested_folds(cases.cases, workers=args.workers, progress=progress)
            folds = {"inputs_hash": current, **folds}
    with Progress("fidelity rows") as progress:
        summary = fidelity_report(
            args.cases,
            out,
            workers=args.workers,
            progress=progress,
            folds=folds,
            accuracy=args.accuracy,
        )
    oos: dict[str, Any] = summary.get("out_of_sample") or {}
    for category in CATEGORIES if oos else ():
        print(_stats_line(f"{category} out of sample", oos[category], "rows"))
    for category in CATEGORIES:
        print(_stats_line(category, summary[category], "rows predicted"))
    for category in CATEGORIES:  # rows the shipped presets and kernel constants never saw
        unseen = summary["not_fitted"][category]
        held = f"{category} held out by construction (not fitted by the shipped numbers)"
        print(_stats_line(held, unseen, "rows"))
    ttft = summary.get("ttft", {})
    if ttft.get("predicted_rows"):  # published median TTFTs (no fit uses them)
        print(
            f"ttft: {ttft['predicted_rows']} of {ttft['rows']} rows predicted, median |err| "
            f"{ttft['median_abs_relative_error']:.0%} (physics only "
            f"{ttft['ideal_median_abs_relative_error']:.0%}), "
            f"{ttft['predicted_below_measured']} below the measurement"
        )
    print(f"wrote {out / 'REPORT.md'}")
    return 0


def _stats_line(label: str, stats: dict[str, Any], rows: str) -> str:
    """One category's statistics of the summary as one printed line."""
    median = stats["median_abs_relative_error"]
    return (
        f"{label}: {stats['predicted_rows']} of {stats['rows']} {rows}, median |err| "
        f"{'-' if median is None else f'{median:.0%}'}, wrong signs {stats['wrong_signs']}"
    )
