"""Many passes at once (simspec.costs.passes) against the scalar pass cost, pass by pass.

The scalar :func:`~simspec.costs.passes.pass_cost` is the source of truth; the vectorised path
runs the same term functions on arrays, so every row must equal its pass exactly (not merely
to rounding) on any model shape, parameter set and split.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec import catalog
from simspec.costs.batch import draft_step_totals, verify_totals
from simspec.costs.parallel import Parallelism, max_rank_experts
from simspec.costs.passes import pass_constants, pass_cost, pass_cost_many
from simspec.costs.roofline import RooflineCostModel
from simspec.params import L2_REUSE_MODES, MOE_KERNEL_FORMS, RooflineParams
from tests.helpers import DRAFTER_CASES, roofline_model

# MoE with shared experts and dense layers, dense only, hybrid linear attention (state bytes),
# sliding-window attention, plain MoE.
MODELS = ["deepseek-v3", "llama-3.1-8b", "qwen3-next-80b-a3b", "gpt-oss-20b", "mixtral-8x7b"]
SPLITS = [(1, 0, 1), (2, 0, 1), (8, 0, 8), (8, 8, 2), (4, 2, 4), (8, 1, 8)]  # (GPUs, TP, EP)


def _random_params(rng: np.random.Generator) -> RooflineParams:
    return RooflineParams(
        moe_kernel=str(rng.choice(MOE_KERNEL_FORMS)),
        moe_l2_reuse=str(rng.choice(L2_REUSE_MODES)),
        moe_tile_rows=float(rng.choice([1.0, 16.0, 64.0])),
        moe_efficiency_max=float(rng.uniform(0.3, 1.0)),
        moe_saturation_bytes=float(rng.uniform(1e6, 3e8)),
        moe_launch_s=float(rng.uniform(0, 5e-5)),
        moe_expert_s=float(rng.uniform(0, 1e-6)),
        weight_efficiency=float(rng.uniform(0.3, 1.0)),
        kv_efficiency=float(rng.uniform(0.3, 1.0)),
        compute_efficiency=float(rng.uniform(0.2, 1.0)),
        pass_overhead_s=float(rng.uniform(0, 2e-3)),
        comm_s_per_layer=float(rng.choice([0.0, 3e-6])),
        cuda_graphs=bool(rng.choice([True, False])),
        temperature=float(rng.choice([0.0, 0.7])),
        top_p=float(rng.choice([1.0, 0.9])),
    )


def _random_case(seed: int, model: str):
    rng = np.random.default_rng(seed)
    spec = catalog.get_model(model)
    gpus, tp, ep = SPLITS[seed % len(SPLITS)]
    gpu = catalog.get_gpu(str(rng.choice(catalog.gpu_names())))
    c = pass_constants(
        spec.shape,
        gpu,
        _random_params(rng),
        gpus,
        parallel=Parallelism.of(gpus, tp, ep),
        hidden_size=spec.hidden_size,
    )
    n, b = int(rng.integers(1, 25)), int(rng.integers(1, 40))
    tokens = rng.integers(1, 600 if seed % 3 == 0 else 12, size=(n, b))  # prefill-sized too
    contexts = rng.integers(0, 6000, size=(n, b)).astype(float)
    if seed % 2:  # non-integer contexts: still exact (sums run the same way)
        contexts += rng.uniform(0, 1, size=(n, b))
    experts = spec.shape.num_experts
    unique = rng.uniform(0, experts, size=(n, spec.shape.num_moe_layers))
    unique[:, ::3] = np.round(unique[:, ::3])  # integer counts, zeros and a full layer too
    if unique.size:
        unique[0, 0], unique[-1, -1] = 0.0, float(experts)
    return c, tokens, contexts, unique, rng


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(8))
def test_many_equals_the_scalar_pass_row_by_row(model, seed):
    c, tokens, contexts, unique, _ = _random_case(seed, model)
    many = pass_cost_many(c, tokens, contexts, unique)
    one = [pass_cost(c, t, x, u).total_s for t, x, u in zip(tokens, contexts, unique, strict=True)]
    assert many.shape == (len(tokens),)
    assert np.array_equal(many, np.array(one))
    overhead = pass_cost_many(c, tokens, contexts, unique, overhead_s=1e-3)
    assert np.array_equal(
        overhead,
        [pass_cost(c, tokens[0], contexts[0], unique[0], overhead_s=1e-3).total_s]
        + [
            pass_cost(c, t, x, u, overhead_s=1e-3).total_s
            for t, x, u in zip(tokens[1:], contexts[1:], unique[1:], strict=True)
        ],
    )


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", [0, 2, 4])  # integer contexts
def test_integer_arrays_price_the_pass_of_their_floats(model, seed):
    """pass_cost uses int64 tokens and contexts as they are: the same bits as their floats."""
    c, tokens, contexts, unique, _ = _random_case(seed, model)
    ints = contexts.astype(np.int64)
    for t, x, u in zip(tokens, ints, unique, strict=True):
        assert t.dtype == np.int64
        assert pass_cost(c, t, x, u) == pass_cost(c, t.astype(float), x.astype(float), u)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(4))
def test_counted_columns_equal_the_expanded_batch(model, seed):
    c, tokens, contexts, unique, rng = _random_case(seed, model)
    counts = rng.integers(0, 6, size=tokens.shape[1])
    counts[-1] = 1
    expanded = pass_cost_many(
        c, np.repeat(tokens, counts, axis=1), np.repeat(contexts, counts, axis=1), unique
    )
    counted = pass_cost_many(c, tokens, contexts, unique, counts=counts)
    if seed % 2:  # fractional contexts: the weighted sums round differently
        np.testing.assert_allclose(counted, expanded, rtol=1e-12, atol=0)
    else:  # integers: every partial sum is exact, so the same bits
        assert np.array_equal(counted, expanded)


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "deepseek-v3", "llama-3.1-8b"])
@pytest.mark.parametrize("seed", range(6))
def test_a_table_of_expert_counts_gives_the_same_passes(model, seed):
    c, tokens, contexts, _, rng = _random_case(seed, model)
    layers = c.shape.num_moe_layers
    values = rng.uniform(0, max(c.shape.num_experts, 1), size=(7, layers))
    index = rng.integers(0, 7, size=(len(tokens), layers))
    direct = np.take_along_axis(values, index, axis=0)
    tokens[:, 0] = tokens[0, 0]  # repeated token totals share grid rows
    want = pass_cost_many(c, tokens, contexts, direct)
    assert np.array_equal(pass_cost_many(c, tokens, contexts, values, unique_index=index), want)


def test_max_rank_experts_on_arrays_is_the_scalar_elementwise():
    u = np.concatenate([np.arange(0.0, 257.0), np.random.default_rng(0).uniform(0, 256, 50)])
    for ranks in (1, 2, 8, 16):
        want = [max_rank_experts(float(x), 256, ranks) for x in u]
        assert np.array_equal(max_rank_experts(u, 256, ranks), want)
        assert isinstance(max_rank_experts(3.0, 256, ranks), float)


@pytest.mark.parametrize("num_gpus", [1, 4])
@pytest.mark.parametrize("target, drafter, draft_model", DRAFTER_CASES)
def test_draft_steps_and_verify_passes_of_the_model(num_gpus, target, drafter, draft_model):
    model = roofline_model(target, drafter, draft_model, num_gpus)
    rng = np.random.default_rng(num_gpus)
    ctx = rng.integers(1, 8000, size=(30, 5))
    steps = draft_step_totals(model, ctx)
    assert np.array_equal(steps, [model.draft_step(row) for row in ctx])
    counts = np.array([3, 0, 1, 7, 1])
    counted = draft_step_totals(model, ctx, counts=counts)
    assert np.array_equal(counted, [model.draft_step(np.repeat(row, counts)) for row in ctx])
    assert np.array_equal(draft_step_totals(model, np.zeros((3, 0))), np.zeros(3))
    tokens = rng.integers(1, 9, size=(30, 5))
    unique = rng.integers(0, 60, size=(30, model.target.shape.num_moe_layers)).astype(float)
    want = [model.verify_pass(t, c, u).total_s for t, c, u in zip(tokens, ctx, unique, strict=True)]
    assert np.array_equal(verify_totals(model, tokens, ctx, unique), want)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Slower(RooflineCostModel):
    """A user's model that overrides the scalar methods only."""

    def verify_pass(self, tokens_per_request, context_tokens, unique_experts):
        cost = RooflineCostModel.verify_pass(
            self, tokens_per_request, context_tokens, unique_experts
        )
        return dataclasses.replace(cost, overhead_s=cost.overhead_s + 1.0)

    def draft_step(self, context_tokens):
        return RooflineCostModel.draft_step(self, context_tokens) + 1.0


