"""MoE kernel forms: closed forms, limits, the L2 switch, and the fitted launch constants."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simspec
from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.costs.kernels import routed_experts_s
from simspec.costs.moe_kernel import MOE_KERNELS, moe_layer_s, reread_bytes
from simspec.errors import ScenarioError
from simspec.params import MOE_KERNEL_FORMS, PROFILE_OPTIONAL_KEYS, RooflineParams
from simspec.physics.experts import independent_union
from simspec.physics.precision import with_precision
from simspec.profile import profile_from_dict

CASES = Path(__file__).resolve().parents[2] / "validation" / "cases.toml"
H100 = catalog.get_gpu("h100-sxm")
BW = H100.hbm_bytes_per_s
FLOPS = H100.bf16_flops_per_s * 0.6
EXPERT_BYTES = 9.437184e6  # one bf16 Qwen3-30B-A3B expert: 3 · 2048 · 768 parameters · 2 bytes
EXPERT_PARAMS = EXPERT_BYTES / 2
LAUNCH = RooflineParams(
    moe_kernel="launch",
    moe_launch_s=25e-6,
    moe_expert_s=0.2e-6,
    moe_bandwidth_efficiency=0.9,
    moe_exposed_fraction=0.0,
)


def layer_s(params: RooflineParams, unique, rows, *, expert_bytes=EXPERT_BYTES, l2_bytes=0.0):
    return moe_layer_s(
        params,
        unique,
        rows,
        expert_bytes=expert_bytes,
        expert_params=expert_bytes / 2,
        bandwidth=BW,
        flops_per_s=FLOPS,
        l2_bytes=l2_bytes,
    )


def test_every_declared_form_is_registered():
    assert sorted(MOE_KERNELS) == sorted(MOE_KERNEL_FORMS)


def test_the_default_form_is_launch_with_the_fitted_constants():
    """The default: t0 + U·(c_e + b / (eta_bw·BW)) + theta·2·rows·P / F (one token's FLOPs are
    the shorter phase) with validation/KERNEL_FIT.md's constants."""
    p = RooflineParams()
    assert p.moe_kernel == "launch"
    constants = (p.moe_launch_s, p.moe_expert_s, p.moe_bandwidth_efficiency)
    assert constants == (2.69e-5, 2.47e-7, 0.935) and p.moe_exposed_fraction == 0.468
    u = np.array([1.0, 8.0, 40.0, 128.0])
    flops = 0.468 * 2 * 8.0 * EXPERT_PARAMS / FLOPS
    expected = 2.69e-5 + u * (2.47e-7 + EXPERT_BYTES / (0.935 * BW)) + flops
    shape = catalog.get_model("qwen3-30b-a3b").shape
    got = routed_experts_s(shape, p, u, 8.0, BW, FLOPS)
    assert got == pytest.approx(
        2.69e-5 + u * (2.47e-7 + shape.expert_bytes / (0.935 * BW)) + flops, rel=1e-12
    )
    assert layer_s(p, u, 8.0) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("theta", [0.0, 0.468, 1.0])
def test_the_shorter_phase_adds_its_exposed_fraction(theta):
    """t = t0 + max(m, c) + theta·min(m, c): theta = 0 the phases overlap fully, 1 they run one
    after the other; on either side of the crossover the shorter phase is the one exposed."""
    p = dataclasses.replace(LAUNCH, moe_exposed_fraction=theta)
    memory = 128 * (0.2e-6 + EXPERT_BYTES / (0.9 * BW))
    for rows in (1e3, 1e4, 1e5):
        compute = 2 * rows * EXPERT_PARAMS / FLOPS
        expected = 25e-6 + max(memory, compute) + theta * min(memory, compute)
        assert float(layer_s(p, 128.0, rows)) == pytest.approx(expected, rel=1e-12)


def test_the_saturation_form_is_the_original_curve():
    """v0.1's routed term: U·b / (eta_max·(1 − e^(−U·b/S))·BW), with its default constants."""
    p = RooflineParams(moe_kernel="saturation")
    u = np.array([1.0, 8.0, 40.0, 128.0])
    eta = 0.8 * -np.expm1(-u * EXPERT_BYTES / 94e6)
    expected = u * EXPERT_BYTES / (eta * BW)
    shape = catalog.get_model("qwen3-30b-a3b").shape
    got = routed_experts_s(shape, p, u, 8.0, BW, FLOPS)
    assert got == pytest.approx(u * shape.expert_bytes / (eta * BW), rel=1e-12)
    assert layer_s(p, u, 8.0) == pytest.approx(expected, rel=1e-12)


