"""The calibration profile a scenario names: found, loaded and checked against the scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simspec.errors import ScenarioError, describe
from simspec.profile import CalibrationProfile


def profile_path(value: str, base_dir: str) -> Path:
    """Where ``costs.profile = value`` points: relative to ``base_dir`` ("" = working folder)."""
    path = Path(value)
    return path if path.is_absolute() or not base_dir else Path(base_dir) / path


def existing_file(value: str, base_dir: str, source: str, key: str, what: str) -> Path:
    """:func:`profile_path` of the scenario's ``key = value``, which must name a file."""
    path = profile_path(value, base_dir)
    if not path.is_file():
        where = f"the scenario's folder {base_dir}" if base_dir else "the working folder"
        raise ScenarioError(
            source, key, f"an existing {what} (relative to {where})", describe(value)
        )
    return path


def load_scenario_profile(
    costs: Any, gpu: str, target: str, source: str, base_dir: str
) -> CalibrationProfile | None:
    """The profile of a ``[costs]`` table, loaded and checked (None without one).

    Raises
    ------
    ScenarioError
        ``costs.profile`` names no file, the profile does not fit the scenario, or
        ``model = "calibrated"`` has no profile.
    ProfileError
        The profile file is bad (the message names the file and the key inside it).
    """
    if not costs.profile:
        if costs.model == "calibrated":
            raise ScenarioError(
                source,
                "costs.profile",
                "a calibration profile path when model = 'calibrated' (it interpolates the "
                "profile's tables; `simspec calibrate` writes one)",
                describe(costs.profile),
            )
        return None
    what = "calibration profile JSON file"
    path = existing_file(costs.profile, base_dir, source, "costs.profile", what)
    from simspec.profile.parse import load_profile  # only scenarios with a profile parse one

    profile = load_profile(path)
    problem = profile_mismatch(
        profile, costs.model, gpu, target, allow_foreign=costs.allow_foreign_profile
    )
    if problem:
        raise ScenarioError(source, "costs.profile", *problem)
    return profile


def profile_mismatch(
    profile: CalibrationProfile,
    cost_model: str,
    gpu: str,
    target: str,
    *,
    allow_foreign: bool = False,
) -> tuple[str, str] | None:
    """Why ``profile`` does not fit a scenario: (expected, found), or None when it fits.

    A profile must describe the scenario's ``hardware.gpu``: one measured on another catalog
    GPU, or on a device outside the catalog (``metadata.gpu`` empty, such as a CPU test run,
    whose times are orders of magnitude off a GPU's), is refused unless ``allow_foreign``
    (``costs.allow_foreign_profile = true``). The calibrated model also needs tables measured
    for the scenario's target model.
    """
    if profile.gpu != gpu and not allow_foreign:
        device = str(profile.data.get("metadata", {}).get("device", "")) or "an unnamed device"
        described = repr(profile.gpu) if profile.gpu else f"{device!r}, not a catalog GPU"
        return (
            f"a profile for the scenario's hardware.gpu = {gpu!r} (or set "
            "costs.allow_foreign_profile = true to use it anyway)",
            f"{profile.source}, which describes {described}",
        )
    if cost_model == "calibrated":
        if not profile.has_tables:
            return (
                "a profile with measured tables for model = 'calibrated' (an analytic profile "
                "has none: use model = 'roofline' with it)",
                f"{profile.source} ({profile.kind}, no tables)",
            )
        if profile.model != target:
            return (
                f"a profile measured for the target model {target!r}",
                f"{profile.source}, measured for {profile.model!r} "
                f"(run `simspec calibrate --model {target}`)",
            )
    return None
