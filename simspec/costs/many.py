"""Many target passes priced at once: the oracle's (state, k) tables as one array expression.

:func:`pass_cost_many` takes N passes as rows of arrays and runs the very body of the scalar
:func:`simspec.costs.passes.pass_cost` (:func:`~simspec.costs.passes.pass_terms`) on them:
every term function (weights, routed experts and their kernel form, attention, collectives)
accepts arrays and sums along the last axis, so each row costs, bit for bit, what that pass
costs alone, and a change to any term reaches both paths.
"""

from __future__ import annotations

import numpy as np

from simspec.costs.kernels import _batch_sum
from simspec.costs.passes import (
    PassConstants,
    fixed_overhead_s,
    pass_terms,
    routed_experts_split_s,
)


def pass_cost_many(
    c: PassConstants,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    overhead_s: float | None = None,
    counts: np.ndarray | None = None,
    unique_index: np.ndarray | None = None,
) -> np.ndarray:
    """Total times of N target passes at once, s: row p of each argument is one pass.

    Parameters
    ----------
    c : PassConstants
        As in :func:`pass_cost`.
    tokens_per_request, context_tokens : array, shape (N, B)
        Pass p feeds ``tokens_per_request[p, b]`` tokens to request b, whose KV cache holds
        ``context_tokens[p, b]`` (every pass has B requests; a request may differ per pass).
    unique_experts : array, shape (N, num_moe_layers)
        Distinct routed experts per MoE layer of each pass; with ``unique_index``, a table
        (V, num_moe_layers) of the values they take.
    overhead_s : float, optional
        As in :func:`pass_cost`.
    counts : array of int, shape (B,), optional
        Column b stands for ``counts[b]`` identical requests (a batch of many alike plus a few
        that differ, as the oracle prices, in a few columns instead of B).
    unique_index : array of int, shape (N, num_moe_layers), optional
        Pass p touches ``unique_experts[unique_index[p, l], l]`` experts in layer l. When N
        passes share a few values per layer (expert counts are integers) and a few token
        totals, the routed-expert kernel is evaluated once per (total, value, layer) and
        gathered: the same numbers, far fewer of its (exp-heavy) evaluations.

    Returns
    -------
    array, shape (N,)
        Entry p equals ``pass_cost(c, tokens[p], contexts[p], unique[p]).total_s`` bit for bit
        (the same term functions, elementwise; ``tests/costs/test_pass_cost_many.py``); with
        ``counts``, that of the expanded batch (``np.repeat(tokens, counts, axis=1)``), exactly
        so for integer tokens and contexts, to rounding otherwise.
    """
    tokens = np.asarray(tokens_per_request, dtype=float)
    ctx = np.asarray(context_tokens, dtype=float)
    if tokens.ndim != 2 or ctx.shape != tokens.shape:
        raise ValueError(f"tokens {tokens.shape} and contexts {ctx.shape} must be (N, B) alike")
    unique = np.asarray(unique_experts, dtype=float)
    weights = None if counts is None else np.asarray(counts, dtype=float)
    routed = None
    if unique_index is not None:
        if c.shape.num_moe_layers:
            routed = _routed_gathered(c, _batch_sum(tokens, weights), unique, unique_index)
        unique = np.zeros((len(tokens), 0))
    moe, attention, other = pass_terms(c, tokens, ctx, unique, weights, routed)
    requests = tokens.shape[1] if weights is None else float(weights.sum())
    fixed_s = fixed_overhead_s(c.params, requests, overhead_s)
    return fixed_s + moe + attention + other  # PassCost.total_s's order


def _routed_gathered(
    c: PassConstants, n: np.ndarray, values: np.ndarray, index: np.ndarray
) -> np.ndarray:
    """Routed-expert seconds (N, layers) of passes with ``n`` tokens and U = values[index, l]:
    :func:`~simspec.costs.passes.routed_experts_split_s` on the grid of distinct totals ×
    values, then one gather (elementwise the same inputs, so the same numbers)."""
    totals, which = np.unique(n, return_inverse=True)
    grid = routed_experts_split_s(c, values[None], totals[:, None])  # (totals, V, layers)
    count, layers = values.shape
    offset = (which.reshape(-1, 1) * (count * layers)).astype(np.intp)
    flat = index * layers + np.arange(layers) + offset
    return grid.reshape(-1)[flat]