def test_a_subclass_overriding_the_scalar_methods_is_not_bypassed():
    target, drafter = (
        catalog.get_model("qwen3-30b-a3b"),
        catalog.get_drafter("eagle3-qwen3-30b-a3b"),
    )
    gpu = catalog.get_gpu("h100-sxm")
    plain = RooflineCostModel(target=target, drafter=drafter, gpu=gpu)
    slower = _Slower(target=target, drafter=drafter, gpu=gpu)
    tokens, ctx = np.array([[1, 2], [3, 1]]), np.array([[100, 900], [40, 50]])
    unique = np.full((2, 48), 12.0)
    np.testing.assert_allclose(  # the +1 enters the sum at another place: rounding only
        verify_totals(slower, tokens, ctx, unique),
        verify_totals(plain, tokens, ctx, unique) + 1,
        rtol=1e-15,
    )
    np.testing.assert_array_equal(
        draft_step_totals(slower, ctx), draft_step_totals(plain, ctx) + 1.0
    )


def test_many_rejects_mismatched_shapes():
    c = pass_constants(
        catalog.get_model("qwen3-30b-a3b").shape, catalog.get_gpu("h100-sxm"), RooflineParams()
    )
    with pytest.raises(ValueError, match="must be"):
        pass_cost_many(c, np.ones(3), np.ones(3), np.ones((3, 48)))
