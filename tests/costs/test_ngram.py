"""The n-gram (prompt-lookup) drafter against its closed forms.

It has no weights, KV cache or GPU kernels: every draft step and every draft-extend pass costs
0; the engine's host lookup scans each running request's context once per speculative
iteration, t = s_token · Σ_b c_b / min(threads, B) (vLLM's KMP proposer, numba threads over
the requests); the verify pass is the target's whatever drafted its tokens; and the drafter
adds nothing to GPU memory.
"""

from __future__ import annotations

import numpy as np
import pytest

import simspec
from simspec import catalog
from simspec.config.checks import compatible_drafters
from simspec.config.load import scenario_from_dict
from simspec.costs import batch
from simspec.costs.roofline import RooflineCostModel
from simspec.params import RooflineParams
from simspec.physics.launches import VERIFY_KERNELS
from simspec.physics.precision import with_precision

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")
NGRAM = catalog.get_drafter("ngram")
EAGLE = catalog.get_drafter("eagle3-qwen3-30b-a3b")
#: An engine that charges every speculative mechanism: host synchronisations, an extend pass.
ENGINE = RooflineParams(verify_overhead_s=2e-3, draft_extend_passes=1.0, draft_step_overhead_s=1e-4)


def _model(drafter, params=ENGINE, gpus=1):
    return RooflineCostModel(target=QWEN, drafter=drafter, gpu=H100, params=params, num_gpus=gpus)


def _lookup_closed_form(contexts) -> float:
    """vLLM PR #56732's 70.28 ms for 512 x 129,536 tokens on one thread, per token, over the
    requests' summed context, split over min(8, B) threads (PR #24986's cap)."""
    per_token = 70.28e-3 / (512 * 129_536)
    return per_token * float(sum(contexts)) / min(8, len(contexts))


def test_the_catalog_entry_states_vllms_measured_scan_and_thread_cap():
    assert NGRAM.kind == "ngram" and NGRAM.targets == ()
    assert NGRAM.lookup_s_per_token == pytest.approx(70.28e-3 / (512 * 129_536), rel=0.01)
    assert NGRAM.lookup_threads == 8
    assert (NGRAM.prompt_lookup_min, NGRAM.prompt_lookup_max) == (5, 5)  # vLLM's defaults
    assert NGRAM.head_weight_bytes() == 0.0 and NGRAM.head_kv_bytes_per_token() == 0.0


@pytest.mark.parametrize(
    "contexts", [[1000], [1000, 3000], [512] * 8, list(range(100, 2100, 100)), [129_536] * 512]
)
def test_the_lookup_is_the_scan_of_every_context_over_the_threads(contexts):
    assert NGRAM.lookup_s(np.array(contexts)) == pytest.approx(
        _lookup_closed_form(contexts), rel=0.01
    )
    # vLLM's own microbenchmark: 9.95 ms on 8 threads (near-linear split of 70.28 ms).
    if len(contexts) == 512:
        assert 70.28e-3 / 8 <= NGRAM.lookup_s(np.array(contexts)) * 1.0001 <= 9.95e-3
    assert NGRAM.lookup_s(np.array([], dtype=int)) == 0.0
    assert EAGLE.lookup_s(np.array(contexts)) == 0.0


