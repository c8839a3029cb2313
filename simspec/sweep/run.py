"""Sweeps: a grid of scenario variants × replications, run in parallel, crash-safe, resumable.

A sweep starts from one scenario file. Its ``[sweep]`` table (or ``--grid key=v1,v2`` flags)
names the axes:

```toml
[sweep]
replications = 3                       # seeds derived from the scenario seed
grid = { "workload.concurrency" = [1, 4, 16], "routing.overlap" = [0.1, 0.38] }
# an axis whose values are tables sets several keys together:
# grid = { batch = [{ "workload.concurrency" = 1, "workload.num_requests" = 1 }, ...] }
cases = [                              # optional: variants combined with every grid point
  { label = "30b", "model.target" = "qwen3-30b-a3b", "model.drafter" = "eagle3-qwen3-30b-a3b" },
  { label = "235b", "model.target" = "qwen3-235b-a22b", "model.drafter" = "qwen3-0.6b-draft" },
]
```

Every point is the base scenario with ``key=value`` overrides, validated like a scenario file
before anything runs. Replication r uses seed(r) = the scenario seed for r = 0 and a value derived
from (seed, r) by ``numpy.random.SeedSequence`` otherwise; all policies of a point share its
reference sequences (common random numbers), so the per-replication differences to the k = 0
baseline (and to the oracle, with ``oracle = true``) are paired, and their 95 % confidence
intervals shrink with replications.

Each finished point is written atomically to ``DIR/points/<digest>.json`` (digest of the resolved
scenario). ``--resume`` skips points whose file exists, so a killed sweep loses nothing finished
and a resumed sweep writes the same ``results.csv`` and ``summary.csv`` as an uninterrupted one:
rows are ordered by the grid, never by completion.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simspec.config.scenario import PolicySpec, Scenario, apply_overrides, scenario_from_dict
from simspec.errors import InputError, ScenarioError, describe
from simspec.io import file_mode, results_json, write_atomic

SCALARS = (
    "tokens_per_s",
    "tpot_ms",
    "ttft_ms",
    "acceptance_length",
    "acceptance_rate",
    "mean_k",
    "verify_over_decode",
    "unique_experts_per_layer",
    "speedup_vs_no_spec",
    "cost_fallbacks",
)
SWEEP_KEYS = ("replications", "grid", "cases", "oracle")


@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep."""

    grid: dict[str, list[Any]]
    cases: list[dict[str, Any]]
    replications: int = 1
    oracle: bool = False


@dataclass(frozen=True)
class Point:
    """One simulation of the sweep: its axis values, replication, and resolved scenario."""

    index: int
    case: str
    values: dict[str, Any]
    replication: int
    scenario: Scenario

    @property
    def digest(self) -> str:
        """Key of the point's result file."""
        return self.scenario.digest()


def replication_seed(seed: int, replication: int) -> int:
    """The scenario seed for replication 0, a derived 63-bit seed otherwise."""
    if replication == 0:
        return seed
    state = np.random.SeedSequence([seed, replication]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))


def _parse_grid_flag(item: str) -> tuple[str, list[Any]]:
    from simspec.config.scenario import _parse_value

    if "=" not in item:
        raise InputError("--grid", item, "key=v1,v2,...", describe(item))
    key, _, text = item.partition("=")
    values = [_parse_value(v.strip()) for v in text.split(",") if v.strip()]
    if not values:
        raise InputError("--grid", key, "at least one value", "none")
    return key.strip(), values


def read_spec(
    data: Mapping[str, Any],
    source: str,
    grid_flags: Sequence[str] = (),
    replications: int | None = None,
    oracle: bool | None = None,
) -> SweepSpec:
    """The sweep axes from the scenario's ``[sweep]`` table and the command-line flags."""
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
    grid: dict[str, list[Any]] = {}
    for key, values in _flatten(grid_raw):
        if not isinstance(values, list) or not values:
            raise ScenarioError(
                source, f"sweep.grid.{key}", "a non-empty array of values", describe(values)
            )
        grid[key] = list(values)
    for item in grid_flags:
        key, values = _parse_grid_flag(item)
        grid[key] = values
    cases_raw = raw.get("cases", [])
    if not isinstance(cases_raw, list):
        raise ScenarioError(source, "sweep.cases", "an array of tables", describe(cases_raw))
    cases = []
    for i, case in enumerate(cases_raw):
        if not isinstance(case, Mapping):
            raise ScenarioError(
                source, f"sweep.cases[{i}]", "a table of key = value", describe(case)
            )
        cases.append(dict(_flatten(case)))
    reps = raw.get("replications", 1) if replications is None else replications
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= 10_000:
        raise ScenarioError(
            source, "sweep.replications", "an integer in [1, 10000]", describe(reps)
        )
    use_oracle = raw.get("oracle", False) if oracle is None else oracle
    if not isinstance(use_oracle, bool):
        raise ScenarioError(source, "sweep.oracle", "a boolean", describe(use_oracle))
    return SweepSpec(grid, cases, reps, use_oracle)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, f"{path}.")
        else:
            yield path, value


