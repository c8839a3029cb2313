"""The Pareto selection loop (simspec.routing.pareto) against the numpy formula it replaces.

Both must pick the same experts bit for bit: the loop's keys are the numpy keys' float32
operations, draws U = 0 are floored at 2^-25, and chains whose k-th key is tied are answered by
numpy's argpartition. The loop is checked uncompiled (its Python source, on small inputs) and,
where numba is installed, compiled on larger ones; the sampler is checked with and without it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np
import pytest

from simspec import accel
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.pareto import (
    SELECT,
    U_FLOOR,
    bits_to_uniform,
    pareto_keys,
    select_compiled,
    uniform_bits,
)
from simspec.routing.sets import history_bits


def _inputs(gen, chains, experts, k, layers=3, depth=2, coarse=False, hist_dtype=np.int8):
    """Random loop inputs; ``coarse`` draws u and the table values from small sets, so that
    many chains have keys tied at the k-th place, and puts exact zeros among the draws."""
    size = (1 << (depth + 1)) - 1
    if coarse:  # u in {0, 1/8, ..., 5/8}
        bits = (gen.integers(0, 6, (chains, experts)) << 29).astype(np.uint32)
        values = gen.choice(np.float32([0.5, 1.0, 2.0]), layers * experts * size)
    else:
        bits = gen.integers(0, 1 << 32, (chains, experts), dtype=np.uint32)
        bits.ravel()[gen.integers(0, bits.size, 4)] = gen.integers(0, 256, 4)  # u = 0
        values = np.exp(gen.normal(0, 2, layers * experts * size)).astype(np.float32)
    rows = (np.arange(layers * experts).reshape(layers, experts) * size).astype(np.intp)
    row_of_chain = gen.integers(0, layers, chains)
    known = gen.integers(0, depth + 1, chains)
    shift = ((1 << known) - 1).astype(np.int64)
    mask = np.where(gen.random(chains) < 0.3, -1, (1 << known) - 1).astype(np.int64)
    mask[known == depth] = -1
    history = gen.integers(0, 1 << depth, (chains, experts)).astype(hist_dtype)
    return bits, values, rows, row_of_chain, shift, history, mask


def _numpy_selection(bits, values, rows, row_of_chain, shift, history, mask, k):
    """The numpy path's answer: keys from the floored draws, the k smallest by argpartition."""
    index = rows[row_of_chain] + shift[:, None] + (history & mask[:, None])
    key = pareto_keys(np.maximum(bits_to_uniform(bits), U_FLOOR), values.take(index))
    return np.sort(np.argpartition(key, k - 1, axis=1)[:, :k], axis=1)


@pytest.mark.parametrize("coarse", [False, True])
def test_loop_source_picks_the_numpy_experts(coarse):
    gen = np.random.default_rng(11)
    for experts, k in [(4, 1), (8, 3), (16, 15), (16, 4), (12, 6)]:
        args = _inputs(gen, 60, experts, k, coarse=coarse)
        got = select_compiled(SELECT.python, *args, k)
        np.testing.assert_array_equal(got, _numpy_selection(*args, k))
        assert (np.diff(got, axis=1) > 0).all()


def test_loop_flags_ties_and_only_ties():
    """A chain is handed to numpy exactly when its k-th smallest key is not unique."""
    gen = np.random.default_rng(3)
    bits, values, rows, row_of_chain, shift, history, mask = _inputs(gen, 200, 10, 4, coarse=True)
    out, tied = np.empty((200, 4), dtype=np.int64), np.zeros(200, dtype=bool)
    SELECT.python(bits, values, rows, row_of_chain, shift, history, mask, out, tied)
    index = rows[row_of_chain] + shift[:, None] + (history & mask[:, None])
    u = np.maximum(bits_to_uniform(bits), U_FLOOR)
    key = np.sort(pareto_keys(u, values.take(index)), axis=1)
    np.testing.assert_array_equal(tied, key[:, 3] == key[:, 4])
    assert tied.any() and not tied.all()