def test_launch_form_at_no_experts_is_the_launch_latency():
    assert float(layer_s(LAUNCH, 0.0, 0.0)) == pytest.approx(25e-6, rel=1e-12)


def test_the_launch_forms_fixed_times_stretch_with_the_clock_and_its_bytes_do_not():
    """On a GPU clocked at f the fixed times are (1980 MHz / f)·(t0 + U·c_e); the streamed
    bytes take U·b / (eta_bw·BW) whatever the clock (closed form at U = 0 and U = 8)."""
    a100 = catalog.get_gpu("a100-sxm-80gb")
    scale = a100.latency_scale
    assert scale == pytest.approx(1980 / 1410, rel=1e-12)
    at = {"expert_params": EXPERT_BYTES / 2, "bandwidth": BW, "flops_per_s": FLOPS}
    empty = moe_layer_s(LAUNCH, 0.0, 0.0, expert_bytes=EXPERT_BYTES, latency_scale=scale, **at)
    assert float(empty) == pytest.approx(25e-6 * 1980 / 1410, rel=1e-12)
    eight = moe_layer_s(LAUNCH, 8.0, 8.0, expert_bytes=EXPERT_BYTES, latency_scale=scale, **at)
    expected = (25e-6 + 8 * 0.2e-6) * 1980 / 1410 + 8 * EXPERT_BYTES / (0.9 * BW)
    assert float(eight) == pytest.approx(expected, rel=1e-12)
    # The saturation form has no fixed time: the clock leaves it alone.
    sat = RooflineParams(moe_kernel="saturation")
    slow = moe_layer_s(sat, 8.0, 8.0, expert_bytes=EXPERT_BYTES, latency_scale=scale, **at)
    assert float(slow) == float(layer_s(sat, 8.0, 8.0))


def test_a_pass_on_a_slower_clock_pays_the_stretched_fixed_time_per_moe_layer():
    """The pass's routed term on an A100 less the same term with the A100's clock set to the
    reference is (scale − 1)·(t0 + U·c_e) per MoE layer, exactly."""
    from simspec.costs.passes import target_pass_cost

    a100 = catalog.get_gpu("a100-sxm-80gb")
    same = dataclasses.replace(a100, sm_clock_hz=1.98e9)
    shape = catalog.get_model("qwen3-30b-a3b").shape
    p = RooflineParams()
    u = np.full(shape.num_moe_layers, 8.0)

    def moe(gpu):
        return target_pass_cost(shape, gpu, p, np.array([1]), np.array([100]), u).moe_s

    extra = (a100.latency_scale - 1.0) * (p.moe_launch_s + 8 * p.moe_expert_s)
    assert moe(a100) - moe(same) == pytest.approx(shape.num_moe_layers * extra, rel=1e-9)


def test_launch_form_grows_by_cost_per_expert_plus_bytes_at_the_efficiency():
    """Memory-bound: t(U) = t0 + U·(c_e + b/(eta·BW)), a straight line in U."""
    per_expert = 0.2e-6 + EXPERT_BYTES / (0.9 * BW)
    u = np.array([8.0, 64.0, 128.0])
    assert layer_s(LAUNCH, u, 8.0) == pytest.approx(25e-6 + u * per_expert, rel=1e-12)


def test_launch_form_is_compute_bound_for_many_rows():
    """With rows ≫ experts the FLOPs take over: t = t0 + 2·rows·P / F."""
    rows = 2e6
    t = float(layer_s(LAUNCH, 128.0, rows))
    assert t == pytest.approx(25e-6 + 2 * rows * EXPERT_PARAMS / FLOPS, rel=1e-12)
    assert t > 25e-6 + 128 * (0.2e-6 + EXPERT_BYTES / (0.9 * BW))


@settings(max_examples=50, deadline=None)
@given(
    form=st.sampled_from(MOE_KERNEL_FORMS),
    u=st.floats(0.0, 255.0),
    extra=st.floats(0.01, 64.0),
    rows=st.floats(0.0, 1e5),
    l2=st.sampled_from(["ideal", "fit", "none"]),
)
def test_more_experts_never_cost_less(form, u, extra, rows, l2):
    p = dataclasses.replace(LAUNCH, moe_kernel=form, moe_l2_reuse=l2)
    assert float(layer_s(p, u + extra, rows, l2_bytes=50e6)) >= float(
        layer_s(p, u, rows, l2_bytes=50e6)
    )


def test_rereads_exist_only_when_an_expert_gets_more_rows_than_a_tile():
    """R = max(0, rows / tile − U): 8 experts need > 8 tiles of 64 rows to be read twice."""
    assert float(reread_bytes(8.0, 8 * 64, 1.0, 64, "none", 0.0)) == 0.0
    assert float(reread_bytes(8.0, 8 * 64 * 3, 1.0, 64, "none", 0.0)) == pytest.approx(16.0)