def _override(key: str, value: Any) -> str:
    return f"{key}={json.dumps(value) if isinstance(value, str) else _toml(value)}"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def expand(data: Mapping[str, Any], source: str, spec: SweepSpec) -> list[Point]:
    """Every point of the sweep, validated (a bad value raises before anything runs)."""
    base = {k: v for k, v in data.items() if k != "sweep"}
    seed = base.get("seed", 0)
    keys = list(spec.grid)
    points: list[Point] = []
    cases = spec.cases or [{}]
    for case in cases:
        label = str(case.get("label", ""))
        case_overrides = [_override(k, v) for k, v in case.items() if k != "label"]
        for combo in itertools.product(*(spec.grid[k] for k in keys)):
            values: dict[str, Any] = {}
            for key, value in zip(keys, combo, strict=True):
                # A table value sets several keys together (a "zipped" axis).
                values.update(dict(_flatten(value)) if isinstance(value, Mapping) else {key: value})
            overrides = case_overrides + [_override(k, v) for k, v in values.items()]
            for r in range(spec.replications):
                seeded = [*overrides, f"seed={replication_seed(int(seed), r)}"]
                where = f"{source} (sweep point {', '.join(overrides) or 'base'})"
                scenario = scenario_from_dict(apply_overrides(base, seeded), where)
                points.append(Point(len(points), label, values, r, _with_baseline(scenario)))
    return points


def _with_baseline(scenario: Scenario) -> Scenario:
    from simspec.policies import FixedPolicy

    if any(p.policy == FixedPolicy(draft_tokens=0) for p in scenario.policies):
        return scenario
    base = PolicySpec("fixed", "no-spec", FixedPolicy(draft_tokens=0))
    return dataclasses.replace(scenario, policies=(base, *scenario.policies))


def run_point(
    scenario_data: dict[str, Any], source: str, oracle: bool
) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """Simulate one point from plain data (picklable for process and dask workers).

    Returns the results object and, with the oracle, its Delta-space points as arrays.
    """
    scenario = _with_baseline(scenario_from_dict(scenario_data, source))
    if oracle:
        from simspec.compare import compare

        comparison = compare(scenario)
        arrays = dataclasses.asdict(comparison.delta_points)
        return comparison.results, arrays
    from simspec.simulate import simulate

    return simulate(scenario), None


def point_path(out: Path, point: Point) -> Path:
    """Where a point's result lives."""
    return out / "points" / f"{point.digest}.json"


Outcome = tuple[dict[str, Any], dict[str, np.ndarray] | None]


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz", dir=path.parent)
    os.close(fd)
    try:
        np.savez_compressed(tmp, **dict(arrays))  # type: ignore[arg-type]
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def run_sweep(
    points: list[Point],
    out: Path,
    *,
    oracle: bool,
    workers: int,
    executor: str = "process",
    scheduler: str | None = None,
    resume: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Path, Path]:
    """Run every unfinished point, then write ``results.csv`` and ``summary.csv``."""
    out.mkdir(parents=True, exist_ok=True)
    existing = list((out / "points").glob("*.json")) if (out / "points").exists() else []
    if existing and not resume:
        raise InputError(
            "--out",
            str(out),
            "an empty folder (or --resume to continue a sweep)",
            f"{len(existing)} finished points",
        )
    todo = [p for p in points if not point_path(out, p).exists()]
    done = len(points) - len(todo)
    if progress:
        progress(done, len(points))

    def finished(point: Point, outcome: Outcome) -> None:
        nonlocal done
        result, delta = outcome
        if delta is not None:  # written first: a point counts as done once its JSON exists
            _write_npz(out / "delta" / f"{point.digest}.npz", delta)
        record = {
            "case": point.case,
            "values": point.values,
            "replication": point.replication,
            "results": result,
        }
        write_atomic(point_path(out, point), results_json(record))
        done += 1
        if progress:
            progress(done, len(points))

    tasks = [(p, p.scenario.to_dict()) for p in todo]
    if executor == "dask":
        _run_dask(tasks, finished, oracle, workers, scheduler)
    else:
        _run_processes(tasks, finished, oracle, workers)
    return write_tables(points, out)


def _run_processes(
    tasks: list[tuple[Point, dict[str, Any]]],
    finished: Callable[[Point, Outcome], None],
    oracle: bool,
    workers: int,
) -> None:
    if workers <= 1 or len(tasks) <= 1:
        for point, data in tasks:
            finished(point, run_point(data, point.scenario.source, oracle))
        return
    import concurrent.futures as cf
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_point, data, p.scenario.source, oracle): p for p, data in tasks}
        for future in cf.as_completed(futures):
            finished(futures[future], future.result())


