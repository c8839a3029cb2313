"""What a sweep runs: the grid of scenario variants, the cases, and the replications.

A scenario's ``[sweep]`` table (README, "Sweeps") names the axes; the points are the product
cases × grid × replications, in that order (the order of every table and figure). Each point is
the base scenario with ``key = value`` overrides, resolved and validated by :func:`expand`
before anything runs, so a bad value fails in a second, not after an hour. Replication r runs
with :func:`simspec.rng.replication_seed` of the point's seed (the scenario's, or the value a
case or grid axis gives ``seed``): independent of the grid, so adding an axis value never
changes the other points' results.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simspec.config.load import parse_value, read_with_overrides
from simspec.config.overrides import check_disjoint, override_keys
from simspec.config.scenario import Scenario
from simspec.errors import InputError, ScenarioError, describe
from simspec.rng import replication_seed  # noqa: F401 - re-exported: the sweep's seeds
from simspec.sweep.resolve import Combo, resolve_combos

#: The keys of a ``[sweep]`` table.
SWEEP_KEYS = ("replications", "grid", "cases", "oracle")

#: Grid axes: a mapping ``{key: [values]}`` or ``"key=v1,v2"`` strings (TOML values).
GridAxes = Mapping[str, Sequence[Any]] | Iterable[str]


@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep (module docstring): grid ``{key: values}``, cases, replications."""

    grid: dict[str, list[Any]]
    cases: list[dict[str, Any]]
    replications: int = 1
    oracle: bool = False


@dataclass(frozen=True)
class Point:
    """One simulation of the sweep: its case, axis values, replication and resolved scenario.

    ``values`` holds the grid keys this point sets (a table-valued axis contributes all of its
    keys); the case's own overrides are in the scenario, not in ``values``.
    """

    index: int
    case: str
    values: dict[str, Any]
    replication: int
    scenario: Scenario

    @functools.cached_property
    def digest(self) -> str:
        """The key of the point's files: the digest of its resolved scenario (computed once:
        a sweep asks for it several times per point)."""
        return self.scenario.digest()


def _grid_axes(grid: GridAxes, source: str) -> Iterable[tuple[str, list[Any]]]:
    """Extra axes as ``(key, values)``; strings are ``key=v1,v2,...`` with TOML values."""
    if isinstance(grid, Mapping):
        for key, values in grid.items():
            if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
                raise InputError(
                    source, f"sweep.grid.{key}", "a non-empty list of values", describe(values)
                )
            yield str(key), list(values)
        return
    seen: set[str] = set()
    for item in [grid] if isinstance(grid, str) else grid:
        if "=" not in item:
            raise InputError(source, "sweep.grid", "an axis key=v1,v2,...", describe(item))
        key, _, text = item.partition("=")
        values = [parse_value(v.strip()) for v in text.split(",") if v.strip()]
        if not values:
            raise InputError(source, f"sweep.grid.{key.strip()}", "at least one value", "none")
        if key.strip() in seen:  # a second axis on one key would replace the first's values
            raise InputError(source, f"sweep.grid.{key.strip()}", "each key once", "it twice")
        seen.add(key.strip())
        yield key.strip(), values


def read_spec(
    data: Mapping[str, Any],
    source: str,
    grid: GridAxes = (),
    replications: int | None = None,
    oracle: bool | None = None,
) -> SweepSpec:
    """The sweep axes of scenario ``data``: its ``[sweep]`` table, then the arguments.

    Parameters
    ----------
    data : mapping
        The parsed scenario file (:func:`simspec.config.load.read_scenario_data`).
    source : str
        Its name in error messages.
    grid : mapping or iterable of str
        Extra axes, ``{"workload.concurrency": [1, 4]}`` or ``["workload.concurrency=1,4"]``;
        an axis named in both replaces the file's.
    replications, oracle : optional
        Replace ``sweep.replications`` and ``sweep.oracle``.

    Raises
    ------
    InputError
        Naming the key (``sweep.grid.routing.overlap``, ``sweep.cases[1].label``, ...).
    """
    raw = data.get("sweep", {})
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, "sweep", "a table [sweep]", describe(raw))
    for key in raw:
        if key not in SWEEP_KEYS:
            raise ScenarioError(
                source, f"sweep.{key}", "one of the keys " + ", ".join(SWEEP_KEYS), "an unknown key"
            )
    grid_raw = raw.get("grid", {})
    if not isinstance(grid_raw, Mapping):
        raise ScenarioError(source, "sweep.grid", "a table of key = [values]", describe(grid_raw))
    axes: dict[str, list[Any]] = {}
    for key, values in flatten(grid_raw):
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                source, f"sweep.grid.{key}", "a non-empty array of values", describe(values)
            )
        axes[key] = list(values)
    axes.update(_grid_axes(grid, source))
    reps = raw.get("replications", 1) if replications is None else replications
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 10_000:
        raise ScenarioError(
            source, "sweep.replications", "an integer in [1, 10000]", describe(reps)
        )
    use_oracle = raw.get("oracle", False) if oracle is None else oracle
    if not isinstance(use_oracle, bool):
        raise ScenarioError(source, "sweep.oracle", "a boolean", describe(use_oracle))
    return SweepSpec(axes, _read_cases(raw.get("cases", []), source), reps, use_oracle)