@pytest.mark.parametrize(
    ("unique", "rows", "l2_bytes", "fit_equals_none", "fit_equals_ideal"),
    [
        (4.0, 4 * 64 * 2, 50e6, False, True),  # re-reads, 37.7 MB fits in 50 MB: L2 serves them
        (8.0, 8 * 64 * 2, 50e6, True, False),  # re-reads, 75.5 MB does not fit: HBM
        (4.0, 4 * 32, 50e6, True, True),  # one tile per expert: no re-reads, L2 cannot matter
        (4.0, 4 * 64 * 2, 0.0, True, False),  # no L2
    ],
)
def test_l2_matters_only_with_rereads_and_a_working_set_that_fits(
    unique, rows, l2_bytes, fit_equals_none, fit_equals_ideal
):
    times = {
        mode: float(
            layer_s(dataclasses.replace(LAUNCH, moe_l2_reuse=mode), unique, rows, l2_bytes=l2_bytes)
        )
        for mode in ("ideal", "fit", "none")
    }
    assert (times["fit"] == times["none"]) is fit_equals_none
    assert (times["fit"] == times["ideal"]) is fit_equals_ideal
    # Without L2 every re-read streams the expert again: R·b / (eta·BW) on top of "ideal"
    # (these passes stay memory-bound: 2·rows·P / F is below the expert-byte time).
    assert 2 * rows * EXPERT_PARAMS / FLOPS < unique * EXPERT_BYTES / (0.9 * BW)
    rereads = max(rows / 64 - unique, 0.0)
    assert times["none"] - times["ideal"] == pytest.approx(
        rereads * EXPERT_BYTES / (0.9 * BW), rel=1e-9, abs=1e-15
    )


def _kernel_rows(series: str) -> dict[int, float]:
    data = tomllib.loads(CASES.read_text(encoding="utf-8"))
    (case,) = [c for c in data["cases"] if c["id"] == series]
    return dict(zip(case["tokens"], case["value"], strict=True))


@pytest.mark.parametrize(
    ("series", "model", "gpu", "precision", "tp", "tokens"),
    [
        ("mixtral-8x7b-h100-tp2-bf16-tuned", "mixtral-8x7b", "h100-sxm", "bf16", 2, 8),
        ("qwen3-30b-h100-fp8-pr-defaults", "qwen3-30b-a3b", "h100-sxm", "fp8", 1, 4),
    ],
)
def test_fitted_launch_defaults_reproduce_published_kernel_rows(
    series, model, gpu, precision, tp, tokens
):
    """The launch form's default constants (validation/KERNEL_FIT.md) within 10 % of a row."""
    measured_us = _kernel_rows(series)[tokens]
    shape = with_precision(catalog.get_model(model), precision).shape
    spec = catalog.get_gpu(gpu)
    unique = independent_union(shape.num_experts, shape.experts_per_token, tokens)
    predicted = moe_layer_s(
        RooflineParams(moe_kernel="launch"),
        unique,
        tokens * shape.experts_per_token,
        expert_bytes=shape.expert_bytes / tp,  # one GPU's shard
        expert_params=shape.expert_params / tp,
        bandwidth=spec.hbm_bytes_per_s,
        flops_per_s=spec.bf16_flops_per_s * RooflineParams().compute_efficiency,
        l2_bytes=spec.l2_bytes,
    )
    assert float(predicted) * 1e6 == pytest.approx(measured_us, rel=0.10)


def test_scenario_keys_select_the_form_and_reject_unknown_names():
    s = simspec.with_overrides(
        simspec.load_scenario(), {"costs.moe_kernel": "launch", "costs.moe_l2_reuse": "fit"}
    )
    assert (s.roofline.moe_kernel, s.roofline.moe_l2_reuse) == ("launch", "fit")
    with pytest.raises(ScenarioError, match=r"costs\.moe_kernel"):
        simspec.with_overrides(simspec.load_scenario(), {"costs.moe_kernel": "fastest"})


def test_a_profile_without_the_new_keys_still_loads_with_their_defaults():
    data = analytic_profile(H100)
    for key in PROFILE_OPTIONAL_KEYS:
        data["fitted"].pop(key, None)
        data["provenance"].pop(key, None)
    profile = profile_from_dict(data, "old-profile.json")
    assert profile.fitted.moe_kernel == RooflineParams().moe_kernel == "launch"
    assert profile.fitted.moe_launch_s == RooflineParams().moe_launch_s
    data["fitted"]["moe_kernel"] = "saturation"
    assert profile_from_dict(data, "new-profile.json").fitted.moe_kernel == "saturation"
