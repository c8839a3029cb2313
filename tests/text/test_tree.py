"""Draft trees: closed forms, sibling exclusivity, SGLang's shape, fits and the samplers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec.text.tree import (
    build_tree,
    draw_miss_ranks,
    draw_rank_paths,
    expected_acceptance_length,
    fit_alpha,
    fit_rank_decay,
    sibling_probabilities,
    tree_capacity,
    verified_drafts,
)


def chain_al(alpha: float, k: int) -> float:
    return (1 - alpha ** (k + 1)) / (1 - alpha)


@pytest.mark.parametrize(("alpha", "k"), [(0.3, 1), (0.6, 3), (0.8, 5), (0.95, 7)])
@pytest.mark.parametrize("rho", [0.0, 0.5, 1.0])
def test_chain_limit_is_leviathan(alpha, k, rho):
    """topk = 1: E[AL] = (1 − a^(k+1)) / (1 − a) whatever the rank decay."""
    assert expected_acceptance_length(alpha, k, 1, 0, rho) == pytest.approx(chain_al(alpha, k))
    assert expected_acceptance_length(alpha, k, 1, k + 1, rho) == pytest.approx(chain_al(alpha, k))


def _enumerated_al(tree, q):
    """E[AL] by brute force over the target token's rank at every depth (0 = none)."""
    topk, depth = tree.topk, tree.depth
    total = 0.0
    for ranks in itertools.product(range(topk + 1), repeat=depth):
        p = np.prod([q[j][r - 1] if r else 1 - q[j].sum() for j, r in enumerate(ranks)])
        total += p * (tree.accepted_length(list(ranks)) + 1)
    return total


def test_full_tree_matches_enumeration_of_root_paths():
    """Σ Π q over the nodes equals the enumeration over every rank outcome."""
    alphas, topk, rho = [0.7, 0.5, 0.4], 2, 0.8
    q = [sibling_probabilities(a, topk, rho) for a in alphas]
    full = build_tree(alphas, 2, topk, 0, rho)  # depth 2: every topk-ary path is grown
    assert full.num_drafts == topk + topk**2
    assert full.expected_acceptance_length() == pytest.approx(_enumerated_al(full, q), abs=1e-12)
    # Depth 3: only the topk likeliest depth-2 nodes, (1, 1) and (1, 2), are expanded.
    pruned = build_tree(alphas, 3, topk, 0, rho)
    assert pruned.num_drafts == 10
    assert (1, 2, 1) in pruned.graph and (2, 1, 1) not in pruned.graph
    assert pruned.expected_acceptance_length() == pytest.approx(
        _enumerated_al(pruned, q), abs=1e-12
    )


@given(
    alpha=st.floats(0, 1),
    rho=st.floats(0, 1),
    topk=st.integers(1, 12),
)
@settings(max_examples=200, deadline=None)
def test_siblings_are_mutually_exclusive_and_ranked(alpha, rho, topk):
    q = sibling_probabilities(alpha, topk, rho)
    assert q.sum() <= 1 + 1e-12
    assert np.all(np.diff(q) <= 1e-15)  # better-ranked siblings are likelier
    assert q[0] == pytest.approx(alpha)


def test_tree_shape_follows_sglang():
    """Capacity topk + (steps − 1)·topk², SGLang's (3, 3, 8) verifies 7 drafts, parents kept."""
    assert tree_capacity(3, 3) == 3 + 2 * 9
    assert verified_drafts(3, 3, 8) == 7
    assert verified_drafts(3, 3, 0) == 21
    assert verified_drafts(2, 4, 100) == tree_capacity(2, 4)  # clamped to what depth 2 grows
    tree = build_tree([0.6] * 3, 3, 3, 8, 0.65)
    assert tree.num_drafts == 7
    assert sum(1 for node in tree.graph.nodes if node) == 7
    for node in tree.graph.nodes:
        if node:
            assert tree.graph.has_edge(node[:-1], node)  # ancestor-closed
    assert (1, 1, 1) in tree.graph  # the chain is the likeliest path


@pytest.mark.parametrize("alpha", [0.3, 0.6, 0.85])
def test_acceptance_length_is_monotone_in_topk_and_draft_tokens(alpha):
    rho, depth = 0.65, 4
    by_topk = [expected_acceptance_length(alpha, depth, t, 0, rho) for t in range(1, 6)]
    assert np.all(np.diff(by_topk) > 0)
    by_tokens = [expected_acceptance_length(alpha, depth, 4, n, rho) for n in range(2, 40)]
    assert np.all(np.diff(by_tokens) >= 0)
    assert by_tokens[-1] > by_tokens[0]
    by_rho = [expected_acceptance_length(alpha, depth, 3, 10, r) for r in np.linspace(0, 1, 11)]
    assert np.all(np.diff(by_rho) >= 0)


