"""Monte-Carlo routing of the reference sequences: rejected drafts and a pass's gathered tokens.

:class:`~simspec.text.reference.ReferenceSet` samples the routing of a block of requests at
once: the true tokens (a chain along each request's text) and, per rejected depth r, the r-th
rejected draft at every state. The functions here do the array work of that class; the draws
come from the Generators it passes in, in a fixed order (chunks of :data:`CHUNK_CHAINS`
(sequence, state, layer) chains, each chunk's draws before the next chunk's), so a scenario's
routing is the same whatever else changes.

Ids are stored in :func:`~simspec.routing.sets.id_dtype` (uint8 up to 256 experts): a block of
64 requests x 256 tokens x 48 layers x 8 experts is 6.3 MB per depth.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simspec.routing.maxent import MaxEntSampler
from simspec.routing.reuse import ReuseSampler
from simspec.routing.sets import history_bits

CHUNK_CHAINS = 4096  # (sequence, layer) chains per vectorised call: small enough to stay in cache


def continue_reuse(
    sampler: ReuseSampler,
    previous: np.ndarray,
    overlap: float | np.ndarray | None,
    rng: np.random.Generator,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """One more draft after each of the given tokens (ids (sequences, length, layers, k_e),
    ascending), by the reuse sampler, chunk by chunk; ``overlap`` is a number or one value per
    layer. With ``keep`` (sequences, length) only the marked tokens' drafts are computed (the
    others are zeros); each chunk's draws are made for all its chains, so a draft's ids do not
    depend on ``keep``."""
    shape = previous.shape
    flat = previous.reshape(-1, shape[-1])
    out = np.zeros_like(flat) if keep is not None else np.empty_like(flat)
    layers = np.tile(np.arange(shape[2]), shape[0] * shape[1])
    wanted = None if keep is None else np.repeat(keep.reshape(-1), shape[2])
    for start in range(0, len(flat), CHUNK_CHAINS):
        stop = min(start + CHUNK_CHAINS, len(flat))
        chunk = overlap[layers[start:stop]] if isinstance(overlap, np.ndarray) else overlap
        if wanted is None:
            out[start:stop] = sampler.sample(rng, stop - start, flat[start:stop], chunk)
            continue
        subset = np.flatnonzero(wanted[start:stop])
        ids = sampler.sample(rng, stop - start, flat[start:stop], chunk, subset)
        out[start + subset] = ids
    return out.reshape(shape)


def continue_maxent(
    sampler: MaxEntSampler,
    true: np.ndarray,
    anchor: np.ndarray,
    levels: list[np.ndarray],
    rng: np.random.Generator,
    num_experts: int,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """Rejected drafts of the next level r = len(levels) + 1 at every state, each conditioned on
    the D tokens before it: true tokens up to ``anchor`` = i + m_i, then shallower drafts.
    With ``keep`` (sequences, length) only the marked states' drafts are computed (the others
    are zeros; the shallower levels must hold those states); each chunk's draws are made for
    all its chains, so a draft's ids do not depend on ``keep``."""
    nseq, length, layers, k = true.shape
    r = len(levels) + 1
    total = nseq * length * layers
    out = np.zeros((total, k), dtype=true.dtype)
    flat_levels = [lv.reshape(-1, k) for lv in levels]
    wanted = None if keep is None else np.repeat(keep.reshape(-1), layers)
    depth = sampler.depth
    for start in range(0, total, CHUNK_CHAINS):
        stop = min(start + CHUNK_CHAINS, total)
        subset = None if wanted is None else np.flatnonzero(wanted[start:stop])
        chain = np.arange(start, stop) if subset is None else start + subset
        q, rest = np.divmod(chain, length * layers)
        i, layer = np.divmod(rest, layers)
        previous = []
        for d in range(1, depth + 1):
            if d < r:
                previous.append(flat_levels[r - d - 1][chain])
                continue
            index = anchor[q, i] - (d - r)
            ids = true[q, np.maximum(index, 0), layer].astype(np.int16)
            previous.append(np.where(index[:, None] >= 0, ids, -1))
        history = history_bits(previous, num_experts)
        ids = sampler.step(
            rng, layer, history, anchor[q, i] + r, draft=True, chains=stop - start, subset=subset
        )
        out[chain] = ids.astype(true.dtype)
    return out.reshape(nseq, length, layers, k)


def gather_pass(
    true_block: Callable[[int], np.ndarray],
    rejected_ids: Callable[[int, int, np.ndarray, np.ndarray], np.ndarray],
    triples: np.ndarray,
    accepted: np.ndarray,
    block_size: int,
) -> np.ndarray:
    """Every token a verify pass feeds, gathered per block at once: (tokens, layers, k_e).

    ``triples`` (B, 3) holds (request id, state i, drafts k) and ``accepted`` the accepted
    drafts a of each request: the pass feeds the true tokens y_i..y_{i+a} (cut at the block's
    end, as :meth:`~simspec.text.reference.ReferenceSet.fed_routing`'s slice) and the rejected
    drafts of depths 1..k − a at state i. ``true_block(b)`` returns block b's true tokens and
    ``rejected_ids(b, r, q, i)`` the ids of its rejected depth r at rows q, states i. The order
    of the tokens differs from fed_routing's; their union does not.
    """
    request, state, drafts = triples.T
    block, row = np.divmod(request, block_size)
    parts = []
    blocks = [int(block[0])] if (block == block[0]).all() else np.unique(block).tolist()
    for b in blocks:
        mine = slice(None) if len(blocks) == 1 else block == b
        q, i, acc = row[mine], state[mine], accepted[mine]
        true = true_block(b)
        count = acc + 1  # true tokens y_i..y_{i+a}
        offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        position = np.repeat(i, count) + offset
        sequence = np.repeat(q, count)
        inside = position < true.shape[1]
        if not inside.all():
            sequence, position = sequence[inside], position[inside]
        parts.append(true[sequence, position])
        rejected = drafts[mine] - acc
        for r in range(1, int(rejected.max()) + 1):
            deep = rejected >= r
            parts.append(rejected_ids(b, r, q[deep], i[deep]))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]
