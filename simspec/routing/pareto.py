"""Pareto order sampling's selection step: the k_e smallest keys of each chain, two ways.

The max-entropy sampler (:mod:`simspec.routing.maxent`) draws a token's k_e experts out of N as
the k_e smallest keys odds(U_e) · g_e (Rosén 1997, "On sampling with probability proportional to
size"), with g_e = 1 / odds(P(expert e used now | its recent use)) read from a table. Per chain
that is N table reads, N keys and a selection. numpy writes it as whole-array passes (a gather,
three arithmetic passes, ``np.partition``, a comparison and ``np.flatnonzero``: ~2 µs per chain at
N = 128); the loop in :data:`SELECT` computes the chain's N keys, keeps the few below a running
threshold and selects among those, and is compiled when numba is installed (:mod:`simspec.accel`).

Both give the same ids: the keys are the same float32 operations in the same order
(:func:`pareto_keys`); a draw U = 0 (the only way to a zero key) is floored at 2^-25 in both, as
the numpy path does when a zero reaches the k smallest; and where two keys tie at the k-th place
(the chosen set is then not unique) the loop flags the chain and :func:`select_compiled` answers
it with numpy's ``argpartition``, as :func:`smallest_sorted` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simspec import accel

#: Smallest draw the keys use: draws are multiples of 2^-24, so flooring moves only U = 0.
U_FLOOR = np.float32(2.0**-25)


def pareto_keys(u: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Pareto order-sampling keys odds(u) · g in float32, g = 1 / odds(inclusion)."""
    key = np.subtract(np.float32(1.0), u)
    np.divide(u, key, out=key)
    key *= g
    return key


def smallest_sorted(key: np.ndarray, k: int, partitioned: np.ndarray | None = None) -> np.ndarray:
    """Column ids of the ``k`` smallest entries of each row of ``key``, ascending: (rows, k).

    ``np.argpartition`` selects per row with a loop that costs more than the sampling itself at
    N = 128; instead one ``np.partition`` finds each row's k-th smallest value and a comparison
    against it marks the chosen columns, which ``np.flatnonzero`` returns already sorted. When
    a row has ties at that value (or NaN), more or fewer than k columns are marked, and the
    whole call falls back to ``argpartition`` + ``sort``, which it otherwise equals exactly.
    ``partitioned`` is ``np.partition(key, k - 1, axis=1)`` when the caller already has it.
    """
    rows, width = key.shape
    if partitioned is None:
        partitioned = np.partition(key, k - 1, axis=1)
    kth = partitioned[:, k - 1 : k]
    chosen = np.flatnonzero(key <= kth)
    # Without NaN among the k smallest every row marks at least k, so k in all of them.
    if len(chosen) == rows * k and not np.isnan(kth).any():
        return chosen.reshape(rows, k) - (np.arange(rows) * width)[:, None]
    return np.sort(np.argpartition(key, k - 1, axis=1)[:, :k], axis=1)


@accel.kernel
def _select_loop(bits, values, rows, row_of_chain, shift, history, mask, out, tied):  # type: ignore[no-untyped-def]
    """Chain r: g_e = values[rows[row_of_chain[r], e] + shift[r] + (history[r, e] & mask[r])],
    key_e = odds(max(u_e, 2^-25)) · g_e with u_e = (bits[r, e] >> 8) · 2^-24 (numpy's float32
    draw, :func:`uniform_bits`); out[r] = the ids of the k smallest keys in ascending id order,
    or tied[r] = True when the k-th smallest key is tied (or NaN).

    Per chain: the N keys (one vectorisable pass); the experts whose key is at most
    ``limit`` (twice the previous chain's k-th key; widened while fewer than k pass), kept in id
    order without branches; the k smallest of those few by insertion into a sorted buffer
    (branch-free min/max); and the candidates up to that k-th key, counted for ties. Every key
    up to the k-th is a candidate, so the answer does not depend on ``limit``.
    """
    chains, width = bits.shape
    k = out.shape[1]
    one = np.float32(1.0)
    floor = np.float32(2.0**-25)
    scale = np.float32(2.0**-24)
    inf = np.float32(np.inf)
    keys = np.empty(width, dtype=np.float32)
    cand = np.empty(width, dtype=np.int64)
    best = np.empty(k, dtype=np.float32)  # the k smallest candidate keys so far, ascending
    limit = inf
    for r in range(chains):
        row = rows[row_of_chain[r]]
        s = shift[r]
        m = mask[r]
        for e in range(width):
            x = np.float32(bits[r, e] >> 8) * scale
            if x < floor:
                x = floor
            keys[e] = x / (one - x) * values[row[e] + s + (history[r, e] & m)]
        c = 0
        while True:
            c = 0
            for e in range(width):
                cand[c] = e
                c += keys[e] <= limit
            if c >= k or limit == inf:
                break
            limit = limit * np.float32(16.0) if limit > 0 else inf
        for j in range(k):
            best[j] = inf
        for i in range(c):
            key = keys[cand[i]]
            if key < best[k - 1]:
                for j in range(k - 1, 0, -1):
                    lower = best[j - 1]
                    upper = lower if lower > key else key
                    best[j] = upper if best[j] > upper else best[j]
                best[0] = key if best[0] > key else best[0]
        kth = best[k - 1]
        count = 0
        for i in range(c):
            e = cand[i]
            if keys[e] <= kth:
                if count < k:
                    out[r, count] = e
                count += 1
        tied[r] = count != k
        limit = kth * np.float32(2.0)