@pytest.mark.parametrize("gpus", [1, 4])
@pytest.mark.parametrize(
    ("ks", "contexts"),
    [([3, 3], [100, 900]), ([0, 5, 2, 1], [64, 2048, 512, 7000]), ([8], [40_000])],
)
def test_the_draft_phase_costs_no_gpu_time_and_the_iteration_its_lookup(gpus, ks, contexts):
    model = _model(NGRAM, gpus=gpus)
    ks, ctx = np.array(ks), np.array(contexts)
    assert model.draft_step(ctx) == 0.0
    assert batch.draft_phase_s(model, ctx, ks) == 0.0
    assert batch.tree_draft_phase_s(model, ctx, ks, 1) == 0.0
    assert model.draft_phase_s(ctx.astype(float), ks) == 0.0  # the general path
    assert np.array_equal(model.draft_phase_totals(ctx[None], ks[None]), [0.0])
    # The speculative iteration: the verify bookkeeping's floors, the exposed host
    # synchronisations, no extend pass, and the lookup over every running request.
    committed = np.minimum(ks, 2) + 1
    fixed = VERIFY_KERNELS * H100.kernel_floor_s(ENGINE.cuda_graphs) + ENGINE.verify_overhead_s
    expected = fixed + _lookup_closed_form(contexts)
    assert model.speculation_overhead_s(committed, ctx) == pytest.approx(expected, rel=0.01)
    assert model.speculation_overhead_s(committed, ctx) - fixed == pytest.approx(
        _lookup_closed_form(contexts), rel=0.01
    )
    many = batch.speculation_overhead_totals(model, committed[None], ctx[None])
    assert many[0] == model.speculation_overhead_s(committed, ctx)
    # An EAGLE-3 head under the same engine pays its extend on top of the same floors: the
    # draft phase's first step widened to the committed tokens, more with more of them.
    eagle = _model(EAGLE, gpus=gpus)
    assert eagle.speculation_overhead_s(committed, ctx) >= fixed
    assert eagle.speculation_overhead_s(committed + 3, ctx) > eagle.speculation_overhead_s(
        committed, ctx
    )
    assert batch.draft_phase_s(eagle, ctx, ks) > 0.0


def test_the_verify_pass_is_the_targets_whatever_the_drafter():
    rng = np.random.default_rng(3)
    ngram, eagle = _model(NGRAM, gpus=2), _model(EAGLE, gpus=2)
    for _ in range(20):
        b = int(rng.integers(1, 9))
        tokens, ctx = rng.integers(1, 9, b), rng.integers(1, 5000, b)
        unique = rng.uniform(1, 128, QWEN.shape.num_moe_layers)
        assert ngram.verify_pass(tokens, ctx, unique) == eagle.verify_pass(tokens, ctx, unique)
        assert ngram.prefill(ctx) == eagle.prefill(ctx)


def _scenario(drafter: str, **model) -> dict:
    return {
        "model": {"target": "qwen3-30b-a3b", "drafter": drafter, **model},
        "hardware": {"gpu": "h100-sxm"},
        "routing": {"overlap": 0.38},
        "acceptance": {"process": "iid", "alpha": 0.7},
        "workload": {"concurrency": 4, "num_requests": 8, "prompt_tokens": 256},
        "engine": {"preset": "sglang"},
        "policies": [{"name": "fixed", "draft_tokens": k} for k in (1, 3, 6)],
    }


@pytest.mark.parametrize("precision", ["catalog", "fp8"])
def test_memory_is_the_targets_alone(precision):
    s = scenario_from_dict(_scenario("ngram", precision=precision))
    target = with_precision(QWEN, precision)
    assert s.weight_bytes == target.shape.total_weight_bytes
    eagle = scenario_from_dict(_scenario(EAGLE.name, precision=precision))
    assert eagle.weight_bytes > s.weight_bytes


def test_a_run_is_never_slower_per_committed_token_than_with_an_eagle_head():
    """The same reference sequences (same acceptance, seed and draft cap) commit the same
    tokens; only the drafting differs, and an n-gram drafter's costs nothing on the GPU."""
    ngram = simspec.run(scenario_from_dict(_scenario("ngram")))
    eagle = simspec.run(scenario_from_dict(_scenario(EAGLE.name)))
    assert NGRAM.max_draft_tokens == EAGLE.max_draft_tokens
    assert len(ngram.policies) == len(eagle.policies) == 4
    for a, b in zip(ngram.policies, eagle.policies, strict=True):
        assert a.label == b.label and a.tokens == b.tokens
        assert a.acceptance_length == b.acceptance_length
        if a.is_baseline:  # k = 0 drafts with neither: the same run
            assert a.tpot_ms == b.tpot_ms and a.gpu_time_s.total == b.gpu_time_s.total
            continue
        assert a.gpu_time_s.total / a.tokens < b.gpu_time_s.total / b.tokens, a.label
        assert a.tpot_ms < b.tpot_ms and a.gpu_time_s["draft"] == 0.0


def test_it_serves_every_target_but_is_never_a_targets_default():
    for name in catalog.model_names():
        names = compatible_drafters(name)
        assert names[-1] == "ngram"
        if len(names) > 1:
            assert catalog.get_drafter(names[0]).kind != "ngram"
