"""Expert offloading on one GPU: the five findings of offload.md, measured with simspec.

    python -m studies.offloading [--workers 2] [--figure scenarios/studies/offloading/figures]
                                 [--framework hf-eager]

Runs the scenarios of ``scenarios/studies/offloading/`` (Mixtral-8x7B with HQQ 4-bit experts,
Qwen3-30B-A3B in bf16, gpt-oss-120b with MXFP4 experts; experts in pinned host memory behind a
per-layer LRU cache; EAGLE-3 drafting at batch 1) with one key changed at a time and prints one
Markdown table per finding (the README quotes them):

1. transfer-bound: the link's busy fraction of the run and the cache's hit rate at k = 0, cache
   as in the scenario and a small one;
2. prefetch: tokens/s with the next layer's gate applied early (accuracy 0.9) over none;
3. speculation under offloading vs all weights resident: the best fixed k's speedup on the
   RTX 4090 / RTX A6000 / A100-40GB with offloading and on an H100 SXM holding every expert;
4. the best draft length against the link bandwidth (4-50 GB/s; the figure "speedup vs draft
   length, one curve per link bandwidth", :mod:`simspec.plots.offload`, is drawn per model when
   ``--figure`` names a folder);
5. hit rates of LRU and static (most popular) caches against the cache size.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import simspec

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "scenarios" / "studies" / "offloading"
MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b")
GPUS = ("rtx-4090", "rtx-a6000", "a100-pcie-40gb")
LINKS = (4.0, 8.0, 16.0, 25.0, 50.0)  # GB/s: pageable PCIe 4 .. pinned PCIe 5
#: Cache sizes per layer for finding 5 (Mixtral has 8 experts per layer, the others 128).
CACHES = {
    "mixtral-8x7b": (1, 2, 4, 6),
    "qwen3-30b-a3b": (8, 16, 32, 64),
    "gpt-oss-120b": (8, 16, 32, 64),
}
#: What finding 3 needs on Mixtral-8x7B (RTX 4090): more routing overlap between consecutive
#: tokens (the drafts share experts), and copies started while drafting.
SENSITIVITY: dict[str, dict[str, Any]] = {
    "routing overlap 0.38 (default)": {},
    "routing overlap 0.6": {"routing.overlap": 0.6},
    "routing overlap 0.8": {"routing.overlap": 0.8},
    "draft-guided prefetch (accuracy 0.9)": {"offload.prefetch": "draft_guided"},
    "overlap 0.8 + draft-guided prefetch": {
        "routing.overlap": 0.8,
        "offload.prefetch": "draft_guided",
    },
}
#: Routing with reuse for finding 5: Qwen3-30B-A3B's working sets (validation/offload.toml,
#: imp PR #1359's reuse statistics) and the default scenario's lag-1 overlap.
REUSE = {"routing.working_set": 0.2, "routing.overlap": 0.38}
#: A small cache for finding 1 (few experts cached).
SMALL = {"mixtral-8x7b": 1, "qwen3-30b-a3b": 8, "gpt-oss-120b": 8}


def run(model: str, overrides: dict[str, Any], k0_only: bool = False) -> dict[str, Any]:
    """One run of the model's study scenario with ``overrides``: per policy label, tokens/s,
    speedup, hit rate and link busy fraction."""
    scenario = simspec.load_scenario(FOLDER / f"{model}.toml", overrides)
    if k0_only:
        scenario = simspec.with_overrides(
            scenario, {"policies": [{"name": "fixed", "draft_tokens": 0}]}
        )
    rows = {}
    for r in simspec.run(scenario).records():
        rows[r["policy"]] = {
            "tokens_per_s": r["tokens_per_s"],
            "speedup": r["speedup_vs_no_spec"],
            "hit_rate": r.get("expert_hit_rate"),
            "link_busy": r.get("link_busy_fraction"),
        }
    return rows


def _task(args: tuple[str, dict[str, Any], bool]) -> dict[str, Any]:
    """:func:`run`, or ``{"error": message}`` for a configuration the scenario checks reject
    (e.g. a cache that does not fit the GPU)."""
    try:
        return run(*args)
    except simspec.InputError as exc:
        return {"error": str(exc)}


def best(rows: dict[str, Any]) -> tuple[str, float]:
    """The policy with the highest speedup (no-spec = 1.0)."""
    label = max(rows, key=lambda p: rows[p]["speedup"])
    return label, rows[label]["speedup"]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--figure", type=Path, default=None, help="folder for the figure")
    parser.add_argument(
        "--finding", type=int, action="append", choices=range(1, 6), help="only these (1-5)"
    )
    parser.add_argument(
        "--framework",
        default="none",
        help="offload framework of every run (default none: physics only; hf-eager: an eager "
        "transformers runtime's host time per layer, simspec/catalog/offload_frameworks)",
    )
    args = parser.parse_args(argv)
    wanted = set(args.finding or range(1, 6))
    jobs: dict[str, tuple[str, dict[str, Any], bool]] = {}
    for m in MODELS:
        jobs[f"f1/{m}/scenario"] = (m, {}, True)
        jobs[f"f1/{m}/small"] = (m, {"offload.cache_experts_per_layer": SMALL[m]}, True)
        jobs[f"f2/{m}"] = (m, {"offload.prefetch": "next_layer"}, True)
        for gpu in GPUS:
            jobs[f"f3/{m}/{gpu}"] = (m, {"hardware.gpu": gpu}, False)
        jobs[f"f3/{m}/resident"] = (
            m,
            {"hardware.gpu": "h100-sxm", "offload.experts": "gpu"},
            False,
        )
        for c in CACHES[m]:
            for policy in ("lru", "static"):
                over = {"offload.cache_experts_per_layer": c, "offload.cache_policy": policy}
                jobs[f"f5/{m}/{c}/{policy}"] = (m, over, True)
            jobs[f"f5/{m}/{c}/lru-reuse"] = (
                m,
                {"offload.cache_experts_per_layer": c, "offload.cache_policy": "lru", **REUSE},
                True,
            )
    for label, over in SENSITIVITY.items():
        jobs[f"f3x/{label}"] = ("mixtral-8x7b", over, False)
    for link in LINKS:
        for m in ("mixtral-8x7b", "gpt-oss-120b"):
            jobs[f"f4/{m}/{link}"] = (m, {"offload.link_gb_per_s": link}, False)
    needs = {1: ("f1/",), 2: ("f1/", "f2/"), 3: ("f3/", "f3x/"), 4: ("f4/",), 5: ("f5/",)}
    prefixes = tuple(p for n in wanted for p in needs[n])
    jobs = {key: job for key, job in jobs.items() if key.startswith(prefixes)}
    if args.framework != "none":
        jobs = {
            k: (m, {**over, "offload.framework": args.framework}, k0)
            for k, (m, over, k0) in jobs.items()
        }
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = dict(zip(jobs, pool.map(_task, jobs.values()), strict=True))

    findings = (_finding1, _finding2, _finding3, _finding4, _finding5)
    for n in sorted(wanted):
        if n != min(wanted):
            print()
        findings[n - 1](results, len(wanted) > 1)
    if args.figure is not None and 4 in wanted:
        figure(
            results,
            [p for p in results[f"f4/mixtral-8x7b/{LINKS[0]}"] if p != "no-spec"],
            args.figure,
            args.framework,
        )
    return 0


def _heading(show: bool, text: str) -> None:
    """A finding's heading (with several findings; one finding prints its tables only)."""
    if show:
        print(text)


