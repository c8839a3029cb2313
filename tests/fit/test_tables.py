"""Fitting the roofline to measured tables: synthetic tables of known parameters are fitted back
to them, in each MoE kernel form, with and without noise."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate.analytic import synthetic_tables
from simspec.calibrate.plan import bench_model, make_plan
from simspec.costs.kernels import routed_experts_s, weights_s
from simspec.fit import assemble_profile
from simspec.fit import moe as fit_moe
from simspec.fit._search import grid_then_bounded
from simspec.fit.moe import FORM_KEYS, per_expert_s
from simspec.params import RooflineParams

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
#: Known parameters per MoE kernel form, each away from the defaults the fit starts from.
TRUTHS = {
    "launch": RooflineParams(
        pass_overhead_s=5e-4,
        moe_launch_s=2e-5,
        moe_bandwidth_efficiency=0.8,
        weight_efficiency=0.65,
        kv_efficiency=0.45,
        compute_efficiency=0.55,
    ),
    "saturation": RooflineParams(
        moe_kernel="saturation",
        pass_overhead_s=5e-4,
        moe_efficiency_max=0.72,
        moe_saturation_bytes=60e6,
        weight_efficiency=0.65,
        kv_efficiency=0.45,
        compute_efficiency=0.55,
    ),
}
COMMON = ("pass_overhead_s", "weight_efficiency", "kv_efficiency", "compute_efficiency")
PEAK = {"hbm_bytes_per_s": H100.hbm_bytes_per_s, "bf16_flops_per_s": H100.bf16_flops_per_s}
META = {
    "kind": "measured",
    "device": "synthetic",
    "gpu": "h100-sxm",
    "model": "qwen3-30b-a3b",
    "shapes": "full",
    "date": "",
    "command": "",
}


def _fitted_names(form):
    return COMMON + FORM_KEYS[form]


def _fit(tables, form="launch", spec=QWEN):
    assumed = RooflineParams(moe_kernel=form)
    return assemble_profile(
        bench_model(spec, "full"), tables, metadata=META, peak=PEAK, assumed=assumed
    )


@pytest.fixture(scope="module", params=sorted(TRUTHS))
def form_tables(request):
    """(form, its known parameters, the synthetic tables they give on the full grid)."""
    spec = bench_model(QWEN, "full")
    truth = TRUTHS[request.param]
    return (
        request.param,
        truth,
        synthetic_tables(spec, H100, truth, make_plan(spec, quick=False, shapes="full")),
    )


# -- the fit -------------------------------------------------------------------------------------


def test_fit_recovers_known_roofline_parameters(form_tables):
    form, truth, tables = form_tables
    data = _fit(tables, form)
    fitted = data["fitted"]
    assert fitted["moe_kernel"] == form  # the profile records the form it was fitted for
    for name in _fitted_names(form):
        assert fitted[name] == pytest.approx(getattr(truth, name), rel=0.05), name
    # Noise-free tables: the recovery is in fact exact (the bounded searches converge to
    # about 1e-10), and every stack point is predicted.
    for name in _fitted_names(form):
        assert fitted[name] == pytest.approx(getattr(truth, name), rel=1e-8), name
    assert all(abs(v["relative_error"]) < 0.01 for v in data["validation"])
    assert data["provenance"]["compute_efficiency"].startswith("fitted")
    assert data["provenance"]["pass_overhead_s"].startswith("fitted")
    assert fitted["draft_step_overhead_s"] == RooflineParams().draft_step_overhead_s
    assert data["fit_details"][f"moe_{form}_rms_log_error"] < 1e-8


def test_fit_also_fits_the_other_form_and_reports_which_fits_better(form_tables):
    form, _, tables = form_tables
    data = _fit(tables, form)
    other = next(name for name in TRUTHS if name != form)
    details, provenance = data["fit_details"], data["provenance"]
    # The tables come from ``form``: the other form cannot fit them exactly, but gets its own
    # fitted constants (a scenario switching forms on this profile uses them).
    assert details[f"moe_{other}_rms_log_error"] > 100 * details[f"moe_{form}_rms_log_error"]
    assert details["moe_rms_log_error"] == details[f"moe_{form}_rms_log_error"]
    for name in FORM_KEYS[other]:
        assert data["fitted"][name] != getattr(RooflineParams(), name), name
        assert "not this profile's form" in provenance[name]
    for name in FORM_KEYS[form]:
        assert provenance[name] == "fitted to the MoE table (flushed L2)"


def test_launch_fit_identifies_the_per_expert_sum_not_its_split(form_tables):
    """One expert size: only c_e + b / (eta_bw·BW) is identified; c_e stays as assumed."""
    form, truth, tables = form_tables
    if form != "launch":
        pytest.skip("launch form only")
    assumed = RooflineParams(moe_expert_s=1e-7)  # not the truth's 0.234 µs
    data = assemble_profile(
        bench_model(QWEN, "full"), tables, metadata=META, peak=PEAK, assumed=assumed
    )
    fitted = RooflineParams(**data["fitted"])
    assert fitted.moe_expert_s == 1e-7
    b, bw = QWEN.shape.expert_bytes, H100.hbm_bytes_per_s
    # Closed form: eta_bw = b / (BW·(c_e + b / (eta_true·BW) − c_e_assumed)).
    per_expert = truth.moe_expert_s + b / (truth.moe_bandwidth_efficiency * bw)
    eta = b / (bw * (per_expert - 1e-7))
    assert fitted.moe_bandwidth_efficiency == pytest.approx(eta, rel=1e-8)
    assert per_expert_s(fitted, b, bw) == pytest.approx(per_expert, rel=1e-9)
    assert data["fit_details"]["moe_launch_per_expert_s"] == pytest.approx(per_expert, rel=1e-9)
    assert fitted.moe_launch_s == pytest.approx(truth.moe_launch_s, rel=1e-8)
    assert data["provenance"]["moe_expert_s"].startswith("assumed")


def test_fit_tolerates_measurement_noise(form_tables):
    form, truth, tables = form_tables
    rng = np.random.default_rng(7)

    def noisy(values):
        if isinstance(values, list):
            return [noisy(v) for v in values]
        return float(values * np.exp(rng.normal(0.0, 0.02)))

    tables = copy.deepcopy(tables)
    tables["moe"]["time_s"] = noisy(tables["moe"]["time_s"])
    tables["attention"]["time_s"] = noisy(tables["attention"]["time_s"])
    for gemm in tables["gemm"].values():
        gemm["time_s"] = noisy(gemm["time_s"])
    fitted = _fit(tables, form)["fitted"]
    for name in _fitted_names(form)[1:]:  # the overhead is a small difference of large numbers
        assert fitted[name] == pytest.approx(getattr(truth, name), rel=0.05), name


def test_without_compute_bound_cells_compute_efficiency_is_not_invented(form_tables):
    form, truth, tables = form_tables
    tables = copy.deepcopy(tables)
    for gemm in tables["gemm"].values():  # keep only one-token cells: all memory-bound
        gemm["tokens"], gemm["time_s"] = gemm["tokens"][:1], gemm["time_s"][:1]
    tables["moe"]["tokens"] = tables["moe"]["tokens"][:1]
    tables["moe"]["time_s"] = tables["moe"]["time_s"][:1]
    data = assemble_profile(
        bench_model(QWEN, "full"),
        tables,
        metadata=META,
        peak=PEAK,
        ceilings={"matmul_flops_per_s": 0.7 * H100.bf16_flops_per_s},
        assumed=RooflineParams(moe_kernel=form),
    )
    assert data["fitted"]["compute_efficiency"] == pytest.approx(0.7)
    assert data["provenance"]["compute_efficiency"].startswith("measured")
    assert data["fitted"]["weight_efficiency"] == pytest.approx(truth.weight_efficiency)
    # One-token cells still identify the MoE form's constants, up to the exposed share of
    # their FLOPs (moe_exposed_fraction), which the unidentified compute efficiency prices: a
    # few µs of a cell of hundreds.
    for name in FORM_KEYS[form]:
        assert data["fitted"][name] == pytest.approx(getattr(truth, name), rel=0.02), name


def test_grid_then_bounded_finds_the_global_minimum_precisely():
    # A shallow local minimum near 0.1, the global one at 0.73: the scan picks the right basin.
    def f(x: float) -> float:
        return min((x - 0.1) ** 2 + 0.05, 3.0 * (x - 0.73) ** 2)

    assert grid_then_bounded(f, 0.0, 1.0) == pytest.approx(0.73, abs=1e-9)
    # The refinement's precision does not degrade far from zero (Brent's relative tolerance).
    assert grid_then_bounded(lambda x: (x - 17.9) ** 2, 10.0, 25.0) == pytest.approx(
        17.9, rel=1e-11
    )
    # A minimum on the boundary stays there.
    assert grid_then_bounded(lambda x: x, 2.0, 3.0) == pytest.approx(2.0, abs=1e-9)


def test_fit_predicts_moe_cells_with_the_cost_models_kernel(form_tables):
    """The fit's MoE prediction is the cost model's, cell by cell: exact at the true values."""
    _, truth, tables = form_tables
    from simspec.physics.launches import TABLE_MOE_KERNELS

    # A synthetic cell holds the router and top-k kernels' floors, as a measured one does.
    cells = fit_moe.moe_cells(tables, TABLE_MOE_KERNELS * H100.kernel_floor_s(True))
    assert cells is not None
    bw, peak = H100.hbm_bytes_per_s, H100.bf16_flops_per_s
    predicted = fit_moe.moe_pred(
        cells, truth, truth.weight_efficiency, truth.compute_efficiency, bw, peak
    )
    np.testing.assert_allclose(predicted, cells.time_s, rtol=1e-12)
    # The same cells one at a time through the cost model's kernels (an independent path).
    shape = bench_model(QWEN, "full").shape
    flops = truth.compute_efficiency * peak
    for u, rows, n, t in zip(cells.unique, cells.rows, cells.tokens, cells.time_s, strict=True):
        one = routed_experts_s(shape, truth, np.array([u]), rows, bw, flops)[0] + weights_s(
            shape.router_bytes, n, shape.weight_bytes_per_param, bw * truth.weight_efficiency, flops
        )
        assert one == pytest.approx(t, rel=1e-12)
