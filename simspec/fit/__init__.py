"""Fitting the cost model to measurements: every least-squares and search fit in one place.

- :mod:`.tables`: the roofline's efficiencies and the MoE kernel's constants (:mod:`.moe`)
  fitted to the tables ``simspec calibrate`` measures (coarse scans refined by Brent's method,
  :mod:`._search`); :func:`assemble_profile` writes the result as a profile.
- :mod:`.serving`: overheads and efficiencies fitted to a team's own serving benchmarks
  (``simspec fit``; the file format in :mod:`.measurements`), every row simulated,
  ``scipy.optimize.least_squares`` on log residuals; :func:`fitted_profile` writes the profile.
- :mod:`.kernels`: the MoE kernel forms fitted across published ``fused_moe`` tables of many
  models and GPUs (the defaults of ``[costs]``; ``simspec fidelity --fit-kernels``).
- :mod:`.floors`: a GPU's kernel floors (CUDA graph and eager) from the small decode kernels
  its measured profiles time (the catalog's ``kernel_floor_graph_s``/``kernel_floor_eager_s``).
- :mod:`.presets`: the engine presets' overheads fitted to each engine's published serving
  rows (``simspec/catalog/engines``; ``simspec fidelity --fit-presets``).

The published rows are read and predicted by :mod:`simspec.validation`. No torch here.
"""

from __future__ import annotations

from .measurements import MeasurementRow, Measurements, parse_measurements, read_measurements
from .profiles import assemble_profile, fitted_profile
from .serving import (
    FitResult,
    FitSettings,
    RowFit,
    alpha_for_acceptance_length,
    default_fit_params,
    fit_measurements,
    fittable_params,
    row_scenario,
    simulate_row,
)
from .tables import TableFit, fit_efficiencies, fit_overhead

__all__ = [
    "FitResult",
    "FitSettings",
    "MeasurementRow",
    "Measurements",
    "RowFit",
    "TableFit",
    "alpha_for_acceptance_length",
    "assemble_profile",
    "default_fit_params",
    "fit_efficiencies",
    "fit_measurements",
    "fit_overhead",
    "fittable_params",
    "fitted_profile",
    "parse_measurements",
    "read_measurements",
    "row_scenario",
    "simulate_row",
]