def _k0(results: dict[str, Any], key: str) -> dict[str, Any]:
    return results[key]["fixed-0"]


def _finding1(results: dict[str, Any], heading: bool) -> None:
    _heading(
        heading,
        "### 1. Transfer-bound: link busy fraction and hit rate at k = 0 (RTX 4090, 25.2 GB/s)\n",
    )
    print("| model | cache per layer | hit rate | link busy | tokens/s |")
    print("|---|---|---|---|---|")
    for m in MODELS:
        for key, label in ((f"f1/{m}/small", SMALL[m]), (f"f1/{m}/scenario", "scenario's")):
            r = _k0(results, key)
            print(f"| {m} | {label} | {_pct(r['hit_rate'])} | {_pct(r['link_busy'])} | "
                  f"{r['tokens_per_s']:.2f} |")  # fmt: skip


def _finding2(results: dict[str, Any], heading: bool) -> None:
    _heading(
        heading, "### 2. Prefetch: the next layer's gate applied early (accuracy 0.9), k = 0\n"
    )
    print("| model | tokens/s, none | next_layer | gain |")
    print("|---|---|---|---|")
    for m in MODELS:
        a, b = (
            _k0(results, f"f1/{m}/scenario")["tokens_per_s"],
            _k0(results, f"f2/{m}")["tokens_per_s"],
        )
        print(f"| {m} | {a:.2f} | {b:.2f} | {b / a - 1:+.1%} |")


