"""How much each row's error depends on the protocol it assumes: validation/SENSITIVITY.md.

    python bench/sensitivity.py [--workers N] [--out validation/SENSITIVITY.md]

Every decode and speculative row of ``validation/cases.toml`` lists the keys whose values are
assumptions (``assumed_keys``). For each protocol key among them this script moves the value
over a stated plausible range (:data:`RANGES`), one key at a time, predicts the row with the
shipped engine presets at each value (:func:`simspec.validation.predictions.predict_run`) and
reports the relative error at the row's value and at each end of the range: which rows'
errors depend on which assumption, and by how much. An assumed tensor-parallel degree is moved
to half and twice its value within one 8-GPU node, the GPU count with it (rows without
expert parallelism). Keys that are neither (``quantity``, ``gpu``, ``model``, ``precision``,
``ep``, ``batch``) are listed, not varied. Nothing here is fitted or chosen: the rows keep
the values ``cases.toml`` states, and the report says how far the errors would move if those
values were wrong.

Beside the protocol, every speculative row shares one model assumption: the routing's lag-1
overlap (``[routing] overlap`` of the default scenario, the published adjacent-token overlap
stood in for every model), which sets how many experts a verify pass's tokens add. It is
moved over the range published routers span (:data:`MODEL_RANGES`) for every speculative and
overlap row, and the report gives each reporter's median predicted / measured ratio at both
ends and at the shipped value.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's simspec, whichever one is installed

from simspec.config.load import read_scenario_data  # noqa: E402
from simspec.errors import InputError  # noqa: E402
from simspec.validation.cases import RATIO_CATEGORIES, Case, load_cases  # noqa: E402
from simspec.validation.predictions import predict_run  # noqa: E402

#: The most GPUs an assumed tensor-parallel degree is moved up to: one NVLink node.
NODE_GPUS = 8
#: The plausible range of each varied protocol key: (what the range is, low and high value
#: from the row's value). Lengths: from half to twice a stated prompt (few-shot and chat
#: prompts differ by that much), from half to 1.5 times an output (a benchmark's capped
#: outputs end early or run to the cap); output spread: none to the widest the nested
#: validation chooses from (0, 0.4, 0.8); requests: half to twice the count; tensor parallelism:
#: half to twice the degree within one node, the GPU count moving with it.
RANGES: dict[str, tuple[str, Callable[[Case], tuple[float, float]]]] = {
    "prompt_tokens": ("x0.5 .. x2", lambda c: (max(c.prompt_tokens // 2, 1), c.prompt_tokens * 2)),
    "output_tokens": (
        "x0.5 .. x1.5",
        lambda c: (max(c.output_tokens // 2, 2), c.output_tokens * 3 // 2),
    ),
    "length_jitter": ("0 .. 0.8", lambda c: (0.0, 0.8)),
    "num_requests": (
        "x0.5 .. x2",
        lambda c: (max(c.num_requests // 2, 1), c.num_requests * 2),
    ),
    "tp": (
        "x0.5 .. x2, at most 8",
        lambda c: (max(c.tp // 2, 1), c.tp * 2 if c.tp * 2 <= NODE_GPUS else c.tp),
    ),
}


#: The model assumptions varied on every speculative and overlap row: ``[routing]`` key -> (the
#: range, its low and high value; None removes the key). The lag-1 overlap rho_1 from chance
#: (independent routing: GLM-5.2's reporter finds adjacent tokens share almost no experts,
#: jundot/omlx#2077) to 0.6 (gpt-oss-20b: ~13 distinct experts for 8 tokens against 21 when
#: independent, nkipy, which the lag-1 max-entropy law meets at rho_1 = 0.62); between them
#: Cohere's 0.38 (the shipped value) and Qwen3-30B-A3B's 0.45 (kekzl/imp PR #1359).
MODEL_RANGES: dict[str, tuple[str, tuple[float | None, float | None]]] = {
    "overlap": ("chance .. 0.6", (None, 0.6)),
}


@functools.cache
def shipped_routing() -> dict[str, object]:
    """The ``[routing]`` table every prediction runs (the default scenario's; read once)."""
    data, _ = read_scenario_data(None)
    return dict(data.get("routing", {}))


def _error(case: Case, routing: dict[str, float | None] | None = None) -> float | None:
    """Relative error of the row's prediction with its shipped preset (None: no prediction);
    ``routing``: ``[routing]`` keys moved (:data:`MODEL_RANGES`)."""
    try:
        predicted = predict_run(case, routing=routing)
    except InputError:  # a variant the scenario cannot express: reported as missing
        return None
    return (predicted - case.measured) / case.measured


def model_variants(case: Case) -> list[tuple[str, str, dict[str, float | None]]]:
    """(``routing.<key>``, "low"/"high", the ``[routing]`` keys moved) of a speculative or
    overlap row (none for other rows: a decode pass holds one token per request, whose
    routing is independent of the others' whatever the overlap)."""
    if case.category not in RATIO_CATEGORIES:
        return []
    shipped = shipped_routing()
    out = []
    for key, (_, ends) in MODEL_RANGES.items():
        for end, value in zip(("low", "high"), ends, strict=True):
            if value != shipped.get(key):
                out.append((f"routing.{key}", end, {key: value}))
    return out


def variants(case: Case) -> list[tuple[str, str, Case]]:
    """(key, "low"/"high", the row with that key moved) for every varied assumed key; a key
    whose value a row does not use (num_requests of a steady loop, length_jitter at batch 1,
    where predictions run one request at a time) is skipped."""
    out = []
    for key in case.assumed_keys:
        if key not in RANGES:
            continue
        if key == "num_requests" and not case.num_requests:
            continue
        if key == "length_jitter" and case.batch == 1:
            continue
        if key == "tp" and (case.ep > 1 or case.num_gpus != case.tp):
            continue  # expert or data parallelism: the layout is not one knob
        low, high = RANGES[key][1](case)
        for end, value in (("low", low), ("high", high)):
            if value != getattr(case, key):
                moved = {key: value} | ({"num_gpus": value} if key == "tp" else {})
                out.append((key, end, dataclasses.replace(case, **moved)))
    return out


def _row_task(case: Case) -> tuple[str, float | None, list[tuple[str, str, float | None]]]:
    moved = [(key, end, _error(variant)) for key, end, variant in variants(case)]
    moved += [(key, end, _error(case, routing)) for key, end, routing in model_variants(case)]
    return case.id, _error(case), moved


#: A key's sign flips are named up to this many rows, counted beyond.
MAX_LISTED_FLIPS = 8


def _flipped(case_ids: list[str], by_id: dict[str, Case]) -> str:
    """The rows whose sign flips: named up to :data:`MAX_LISTED_FLIPS`, else counted per
    reporter (most first)."""
    if len(case_ids) <= MAX_LISTED_FLIPS:
        return ", ".join(case_ids)
    counts: dict[str, int] = {}
    for case_id in case_ids:
        reporter = by_id[case_id].reporter
        counts[reporter] = counts.get(reporter, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"{len(case_ids)} rows: " + ", ".join(f"{who} {n}" for who, n in ranked)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def _keys() -> list[tuple[str, str]]:
    """(key, range text) of every varied key: the protocol's, then the model's."""
    return [(key, text) for key, (text, _) in RANGES.items()] + [
        (f"routing.{key}", text) for key, (text, _) in MODEL_RANGES.items()
    ]


def _ratio_median(values: list[float | None]) -> str:
    """Median predicted / measured of relative errors (— without any)."""
    ratios = [1 + e for e in values if e is not None]
    return f"{statistics.median(ratios):.3f}" if ratios else "—"


def reporter_table(cases: list[Case], results: dict) -> list[str]:
    """Per reporter of speculative rows: the median predicted / measured ratio with the
    routing overlap at the low end, the shipped value and the high end of its range."""
    by_id = {c.id: c for c in cases}
    per: dict[str, dict[str, list[float | None]]] = {}
    for case_id, (base, moved) in results.items():
        case = by_id[case_id]
        if case.category != "speculative":
            continue
        ends = {end: err for key, end, err in moved if key == "routing.overlap"}
        cells = per.setdefault(case.reporter, {"low": [], "shipped": [], "high": []})
        cells["low"].append(ends.get("low"))
        cells["shipped"].append(base)
        cells["high"].append(ends.get("high"))
    low, high = MODEL_RANGES["overlap"][1]
    shipped = shipped_routing().get("overlap")
    head = (
        f"| reporter | rows | overlap {'chance' if low is None else low} | "
        f"{'chance' if shipped is None else shipped} (shipped) | "
        f"{'chance' if high is None else high} |"
    )
    lines = [head, "|---|---|---|---|---|"]
    for reporter, cells in sorted(
        per.items(), key=lambda item: (-len(item[1]["shipped"]), item[0])
    ):
        lines.append(
            f"| {reporter} | {len(cells['shipped'])} | {_ratio_median(cells['low'])} | "
            f"{_ratio_median(cells['shipped'])} | {_ratio_median(cells['high'])} |"
        )
    return lines


def report(cases: list[Case], results: dict, seconds: float) -> str:
    """The Markdown report: per key, per reporter (the routing overlap), then per row."""
    by_id = {c.id: c for c in cases}
    lines = [
        "# Sensitivity of the fidelity rows to their assumed protocol",
        "",
        "Written by `python bench/sensitivity.py` from `validation/cases.toml`; do not edit by",
        "hand. Each decode or speculative row lists the keys whose values are assumptions",
        "(`assumed_keys`; `assumed` says what stands in and why). Each length or count among them,",
        "and an assumed tensor-parallel degree (with the GPU count, rows without expert",
        "parallelism), is moved over the range below, one key at a time, and the row is predicted",
        "with the shipped engine presets (in sample: the presets are not refitted per variant).",
        "Every speculative and overlap row also shares one model assumption, moved the same way:",
        "the routing's lag-1 overlap `routing.overlap` (the default scenario's, the published",
        "adjacent-token overlap standing in for every model), from chance (independent routing)",
        "to 0.6, the range published routers span (`bench/sensitivity.py`, `MODEL_RANGES`).",
        "*Swing* is the largest change of |relative error| over the range, in percentage points.",
        "Other assumed keys are listed per row, not varied. The rows keep the values",
        "`cases.toml` states: nothing is tuned to the errors.",
        "",
        "| key | range | rows varied | median swing | max swing | sign of speedup − 1 flips |",
        "|---|---|---|---|---|---|",
    ]
    keys = _keys()
    swings: dict[str, list[float]] = {key: [] for key, _ in keys}
    flips: dict[str, list[str]] = {key: [] for key, _ in keys}
    row_lines = []
    for case_id, (base, moved) in results.items():
        case = by_id[case_id]
        per_key: dict[str, dict[str, float | None]] = {}
        for key, end, err in moved:
            per_key.setdefault(key, {})[end] = err
        cells = []
        for key, ends in per_key.items():
            values = [e for e in (base, *ends.values()) if e is not None]
            if base is not None and len(values) > 1:
                swing = max(abs(abs(e) - abs(base)) for e in values)
                swings[key].append(swing)
                if case.category == "speculative":
                    measured = case.measured
                    signs = {(1 + e) * measured > 1 for e in values}
                    if len(signs) > 1 and abs(measured - 1) > 0.02:
                        flips[key].append(case_id)
            cells.append(f"{key} {_pct(ends.get('low'))} / {_pct(ends.get('high'))}")
        fixed = [k for k in case.assumed_keys if k not in per_key]
        row_lines.append(
            f"| {case_id} | {case.category} | {case.reporter} | {_pct(base)} | "
            f"{'; '.join(cells) or '—'} | {', '.join(fixed) or '—'} |"
        )
    for key, text in keys:
        s = swings[key]
        med = f"{statistics.median(s) * 100:.1f}" if s else "—"
        mx = f"{max(s) * 100:.1f}" if s else "—"
        listed = _flipped(flips[key], by_id)
        lines.append(f"| {key} | {text} | {len(s)} | {med} | {mx} | {listed or 'none'} |")
    lines += [
        "",
        "The routing overlap per reporter: the median predicted / measured speedup of each",
        "reporter's speculative rows (1 = right on average; above 1: predicted too fast) with",
        "the overlap at each end of its range and at the shipped value. More overlap means fewer",
        "experts added per verify token, a cheaper verify pass and a higher predicted speedup.",
        "",
        *reporter_table(cases, results),
        "",
        "Per row: the relative error at the row's values, then for each varied key the error at",
        "the low / high end of its range; *listed, not varied*: the other assumed keys.",
        "",
        "| row | category | reporter | error | varied: low / high | listed, not varied |",
        "|---|---|---|---|---|---|",
        *row_lines,
        "",
        f"{len(results)} rows, {seconds:.0f} s.",
        "",
    ]
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "validation" / "SENSITIVITY.md")
    parser.add_argument("--cases", type=Path, default=ROOT / "validation" / "cases.toml")
    args = parser.parse_args(argv)
    cases = [
        c
        for c in load_cases(args.cases).cases
        if c.category != "kernel" and (c.assumed_keys or c.category in RATIO_CATEGORIES)
    ]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done = list(pool.map(_row_task, cases))
    results = {case_id: (base, moved) for case_id, base, moved in done}
    text = report(cases, results, time.perf_counter() - start)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(run())
