"""A verify pass's tokens gathered from the stored routing of the reference sequences.

:class:`~simspec.text.reference.ReferenceSet` stores, per block of requests, the ids of the true
tokens and of every rejected depth (:mod:`simspec.routing.model` draws them); a pass feeds, per
request, a run of true tokens and the first few rejected drafts of its state. Ids are stored in
:func:`~simspec.routing.sets.id_dtype` (uint8 up to 256 experts): a block of 64 requests x 256
tokens x 48 layers x 8 experts is 6.3 MB per depth.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


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
