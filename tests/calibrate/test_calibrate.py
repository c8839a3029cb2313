"""Calibration: fit recovery, the calibrated cost model, and `simspec calibrate` end to end."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile, assemble_profile, fit_moe
from simspec.calibrate.analytic import synthetic_tables
from simspec.calibrate.fit import grid_then_bounded
from simspec.calibrate.fit_moe import FORM_KEYS, per_expert_s
from simspec.calibrate.plan import (
    bench_model,
    gemm_weight_bytes,
    make_plan,
    stack_unique_experts,
    tiny_model,
    unique_experts_grid,
)
from simspec.cli import main
from simspec.costs.batch import draft_phase_s
from simspec.costs.calibrated import CalibratedCostModel, calibrated_pass_cost
from simspec.costs.kernels import routed_experts_s, weights_s
from simspec.costs.passes import target_pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.models import attention_params
from simspec.profile import load_profile, profile_from_dict, profile_json
from tests.helpers import simulate, tiny

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
    for name in FORM_KEYS[form]:  # one-token cells still identify the MoE form's constants
        assert data["fitted"][name] == pytest.approx(getattr(truth, name), rel=1e-6), name


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
    cells = fit_moe.moe_cells(tables)
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


# -- the calibrated cost model -----------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic_profile():
    """Synthetic tables of the default parameters (full grid): the roofline on the grid."""
    data = analytic_profile(H100, model=QWEN)
    return profile_from_dict(data, "synthetic.json")


def _both(profile, tokens, contexts, unique):
    shape = QWEN.shape
    args = (np.asarray(tokens), np.asarray(contexts), np.full(shape.num_moe_layers, unique))
    roof = target_pass_cost(shape, H100, RooflineParams(), *args)
    cal = calibrated_pass_cost(shape, H100, RooflineParams(), profile, *args)
    return roof, cal


@pytest.mark.parametrize(
    ("tokens", "contexts", "unique"),
    [
        ([1], [511], 8.0),
        ([4], [508], 23.0),
        ([2] * 4, [510] * 4, 64.0),
        ([1] * 64, [511] * 64, 128.0),
    ],
)
def test_calibrated_model_reproduces_the_roofline_on_its_grid(
    synthetic_profile, tokens, contexts, unique
):
    roof, cal = _both(synthetic_profile, tokens, contexts, unique)
    assert cal.fallback_terms == 0
    assert cal.moe_s == pytest.approx(roof.moe_s, rel=1e-9)
    assert cal.other_s == pytest.approx(roof.other_s, rel=1e-9)
    assert cal.attention_s == pytest.approx(roof.attention_s, rel=1e-9)
    assert cal.total_s == pytest.approx(roof.total_s, rel=1e-9)


def test_off_grid_points_are_interpolated_and_outside_points_fall_back(synthetic_profile):
    roof, cal = _both(synthetic_profile, [3] * 5, [700] * 5, 50.0)  # between grid points
    assert cal.fallback_terms == 0
    assert cal.total_s == pytest.approx(roof.total_s, rel=0.02)
    roof, cal = _both(synthetic_profile, [8] * 200, [700] * 200, 128.0)  # 1600 tokens, B=200
    assert cal.fallback_terms > 0
    assert cal.total_s == pytest.approx(roof.total_s, rel=1e-9)  # the roofline beyond the grid
    _, below = _both(synthetic_profile, [1], [10], 8.0)  # fewer keys than the grid's smallest
    assert below.fallback_terms == 1


def test_calibrated_cost_is_monotone_in_tokens_and_unique_experts_across_the_grid_edge():
    # A profile whose grid stops early (quick), so the sweep crosses the border.
    profile = profile_from_dict(analytic_profile(H100, model=QWEN, quick=True), "quick.json")
    shape = QWEN.shape
    previous = 0.0
    crossed = False
    for n in range(1, 400, 3):
        cost = calibrated_pass_cost(
            shape,
            H100,
            RooflineParams(),
            profile,
            np.array([n]),
            np.array([1000]),
            np.full(shape.num_moe_layers, 8.0),
        )
        assert cost.total_s >= previous - 1e-15
        previous = cost.total_s
        crossed |= cost.fallback_terms > 0
    assert crossed
    previous = 0.0
    for u in np.linspace(8, 128, 61):
        cost = calibrated_pass_cost(
            shape,
            H100,
            RooflineParams(),
            profile,
            np.array([16, 16]),
            np.array([1000, 1000]),
            np.full(shape.num_moe_layers, u),
        )
        assert cost.total_s >= previous - 1e-15
        previous = cost.total_s


def test_calibrated_model_counts_fallbacks_in_results(tmp_path):
    path = tmp_path / "synthetic.json"
    path.write_text(profile_json(analytic_profile(H100, model=QWEN, quick=True)), encoding="utf-8")
    roof = simulate(tiny())
    cal = simulate(tiny("costs.model=calibrated", f"costs.profile={path}"))
    for a, b in zip(roof["policies"], cal["policies"], strict=True):
        assert a["cost_fallbacks"] == 0
        assert b["cost_fallbacks"] >= 1  # prefill passes (64-token prompts) lie outside
        assert b["tpot_ms"] == pytest.approx(a["tpot_ms"], rel=0.03)
    # Same scenario and seed: byte-identical results.
    again = simulate(tiny("costs.model=calibrated", f"costs.profile={path}"))
    assert json.dumps(again) == json.dumps(cal)


def test_calibrated_model_draft_steps_use_the_fitted_roofline(synthetic_profile):
    drafter = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    roof = RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100)
    cal = CalibratedCostModel(target=QWEN, drafter=drafter, gpu=H100, profile=synthetic_profile)
    ctx = np.array([100, 2000])
    assert cal.draft_step(ctx) == roof.draft_step(ctx)
    ks = np.array([3, 1])
    by_depth = roof.draft_step(ctx) + roof.draft_step(ctx[:1] + 1) + roof.draft_step(ctx[:1] + 2)
    assert draft_phase_s(cal, ctx, ks) == draft_phase_s(roof, ctx, ks) == by_depth
    assert cal.prefill(np.array([300])).fallback_terms > 0


# -- the plan --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", catalog.model_names())
def test_benchmarked_gemms_read_the_shapes_bytes(name):
    spec = bench_model(catalog.get_model(name), "full")
    shape = spec.shape
    nbytes = gemm_weight_bytes(spec)
    assert nbytes["lm_head"] == shape.lm_head_bytes
    if "attention_projections" in nbytes:
        assert nbytes["attention_projections"] == attention_params(spec, "full") * 2.0
    if "linear_attention_projections" in nbytes:
        assert nbytes["linear_attention_projections"] == attention_params(spec, "linear") * 2.0
    if "shared_expert" in nbytes:
        assert nbytes["shared_expert"] == shape.shared_expert_bytes
    tiny_spec = tiny_model(spec)  # builds (valid) for every architecture
    assert tiny_spec.hidden_size == 64
    assert tiny_spec.shape.num_moe_layers > 0 or not shape.num_moe_layers
    for n in (1, 3, 40):
        u = stack_unique_experts(spec, n)
        if shape.num_moe_layers:
            assert (
                shape.experts_per_token
                <= u
                <= min(shape.num_experts, n * spec.moe.experts_per_token)
            )


def test_unique_experts_grid():
    assert unique_experts_grid(128, 8, 9) == (8, 11, 16, 23, 32, 45, 64, 91, 128)
    assert unique_experts_grid(8, 2, 5)[0] == 2 and unique_experts_grid(8, 2, 5)[-1] == 8
    assert unique_experts_grid(0, 0, 5) == ()


# -- torch stays out of `import simspec` ----------------------------------------------------------


def test_import_simspec_and_analytic_calibration_do_not_import_torch(tmp_path):
    out = tmp_path / "p.json"
    code = (
        "import sys, simspec, simspec.profile, simspec.calibrate, simspec.commands.calibrate\n"
        "from simspec.cli import main\n"
        f"assert main(['calibrate', '--analytic', 'h200', '--out', {str(out)!r}]) == 0\n"
        "assert main(['calibrate', '--help']) == 0\n"
        "print('heavy:' + ','.join(m for m in ('torch', 'matplotlib') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip().splitlines()[-1] == "heavy:"
    assert load_profile(out).gpu == "h200"


def test_calibrate_moe_kernel_option_picks_the_form_of_the_tables_and_the_fit(tmp_path, capsys):
    out = tmp_path / "sat.json"
    args = ["--model", "qwen3-30b-a3b", "--quick", "--moe-kernel", "saturation"]
    assert main(["calibrate", "--analytic", "h100-sxm", *args, "--out", str(out)]) == 0
    capsys.readouterr()
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["fitted"]["moe_kernel"] == "saturation"
    assert "--moe-kernel saturation" in data["metadata"]["command"]
    spec = bench_model(QWEN, "full")
    saturation = RooflineParams(moe_kernel="saturation")
    expected = synthetic_tables(spec, H100, saturation, make_plan(spec, quick=True, shapes="full"))
    assert data["tables"]["moe"]["time_s"] == expected["moe"]["time_s"]
    # Without the option: the default form, in the tables and the record.
    default = tmp_path / "default.json"
    assert main(["calibrate", "--analytic", "h100-sxm", *args[:3], "--out", str(default)]) == 0
    capsys.readouterr()
    data = json.loads(default.read_text(encoding="utf-8"))
    assert data["fitted"]["moe_kernel"] == RooflineParams().moe_kernel == "launch"
    assert data["tables"]["moe"]["time_s"] != expected["moe"]["time_s"]
