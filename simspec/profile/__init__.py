"""Calibration profiles: what one GPU measured (or what is assumed), in one validated JSON file.

A profile is written by ``simspec calibrate`` (``kind = "measured"``: torch microbenchmarks on a
device) or describes spec-sheet numbers with assumed efficiencies (``kind = "analytic"``), or is
written by ``simspec fit`` (``kind = "fitted"``: parameters fitted to serving benchmarks,
:mod:`simspec.fit.profiles`; ``fit_details`` holds the rows and residuals). It has:

``metadata``
    device, catalog GPU name (``gpu``, empty when the device is not in the catalog), model,
    shapes (``full``, or ``tiny`` for the CPU test runs), torch/CUDA versions, date, command,
    git sha, and where the numbers come from (``notes``, ``sources``).
``peak``
    the bandwidth and bf16 FLOP/s every efficiency is a fraction of: the catalog's spec sheet
    for a catalog GPU, the measured copy bandwidth and matmul throughput otherwise.
``fitted``
    every :class:`~simspec.params.RooflineParams` field; ``provenance`` says, per field,
    whether it was fitted to the tables, measured, or assumed (and why).
``tables``
    the measured medians on grids: MoE layer time over (tokens in the pass, unique experts),
    decode attention over (batch, keys per request, query tokens per request), dense GEMMs over
    tokens, and whole layer stacks at a few (batch, tokens per request) points.

The calibrated cost model reads the tables through :class:`GridTable`: multilinear
interpolation of the tables' *monotone envelope* (the running maximum along every axis, so a
noisy measurement can never make more work cheaper; multilinear interpolation of a grid that is
monotone along every axis is monotone along every axis). Points outside a grid report
``inside = False``; the cost model then falls back to the fitted roofline (never below the
grid's edge) and counts the fallback. This is LLMServingSim's (tokens, distinct experts) MoE
table with 2-D interpolation and Vidur's "profile once on the GPU, look up on CPUs" design.

Loading validates everything (types, shapes, finiteness, bounds) and raises
:class:`ProfileError` (an :class:`~simspec.errors.InputError`: exit code 2) naming the file,
the key path inside it, what was expected and what was found. A loaded profile carries the
SHA-256 of its content (``CalibrationProfile.sha256``).

Modules: :mod:`.tables` (the in-memory types and the format's constants), :mod:`.parse`
(validation, :func:`load_profile`), :mod:`.write` (:func:`profile_document`,
:func:`profile_json`). No torch here.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .tables import (
    GEMM_NAMES,
    KINDS,
    SCHEMA,
    SCHEMA_VERSION,
    SHAPES,
    STACK_MODES,
    STACK_USES,
    AttentionTable,
    CalibrationProfile,
    GemmTable,
    GridTable,
    MoeTable,
    StackMeasurement,
)

if TYPE_CHECKING:
    from .parse import (
        ProfileError,
        canonical_sha256,
        load_profile,
        parse_profile_text,
        profile_from_dict,
    )
    from .write import profile_document, profile_json

#: The names of :mod:`.parse` and :mod:`.write`, imported on first access (PEP 562): the cost
#: models and scenarios need only the types of :mod:`.tables`, and a scenario without a profile
#: (every sweep point of the paper studies) never parses one.
_LAZY: dict[str, str] = {
    "ProfileError": ".parse",
    "canonical_sha256": ".parse",
    "load_profile": ".parse",
    "parse_profile_text": ".parse",
    "profile_from_dict": ".parse",
    "profile_document": ".write",
    "profile_json": ".write",
}


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY`, imported from its module and kept as a global."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "GEMM_NAMES",
    "KINDS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SHAPES",
    "STACK_MODES",
    "STACK_USES",
    "AttentionTable",
    "CalibrationProfile",
    "GemmTable",
    "GridTable",
    "MoeTable",
    "ProfileError",
    "StackMeasurement",
    "canonical_sha256",
    "load_profile",
    "parse_profile_text",
    "profile_document",
    "profile_from_dict",
    "profile_json",
]
