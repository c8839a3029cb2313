"""Sensitivity of paper B's conclusions to simspec's assumed constants.

    python -m studies.sensitivity [--batches 1,8] [--presets ideal,sglang,vllm]
                                [--out scenarios/papers/why-sd-works-better/SENSITIVITY.md]

Paper B's 10-model study (``full.toml``) draws conclusions from the speedup of k = 3 over plain
decoding at low and medium batch. Most constants of the cost model behind them are assumptions
(efficiencies, fixed overheads) or borrowed from one model (the overlap profile). This script
re-runs the study's cases at a few batch sizes

* under each engine preset (``[engine] preset``: "ideal" is the physics-only model, the others
  add the overheads fitted on that engine's published rows), and
* with each assumed constant moved by -50 % and +50 % (one at a time, under the first preset),

and says which of these conclusions hold in each variant:

C1  fine-grained models (>= 128 experts) gain more at batch 1 than coarse ones (8-16 experts):
    the mean batch-1 speedup of the fine-grained group exceeds the coarse group's;
C2  the fine-grained models' curves are not concave at low batch: for most of them the
    batch-1 speedup exceeds the one at the second batch size;
C3  speculation pays at batch 1 for every model (speedup > 1);
C4  the model with the largest batch-1 speedup (reported; "flips" when it changes).

Every run uses the study's own settings (analytic routing, one wave of requests per point).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import simspec
from simspec.config.load import read_scenario_data, scenario_from_dict
from simspec.params import SCENARIO_OWNED_KEYS, RooflineParams

ROOT = Path(__file__).resolve().parents[1]

STUDY = ROOT / "scenarios/papers/why-sd-works-better/full.toml"
#: Experts at or above which a model counts as fine-grained (C1, C2), at or below coarse.
FINE_EXPERTS, COARSE_EXPERTS = 128, 16
#: Constants of the MoE-kernel form a scenario does not use (moving them changes nothing).
INACTIVE_KEYS = {
    "saturation": ("moe_launch_s", "moe_expert_s", "moe_bandwidth_efficiency", "moe_tile_rows"),
    "launch": ("moe_efficiency_max", "moe_saturation_bytes"),
}
#: Relative moves of each assumed constant.
MOVES = (0.5, 1.5)


def study_cases(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The study's scenario data (without [sweep]) and its cases."""
    data, _ = read_scenario_data(path)
    data = dict(data)
    sweep = data.pop("sweep")
    return data, list(sweep["cases"])


def assumed_constants() -> list[str]:
    """The float [costs] keys of the cost model (efficiencies, overheads, kernel constants);
    the keys other scenario tables own (temperature, top_p: [workload]) are not assumptions."""
    return [
        f.name
        for f in dataclasses.fields(RooflineParams)
        if isinstance(getattr(RooflineParams(), f.name), float)
        and f.name not in SCENARIO_OWNED_KEYS
    ]


def _load(base: dict[str, Any]) -> simspec.Scenario:
    return scenario_from_dict(base, str(STUDY), base_dir=STUDY.parent)


def _speedup(task: tuple[dict[str, Any], dict[str, Any], int]) -> float:
    base, overrides, batch = task
    scenario = _load(base)
    scenario = simspec.with_overrides(
        scenario,
        {**overrides, "workload.concurrency": batch, "workload.num_requests": batch},
    )
    result = simspec.run(scenario)
    return next(r for r in result.policies if not r.is_baseline).speedup_vs_no_spec