def _run_dask(
    tasks: list[tuple[Point, dict[str, Any]]],
    finished: Callable[[Point, Outcome], None],
    oracle: bool,
    workers: int,
    scheduler: str | None,
) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError(
            "--executor",
            "dask",
            "dask.distributed installed (pip install 'simspec[cluster]')",
            "it is not installed",
        ) from None
    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        cluster = LocalCluster(
            n_workers=max(workers, 1), threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
    try:
        futures = {
            client.submit(run_point, data, p.scenario.source, oracle, pure=False): p
            for p, data in tasks
        }
        for future in as_completed(futures):
            finished(futures[future], future.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _flat_gpu(row: Mapping[str, Any]) -> dict[str, Any]:
    return {f"gpu_time_s.{k}": v for k, v in row.get("gpu_time_s", {}).items()}


def write_tables(points: list[Point], out: Path) -> tuple[Path, Path]:
    """``results.csv`` (one row per point × policy) and ``summary.csv`` (means and paired CIs)."""
    keys = list(dict.fromkeys(k for p in points for k in p.values))
    rows: list[dict[str, Any]] = []
    for p in points:
        record = json.loads(point_path(out, p).read_text(encoding="utf-8"))
        for row in record["results"]["policies"]:
            flat = {
                "case": p.case,
                **{k: p.values.get(k, "") for k in keys},
                "replication": p.replication,
                "seed": p.scenario.seed,
                "policy": row["label"],
                "policy_name": row["name"],
            }
            flat.update({k: row[k] for k in SCALARS})
            flat["gap_to_oracle_pct"] = row.get("gap_to_oracle_pct", "")
            flat["requests"], flat["tokens"] = row["requests"], row["tokens"]
            flat.update(_flat_gpu(row))
            rows.append(flat)
    results = out / "results.csv"
    write_atomic(results, _csv(rows))
    summary = out / "summary.csv"
    write_atomic(summary, _csv(summarize_rows(rows, keys)))
    return results, summary


def _csv(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t_quantile_975(df: int) -> float:
    """Two-sided 95 % Student-t quantile (tabulated; the largest tabulated df not above ``df``)."""
    if df <= 0:
        return math.nan
    usable = [d for d in _T975 if d <= df]
    return _T975[max(usable)] if df <= 120 else 1.960


def paired_ci(diffs: Sequence[float]) -> tuple[float, float]:
    """Mean and 95 % half-width of paired differences (nan half-width for one replication)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return math.nan, math.nan
    return float(d.mean()), _half_width(d)


def _half_width(values: Sequence[float] | np.ndarray) -> float:
    """95 % half-width of the mean of independent replications (nan for one)."""
    if len(values) < 2:
        return math.nan
    v = np.asarray(values, dtype=float)
    return t_quantile_975(len(v) - 1) * float(v.std(ddof=1)) / math.sqrt(len(v))


def summarize_rows(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """Per (case, grid values, policy): means over replications and paired 95 % CIs of the TPOT
    difference to the k = 0 baseline and to the oracle (ms; negative = faster)."""

    def point_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return (row["case"], *(str(row[k]) for k in keys))

    by_point: dict[tuple[Any, ...], dict[int, dict[str, dict[str, Any]]]] = {}
    order: list[tuple[tuple[Any, ...], str]] = []
    for row in rows:
        reps = by_point.setdefault(point_key(row), {})
        reps.setdefault(int(row["replication"]), {})[row["policy"]] = row
        if (point_key(row), row["policy"]) not in order:
            order.append((point_key(row), row["policy"]))
    out = []
    for pkey, policy in order:
        reps = by_point[pkey]
        mine = [reps[r][policy] for r in sorted(reps) if policy in reps[r]]
        first = mine[0]
        summary = {
            "case": first["case"],
            **{k: first[k] for k in keys},
            "policy": policy,
            "replications": len(mine),
        }
        for field in (
            "tpot_ms",
            "tokens_per_s",
            "speedup_vs_no_spec",
            "mean_k",
            "acceptance_length",
        ):
            values = [float(m[field]) for m in mine]
            summary[field] = float(np.mean(values))
            if field in ("tpot_ms", "speedup_vs_no_spec"):
                summary[f"{field}_ci95"] = _half_width(values)
        for ref_name, pick in (("no_spec", _baseline_label), ("oracle", _oracle_label)):
            diffs = []
            for r in sorted(reps):
                ref = pick(reps[r])
                if ref is not None and policy in reps[r]:
                    diffs.append(float(reps[r][policy]["tpot_ms"]) - float(reps[r][ref]["tpot_ms"]))
            mean, half = paired_ci(diffs) if diffs else (math.nan, math.nan)
            summary[f"tpot_diff_vs_{ref_name}_ms"] = mean
            summary[f"tpot_diff_vs_{ref_name}_ci95_ms"] = half
        out.append(summary)
    return out


def _baseline_label(policies: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The k = 0 row of a replication: fixed with no drafts ("no-spec" when the sweep added it)."""
    if "no-spec" in policies:
        return "no-spec"
    for label, row in policies.items():
        if row["policy_name"] == "fixed" and float(row["mean_k"]) == 0.0:
            return label
    return None


def _oracle_label(policies: Mapping[str, Mapping[str, Any]]) -> str | None:
    return "oracle" if "oracle" in policies else None