def _finding3(results: dict[str, Any], heading: bool) -> None:
    _heading(
        heading,
        "### 3. Best fixed k: offloaded (pinned, LRU) vs every expert resident on an H100\n",
    )
    print("| model | " + " | ".join(GPUS) + " | H100 SXM, resident |")
    print("|---|" + "---|" * (len(GPUS) + 1))
    for m in MODELS:
        cells = []
        for gpu in (*GPUS, "resident"):
            label, speedup = best(results[f"f3/{m}/{gpu}"])
            cells.append(f"{speedup:.2f}x ({label})")
        print(f"| {m} | " + " | ".join(cells) + " |")
    print()
    _heading(heading, "Mixtral-8x7B on the RTX 4090, what speculation needs to pay:\n")
    print("| variant | best fixed k | speedup |")
    print("|---|---|---|")
    for label in SENSITIVITY:
        policy, speedup = best(results[f"f3x/{label}"])
        print(f"| {label} | {policy} | {speedup:.2f}x |")


def _finding4(results: dict[str, Any], heading: bool) -> None:
    _heading(heading, "### 4. Speedup vs draft length per link bandwidth (RTX 4090)\n")
    ks = [p for p in results[f"f4/mixtral-8x7b/{LINKS[0]}"] if p != "no-spec"]
    print("| model | link GB/s | " + " | ".join(ks) + " | best |")
    print("|---|---|" + "---|" * (len(ks) + 1))
    for m in ("mixtral-8x7b", "gpt-oss-120b"):
        for link in LINKS:
            rows = results[f"f4/{m}/{link}"]
            label, _ = best(rows)
            cells = " | ".join(f"{rows[p]['speedup']:.2f}" for p in ks)
            print(f"| {m} | {link:g} | {cells} | {label} |")


def _finding5(results: dict[str, Any], heading: bool) -> None:
    _heading(heading, "### 5. Hit rate against cache size, LRU and static (most popular), k = 0\n")
    print("| model | experts per layer cached | LRU | static | LRU, routing with reuse |")
    print("|---|---|---|---|---|")
    for m in MODELS:
        for c in CACHES[m]:
            if "error" in results[f"f5/{m}/{c}/lru"]:
                print(f"| {m} | {c} | does not fit the GPU | | |")
                continue
            lru, static = _k0(results, f"f5/{m}/{c}/lru"), _k0(results, f"f5/{m}/{c}/static")
            reuse = _k0(results, f"f5/{m}/{c}/lru-reuse")
            cells = (lru["hit_rate"], static["hit_rate"], reuse["hit_rate"])
            print(f"| {m} | {c} | " + " | ".join(_pct(x) for x in cells) + " |")


def figure(results: dict[str, Any], ks: list[str], folder: Path, framework: str = "none") -> None:
    """Speedup vs draft length, one curve per link bandwidth, one figure per model
    (:func:`simspec.plots.offload.offload_figure`, from the finding's runs; a framework other
    than none suffixes the file names)."""
    from simspec.plots.offload import OffloadCurves, draw_offload_figure

    draft = (0, *(int(p.split("-")[1]) for p in ks))
    for m in ("mixtral-8x7b", "gpt-oss-120b"):
        rows = tuple(
            (1.0, *(results[f"f4/{m}/{link}"][p]["speedup"] for p in ks)) for link in LINKS
        )
        runtime = "" if framework == "none" else f", {framework} runtime"
        curves = OffloadCurves(
            f"{m} on rtx-4090, experts in host_pinned, lru{runtime} (offloading study)",
            "offload.link_gb_per_s",
            LINKS,
            draft,
            rows,
        )
        suffix = "" if framework == "none" else f"-{framework}"
        name = f"speedup_vs_k_per_link-{m}{suffix}.png"
        for path in draw_offload_figure(curves, folder / name, svg=False):
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    raise SystemExit(main())
