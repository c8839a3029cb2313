"""The reuse sampler's compiled loops (SHUFFLE, READ_ROUND) against its numpy path.

:meth:`ExpertSampler.sample` runs the loops of :mod:`simspec.routing.reuse` when numba is
installed and its numpy code otherwise; scenarios must give the same bytes either way, so both
paths must return the same ids *and* leave the Generator in the same state (same draws, same
calls, same order), for every popularity, overlap and shape, including chains that need several
rounds of draws. The loops' Python source is also run uncompiled, so their logic is checked
where numba is absent.
"""

from __future__ import annotations

import numpy as np
import pytest

from simspec import accel
from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import popularity_weights
from simspec.routing.reuse import READ_ROUND, SHUFFLE, ExpertSampler, sample_sequences
from simspec.text.mc_routing import continue_reuse


def _case(seed: int, max_chains: int):
    """A random sampler and call: N in 8..256, k_e in 1..8 (k_e <= N / 2, room for k_e new
    experts next to k_e excluded ones), uniform or skewed popularity, with or without a
    previous token, the overlap a number or one per chain (or None, which ignores the previous
    token), previous ids and layers in various types."""
    g = np.random.default_rng(seed)
    n_experts = int(g.choice([8, 9, 16, 60, 64, 128, 160, 256]))
    k = int(g.integers(1, min(n_experts // 2, 8) + 1))
    layers = int(g.integers(1, 5))
    popularity = ("uniform", "zipf", "dirichlet")[seed % 3]
    config = RoutingConfig(
        popularity=popularity,
        zipf_exponent=float(g.uniform(0, 1.5)),
        dirichlet_concentration=float(g.uniform(0.2, 2)),
    )
    weights = popularity_weights(config, layers, n_experts, g)
    chains = int(g.integers(1, max_chains + 1))
    layer_of_chain = g.integers(0, layers, size=chains).astype((np.int64, np.int32)[seed % 2])
    previous = overlap = None
    if seed % 4:
        ids = np.argsort(g.random((chains, n_experts)), axis=1)[:, :k]
        previous = ids.astype((np.int16, np.uint8, np.int64)[seed % 5 % 3])
        overlap = float(g.uniform(0, 1)) if seed % 4 == 1 else g.uniform(0, 1, size=chains)
        if seed % 12 == 3:
            overlap = None  # a previous token without overlap is ignored
    return ExpertSampler(weights, k), layer_of_chain, previous, overlap


def _both_paths(sampler, layers, previous, overlap, seed, dtype=np.int16):
    """(ids, Generator state) from the current path and from the numpy path."""
    rng = np.random.default_rng(seed)
    got = sampler.sample(rng, layers, previous, overlap, dtype=dtype)
    reference_rng = np.random.default_rng(seed)
    with accel.disabled():
        expected = sampler.sample(reference_rng, layers, previous, overlap, dtype=dtype)
    return (got, rng.bit_generator.state), (expected, reference_rng.bit_generator.state)


@pytest.fixture
def uncompiled(monkeypatch):
    """Make ``sample`` take its kernel path with the loops' plain Python source."""
    for loop in (SHUFFLE, READ_ROUND):
        monkeypatch.setattr(loop, "compiled", lambda work=None, loop=loop: loop.python)


def test_compiled_loops_equal_the_numpy_path_on_many_shapes():
    pytest.importorskip("numba")
    if not accel.enabled():
        pytest.skip("compiled kernels are turned off (SIMSPEC_JIT)")
    assert READ_ROUND.compiled() is not None  # loaded now, not after the warm-up
    crowded = set()
    for seed in range(300):
        sampler, layers, previous, overlap = _case(seed, max_chains=300)
        (got, state), (expected, reference_state) = _both_paths(
            sampler, layers, previous, overlap, seed + 7
        )
        assert got.dtype == expected.dtype == np.int16
        assert np.array_equal(got, expected), seed
        assert state == reference_state, seed  # the same draws were consumed
        assert (np.sort(got, axis=1)[:, 1:] != np.sort(got, axis=1)[:, :-1]).all()
        crowded.add(sampler.num_experts <= 2 * sampler.k)
    assert crowded == {True, False}  # chains needing several rounds of draws were covered
    # Every input type is brought to one signature: one compilation per loop.
    for loop in (SHUFFLE, READ_ROUND):
        assert len(loop.compiled().signatures) == 1


def test_uncompiled_loops_equal_the_numpy_path(uncompiled):
    for seed in range(120):
        sampler, layers, previous, overlap = _case(seed, max_chains=12)
        (got, state), (expected, reference_state) = _both_paths(
            sampler, layers, previous, overlap, seed
        )
        assert np.array_equal(got, expected), seed
        assert state == reference_state, seed


def test_sequences_and_rejected_drafts_equal_the_numpy_path(uncompiled):
    weights = popularity_weights(RoutingConfig(popularity="zipf"), 3, 32, np.random.default_rng(0))
    sampler = ExpertSampler(weights, 4)
    overlap = np.array([0.2, 0.5, 0.9])
    got = sample_sequences(sampler, np.random.default_rng(1), 3, 6, overlap)
    drafts = continue_reuse(sampler, got, overlap, np.random.default_rng(2))
    with accel.disabled():
        expected = sample_sequences(sampler, np.random.default_rng(1), 3, 6, overlap)
        expected_drafts = continue_reuse(sampler, expected, overlap, np.random.default_rng(2))
    assert got.dtype == expected.dtype == np.uint8
    assert np.array_equal(got, expected)
    assert np.array_equal(drafts, expected_drafts)


def test_shuffle_places_each_id_at_the_rank_of_its_key_and_flags_ties():
    rng = np.random.default_rng(3)
    for k in range(1, 9):
        keys = rng.random((50, k))
        previous = rng.integers(-1, 300, size=(50, k)).astype(np.int16)
        out = np.empty((50, k), dtype=np.int16)
        assert not SHUFFLE.python(out, previous, keys)
        assert np.array_equal(out, np.take_along_axis(previous, np.argsort(keys, axis=1), 1))
    keys = np.array([[0.5, 0.25, 0.5], [0.1, 0.2, 0.3]])
    assert SHUFFLE.python(np.empty((2, 3), np.int16), np.zeros((2, 3), np.int16), keys)


def test_tied_shuffle_keys_are_answered_by_argsort(monkeypatch):
    """When the loop reports equal keys, ``sample`` redoes the shuffle as numpy does."""
    sampler, layers, previous, overlap = _case(5, max_chains=40)
    (expected, _), _ = _both_paths(sampler, layers, previous, overlap, 1)  # numpy: reference

    def tied(out, previous, keys):
        out[:] = -7  # garbage, as a tie leaves it
        return True

    monkeypatch.setattr(SHUFFLE, "compiled", lambda work=None: tied)
    monkeypatch.setattr(READ_ROUND, "compiled", lambda work=None: READ_ROUND.python)
    got = sampler.sample(np.random.default_rng(1), layers, previous, overlap, dtype=np.int16)
    assert np.array_equal(got, expected)


def test_ids_outside_the_expert_range_in_previous_are_never_drawn(uncompiled):
    """A previous id of -1 (no expert) excludes nothing, in both paths."""
    sampler = ExpertSampler(np.full((2, 16), 1 / 16), 4)
    previous = np.array([[-1, 3, 5, -1], [0, 1, 2, 3], [-1, -1, -1, -1]], dtype=np.int16)
    (got, state), (expected, reference_state) = _both_paths(
        sampler, np.array([0, 1, 0]), previous, 0.0, 4
    )
    assert np.array_equal(got, expected) and state == reference_state
    assert (got >= 0).all()


@pytest.mark.parametrize("loop", ["python", "compiled"])
def test_an_acceptance_draw_equal_to_the_threshold_takes_the_alias(loop):
    """numpy keeps slot j when draw < accept[j] (strictly); so does the loop."""
    if loop == "compiled":
        pytest.importorskip("numba")
    read = READ_ROUND.python if loop == "python" else READ_ROUND.compiled()
    if read is None:
        pytest.skip("compiled kernels are turned off (SIMSPEC_JIT)")
    sampler = ExpertSampler(np.array([[0.1, 0.2, 0.3, 0.4]]), 1)
    threshold = sampler._accept[0, 0]
    assert threshold < 1 and sampler._alias[0, 0] != 0
    for draw, expert in ((threshold, sampler._alias[0, 0]), (np.nextafter(threshold, 0), 0)):
        out, count = np.empty((1, 1), dtype=np.int16), np.zeros(1, dtype=np.int64)
        no_ids = np.empty((0, 0), dtype=np.int16)
        args = (np.zeros((1, 1), np.int64), np.array([[draw]]), sampler._accept, sampler._alias)
        left, _ = read(out, count, no_ids, np.arange(1), *args, np.zeros(1, np.int64))
        assert left == 0 and out[0, 0] == expert
