"""The draft phase of a step: the depths every request drafts are priced in one call."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.costs.batch import draft_phase_s, tree_draft_phase_s
from simspec.costs.roofline import RooflineCostModel
from tests.helpers import DRAFTER_CASES, roofline_model

DRAFTS = [[3, 3, 3, 3], [4, 2, 3, 2], [0, 3, 3], [1, 1], [5], [0, 0], [2, 6, 2, 2, 9]]


def by_depth(model, contexts: np.ndarray, ks: np.ndarray) -> float:
    """The definition: draft step j for every request with k_b >= j, summed in depth order."""
    return float(
        sum(model.draft_step(contexts[ks >= j] + (j - 1)) for j in range(1, int(ks.max()) + 1))
    )


@pytest.mark.parametrize("num_gpus", [1, 4])
@pytest.mark.parametrize("target, drafter, draft_model", DRAFTER_CASES)  # a head, a dense model
@pytest.mark.parametrize("drafts", DRAFTS, ids=lambda d: "-".join(map(str, d)))
def test_the_phase_is_the_sum_over_depths(num_gpus, target, drafter, draft_model, drafts):
    """The phase equals the per-depth sum bit for bit."""
    model = roofline_model(target, drafter, draft_model, num_gpus)
    ks = np.array(drafts)
    contexts = np.random.default_rng(len(drafts)).integers(1, 9000, size=len(ks))
    assert draft_phase_s(model, contexts, ks) == by_depth(model, contexts, ks)
    assert draft_phase_s(model, contexts[:0], ks[:0]) == 0.0


@pytest.mark.parametrize("target, drafter, draft_model", DRAFTER_CASES)
def test_the_phase_holds_for_float_contexts_negative_k_and_large_batches(
    target, drafter, draft_model
):
    """The head drafter's two-sum shortcut takes integer contexts; anything else the general
    path: all of them equal the per-depth definition."""
    model = roofline_model(target, drafter, draft_model)
    rng = np.random.default_rng(7)
    contexts = rng.integers(1, 30_000, size=256)
    for ks in (np.full(256, 5), rng.integers(-1, 8, size=256), rng.integers(0, 2, size=256)):
        want = by_depth(model, contexts, ks)
        assert draft_phase_s(model, contexts, ks) == want
        assert draft_phase_s(model, contexts.astype(float), ks) == want
        assert draft_phase_s(model, contexts + 0.5, ks) == by_depth(model, contexts + 0.5, ks)


class SlowerSteps(RooflineCostModel):
    """A subclass whose draft steps cost more: its own steps, never the shortcut, make the phase."""

    def draft_step(self, context_tokens):
        return RooflineCostModel.draft_step(self, context_tokens) + 1.0


def test_an_overridden_draft_step_prices_the_phase():
    head = roofline_model(*DRAFTER_CASES[0])
    slower = SlowerSteps(target=head.target, drafter=head.drafter, gpu=head.gpu)
    contexts, ks = np.array([100, 200, 300]), np.array([2, 4, 3])
    assert draft_phase_s(slower, contexts, ks) == by_depth(slower, contexts, ks)
    assert draft_phase_s(slower, contexts, ks) == pytest.approx(
        draft_phase_s(head, contexts, ks) + 4
    )


class SumCosts:
    """A cost model that prices a draft step at the sum of its contexts."""

    def draft_step(self, context_tokens):
        return float(np.sum(context_tokens))


def test_each_depth_runs_for_the_requests_still_drafting():
    contexts = np.array([10, 20, 30])
    # Depths 1..3 for all: rows (10 20 30), (11 21 31), (12 22 32).
    assert draft_phase_s(SumCosts(), contexts, np.array([3, 3, 3])) == 60 + 63 + 66
    # Depths 1, 2 shared; depth 3 for two requests (12 + 32), depth 4 for one (13).
    assert draft_phase_s(SumCosts(), contexts, np.array([4, 2, 3])) == 60 + 63 + 44 + 13
    assert draft_phase_s(SumCosts(), contexts, np.array([0, 0, 0])) == 0


def tree_by_depth(model, contexts: np.ndarray, ks: np.ndarray, topk) -> float:
    """The definition: step 1 one row per request with k_b >= 1, step j > 1 its topk rows,
    each at its context plus j - 1, summed in depth order."""
    rows = np.broadcast_to(np.asarray(topk), ks.shape)
    total = 0.0
    for j in range(1, int(ks.max(initial=0)) + 1):
        drafting = ks >= j
        fed = contexts[drafting] + (j - 1)
        total += model.draft_step(fed if j == 1 else np.repeat(fed, rows[drafting]))
    return total


@pytest.mark.parametrize("num_gpus", [1, 4])
@pytest.mark.parametrize("target, drafter, draft_model", DRAFTER_CASES)  # a head, a dense model
@pytest.mark.parametrize("drafts", DRAFTS, ids=lambda d: "-".join(map(str, d)))
def test_the_tree_phase_is_the_sum_over_depths(num_gpus, target, drafter, draft_model, drafts):
    """The tree phase equals the per-depth sum bit for bit, for one topk and per-request ones,
    on integer and float contexts."""
    model = roofline_model(target, drafter, draft_model, num_gpus)
    ks = np.array(drafts)
    rng = np.random.default_rng(len(drafts))
    contexts = rng.integers(1, 9000, size=len(ks))
    for topk in (1, 4, rng.integers(1, 9, size=len(ks))):
        want = tree_by_depth(model, contexts, ks, topk)
        assert tree_draft_phase_s(model, contexts, ks, topk) == want
        assert tree_draft_phase_s(model, contexts.astype(float), ks, topk) == want
    assert tree_draft_phase_s(model, contexts[:0], ks[:0], 4) == 0.0


def test_an_overridden_draft_step_prices_the_tree_phase():
    head = roofline_model(*DRAFTER_CASES[0])
    slower = SlowerSteps(target=head.target, drafter=head.drafter, gpu=head.gpu)
    contexts, ks = np.array([100, 200, 300]), np.array([2, 4, 3])
    assert tree_draft_phase_s(slower, contexts, ks, 2) == tree_by_depth(slower, contexts, ks, 2)
    assert tree_draft_phase_s(slower, contexts, ks, 2) == pytest.approx(
        tree_draft_phase_s(head, contexts, ks, 2) + 4
    )
