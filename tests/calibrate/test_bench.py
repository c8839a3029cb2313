"""The torch microbenchmarks on a CPU (tiny shapes): every kernel's code path, end to end."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simspec import catalog
from simspec.calibrate.plan import bench_model, make_plan
from simspec.cli import main
from simspec.fit import assemble_profile
from simspec.profile import load_profile, profile_from_dict

QWEN = catalog.get_model("qwen3-30b-a3b")
META = {
    "kind": "measured",
    "device": "synthetic",
    "gpu": "",
    "model": "qwen3-30b-a3b",
    "shapes": "tiny",
    "date": "",
    "command": "",
}


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
    assert data["tables"]["floors"]["drafter"] == "eagle3-qwen3-30b-a3b"  # the catalog's head
    assert sorted(p.name for p in raw.iterdir()) == [
        "attention.csv",
        "ceilings.csv",
        "floors.csv",
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
            "costs.allow_foreign_profile=true",  # a CPU profile on the H100 scenario
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
    from simspec.calibrate.moe import forced_routing

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
    from simspec.calibrate import moe
    from simspec.calibrate.common import RandomTensors

    spec = bench_model(QWEN, "tiny")
    rand = RandomTensors(torch.device("cpu"))
    w = moe.moe_weights(spec, rand)
    w = moe.MoeWeights(w.router.float(), w.gate_up.float(), w.down.float())
    x = rand(5, spec.hidden_size, scale=1.0, dtype=torch.float32)
    order = list(range(spec.moe.num_experts))
    routing = moe.forced_routing(5, 8, 12, order, spec.moe.num_experts)
    loop = moe.moe_layer(x, w, 8, routing, grouped=False)()
    top = torch.topk(torch.softmax(x @ w.router, -1), 8, -1).values
    expected = torch.zeros_like(x)
    for t in range(5):
        for j in range(8):
            e = (t * 8 + j) % 12
            gate, up = (x[t] @ w.gate_up[e]).chunk(2)
            expected[t] += top[t, j] * ((torch.nn.functional.silu(gate) * up) @ w.down[e])
    assert torch.allclose(loop, expected, atol=1e-5)
    grouped, _ = moe.probe_grouped_mm(torch.device("cpu"))
    if grouped:
        wb = moe.MoeWeights(*(t.to(torch.bfloat16) for t in (w.router, w.gate_up, w.down)))
        xb = x.to(torch.bfloat16)
        a = moe.moe_layer(xb, wb, 8, routing, grouped=True)().float()
        b = moe.moe_layer(xb, wb, 8, routing, grouped=False)().float()
        assert torch.allclose(a, b, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize(
    "name", ["deepseek-v3", "qwen3-next-80b-a3b", "gpt-oss-20b", "llama-3.1-8b"]
)
def test_benchmarks_run_for_every_architecture_kind(name):
    """MLA, linear attention + shared experts, sliding windows, dense: the CPU code paths."""
    pytest.importorskip("torch")
    from simspec.calibrate.run import run_all

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
    result = run_all(spec, plan, device="cpu")
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

    from simspec.calibrate.attention import causal_mask, lower_right_bias_works

    cpu = torch.device("cpu")
    assert causal_mask(1, 9, cpu, bias=False) is None
    for q, keys in [(2, 5), (4, 4), (3, 17)]:
        mask = causal_mask(q, keys, cpu, bias=False)
        assert torch.equal(mask, causal_lower_right(q, keys)._materialize(cpu))
    assert not lower_right_bias_works(bench_model(QWEN, "tiny"), cpu)  # GPU only


def test_kernel_floor_table_covers_every_op_token_count_and_draft_batch():
    torch = pytest.importorskip("torch")
    from simspec.calibrate.common import RandomTensors
    from simspec.calibrate.floors import DRAFT_BATCH, OPS_TOKENS, bench_floors, tiny_drafter
    from simspec.calibrate.timing import CpuTimer

    spec = bench_model(QWEN, "tiny")
    drafter = tiny_drafter(catalog.get_drafter("eagle3-qwen3-30b-a3b"))
    rand = RandomTensors(torch.device("cpu"))
    table, raw, _ = bench_floors(spec, drafter, CpuTimer(rand.device, 0, 2), rand, lambda _: None)
    ops = {(row["op"], row["tokens"]) for row in table["ops"]}
    names = {"residual_add", "rms_norm", "rope", "router_topk", "swiglu", "gather_rows"}
    assert ops == {(n, t) for n in names for t in OPS_TOKENS}
    assert [row["batch"] for row in table["draft"]] == list(DRAFT_BATCH)
    times = [table["kernel_floor_s"]["eager"]] + [row["eager"] for row in table["ops"]]
    assert all(t > 0 for t in times)
    sweep = table["sweep"]
    assert len(sweep["gemv_s"]) == len(sweep["stream_s"]) == len(sweep["bytes"]) > 1
    assert sweep["stream_bytes_moved"] == [2 * b for b in sweep["bytes"]]
    rows = 1 + len(table["ops"]) + len(table["draft"]) + 2 * len(sweep["bytes"])
    assert len(raw) == 2 * rows  # every repetition


def test_floor_ops_and_draft_step_compute_what_they_name():
    torch = pytest.importorskip("torch")
    from simspec.calibrate.common import RandomTensors
    from simspec.calibrate.floors import draft_step, layer_ops, tiny_drafter

    spec = bench_model(QWEN, "tiny")
    rand = RandomTensors(torch.device("cpu"))
    ops = layer_ops(spec, 4, rand)
    values, _ = ops["router_topk"]()
    assert values.shape == (4, spec.moe.experts_per_token)
    assert torch.all(values[:, :-1] >= values[:, 1:])  # sorted top-k of a softmax
    assert float(values.sum(dim=-1).max()) <= 1.0 + 1e-5
    q, k = ops["rope"]()
    assert q.shape == (4, spec.attention.num_heads, spec.attention.head_dim)
    assert k.shape == (4, spec.attention.num_kv_heads, spec.attention.head_dim)
    drafter = tiny_drafter(catalog.get_drafter("eagle3-qwen3-30b-a3b"))
    top = draft_step(drafter, 3, 16, rand)()
    assert top.shape == (3, 8)
    assert torch.all(top > 0) and float(top.sum(dim=-1).max()) <= 1.0 + 1e-5
