"""Kernel floors per GPU from measured profiles: what one small kernel of a decode layer costs.

``simspec calibrate`` times the small per-layer operations of a decode pass (residual add,
RMSNorm, rotary embedding, router softmax + top-k, SwiGLU activation, row gather) at one token,
as a CUDA-graph replay and eagerly, with the number of kernels each call launches
(``tables.floors.ops`` of a profile, :mod:`simspec.calibrate.floors`). One such kernel moves a
few kilobytes, so its time is a floor: the GPU's per-kernel cost in a graph, the host's launch
path eagerly. The floor of a GPU is the median over operations and over the measured profiles
of that GPU of (time per call / kernels per call), at the smallest token count; the catalog's
``kernel_floor_graph_s`` and ``kernel_floor_eager_s`` of a measured GPU are these values
(tests check that they stay equal).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any


@dataclass(frozen=True, slots=True)
class KernelFloors:
    """Median per-kernel time of small decode kernels, graph and eager, and what it rests on."""

    graph_s: float
    eager_s: float
    samples: int  # (profile, operation) pairs
    profiles: tuple[str, ...]


def per_kernel_times(floors: Mapping[str, Any], mode: str) -> list[float]:
    """Time per kernel of each operation at the smallest token count, in ``mode``.

    >>> table = {"ops": [
    ...     {"op": "rms_norm", "tokens": 1, "graph": 3e-6, "kernels_per_call": 1.0},
    ...     {"op": "rope", "tokens": 1, "graph": 2e-5, "kernels_per_call": 10.0},
    ...     {"op": "rope", "tokens": 8, "graph": 4e-5, "kernels_per_call": 10.0}]}
    >>> [round(t * 1e6, 3) for t in per_kernel_times(table, "graph")]  # microseconds
    [3.0, 2.0]
    """
    rows = [r for r in floors.get("ops", []) if r.get(mode) and r.get("kernels_per_call")]
    if not rows:
        return []
    smallest = min(r["tokens"] for r in rows)
    return [r[mode] / r["kernels_per_call"] for r in rows if r["tokens"] == smallest]


def kernel_floors(profiles: Iterable[str | Path], gpu: str) -> KernelFloors | None:
    """The kernel floors of ``gpu`` from the measured profiles among ``profiles`` (None: none)."""
    graph: list[float] = []
    eager: list[float] = []
    used: list[str] = []
    for path in profiles:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        meta = data.get("metadata", {})
        floors = data.get("tables", {}).get("floors")
        if meta.get("kind") != "measured" or meta.get("gpu") != gpu or not floors:
            continue
        g, e = per_kernel_times(floors, "graph"), per_kernel_times(floors, "eager")
        if g and e:
            graph += g
            eager += e
            used.append(Path(path).name)
    if not used:
        return None
    return KernelFloors(median(graph), median(eager), len(graph), tuple(sorted(used)))
