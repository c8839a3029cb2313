"""The memos of a single pass (simspec.costs.passes): the same numbers as without them.

A pass keeps the terms of each token count, and the MoE total of each (token count, read-only
experts array) pair, in its constants. Every answer must equal the arithmetic of constants with
empty memos, on the first call and on every repeat, and a writeable experts array is never
taken from the memo (it may change between calls).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simspec.costs import passes
from simspec.costs.passes import pass_cost
from tests.costs.test_pass_cost_many import MODELS, _random_case


def fresh(c: passes.PassConstants) -> passes.PassConstants:
    """The same constants with empty memos."""
    return dataclasses.replace(c, token_memo={}, moe_memo={})


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(4))
def test_memoised_passes_equal_passes_without_memos(model, seed):
    c, tokens, contexts, unique, _ = _random_case(seed, model)
    frozen = unique.copy()
    frozen.setflags(write=False)
    tokens[1::2] = tokens[0]  # repeated token counts with other contexts and experts
    for _ in range(2):  # the second round reads every term from the memos
        for t, x, u, f in zip(tokens, contexts, unique, frozen, strict=True):
            want = pass_cost(fresh(c), t, x, u)
            assert pass_cost(c, t, x, f) == want
            assert pass_cost(c, t, x, u) == want
    assert len(c.token_memo) == len({float(t.sum()) for t in tokens})
    assert len(c.moe_memo) == (len(tokens) if c.shape.num_moe_layers else 0)


def test_a_writeable_experts_array_is_read_afresh_each_time():
    c, tokens, contexts, unique, _ = _random_case(0, "qwen3-30b-a3b")
    u = unique[0].copy()
    before = pass_cost(c, tokens[0], contexts[0], u)
    u *= 0.5  # the same object, other values
    after = pass_cost(c, tokens[0], contexts[0], u)
    assert after == pass_cost(fresh(c), tokens[0], contexts[0], u)
    assert after.moe_s < before.moe_s
    assert not c.moe_memo


def test_the_memos_stay_bounded(monkeypatch):
    monkeypatch.setattr(passes, "MEMO_ENTRIES", 8)
    c, _, _, unique, _ = _random_case(1, "qwen3-30b-a3b")
    frozen = unique[0].copy()
    frozen.setflags(write=False)
    for n in range(1, 30):
        tokens = np.full(3, n)
        assert pass_cost(c, tokens, tokens, frozen) == pass_cost(fresh(c), tokens, tokens, frozen)
        assert len(c.token_memo) <= 8 and len(c.moe_memo) <= 8