@pytest.mark.parametrize(
    ("steps", "topk", "tokens", "al"),
    [(3, 1, 4, 1.86), (3, 3, 8, 2.20), (7, 4, 16, 2.52), (8, 8, 60, 3.2), (5, 2, 0, 4.9)],
)
def test_fit_alpha_reproduces_the_measured_acceptance_length(steps, topk, tokens, al):
    alpha = fit_alpha(al, steps, topk, tokens, 0.65)
    assert expected_acceptance_length(alpha, steps, topk, tokens, 0.65) == pytest.approx(
        al, abs=1e-6
    )
    if topk == 1:  # Leviathan's closed form
        assert chain_al(alpha, steps) == pytest.approx(al, abs=1e-6)


def test_fit_rank_decay_reproduces_the_measured_acceptance_length():
    alpha = fit_alpha(1.86, 3, 1, 4, 0.65)
    rho = fit_rank_decay(2.20, alpha, 3, 3, 8)
    assert 0 < rho < 1
    assert expected_acceptance_length(alpha, 3, 3, 8, rho) == pytest.approx(2.20, abs=1e-6)
    with pytest.raises(ValueError, match="outside"):
        fit_rank_decay(1.5, alpha, 3, 3, 8)  # below the chain's AL
    with pytest.raises(ValueError, match="outside"):
        fit_alpha(5.0, 3, 3, 8, 0.65)  # more than depth + 1


def test_miss_ranks_follow_the_sibling_law():
    rng = np.random.default_rng(3)
    alpha, rho, topk, n = 0.6, 0.7, 5, 400_000
    ranks = draw_miss_ranks(np.full(n, alpha), rho, topk, rng)
    q = sibling_probabilities(alpha, topk, rho)
    observed = np.bincount(ranks, minlength=topk + 1) / n
    expected = q[1:] / (1 - alpha)
    assert observed[1] == 0  # a miss is never the top candidate
    np.testing.assert_allclose(observed[2:], expected, atol=4 * np.sqrt(0.25 / n))
    assert observed[0] == pytest.approx(1 - expected.sum(), abs=4 * np.sqrt(0.25 / n))


@pytest.mark.parametrize(("topk", "tokens"), [(1, 0), (3, 8), (4, 12)])
def test_sampled_acceptance_length_converges_to_closed_form(topk, tokens):
    alphas, rho, n = [0.75, 0.65, 0.55, 0.5], 0.65, 100_000
    tree = build_tree(alphas, 4, topk, tokens, rho)
    lengths = _sample_acceptance_lengths(tree, alphas, rho, n, np.random.default_rng(7))
    se = lengths.std() / np.sqrt(n)
    assert abs(lengths.mean() - tree.expected_acceptance_length()) < 4 * se
    assert lengths.max() <= 5


def test_rank_paths_agree_with_the_chain_reference():
    """Rank 1 exactly on the chain's accepted prefix; a tree with topk = 1 accepts m_i."""
    rng = np.random.default_rng(11)
    states, slots = 200, 6
    conf = rng.uniform(0.2, 0.95, (states, slots))
    match = np.minimum(rng.integers(0, slots + 1, states), slots)
    ranks = draw_rank_paths(match, conf, np.full(slots, 0.6), 0.65, 4, rng)
    chain = build_tree([0.6] * slots, slots, 1, 0, 0.65)
    for i in range(states):
        m = match[i]
        assert np.all(ranks[i, :m] == 1)
        if m < slots:
            assert ranks[i, m] != 1
        assert chain.accepted_length(list(ranks[i])) == m


def _sample_acceptance_lengths(
    tree,
    alphas: list[float],
    rank_decay: float,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Tokens committed (accepted drafts + 1) by ``samples`` independent verify passes, each
    drawing the target's rank at every depth (the Monte-Carlo reference of the closed form)."""
    a = np.broadcast_to(np.asarray(alphas, dtype=float)[: tree.depth], (samples, tree.depth))
    top_hit = rng.random(a.shape) < a
    ranks = np.where(top_hit, 1, draw_miss_ranks(a, rank_decay, tree.topk, rng))
    return np.array([tree.accepted_length(row) + 1 for row in ranks], dtype=np.int64)
