"""The vectorised reuse sampler against the column-by-column loop it replaced.

Monte-Carlo scenarios must reproduce byte for byte, so :meth:`ExpertSampler.sample` has to
return the same ids *and* leave its Generator in the same state as the original successive
sampling loop, for every popularity, overlap and shape, including chains that need several
rounds of draws.
"""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import popularity_weights
from simspec.routing.reuse import ExpertSampler, sample_sequences
from simspec.routing.sets import id_dtype, to_sets
from simspec.text.mc_routing import CHUNK_CHAINS, continue_reuse


def _loop_sample(sampler, rng, layer_of_chain, previous=None, overlap=None):
    """The original implementation: read each round's draws one column at a time."""
    n, k, num = len(layer_of_chain), sampler.k, sampler.num_experts
    out = np.full((n, k), -1, dtype=np.int64)
    if k == 0 or n == 0:
        return out, 0
    count = np.zeros(n, dtype=np.int64)
    excluded = None
    if previous is not None and overlap is not None:
        reuse = rng.binomial(k, overlap, size=n)
        order = np.argsort(rng.random((n, k)), axis=1)
        shuffled = np.take_along_axis(previous, order, axis=1)
        out = np.where(np.arange(k)[None, :] < reuse[:, None], shuffled, -1)
        count = reuse.astype(np.int64)
        excluded = previous
    taken = np.zeros((n, num), dtype=bool)
    rows = np.arange(n)
    if excluded is not None:
        taken[rows[:, None], excluded] = True
    pending = np.flatnonzero(count < k)
    rounds = 0
    while len(pending):
        rounds += 1
        width = int(k - count[pending].min()) + 4
        layers = layer_of_chain[pending]
        cand = rng.integers(0, num, size=(len(pending), width))
        if not sampler.uniform:  # alias draws, as ExpertSampler._candidates
            keep = rng.random((len(pending), width)) < sampler._accept[layers[:, None], cand]
            cand = np.where(keep, cand, sampler._alias[layers[:, None], cand])
        for c in range(width):
            col = cand[:, c]
            ok = (count[pending] < k) & ~taken[pending, col]
            chosen, expert = pending[ok], col[ok]
            taken[chosen, expert] = True
            out[chosen, count[chosen]] = expert
            count[chosen] += 1
        pending = pending[count[pending] < k]
    return out, rounds


