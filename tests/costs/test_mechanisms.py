"""Engine time by mechanism, each against its closed form.

Kernel floors (kernels counted from the architecture x the GPU's floor, CUDA graph or eager),
NCCL's collective latency model, the draft step's floor, the verify bookkeeping with and
without an overlap scheduler, and the top-p renormalisation of a sampled verify.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from simspec import catalog
from simspec.config.load import load_scenario
from simspec.costs.parallel import all_to_all_s, allreduce_s
from simspec.costs.passes import pass_constants, pass_cost
from simspec.costs.roofline import RooflineCostModel
from simspec.errors import ScenarioError
from simspec.params import RooflineParams
from simspec.physics.precision import with_precision
from simspec.policies import FixedPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
DRAFTER = catalog.get_drafter("eagle3-qwen3-30b-a3b")
CTX = np.array([100, 200, 300])
ACCEPTED = np.array([1, 3, 2])


def _model(gpus: int = 1, **params) -> RooflineCostModel:
    p = RooflineParams(draft_extend_passes=0.0, **params)
    return RooflineCostModel(target=QWEN, drafter=DRAFTER, gpu=H100, params=p, num_gpus=gpus)


def _kernels(spec) -> int:
    """Kernels of one pass from the config alone: attention block 6 (GQA, + 2 with per-head
    query/key norms) or 11 (MLA), MoE block 3 (+4 with shared experts), dense FFN 4, and 5 per
    pass (every layer of these models has full attention)."""
    attention = 11 if spec.attention.kind == "mla" else 6 + (2 if spec.attention.qk_norm else 0)
    moe = 3 + (4 if spec.moe.num_shared_experts else 0)
    moe_layers = 0 if not spec.moe.num_experts else spec.num_layers - spec.moe.first_dense_layers
    return spec.num_layers * attention + moe_layers * moe + (spec.num_layers - moe_layers) * 4 + 5


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3", "llama-3.1-8b", "glm-4.7"])
@pytest.mark.parametrize("graphs", [True, False])
def test_a_pass_pays_every_kernels_floor(name, graphs):
    spec = catalog.get_model(name)
    floor = H100.kernel_floor_graph_s if graphs else H100.kernel_floor_eager_s
    params = RooflineParams(cuda_graphs=graphs)
    c = pass_constants(spec.shape, H100, params)
    assert c.floor_s == pytest.approx(_kernels(spec) * floor, rel=1e-12)
    cost = pass_cost(c, np.array([1]), np.array([10]), np.full(spec.shape.num_moe_layers, 8.0))
    assert cost.floors_s == c.floor_s
    assert cost.overhead_s == params.pass_overhead_s  # the engine's host time, apart


def test_eager_passes_cost_more_by_the_floor_difference():
    shape, k = QWEN.shape, _kernels(QWEN)
    graph = pass_constants(shape, H100, RooflineParams(cuda_graphs=True))
    eager = pass_constants(shape, H100, RooflineParams(cuda_graphs=False))
    gap = H100.kernel_floor_eager_s - H100.kernel_floor_graph_s
    assert gap > 0
    assert eager.floor_s - graph.floor_s == pytest.approx(k * gap, rel=1e-12)


def test_collective_latency_follows_nccls_ring_model():
    base, step = H100.collective_latency_s, H100.collective_step_latency_s
    for r in (2, 4, 8):
        assert allreduce_s(0.0, r, base, 1e11, step) == pytest.approx(base + 2 * (r - 1) * step)
        assert all_to_all_s(0.0, r, base, 1e11, step) == pytest.approx(base + (r - 1) * step)
    small = [allreduce_s(1e4, r, base, H100.link_bytes_per_s, step) for r in (2, 4, 8)]
    assert small == sorted(small)  # grows with the tensor-parallel degree


def test_a_draft_step_pays_its_kernels_floors():
    bare = dataclasses.replace(H100, kernel_floor_graph_s=0.0)
    floored = RooflineCostModel(
        target=QWEN, drafter=DRAFTER, gpu=H100, params=RooflineParams(), num_gpus=1
    )
    plain = dataclasses.replace(floored, gpu=bare)
    # One head layer: a GQA layer and a dense FFN (6 + 4) and 8 kernels outside it.
    kernels = DRAFTER.num_layers * 10 + 8
    diff = floored.draft_step(CTX) - plain.draft_step(CTX)
    assert diff == pytest.approx(kernels * H100.kernel_floor_graph_s, rel=1e-9)


@pytest.mark.parametrize("overlap", [False, True])
def test_host_syncs_are_exposed_only_without_an_overlap_scheduler(overlap):
    x = 1.5e-3
    zero = _model(overlap_scheduling=overlap).speculation_overhead_s(ACCEPTED, CTX)
    more = _model(overlap_scheduling=overlap, verify_overhead_s=x)
    extra = more.speculation_overhead_s(ACCEPTED, CTX) - zero
    assert extra == pytest.approx(0.0 if overlap else x, abs=1e-15)
    assert zero == pytest.approx(6 * H100.kernel_floor_graph_s, rel=1e-12)  # bookkeeping


def _verify_other(temperature: float, top_p: float, tokens: np.ndarray) -> float:
    m = _model(temperature=temperature, top_p=top_p)
    unique = np.full(QWEN.shape.num_moe_layers, 20.0)
    return m.verify_pass(tokens, np.full(len(tokens), 500), unique).other_s


def test_greedy_or_full_nucleus_verify_has_no_renormalisation():
    tokens = np.array([4, 4])
    greedy = _verify_other(0.0, 1.0, tokens)
    assert _verify_other(0.0, 0.9, tokens) == greedy
    assert _verify_other(0.7, 1.0, tokens) == greedy


def test_sampled_verify_renormalises_each_row_in_waves_of_one_row_per_sm():
    params = RooflineParams()
    row_s = params.top_p_renorm_passes * QWEN.vocab_size * 4.0 / (H100.hbm_bytes_per_s / 132)
    for batch, k in ((1, 3), (16, 4), (64, 7)):
        tokens = np.full(batch, k + 1)
        extra = _verify_other(0.7, 0.9, tokens) - _verify_other(0.0, 1.0, tokens)
        waves = math.ceil(batch * (k + 1) / H100.num_sms)
        assert extra == pytest.approx(waves * row_s, rel=1e-9)
    plain = np.ones(8, dtype=int)  # a decode pass verifies nothing: no renormalisation
    assert _verify_other(0.7, 0.9, plain) == _verify_other(0.0, 1.0, plain)


SMALL = {
    "workload.num_requests": 4,
    "workload.concurrency": 2,
    "workload.loop": "closed",
    "workload.prompt_tokens": 64,
    "workload.output_tokens": 24,
    "hardware.num_gpus": 2,
}


def _end(overrides: dict[str, object], k: int) -> float:
    s = load_scenario(overrides={**SMALL, **overrides})
    log = run_policy(build_setup(s), FixedPolicy(draft_tokens=k))
    return max(r.finish_s for r in log.requests)


def test_scenario_keys_reach_the_cost_model():
    s = load_scenario(
        overrides={
            "workload.temperature": 0.6,
            "workload.top_p": 0.9,
            "engine.overlap_scheduling": True,
            "engine.cuda_graphs": False,
        }
    )
    p = s.roofline
    assert (p.temperature, p.top_p, p.overlap_scheduling, p.cuda_graphs) == (0.6, 0.9, True, False)
    # Sampling makes a speculative run slower, plain decoding not at all.
    sampled = {"workload.temperature": 0.6, "workload.top_p": 0.9}
    assert _end(sampled, 3) > _end({}, 3)
    assert _end(sampled, 0) == _end({}, 0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("workload.temperature", -0.1),
        ("workload.top_p", 0.0),
        ("workload.top_p", 1.5),
        ("engine.overlap_scheduling", "sometimes"),
        ("engine.cuda_graphs", 3),
    ],
)
def test_bad_values_name_their_key(key, value):
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={key: value})
    assert key.split(".")[-1] in err.value.key_path


def test_scenario_owned_keys_are_not_costs_keys():
    for key in ("temperature", "top_p", "overlap_scheduling", "cuda_graphs"):
        with pytest.raises(ScenarioError):
            load_scenario(overrides={f"costs.{key}": 1})


def test_only_moe_layers_that_dispatch_add_their_dispatch_kernels():
    from simspec.costs.parallel import Parallelism

    shape, floor = QWEN.shape, H100.kernel_floor_graph_s
    tp = pass_constants(shape, H100, RooflineParams(), 8, parallel=Parallelism.of(8, 8, 1))
    ep = pass_constants(shape, H100, RooflineParams(), 8, parallel=Parallelism.of(8, 8, 8))
    wide = pass_constants(shape, H100, RooflineParams(), 8, parallel=Parallelism.of(8, 1, 8))
    single = pass_constants(shape, H100, RooflineParams(), 1, parallel=Parallelism.of(1, 1, 1))
    # Experts inside the tensor-parallel group: every GPU holds every token, nothing to send.
    assert ep.floor_s == tp.floor_s
    # Experts beyond it: count tokens per rank, permute, unpermute, combine, 4 per MoE layer.
    extra = shape.num_moe_layers * 4 * floor
    assert wide.floor_s - single.floor_s == pytest.approx(extra, rel=1e-12)


def test_overlap_scheduling_defaults_to_the_presets_design_and_the_scenario_wins():
    design = {name: catalog.get_engine(name).overlap_scheduling for name in catalog.engine_names()}
    for name, setting in design.items():
        s = load_scenario(overrides={"engine.preset": name})
        assert s.roofline.overlap_scheduling is bool(setting)
        for value in (True, False):
            forced = load_scenario(
                overrides={"engine.preset": name, "engine.overlap_scheduling": value}
            )
            assert forced.roofline.overlap_scheduling is value


def test_a_preset_may_set_its_sampling_path():
    from simspec.params.presets import EnginePreset

    preset = EnginePreset(name="x", top_p_renorm_passes=3.0)
    assert preset.overrides() == {"top_p_renorm_passes": 3.0}
    tokens, ctx = np.array([4, 4]), np.array([500, 500])
    unique = np.full(QWEN.shape.num_moe_layers, 20.0)

    def extra(passes: float) -> float:
        sampled = _model(temperature=0.7, top_p=0.9, top_p_renorm_passes=passes)
        greedy = _model(top_p_renorm_passes=passes)
        return (
            sampled.verify_pass(tokens, ctx, unique).other_s
            - greedy.verify_pass(tokens, ctx, unique).other_s
        )

    assert extra(3.0) == pytest.approx(extra(30.0) / 10, rel=1e-9)  # linear in the passes
    assert extra(0.0) == 0.0


@pytest.mark.parametrize(("expert", "priced"), [("fp8", True), ("bf16", False), ("nvfp4", False)])
def test_the_fp8_moe_term_adds_once_per_moe_layer_of_fp8_experts_only(expert, priced):
    """An engine's FP8 MoE path (``fp8_moe_s_per_layer``) adds its time once per MoE layer of a
    pass, whatever the batch, and nothing where the routed experts are not FP8."""
    spec = with_precision(QWEN, "bf16", expert=expert)
    for tokens in (np.array([1]), np.array([1, 4, 2, 8])):
        args = (tokens, np.full(len(tokens), 500), np.full(QWEN.shape.num_moe_layers, 30.0))
        base = pass_cost(pass_constants(spec.shape, H100, RooflineParams()), *args)
        extra = pass_cost(
            pass_constants(spec.shape, H100, RooflineParams(fp8_moe_s_per_layer=4e-5)), *args
        )
        added = spec.shape.num_moe_layers * 4e-5 if priced else 0.0
        assert extra.moe_s - base.moe_s == pytest.approx(added, abs=1e-15)
        assert extra.total_s - base.total_s == pytest.approx(added, abs=1e-15)