@pytest.mark.parametrize("hist_dtype", [np.int8, np.int32])
def test_compiled_loop_picks_the_numpy_experts(hist_dtype):
    pytest.importorskip("numba")
    loop = SELECT.compiled()
    assert loop is not None
    gen = np.random.default_rng(12)
    for experts, k, coarse in [(128, 8, False), (256, 8, False), (64, 6, True), (160, 1, False)]:
        args = _inputs(
            gen, 3000, experts, k, layers=5, depth=3, coarse=coarse, hist_dtype=hist_dtype
        )
        np.testing.assert_array_equal(select_compiled(loop, *args, k), _numpy_selection(*args, k))


def test_kernel_loads_after_its_warmup_work():
    """In a fresh process: numba stays unimported for the first ``warmup`` of work, then loads;
    and once it is loaded, another kernel loads at once."""
    pytest.importorskip("numba")
    code = (
        "import sys; from simspec import accel; from simspec.routing.pareto import SELECT;"
        "a = accel.Kernel(SELECT.python, warmup=100); b = accel.Kernel(SELECT.python, 10**9);"
        "print(a.compiled(60) is None, a.compiled(40) is None, 'numba' in sys.modules,"
        "a.compiled(1) is not None, b.compiled(1) is not None)"
    )
    env = {**os.environ, "SIMSPEC_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.split() == ["True", "True", "False", "True", "True"], out.stderr


def test_disabled_turns_the_kernel_off(monkeypatch):
    with accel.disabled():
        assert SELECT.compiled() is None
    monkeypatch.setenv("SIMSPEC_JIT", "0")
    assert SELECT.compiled() is None and not accel.enabled()


@pytest.mark.parametrize("lags", [0, 1, 3])
def test_sampler_draws_the_same_routing_with_and_without_the_kernel(lags):
    pytest.importorskip("numba")
    assert SELECT.compiled() is not None  # loaded now, not after the warm-up
    gen = np.random.default_rng(lags)
    layers, experts, k = 3, 64, 6
    p = np.minimum(gen.dirichlet(np.ones(experts) * 20, size=layers) * k, 1.0)
    p *= k / p.sum(axis=1, keepdims=True)
    profile = np.tile([0.35, 0.28, 0.24][:lags], (layers, 1))
    sampler = MaxEntSampler(p, profile, profile * 0.6 if lags else None)
    layer = gen.integers(0, layers, 900)
    previous = [gen.permuted(np.tile(np.arange(experts), (900, 1)), axis=1)[:, :k]] * lags
    history = history_bits(previous, experts)
    knowns = (0, lags, gen.integers(0, lags + 2, 900))
    results = []
    for context in (contextlib.nullcontext(), accel.disabled()):
        with context:
            seqs = sampler.sample_sequences(np.random.default_rng(1), 7, 30)
            steps = [
                sampler.step(np.random.default_rng(2), layer, history, known, draft=True)
                for known in knowns
            ]
            results.append((seqs, steps))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.random.default_rng(4),
        lambda: np.random.Generator(np.random.Philox(4)),  # not PCG64: rebuilt from floats
    ],
)
def test_uniform_bits_are_the_float32_draws_and_leave_the_stream_where_random_does(make):
    for shape in [(6, 128), (3, 5), (1, 1), (0, 8)]:
        for buffered in (False, True):  # a half-word left over from an odd earlier draw
            want, got = make(), make()
            if buffered:
                want.random(3, dtype=np.float32), got.random(3, dtype=np.float32)
            expected = want.random(shape, dtype=np.float32)
            bits = uniform_bits(got, shape)
            assert bits.dtype == np.uint32 and bits.shape == shape
            np.testing.assert_array_equal(bits_to_uniform(bits), expected)
            np.testing.assert_array_equal(
                got.random(7, dtype=np.float32), want.random(7, dtype=np.float32)
            )
            assert got.integers(0, 1 << 40) == want.integers(0, 1 << 40)
