"""The engine's per-request time per target pass (request_overhead_s) against its closed form."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec import catalog
from simspec.costs.parallel import request_overhead_s
from simspec.costs.passes import pass_constants, pass_cost, target_pass_cost
from simspec.params import RooflineParams
from simspec.params.presets import PRESET_KEYS, EnginePreset

H100 = catalog.get_gpu("h100-sxm")
QWEN = catalog.get_model("qwen3-30b-a3b")


def test_closed_form_is_linear_in_requests_and_vectorised():
    assert float(request_overhead_s(8, 5e-5)) == pytest.approx(4e-4, rel=1e-15)
    n = np.array([1.0, 2.0, 64.0])
    assert request_overhead_s(n, 1e-4).tolist() == pytest.approx([1e-4, 2e-4, 6.4e-3])
    # Both arguments broadcast (the vectorised pass-cost path prices many passes at once).
    grid = request_overhead_s(n[:, None], np.array([0.0, 1e-4])[None, :])
    assert grid.shape == (3, 2) and grid[:, 0].tolist() == [0.0, 0.0, 0.0]
    assert float(request_overhead_s(0, 1e-4)) == 0.0


def _cost(params, tokens, gpus=1):
    tokens = np.asarray(tokens)
    ctx = np.full(len(tokens), 300)
    unique = np.full(QWEN.shape.num_moe_layers, 20.0)
    return target_pass_cost(
        QWEN.shape, H100, params, tokens, ctx, unique, num_gpus=gpus, hidden_size=QWEN.hidden_size
    )


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_target_pass_adds_requests_times_the_constant_whatever_the_gpu_count(gpus):
    base = RooflineParams()
    per = 2.5e-4
    tokens = [1, 4, 4, 1, 2]  # five requests, 12 tokens: the term counts requests, not tokens
    plain = _cost(base, tokens, gpus)
    more = _cost(dataclasses.replace(base, request_overhead_s=per), tokens, gpus)
    assert more.overhead_s - plain.overhead_s == pytest.approx(5 * per, rel=1e-12)
    assert (more.moe_s, more.attention_s, more.other_s) == (
        plain.moe_s,
        plain.attention_s,
        plain.other_s,
    )


def test_default_is_zero_and_leaves_every_pass_bit_identical():
    assert RooflineParams().request_overhead_s == 0.0
    explicit = dataclasses.replace(RooflineParams(), request_overhead_s=0.0)
    assert _cost(RooflineParams(), [1, 3]) == _cost(explicit, [1, 3])
    assert _cost(RooflineParams(), [1, 3]).overhead_s == RooflineParams().pass_overhead_s


def test_passes_with_their_own_overhead_do_not_pay_it():
    # Draft steps and the draft extend pass their overhead explicitly: the per-request term is
    # the target pass's (the scheduler's iteration), not each drafter pass's.
    params = dataclasses.replace(RooflineParams(), request_overhead_s=1e-3)
    c = pass_constants(QWEN.shape, H100, params)
    tokens, ctx = np.array([1, 1, 1]), np.array([10, 10, 10])
    unique = np.full(QWEN.shape.num_moe_layers, 8.0)
    assert pass_cost(c, tokens, ctx, unique, overhead_s=2e-4).overhead_s == 2e-4


def test_engine_presets_may_set_it():
    assert "request_overhead_s" in PRESET_KEYS
    preset = EnginePreset(name="x", request_overhead_s=5e-5)
    assert preset.overrides() == {"request_overhead_s": 5e-5}
