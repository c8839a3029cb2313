"""Benchmark: wall time of the two paper studies' sweeps, run as their READMEs say.

    python bench/bench_studies.py [--workers 2]
    python bench/bench_studies.py --speedup 5 [--study STUDY.toml]

Target (issue): each study's sweep finishes in under 10 minutes on a 2-core machine.

``--speedup N`` (issue 12 target: 2 workers >= 1.8x one worker on the paper-B prior study) runs
the study's sweep N times with 1 worker and N times with 2, interleaved, each in a fresh process
that imports simspec, loads the sweep and calls ``run_sweep`` (what ``simspec sweep`` does,
without the progress line). It reports medians of the wall time and of the CPU seconds: the
parent's imports, its share of ``load_sweep`` and of ``run_sweep``, and the workers' share of
each (``RUSAGE_CHILDREN``). On a shared machine the wall ratio says little, so it also reports
the wall time that two free cores would give, the parent's CPU + the workers' CPU / workers (a
lower bound: it assumes perfectly balanced workers), and checks that every run wrote the same
files. Run it with
``PYTHONPATH=<other tree>`` to time another copy of simspec.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = (
    "scenarios/papers/why-sd-works-better/prior.toml",
    "scenarios/papers/why-sd-works-better/full.toml",
    "scenarios/papers/limits-of-speculation/study.toml",
)


# One sweep in a fresh process: CPU seconds of each stage, as JSON on stderr.
_CHILD = """
import inspect, json, resource, sys, time
def children():
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime
wall, start = time.perf_counter(), time.process_time()
from simspec.sweep.run import run_sweep
from simspec.sweep.spec import load_sweep
imported = time.process_time()
workers = int(sys.argv[2])
parallel = "workers" in inspect.signature(load_sweep).parameters  # validation in workers
spec, points = load_sweep(sys.argv[1], **({"workers": workers} if parallel else {}))
loaded, loaded_children = time.process_time(), children()
run_sweep(points, sys.argv[3], oracle=spec.oracle, workers=workers)
stages = {"imports": imported - start, "load": loaded - imported,
          "load workers": loaded_children, "parent": time.process_time() - loaded,
          "workers": children() - loaded_children, "wall": time.perf_counter() - wall}
print(json.dumps(stages), file=sys.stderr)
"""


def folder_digest(folder: Path) -> str:
    """SHA-256 over every file of a sweep folder (names and bytes)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def sweep_once(study: str, workers: int, out: Path) -> dict[str, float]:
    """One fresh-process sweep of ``study``: its stages' CPU seconds and wall time."""
    import simspec

    root = os.path.dirname(os.path.dirname(simspec.__file__))  # the simspec this process uses
    proc = subprocess.run(
        [sys.executable, "-P", "-c", _CHILD, str(ROOT / study), str(workers), str(out)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


def speedup(study: str, repeats: int) -> None:
    """Median stages of 1- and 2-worker sweeps of ``study``, interleaved (module docstring)."""
    import simspec

    runs: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    digests = set()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for workers in (1, 2):
                out = Path(tmp) / f"w{workers}-{r}"
                runs[workers].append(sweep_once(study, workers, out))
                digests.add(folder_digest(out))
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; simspec from {os.path.dirname(simspec.__file__)}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"{study}: every run wrote the same files: {len(digests) == 1}")
    keys = ("imports", "load", "load workers", "parent", "workers", "wall", "two cores")
    med = {}
    for workers, results in runs.items():
        for r in results:
            serial = r["imports"] + r["load"] + r["parent"]
            r["two cores"] = serial + (r["load workers"] + r["workers"]) / workers
        med[workers] = {k: statistics.median(r[k] for r in results) for k in keys}
        print(f"{workers} worker(s), wall s: " + " ".join(f"{r['wall']:.2f}" for r in results))
    ratios = [a["wall"] / b["wall"] for a, b in zip(runs[1], runs[2], strict=True)]
    print()
    print("medians, s    " + "  ".join(f"{k:>12}" for k in keys))
    for workers in (1, 2):
        print(f"{workers} worker(s)   " + "  ".join(f"{med[workers][k]:12.2f}" for k in keys))
    print(
        "wall ratio 1/2 workers per pair: "
        + " ".join(f"{x:.2f}" for x in ratios)
        + f" (median {statistics.median(ratios):.2f}); two-core estimate ratio "
        f"{med[1]['two cores'] / med[2]['two cores']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--speedup", type=int, default=0, metavar="N")
    parser.add_argument("--study", default=STUDIES[0])
    args = parser.parse_args()
    if args.speedup:
        speedup(args.study, args.speedup)
        return
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for study in STUDIES:
            out = Path(tmp) / Path(study).parent.name / Path(study).stem
            cmd = [
                sys.executable,
                "-m",
                "simspec",
                "sweep",
                study,
                "--out",
                str(out),
                "--workers",
                str(args.workers),
            ]
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
            wall = time.perf_counter() - start
            points = len(list((out / "points").glob("*.json")))
            print(f"{study}: {points} points in {wall:.1f} s ({args.workers} workers)")


if __name__ == "__main__":
    main()
