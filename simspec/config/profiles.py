"""Scenario side of calibration profiles (moved out of simspec.profile; being rewritten)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from simspec.costs.params import RooflineParams
from simspec.errors import FieldError
from simspec.profile import CalibrationProfile, load_profile

_ROOFLINE_FIELDS = {f.name: f for f in dataclasses.fields(RooflineParams)}
_DEFAULTS = RooflineParams()


class _Default(float):
    """A RooflineParams default a profile may replace: a float that knows it was not set.

    It equals the built-in default (so the field's declared default is the real number);
    values a scenario sets are plain floats (schema.build converts them), so they stay.
    """

    __slots__ = ()


def from_profile(name: str) -> Any:
    """A ``[costs]`` field for RooflineParams field ``name`` whose default comes from a profile.

    Same help text, bounds and default value as the RooflineParams field; :func:`fill_from_profile`
    replaces the default (not a value the scenario sets) by the profile's fitted value.
    """
    base = _ROOFLINE_FIELDS[name]
    return dataclasses.field(default=_Default(getattr(_DEFAULTS, name)), metadata=base.metadata)


def fill_from_profile(config: Any) -> None:
    """Fill the unset roofline fields of a ``CostsConfig`` (from its profile, else the defaults).

    Called from ``CostsConfig.__post_init__``; keys set in the scenario win over the profile.

    Raises
    ------
    FieldError
        ``profile`` names no file, or ``model = "calibrated"`` without a profile.
    ProfileError
        The profile file is bad (the message names the file and the key inside it).
    """
    source = _DEFAULTS
    if config.profile:
        if not Path(config.profile).is_file():
            raise FieldError(
                "profile",
                "an existing calibration profile JSON file (path relative to the working folder)",
                config.profile,
            )
        source = load_profile(config.profile).fitted
    elif config.model == "calibrated":
        raise FieldError(
            "profile",
            "a calibration profile path when model = 'calibrated' (it interpolates the "
            "profile's tables; `simspec calibrate` writes one)",
            config.profile,
        )
    for name in _ROOFLINE_FIELDS:
        if isinstance(getattr(config, name), _Default):
            object.__setattr__(config, name, float(getattr(source, name)))


def profile_mismatch(
    profile: CalibrationProfile, cost_model: str, gpu: str, target: str
) -> tuple[str, str] | None:
    """Why ``profile`` does not fit a scenario: (expected, found), or None when it fits.

    A profile measured on a catalog GPU must match ``hardware.gpu`` (a profile from a device
    outside the catalog, such as a CPU test run, is not checked). The calibrated model also
    needs tables measured for the scenario's target model.
    """
    if profile.gpu and profile.gpu != gpu:
        return (
            f"a profile for the scenario's hardware.gpu = {gpu!r}",
            f"{profile.source}, which describes {profile.gpu!r}",
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