def variants(presets: list[str], base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides) of every variant: presets, then each constant moved under the first."""
    out: list[tuple[str, dict[str, Any]]] = [(f"preset {p}", {"engine.preset": p}) for p in presets]
    first = {"engine.preset": presets[0]}
    resolved = simspec.with_overrides(_load(base), first)
    values = dataclasses.asdict(resolved.roofline)
    inactive = INACTIVE_KEYS.get(values.get("moe_kernel", ""), ())
    for key in assumed_constants():
        if key in inactive:
            continue
        value = values[key]
        if not value:
            continue
        meta = {f.name: f.metadata for f in dataclasses.fields(RooflineParams)}[key]
        for move in MOVES:
            moved = value * move
            hi = meta.get("le", meta.get("lt"))
            if hi is not None and moved > hi:
                moved = float(hi) if "le" in meta else float(hi) * 0.999
            out.append((f"{key} x{move:g}", {**first, f"costs.{key}": moved}))
    overlaps = base.get("routing", {}).get("overlaps")
    if overlaps:
        for move in MOVES:
            moved = [min(0.95, o * move) for o in overlaps]
            out.append((f"routing.overlaps x{move:g}", {**first, "routing.overlaps": moved}))
    return out


def conclusions(labels: list[str], experts: list[int], s1: list[float], s2: list[float]) -> dict:
    fine = [i for i, e in enumerate(experts) if e >= FINE_EXPERTS]
    coarse = [i for i, e in enumerate(experts) if e <= COARSE_EXPERTS]
    c1 = statistics.mean(s1[i] for i in fine) > statistics.mean(s1[i] for i in coarse)
    c2 = sum(s1[i] > s2[i] for i in fine) > len(fine) / 2
    c3 = all(s > 1 for s in s1)
    c4 = labels[max(range(len(s1)), key=s1.__getitem__)]
    return {"C1": c1, "C2": c2, "C3": c3, "C4": c4}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--presets", default="ideal,sglang,vllm")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=STUDY.parent / "SENSITIVITY.md")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    presets = args.presets.split(",")
    base, cases = study_cases(STUDY)
    labels = [c["label"] for c in cases]
    case_overrides = [{k: v for k, v in c.items() if k != "label"} for c in cases]
    experts = [
        simspec.with_overrides(_load(base), o).target.shape.num_experts for o in case_overrides
    ]
    runs = variants(presets, base)
    tasks = [(base, {**o, **v}, b) for _, v in runs for o in case_overrides for b in batches]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        speedups = list(pool.map(_speedup, tasks, chunksize=4))
    print(f"{len(tasks)} runs in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    per = len(case_overrides) * len(batches)
    rows = []
    for n, (label, _) in enumerate(runs):
        block = speedups[n * per : (n + 1) * per]
        s = [block[i * len(batches) : (i + 1) * len(batches)] for i in range(len(cases))]
        s1 = [x[0] for x in s]
        s2 = [x[1] if len(x) > 1 else x[0] for x in s]
        rows.append((label, s, conclusions(labels, experts, s1, s2)))
    ref = rows[0][2]
    lines = [
        "# Sensitivity of paper B's conclusions",
        "",
        f"Written by `python -m studies.sensitivity` ({len(tasks)} runs); do not edit by hand. "
        "Conclusions (C1-C4) are defined in the script's docstring; **bold** marks a "
        "conclusion that differs from the first row's.",
        "",
        "## Conclusions per variant",
        "",
        "| variant | C1 fine > coarse at B=1 | C2 fine non-concave | C3 all > 1 at B=1 | "
        "C4 largest B=1 speedup |",
        "|---|---|---|---|---|",
    ]
    for label, _, c in rows:
        cells = []
        for key in ("C1", "C2", "C3", "C4"):
            text = "yes" if c[key] is True else "no" if c[key] is False else str(c[key])
            cells.append(f"**{text}**" if c[key] != ref[key] else text)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"## Speedups at batch {', '.join(map(str, batches))} per preset",
        "",
        "| model (experts) | " + " | ".join(f"preset {p}" for p in presets) + " |",
        "|---|" + "---|" * len(presets),
    ]
    for i, label in enumerate(labels):
        cells = [" / ".join(f"{x:.2f}" for x in rows[j][1][i]) for j in range(len(presets))]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    flips = [label for label, _, c in rows[len(presets) :] if c != ref]
    lines += [
        "",
        f"Constants whose ±50 % move flips at least one conclusion: "
        f"{', '.join(flips) if flips else 'none'}.",
        "",
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
