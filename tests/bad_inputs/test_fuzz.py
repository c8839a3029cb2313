"""Fuzz of the scenario loader (issue 13): mutated shipped scenarios never crash it.

Hypothesis mutates every shipped scenario (key deletions, type swaps, extreme numbers such as
5e-324, 1e308, -0.0, NaN and NaN-like strings, unknown keys). Loading must either succeed or
raise :class:`~simspec.errors.InputError` (exit 2), nothing else; a scenario that loads, run at a
tiny size, must give finite results that serialise as strict JSON. Derandomized and bounded
(60 examples), so it is reproducible and takes seconds.
"""

from __future__ import annotations

import copy
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simspec.analysis.experiment import run_experiment
from simspec.config.load import scenario_from_dict, with_overrides
from simspec.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "simspec" / "config" / "default_scenario.toml"
SHIPPED = [*sorted(ROOT.glob("scenarios/**/*.toml")), DEFAULT]
assert len(SHIPPED) >= 5

EXTREMES: list[Any] = [
    5e-324,
    -5e-324,
    1e308,
    -1e308,
    1.7e308,
    -0.0,
    0.0,
    math.nan,
    math.inf,
    -math.inf,
    2**63,
    -(2**63),
    -1,
    0,
    1,
    1e-300,
    0.5,
    "nan",
    "NaN",
    "inf",
    "-0.0",
    "1e308",
    "",
    "abc",
    True,
    False,
    [],
    [5e-324],
    [1e308, -0.0],
    {},
    {"x": 1},
]


def _load(path: Path) -> dict[str, Any]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    data.pop("sweep", None)  # the sweep axes are the sweep runner's, not the loader's
    return data


BASES = {path: _load(path) for path in SHIPPED}


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path (dict keys and list indexes) inside ``node``."""
    found: list[tuple] = []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        path = (*prefix, key)
        found.append(path)
        if isinstance(value, dict | list):
            found.extend(_paths(value, path))
    return found


def _parent(data: Any, path: tuple) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Path, dict[str, Any]]:
    path = draw(st.sampled_from(SHIPPED))
    data = copy.deepcopy(BASES[path])
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(data)
        if not paths:
            break
        target = draw(st.sampled_from(paths))
        parent, key = _parent(data, target), target[-1]
        action = draw(st.sampled_from(["delete", "replace", "replace", "unknown key"]))
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = copy.deepcopy(draw(st.sampled_from(EXTREMES)))
        elif isinstance(parent, dict):
            parent["no_such_key"] = draw(st.sampled_from(EXTREMES[:6]))
    return path, data


def _finite(value: Any, where: str) -> None:
    if isinstance(value, float):
        assert math.isfinite(value), f"{where} = {value!r}"
    elif isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _finite(item, f"{where}[{i}]")


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
def test_mutated_scenarios_load_or_fail_cleanly_and_run_finite(case):
    path, data = case
    try:
        scenario = scenario_from_dict(data, str(path), base_dir=str(path.parent))
        small = with_overrides(scenario, {"workload.num_requests": 2, "workload.output_tokens": 8})
    except InputError as err:
        assert err.source, f"no file named: {err}"
        assert "expected" in str(err) and "found" in str(err)
        return
    result = run_experiment(small)
    for row in result.policies:
        for name, value in row.scalars().items():
            assert math.isfinite(value), f"{path.name}: {row.label}.{name} = {value!r}"
    _finite(result.to_dict()["policies"], "policies")
    json.loads(result.to_json())  # strict JSON: to_json refuses NaN and infinity
