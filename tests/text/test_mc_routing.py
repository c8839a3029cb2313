"""Rejected drafts of the max-entropy sampler: the compiled history loop against numpy.

:func:`simspec.text.mc_routing.continue_maxent` conditions each rejected draft on the D tokens
before it (shallower drafts, then true tokens back from the anchor, none before a sequence's
start). Its history bits come from numpy (``history_bits`` of gathered ids) or from one loop;
both must give the same drafts, with the loop compiled and run as plain Python.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from simspec import accel
from simspec.routing.maxent import MaxEntSampler
from simspec.text import mc_routing
from simspec.text.mc_routing import HISTORY, continue_maxent


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


def _levels(sampler, true, anchor, n, depth, seed):
    levels: list[np.ndarray] = []
    for level in range(depth):
        rng = np.random.default_rng([seed, level])
        levels.append(continue_maxent(sampler, true, anchor, levels, rng, n))
    return levels


@pytest.mark.parametrize("lags", [1, 2, 4])
def test_history_loop_source_gives_the_numpy_drafts(lags, monkeypatch):
    sampler, true, anchor, n = _case(lags, lags)
    with accel.disabled():
        want = _levels(sampler, true, anchor, n, 4, 9)
    monkeypatch.setattr(HISTORY, "compiled", lambda work=None: HISTORY.python)
    got = _levels(sampler, true, anchor, n, 4, 9)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_compiled_history_loop_gives_the_numpy_drafts(monkeypatch):
    pytest.importorskip("numba")
    assert HISTORY.compiled() is not None  # loaded now, not after the warm-up
    monkeypatch.setattr(mc_routing, "CHUNK_CHAINS", 50)  # several chunks, a partial last one
    for lags in (1, 3):
        sampler, true, anchor, n = _case(10 + lags, lags, nseq=5, length=40, layers=3, n=64)
        results = []
        for context in (contextlib.nullcontext(), accel.disabled()):
            with context:
                results.append(_levels(sampler, true, anchor, n, 3, 4))
        for a, b in zip(*results, strict=True):
            np.testing.assert_array_equal(a, b)