def _read_cases(raw: Any, source: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ScenarioError(source, "sweep.cases", "an array of tables", describe(raw))
    cases: list[dict[str, Any]] = []
    labels: list[str] = []
    for i, case in enumerate(raw):
        if not isinstance(case, Mapping):
            raise ScenarioError(
                source, f"sweep.cases[{i}]", "a table of key = value", describe(case)
            )
        label = case.get("label", "")
        # The label is the only column telling cases apart in the tables: it must be unique.
        if not isinstance(label, str) or (len(raw) > 1 and (not label or label in labels)):
            raise ScenarioError(
                source, f"sweep.cases[{i}].label", "a label unique among the cases", describe(label)
            )
        labels.append(label)
        cases.append(dict(flatten(case)))
    return cases


def flatten(table: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """``(dotted key, value)`` of every leaf of nested tables."""
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{path}.")
        else:
            yield path, value


def _override(key: str, value: Any) -> str:
    return f"{key}={_toml(value)}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def expand(
    data: Mapping[str, Any],
    source: str,
    spec: SweepSpec,
    *,
    base_dir: str = "",
    workers: int = 1,
) -> list[Point]:
    """Every point of the sweep, in table order, resolved and validated.

    Parameters
    ----------
    data : mapping
        The parsed scenario (its ``[sweep]`` table is ignored here: ``spec`` says what to run).
    source : str
        Its name in error messages; each point's errors also name the point's overrides.
    spec : SweepSpec
        From :func:`read_spec`.
    base_dir : str
        The folder a relative ``costs.profile`` is resolved against (the scenario file's).
    workers : int
        Apply the points' overrides, resolve their scenarios and compute their digests in this
        many forked processes (Linux; the same points and the same first error as one process).

    Raises
    ------
    ScenarioError
        For the first invalid point, before anything runs.
    """
    base = {k: v for k, v in data.items() if k != "sweep"}
    keys = list(spec.grid)
    check_size(spec, source)
    combos: list[Combo] = []
    for case in spec.cases or [{}]:
        label = str(case.get("label", ""))
        case_overrides = [_override(k, v) for k, v in case.items() if k != "label"]
        for combo in itertools.product(*(spec.grid[k] for k in keys)):
            values: dict[str, Any] = {}
            for key, value in zip(keys, combo, strict=True):
                values.update(dict(flatten(value)) if isinstance(value, Mapping) else {key: value})
            overrides = case_overrides + [_override(k, v) for k, v in values.items()]
            where = f"{source} (sweep point {', '.join(overrides) or 'base'})"
            combos.append((label, values, overrides, where))
    resolved = resolve_combos(base, combos, spec.replications, base_dir, workers)
    points: list[Point] = []
    for (label, values, _, _), replications in zip(combos, resolved, strict=True):
        for r, (scenario, digest) in enumerate(replications):
            point = Point(len(points), label, values, r, scenario)
            if digest is not None:
                point.__dict__["digest"] = digest  # what the cached property stores
            points.append(point)
    return points


#: Most points one sweep may have (cases x grid values x replications), checked before any
#: point is built: beyond it a sweep would spend minutes only validating its points.
MAX_POINTS = 100_000


def check_size(spec: SweepSpec, source: str) -> None:
    """Refuse a sweep of more than :data:`MAX_POINTS` points, before building one."""
    count = max(len(spec.cases), 1) * spec.replications
    for values in spec.grid.values():
        count *= len(values)
        if count > MAX_POINTS:
            break
    if count > MAX_POINTS:
        sizes = " x ".join(f"{len(v)} ({k})" for k, v in spec.grid.items())
        raise InputError(
            source,
            "sweep.grid",
            f"at most {MAX_POINTS:,} points (cases x grid values x replications)",
            f"{max(len(spec.cases), 1)} cases x {sizes} x {spec.replications} replications",
        )


def load_sweep(
    path: str | Path,
    *,
    grid: GridAxes = (),
    overrides: Mapping[str, Any] | Iterable[str] = (),
    replications: int | None = None,
    oracle: bool | None = None,
    workers: int = 1,
) -> tuple[SweepSpec, list[Point]]:
    """Read a scenario file and return its sweep's axes and validated points.

    ``overrides`` change the base scenario (``{"routing.overlap": 0.5}`` or ``"key=value"``
    strings), before the axes are applied; ``workers`` processes validate the points
    (:func:`expand`); the other arguments are those of :func:`read_spec`.

    Examples
    --------
    >>> spec, points = load_sweep(
    ...     "scenarios/qwen3-30b-h100-batch32.toml",
    ...     grid={"workload.concurrency": [1, 4]},
    ...     replications=2,
    ... )  # doctest: +SKIP
    >>> len(points)  # doctest: +SKIP
    4
    """
    data, source, base = read_with_overrides(path, overrides)
    spec = read_spec(data, source, grid, replications, oracle)
    varied = [*spec.grid, *(k for case in spec.cases for k in case if k != "label")]
    check_disjoint(override_keys(overrides), dict.fromkeys(varied))
    return spec, expand(data, source, spec, base_dir=base, workers=workers)