#: The selection loop as an optional compiled kernel (None from ``compiled()`` without numba);
#: callers pass the call's chains × experts as its work, and the first 2^26 of a process (~0.7
#: CPU s of numpy) run on the numpy path, so small runs do not pay for loading numba (~0.6 s).
SELECT: accel.Kernel = _select_loop
SELECT.warmup = 1 << 26


def select_compiled(
    loop: Callable[..., Any],
    bits: np.ndarray,
    values: np.ndarray,
    rows: np.ndarray,
    row_of_chain: np.ndarray,
    shift: np.ndarray,
    history: np.ndarray,
    mask: np.ndarray,
    k: int,
) -> np.ndarray:
    """The k smallest Pareto keys of every chain by ``loop`` (:data:`SELECT`, compiled or not):
    ids (chains, k) of int64, ascending. Chains whose k-th key is tied are redone as numpy does
    (``argpartition`` of the floored keys, sorted). Arguments as in the loop's docstring."""
    chains = len(bits)
    out = np.empty((chains, k), dtype=np.int64)
    tied = np.zeros(chains, dtype=bool)
    loop(bits, values, rows, row_of_chain, shift, history, mask, out, tied)
    if tied.any():
        redo = np.flatnonzero(tied)
        index = rows[row_of_chain[redo]] + shift[redo, None] + (history[redo] & mask[redo, None])
        key = pareto_keys(np.maximum(bits_to_uniform(bits[redo]), U_FLOOR), values.take(index))
        out[redo] = np.sort(np.argpartition(key, k - 1, axis=1)[:, :k], axis=1)
    return out


def bits_to_uniform(bits: np.ndarray) -> np.ndarray:
    """numpy's float32 uniform draw from a 32-bit word: its top 24 bits times 2^-24 (exact)."""
    return (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)


def uniform_bits(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """The 32-bit words behind ``rng.random(shape, dtype=np.float32)``, leaving ``rng`` where
    that call leaves it: (shape) uint32 whose :func:`bits_to_uniform` is that call's result.

    numpy makes a float32 draw from one 32-bit word, and its PCG64 generator hands out the
    words of each 64-bit output low half first; so for an even count, with no half-word
    buffered, the words are ``random_raw`` viewed as uint32 (at half the cost per draw). That is
    numpy's code, not its documented contract: :func:`_raw_words_match` checks it once per
    process against ``rng.random``; otherwise (and for other generators or odd counts) the words
    are rebuilt from ``rng.random``'s floats.
    """
    count = shape[0] * shape[1]
    generator = getattr(rng, "bit_generator", None)  # (tests pass Generator stand-ins)
    if (
        count % 2 == 0
        and isinstance(generator, np.random.PCG64)
        and _raw_words_match()
        and not generator.state["has_uint32"]
    ):
        return generator.random_raw(count // 2).view(np.uint32).reshape(shape)
    u = rng.random(shape, dtype=np.float32)
    return (u * np.float32(2.0**24)).astype(np.uint32) << np.uint32(8)


_RAW_WORDS: list[bool] = []  # the one-time check's answer


def _raw_words_match() -> bool:
    """Whether this numpy's float32 draws are the PCG64 words of :func:`uniform_bits`."""
    if not _RAW_WORDS:
        want = np.random.Generator(np.random.PCG64(12345)).random((3, 64), dtype=np.float32)
        words = np.random.PCG64(12345).random_raw(96).view(np.uint32).reshape(3, 64)
        _RAW_WORDS.append(bool(np.array_equal(bits_to_uniform(words), want)))
    return _RAW_WORDS[0]
