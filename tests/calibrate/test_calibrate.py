"""Calibration: the calibrated model on synthetic tables, and `simspec calibrate` end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.calibrate.analytic import synthetic_tables
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
from simspec.costs.passes import target_pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.models import attention_params
from simspec.profile import load_profile, profile_from_dict, profile_json
from tests.helpers import simulate, tiny

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")


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
    """Equal passes; a table cell holds its own kernels' floors (as a measured one does), so
    those floors move from ``floors_s`` into the cell's component."""
    from simspec.physics.launches import TABLE_ATTENTION_KERNELS, TABLE_MOE_KERNELS

    roof, cal = _both(synthetic_profile, tokens, contexts, unique)
    layers, floor = QWEN.shape.num_moe_layers, H100.kernel_floor_s(True)
    assert cal.fallback_terms == 0
    assert cal.moe_s == pytest.approx(roof.moe_s + layers * TABLE_MOE_KERNELS * floor, rel=1e-9)
    assert cal.other_s == pytest.approx(roof.other_s + floor, rel=1e-9)  # the LM head's
    attention = roof.attention_s + layers * TABLE_ATTENTION_KERNELS["gqa"] * floor
    assert cal.attention_s == pytest.approx(attention, rel=1e-9)
    # the roofline's pass of several tokens per request holds the verify mask, which the
    # calibrated model's verify_pass adds on top of calibrated_pass_cost (tested below)
    assert cal.total_s == pytest.approx(roof.total_s - roof.tree_attention_s, rel=1e-9)


def test_the_calibrated_verify_pass_adds_the_roofline_mask(synthetic_profile):
    from simspec import catalog
    from simspec.costs.calibrated import CalibratedCostModel

    roof, _ = _both(synthetic_profile, [4], [508], 23.0)
    assert roof.tree_attention_s > 0
    drafter = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    model = CalibratedCostModel(target=QWEN, drafter=drafter, gpu=H100, profile=synthetic_profile)
    unique = np.full(QWEN.shape.num_moe_layers, 23.0)
    verify = model.verify_pass(np.array([4]), np.array([508]), unique)
    assert verify.tree_attention_s == pytest.approx(roof.tree_attention_s, rel=1e-9)
    assert verify.total_s == pytest.approx(roof.total_s, rel=1e-9)


def test_off_grid_points_are_interpolated_and_outside_points_fall_back(synthetic_profile):
    roof, cal = _both(synthetic_profile, [3] * 5, [700] * 5, 50.0)  # between grid points
    assert cal.fallback_terms == 0
    assert cal.total_s == pytest.approx(roof.total_s, rel=0.02)
    roof, cal = _both(synthetic_profile, [8] * 200, [700] * 200, 128.0)  # 1600 tokens, B=200
    assert cal.fallback_terms > 0
    plain = roof.total_s - roof.tree_attention_s  # the verify mask: verify_pass adds it
    assert cal.total_s == pytest.approx(plain, rel=1e-9)  # the roofline beyond the grid
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
