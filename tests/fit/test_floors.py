"""Kernel floors derived from the measured profiles."""

from __future__ import annotations

from pathlib import Path

import pytest

from simspec.fit.floors import kernel_floors

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "calibration").glob("*.json"))


def test_h200_floors_come_from_both_measured_profiles_and_are_physical():
    floors = kernel_floors(PROFILES, "h200")
    assert floors is not None
    assert floors.profiles == ("h200-gpt-oss-120b.json", "h200-qwen3-30b-a3b.json")
    assert floors.samples == 12  # six operations in each of two profiles
    # A graph node cannot beat the GPU's back-to-back minimum (about 1 us on Hopper) and an
    # eager launch costs several microseconds of host work on top of it.
    assert 0.5e-6 < floors.graph_s < 5e-6
    assert 3 * floors.graph_s < floors.eager_s < 50e-6


def test_no_measured_profile_of_a_gpu_gives_none():
    assert kernel_floors(PROFILES, "a100-sxm-80gb") is None
    assert kernel_floors([ROOT / "calibration" / "h200-analytic.json"], "h200") is None


def test_the_floor_is_the_median_per_kernel_time(tmp_path):
    import json

    ops = [
        {"op": "a", "tokens": 1, "graph": 2e-6, "eager": 10e-6, "kernels_per_call": 1.0},
        {"op": "b", "tokens": 1, "graph": 12e-6, "eager": 60e-6, "kernels_per_call": 3.0},
        {"op": "c", "tokens": 1, "graph": 9e-6, "eager": 90e-6, "kernels_per_call": 10.0},
        {"op": "a", "tokens": 8, "graph": 1.0, "eager": 1.0, "kernels_per_call": 1.0},
    ]
    path = tmp_path / "p.json"
    data = {"metadata": {"kind": "measured", "gpu": "x"}, "tables": {"floors": {"ops": ops}}}
    path.write_text(json.dumps(data))
    floors = kernel_floors([path], "x")
    assert floors is not None
    assert floors.graph_s == pytest.approx(2e-6)  # median of 2, 4, 0.9 us
    assert floors.eager_s == pytest.approx(10e-6)  # median of 10, 20, 9 us


@pytest.mark.parametrize("gpu", ["h200", "h100-sxm"])
def test_catalog_floors_of_hopper_are_the_measured_ones(gpu):
    """The H200 was measured; the H100 SXM is the same die with the same launch path."""
    from simspec import catalog

    floors = kernel_floors(PROFILES, "h200")
    spec = catalog.get_gpu(gpu)
    assert floors is not None
    assert spec.kernel_floor_graph_s == pytest.approx(floors.graph_s, rel=5e-3)
    assert spec.kernel_floor_eager_s == pytest.approx(floors.eager_s, rel=5e-3)
