"""Calibration: fit recovery, the calibrated cost model, and `simspec calibrate` end to end."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate import analytic_profile, assemble_profile
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
from simspec.costs.calibrated import CalibratedCostModel, calibrated_pass_cost
from simspec.costs.kernels import target_pass_cost
from simspec.costs.params import RooflineParams
from simspec.costs.roofline import RooflineCostModel
from simspec.physics.models import attention_params
from simspec.profile import load_profile, profile_from_dict, profile_json
from simspec.simulate import simulate
from tests.helpers import tiny

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
TRUTH = RooflineParams(
    pass_overhead_s=5e-4,
    moe_efficiency_max=0.72,
    moe_saturation_bytes=60e6,
    weight_efficiency=0.65,
    kv_efficiency=0.45,
    compute_efficiency=0.55,
)
FITTED = (
    "pass_overhead_s",
    "moe_efficiency_max",
    "moe_saturation_bytes",
    "weight_efficiency",
    "kv_efficiency",
    "compute_efficiency",
)
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


def _fit(tables, spec=QWEN):
    return assemble_profile(bench_model(spec, "full"), tables, metadata=META, peak=PEAK)


@pytest.fixture(scope="module")
def synthetic_tables_full():
    spec = bench_model(QWEN, "full")
    return synthetic_tables(spec, H100, TRUTH, make_plan(spec, quick=False, shapes="full"))


# -- the fit -------------------------------------------------------------------------------------


def test_fit_recovers_known_roofline_parameters(synthetic_tables_full):
    data = _fit(synthetic_tables_full)
    fitted = data["fitted"]
    for name in FITTED:
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=0.05), name
    # Noise-free tables: the recovery is in fact exact, and every stack point is predicted.
    for name in FITTED:
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=1e-6), name
    assert all(abs(v["relative_error"]) < 0.01 for v in data["validation"])
    assert data["provenance"]["compute_efficiency"].startswith("fitted")
    assert data["provenance"]["pass_overhead_s"].startswith("fitted")
    assert fitted["draft_step_overhead_s"] == RooflineParams().draft_step_overhead_s


def test_fit_tolerates_measurement_noise(synthetic_tables_full):
    rng = np.random.default_rng(7)

    def noisy(values):
        if isinstance(values, list):
            return [noisy(v) for v in values]
        return float(values * np.exp(rng.normal(0.0, 0.02)))

    tables = copy.deepcopy(synthetic_tables_full)
    tables["moe"]["time_s"] = noisy(tables["moe"]["time_s"])
    tables["attention"]["time_s"] = noisy(tables["attention"]["time_s"])
    for gemm in tables["gemm"].values():
        gemm["time_s"] = noisy(gemm["time_s"])
    fitted = _fit(tables)["fitted"]
    for name in FITTED[1:]:  # the overhead is a small difference of large numbers
        assert fitted[name] == pytest.approx(getattr(TRUTH, name), rel=0.05), name


def test_without_compute_bound_cells_compute_efficiency_is_not_invented(synthetic_tables_full):
    tables = copy.deepcopy(synthetic_tables_full)
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
    )
    assert data["fitted"]["compute_efficiency"] == pytest.approx(0.7)
    assert data["provenance"]["compute_efficiency"].startswith("measured")
    assert data["fitted"]["weight_efficiency"] == pytest.approx(TRUTH.weight_efficiency)


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
    assert cal.prefill_pass(np.array([300])).fallback_terms > 0


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


# -- the torch benchmarks (CPU, tiny shapes) -------------------------------------------------------


def test_cpu_quick_calibration_end_to_end(tmp_path, capsys):
    pytest.importorskip("torch")
    out, raw = tmp_path / "cpu.json", tmp_path / "raw"
    code = main(["calibrate", "--device", "cpu", "--quick", "--out", str(out), "--raw", str(raw)])
    stdout = capsys.readouterr().out
    assert code == 0
    assert f"wrote {out}" in stdout
    profile = load_profile(out)
    data = json.loads(out.read_text(encoding="utf-8"))
    meta = data["metadata"]
    assert (profile.kind, profile.shapes, profile.model, profile.gpu) == (
        "measured",
        "tiny",
        "qwen3-30b-a3b",
        "",
    )
    assert meta["command"] == f"simspec calibrate --device cpu --quick --out {out}"
    assert meta["torch_version"] and meta["date"] and "perf_counter" in meta["timer"]
    assert profile.moe is not None and profile.attention is not None
    assert set(profile.gemm) == {"attention_projections", "lm_head"}
    assert {row["use"] for row in data["tables"]["stack"]} == {"fit", "validation"}
    assert sorted(p.name for p in raw.iterdir()) == [
        "attention.csv",
        "ceilings.csv",
        "gemm.csv",
        "moe.csv",
        "stack.csv",
    ]
    results = tmp_path / "results.json"
    code = main(
        [
            "run",
            "--set",
            "costs.model=calibrated",
            "--set",
            f"costs.profile={out}",
            "--set",
            "workload.num_requests=4",
            "--set",
            "workload.output_tokens=16",
            "--json",
            str(results),
        ]
    )
    capsys.readouterr()
    assert code == 0
    rows = json.loads(results.read_text(encoding="utf-8"))["policies"]
    assert all(row["cost_fallbacks"] > 0 for row in rows)  # tiny tables, full-size model
    assert all(row["tpot_ms"] > 0 for row in rows)


def test_cuda_device_without_a_gpu_is_exit_2(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    code = main(["calibrate", "--device", "cuda", "--out", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == 2
    assert "--device" in err and "torch.cuda.is_available() = False" in err
    assert not (tmp_path / "p.json").exists()


def test_forced_routing_touches_exactly_the_unique_experts():
    pytest.importorskip("torch")
    from simspec.calibrate.bench import forced_routing

    experts = list(np.random.default_rng(0).permutation(128))
    for tokens, unique in [(1, 8), (1, 40), (4, 16), (16, 128), (64, 23)]:
        r = forced_routing(tokens, 8, unique, experts, 128)
        assert len(r.segments) == unique
        assert {e for e, _, _ in r.segments} == set(experts[:unique])
        assert r.offsets[-1] == max(tokens * 8, unique) == len(r.row_token)
        per_token: dict[int, set[int]] = {}
        for pair, row in enumerate(r.pair_row):
            expert = next(e for e, a, b in r.segments if a <= row < b)
            assert r.row_token[row] == pair // 8
            per_token.setdefault(pair // 8, set()).add(expert)
        assert all(len(s) == 8 for s in per_token.values())  # k_e distinct experts each


def test_moe_layer_grouped_and_loop_agree_with_a_dense_reference():
    torch = pytest.importorskip("torch")
    from simspec.calibrate import bench

    spec = bench_model(QWEN, "tiny")
    rand = bench._Random(torch.device("cpu"))
    w = bench.moe_weights(spec, rand)
    w = bench.MoeWeights(w.router.float(), w.gate_up.float(), w.down.float())
    x = rand(5, spec.hidden_size, scale=1.0, dtype=torch.float32)
    order = list(range(spec.moe.num_experts))
    routing = bench.forced_routing(5, 8, 12, order, spec.moe.num_experts)
    loop = bench.moe_layer(x, w, 8, routing, grouped=False)()
    top = torch.topk(torch.softmax(x @ w.router, -1), 8, -1).values
    expected = torch.zeros_like(x)
    for t in range(5):
        for j in range(8):
            e = (t * 8 + j) % 12
            gate, up = (x[t] @ w.gate_up[e]).chunk(2)
            expected[t] += top[t, j] * ((torch.nn.functional.silu(gate) * up) @ w.down[e])
    assert torch.allclose(loop, expected, atol=1e-5)
    grouped, _ = bench.probe_grouped_mm(torch.device("cpu"))
    if grouped:
        wb = bench.MoeWeights(*(t.to(torch.bfloat16) for t in (w.router, w.gate_up, w.down)))
        xb = x.to(torch.bfloat16)
        a = bench.moe_layer(xb, wb, 8, routing, grouped=True)().float()
        b = bench.moe_layer(xb, wb, 8, routing, grouped=False)().float()
        assert torch.allclose(a, b, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize(
    "name", ["deepseek-v3", "qwen3-next-80b-a3b", "gpt-oss-20b", "llama-3.1-8b"]
)
def test_benchmarks_run_for_every_architecture_kind(name):
    """MLA, linear attention + shared experts, sliding windows, dense: the CPU code paths."""
    pytest.importorskip("torch")
    from simspec.calibrate import bench

    spec = bench_model(catalog.get_model(name), "tiny")
    plan = dataclasses.replace(
        make_plan(spec, quick=True, shapes="tiny"),
        moe_tokens=(1, 4),
        gemm_tokens=(1, 8),
        attention_batch=(2,),
        attention_query_tokens=(1, 3),
        warmup=0,
        repetitions=1,
    )
    result = bench.run_all(spec, plan, device="cpu")
    assert ("moe" in result.tables) == bool(spec.shape.num_moe_layers)
    assert len(result.tables["stack"]) == len(plan.stack_points)
    data = assemble_profile(
        spec,
        result.tables,
        metadata={**META, "gpu": "", "model": name, "shapes": "tiny"},
        peak={
            "hbm_bytes_per_s": result.ceilings["copy_bytes_per_s"],
            "bf16_flops_per_s": result.ceilings["matmul_flops_per_s"],
        },
        ceilings=result.ceilings,
    )
    profile_from_dict(data, name)


def test_explicit_causal_mask_equals_torchs_lower_right_bias():
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right

    from simspec.calibrate import bench

    cpu = torch.device("cpu")
    assert bench._causal_mask(1, 9, cpu, bias=False) is None
    for q, keys in [(2, 5), (4, 4), (3, 17)]:
        mask = bench._causal_mask(q, keys, cpu, bias=False)
        assert torch.equal(mask, causal_lower_right(q, keys)._materialize(cpu))
    assert not bench.lower_right_bias_works(bench_model(QWEN, "tiny"), cpu)  # GPU only
