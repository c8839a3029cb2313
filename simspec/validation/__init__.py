"""Fidelity: simspec's predictions against published GPU measurements.

``validation/cases.toml`` (data, in the repository) holds published numbers, each citing its
source: MoE kernel times, plain-decode serving numbers and speculative-decoding speedups.
:mod:`.cases` reads and checks the file, :mod:`.predict` predicts one row with the simulator
(the default scenario with the row's model, hardware, engine preset and workload), and
:mod:`.report` predicts them all and writes ``REPORT.md`` and ``summary.json`` (in-sample rows
with the fitted engine presets, physics-only predictions, and the presets' leave-one-source-out
errors). ``simspec fidelity`` runs it; the fits that produce the shipped catalog data from the
same rows live in :mod:`simspec.fit` (:mod:`~simspec.fit.kernels`, :mod:`~simspec.fit.presets`).
"""

from __future__ import annotations

from .cases import CASES_PATH, CATEGORIES, Case, CaseFile, engine_preset, load_cases
from .predictions import Outcome, predict, quantity, run_times, scenario_data
from .report import fidelity_report, predict_all, summarize

__all__ = [
    "CASES_PATH",
    "CATEGORIES",
    "Case",
    "CaseFile",
    "Outcome",
    "engine_preset",
    "fidelity_report",
    "load_cases",
    "predict",
    "predict_all",
    "quantity",
    "run_times",
    "scenario_data",
    "summarize",
]
