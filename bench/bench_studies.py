"""Benchmark: wall time of the two paper studies' sweeps, run as their READMEs say.

    python bench/bench_studies.py [--workers 2]

Target (issue): each study's sweep finishes in under 10 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import platform
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
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