def _case(seed: int):
    g = np.random.default_rng(seed)
    n_experts = int(g.choice([4, 8, 16, 60, 64, 128, 160, 256, 384]))
    k = int(g.integers(1, min(n_experts // 2, 12) + 1))  # room for k new experts
    layers = int(g.integers(1, 5))
    popularity = ("uniform", "zipf", "dirichlet")[seed % 3]
    config = RoutingConfig(
        popularity=popularity,
        zipf_exponent=float(g.uniform(0, 1.2)),
        dirichlet_concentration=float(g.uniform(0.3, 2)),
    )
    weights = popularity_weights(config, layers, n_experts, g)
    chains = int(g.integers(1, 400))
    layer_of_chain = g.integers(0, layers, size=chains)
    previous = overlap = None
    if seed % 4:
        previous = np.argsort(g.random((chains, n_experts)), axis=1)[:, :k]
        overlap = float(g.uniform(0, 1)) if seed % 4 == 1 else g.uniform(0, 1, size=chains)
    return ExpertSampler(weights, k), layer_of_chain, previous, overlap


def test_vectorised_rounds_equal_the_column_loop_on_many_seeds():
    rounds_seen = set()
    for seed in range(240):
        sampler, layers, previous, overlap = _case(seed)
        old_rng, new_rng = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
        expected, rounds = _loop_sample(sampler, old_rng, layers, previous, overlap)
        got = sampler.sample(new_rng, layers, previous, overlap)
        assert got.dtype == np.int64
        assert np.array_equal(got, expected), seed
        # The same draws were consumed: both Generators continue identically.
        assert old_rng.bit_generator.state == new_rng.bit_generator.state, seed
        rounds_seen.add(rounds)
    assert max(rounds_seen) >= 3  # chains that needed several rounds were covered


@pytest.mark.parametrize("dtype", [np.int16, np.uint8, np.int64])
def test_compact_output_types_hold_the_same_ids(dtype):
    sampler, layers, previous, overlap = _case(5)
    wide = sampler.sample(np.random.default_rng(3), layers, previous, overlap)
    narrow = sampler.sample(np.random.default_rng(3), layers, previous, overlap, dtype=dtype)
    assert narrow.dtype == dtype and np.array_equal(narrow, wide)


def test_sequences_equal_the_loop_token_by_token():
    w = popularity_weights(RoutingConfig(popularity="zipf"), 3, 64, np.random.default_rng(0))
    sampler = ExpertSampler(w, 6)
    got = sample_sequences(sampler, np.random.default_rng(9), 7, 12, np.array([0.2, 0.5, 0.9]))
    assert got.dtype == np.uint8
    rng = np.random.default_rng(9)
    layers = np.tile(np.arange(3), 7)
    overlap = np.array([0.2, 0.5, 0.9])[layers]
    previous = None
    for t in range(12):
        ids, _ = _loop_sample(sampler, rng, layers, previous, overlap)
        assert np.array_equal(got[:, t].reshape(-1, 6), ids), t
        previous = ids


def test_rejected_level_equals_the_chunked_loop():
    """continue_reuse: chunk by chunk, compact ids in and out, same draws as the loop."""
    sampler = ExpertSampler(np.full((5, 128), 1 / 128), 8)
    true = sample_sequences(sampler, np.random.default_rng(1), 4, 300, 0.38)  # 6000 chains
    got = continue_reuse(sampler, true, 0.3, np.random.default_rng(2))
    assert got.dtype == true.dtype == np.uint8
    rng = np.random.default_rng(2)
    flat = true.reshape(-1, 8).astype(np.int64)
    layers = np.tile(np.arange(5), 4 * 300)
    for start in range(0, len(flat), CHUNK_CHAINS):
        stop = start + CHUNK_CHAINS
        ids, _ = _loop_sample(sampler, rng, layers[start:stop], flat[start:stop], 0.3)
        assert np.array_equal(got.reshape(-1, 8)[start:stop], ids)


def test_id_types_hold_every_expert():
    assert id_dtype(8) == np.uint8 and id_dtype(256) == np.uint8
    assert id_dtype(257) == np.int16 and id_dtype(512) == np.int16
    sampler = ExpertSampler(np.full((2, 384), 1 / 384), 8)
    ids = sample_sequences(sampler, np.random.default_rng(0), 20, 10, 0.4)
    assert ids.dtype == np.int16 and ids.max() < 384
    assert (to_sets(ids, 384).sum(axis=-1) == 8).all()


@pytest.mark.parametrize("overlap", [0.0, 0.38, 1.0])
def test_reused_experts_are_a_uniform_choice_of_the_previous_ones(overlap):
    """Statistical invariant: every position of the previous token is reused equally often
    (the shuffle), and the overlap with the previous token is Binomial(k_e, overlap) / k_e."""
    sampler = ExpertSampler(np.full((1, 64), 1 / 64), 4)
    rng = np.random.default_rng(4)
    previous = np.tile(np.arange(4), (20_000, 1))
    ids = sampler.sample(rng, np.zeros(20_000, dtype=np.int64), previous, overlap)
    reused = (ids[:, :, None] == np.arange(4)).any(axis=1)  # (chains, position)
    assert reused.sum(axis=1).mean() / 4 == pytest.approx(overlap, abs=0.01)
    if 0 < overlap < 1:
        share = reused.mean(axis=0) / reused.mean()
        assert np.abs(share - 1).max() < 0.05
    assert (np.sort(ids, axis=1)[:, 1:] != np.sort(ids, axis=1)[:, :-1]).all()  # distinct
