"""Rejected drafts of the max-entropy sampler (:func:`simspec.routing.maxent.continue_drafts`).

Each rejected draft is conditioned on the D tokens before it (shallower drafts, then true tokens
back from the anchor, none before a sequence's start): its overlap with its predecessor must be
the draft profile's, and computing only some states must give those states the same drafts.
"""

from __future__ import annotations

import numpy as np

from simspec.routing import maxent
from simspec.routing.maxent import MaxEntSampler, continue_drafts
from simspec.routing.sets import to_sets


def _case(seed: int, lags: int, nseq: int = 3, length: int = 9, layers: int = 2, n: int = 16):
    gen = np.random.default_rng(seed)
    k = 3
    p = np.full((layers, n), k / n)
    profile = np.tile([0.4, 0.3, 0.25, 0.22][:lags], (layers, 1))
    sampler = MaxEntSampler(p, profile, profile * 0.7)
    true = sampler.sample_sequences(gen, nseq, length)
    match = gen.integers(0, 3, (nseq, length))
    anchor = np.minimum(np.arange(length) + match, length - 1).astype(np.int64)
    return sampler, true, anchor, n


def _levels(sampler, true, anchor, n, depth, seed, keeps=None):
    levels: list[np.ndarray] = []
    for level in range(depth):
        rng = np.random.default_rng([seed, level])
        keep = None if keeps is None else keeps[level]
        levels.append(continue_drafts(sampler, true, anchor, levels, rng, n, keep))
    return levels


def test_computing_some_states_gives_them_the_drafts_of_the_whole_draw(monkeypatch):
    monkeypatch.setattr(maxent, "CHUNK_CHAINS", 50)  # several chunks, a partial last one
    for lags in (1, 3):
        sampler, true, anchor, n = _case(10 + lags, lags, nseq=5, length=40, layers=3, n=64)
        whole = _levels(sampler, true, anchor, n, 3, 4)
        gen = np.random.default_rng(lags)
        keeps = [gen.random((5, 40)) < 0.8]
        for _ in range(2):  # each depth's states among the shallower depth's
            keeps.append(keeps[-1] & (gen.random((5, 40)) < 0.8))
        some = _levels(sampler, true, anchor, n, 3, 4, keeps)
        for full, part, keep in zip(whole, some, keeps, strict=True):
            np.testing.assert_array_equal(part[keep], full[keep])
            assert not part[~keep].any()


def test_a_rejected_draft_overlaps_its_predecessor_as_the_draft_profile_says():
    """Lag-1 Markov routing, uniform popularity: E|S_draft ∩ S_anchor| / k_e = 0.7 · 0.4."""
    sampler, true, anchor, n = _case(3, 1, nseq=40, length=60, layers=2, n=16)
    first = _levels(sampler, true, anchor, n, 1, 8)[0]
    rows = np.arange(true.shape[0])[:, None]
    before = to_sets(true[rows, anchor], n)
    shared = (to_sets(first, n) & before).sum(axis=-1) / 3  # (nseq, length, layers)
    samples = shared.mean(axis=1).ravel()  # per (sequence, layer): independent chains
    error = samples.std(ddof=1) / np.sqrt(len(samples))
    assert abs(samples.mean() - 0.28) < 5 * error
