"""Writing a calibration profile: its document (:func:`profile_document`) and JSON text.

The text is ``json.dumps(data, indent=1)`` plus a newline, so the shipped analytic profiles
under ``calibration/`` are byte for byte what the command writes (a test checks it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from simspec.params import SCENARIO_OWNED_KEYS

from .tables import SCHEMA, SCHEMA_VERSION


def profile_json(data: Mapping[str, Any]) -> str:
    """Profile data as JSON text (NaN is refused: a profile never holds one)."""
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


def profile_document(
    *,
    metadata: Mapping[str, Any],
    peak: Mapping[str, Any],
    fitted: Mapping[str, Any],
    provenance: Mapping[str, str],
    ceilings: Mapping[str, Any] | None = None,
    fit_details: Mapping[str, Any] | None = None,
    validation: list[dict[str, Any]] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A profile's JSON-ready data, every section in the format's order (:mod:`simspec.profile`).

    Every profile writer (measured, analytic, fitted) builds its document here, so the sections
    and their order are defined once. The parameters a scenario sets from its own tables
    (:data:`~simspec.params.SCENARIO_OWNED_KEYS`: sampling, CUDA graphs, overlap scheduling)
    describe a run, not a GPU, so a profile does not carry them.
    """
    fitted = {k: v for k, v in fitted.items() if k not in SCENARIO_OWNED_KEYS}
    provenance = {k: v for k, v in provenance.items() if k not in SCENARIO_OWNED_KEYS}
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "metadata": dict(metadata),
        "peak": dict(peak),
        "ceilings": dict(ceilings or {}),
        "fitted": dict(fitted),
        "provenance": dict(provenance),
        "fit_details": dict(fit_details or {}),
        "validation": list(validation or []),
        "tables": dict(tables or {}),
    }
