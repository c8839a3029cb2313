"""Time of a forward pass (kernel terms): a per-kernel roofline with named efficiencies.

A target pass over n tokens (from B requests, T_b tokens each, with C_b tokens already in the KV
cache) that touches U_l distinct routed experts in MoE layer l costs (every term is the roofline
max(bytes / (eta·BW), FLOPs / (eta_c·F)) of one kernel, and kernels run one after another, so
the terms add):

    t = t_fixed (kernel floors + engine host time, simspec.physics.launches)
      + Σ_l moe_layer(U_l, rows = n·k_e)                                   routed experts
      + Σ_l roofline(shared experts + router)                              (MoE part)
      + Σ_l roofline(attention projections) + roofline(KV reads, attention FLOPs)   (attention)
      + Σ_l roofline(dense FFN) + roofline(LM head over all n tokens)      (other)

moe_layer is :func:`simspec.costs.moe_kernel.moe_layer_s`: by default the ``launch`` form fitted
to published fused_moe tables, t0 + max(U·c_e + U·bytes_expert / (eta_bw·BW), FLOPs) — a fixed
time per MoE layer that every pass pays whatever its size, which the k+1 verified tokens share —
or the v0.1 occupancy curve ``saturation``. Every efficiency below is an assumption or a fit to
published tables unless a calibration profile supplies it (``[costs] profile``,
:mod:`simspec.profile`); the fixed part of a pass, every kernel's floor (counted from the
architecture, :mod:`simspec.physics.launches`) plus the engine's host time, is what Cohere's
2026 analysis of speculative decoding on MoE models identifies as the batch-1 mechanism
(amortised over the k+1 tokens).

Split over GPUs (:mod:`simspec.costs.parallel`: tensor degree t, expert degree e) each term is
one GPU's: it reads 1/t of the dense weights and KV cache, the busiest expert-parallel rank's
experts (each split t/e ways), and the pass adds every layer's collectives (alpha-beta) plus
``comm_s_per_layer`` of engine software time per layer.

The per-kernel terms here are shared by the roofline model (:mod:`simspec.costs.roofline`), the
calibrated model's fallback (:mod:`simspec.costs.calibrated`) and the synthetic tables of
:mod:`simspec.calibrate.analytic`, so all three agree to the last bit; :mod:`simspec.costs.passes`
adds them up into one pass (:func:`~simspec.costs.passes.target_pass_cost`).
"""

from __future__ import annotations

import math

import numpy as np

from simspec.costs.moe_kernel import moe_layer_s
from simspec.costs.parallel import Parallelism
from simspec.params import RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.physics.launches import EXPERT_PARALLEL_KERNELS, TABLE_PASS_KERNELS
from simspec.physics.models import LayerGroup, ModelShape


def _roofline(nbytes: float | np.ndarray, flops: float | np.ndarray, bw: float, flops_per_s: float):
    memory, compute = nbytes / bw, flops / flops_per_s
    if isinstance(memory, np.ndarray) or isinstance(compute, np.ndarray):
        return np.maximum(memory, compute)
    return max(memory, compute)  # two scalars: the same number, without a ufunc call


def weights_s(
    nbytes: float, tokens: float, weight_bytes_per_param: float, bw: float, flops_per_s: float
):
    """Roofline of a dense GEMM/GEMV that reads ``nbytes`` of weights for ``tokens`` tokens."""
    return _roofline(nbytes, 2.0 * tokens * nbytes / weight_bytes_per_param, bw, flops_per_s)


def routed_experts_s(
    shape: ModelShape,
    params: RooflineParams,
    unique_experts: np.ndarray,
    rows: float | np.ndarray,
    bw: float,
    flops_per_s: float,
    l2_bytes: float = 0.0,
    latency_scale: float = 1.0,
) -> np.ndarray:
    """Grouped routed-expert FFN per MoE layer: each distinct expert read once, ``rows`` rows.

    ``rows`` is the number of (token, expert) pairs, n·k_e in a real pass. The form of the
    kernel's time is ``params.moe_kernel`` (:func:`simspec.costs.moe_kernel.moe_layer_s`, which
    takes one GPU's expert shard; a whole expert with ``bw``, ``flops_per_s`` and ``l2_bytes``
    summed over the GPUs that hold its shards is the same arithmetic). ``l2_bytes`` is read only
    by ``moe_l2_reuse = "fit"``; ``latency_scale`` stretches the form's fixed times on a GPU
    clocked below the reference (:attr:`simspec.physics.hardware.GpuSpec.latency_scale`).
    """
    return moe_layer_s(
        params,
        unique_experts,
        rows,
        expert_bytes=shape.expert_bytes,
        expert_params=shape.expert_params,
        bandwidth=bw,
        flops_per_s=flops_per_s,
        l2_bytes=l2_bytes,
        latency_scale=latency_scale,
    )


def attention_core_s(
    group: LayerGroup,
    tokens: np.ndarray,
    context_tokens: np.ndarray,
    bw: float,
    flops_per_s: float,
    counts: np.ndarray | None = None,
    *,
    prefill: bool = False,
):
    """KV-cache (or linear-attention state) reads and score FLOPs of one layer of ``group``.

    ``bw`` is the bandwidth already scaled by the KV efficiency. ``tokens`` and
    ``context_tokens`` are (B,) for one pass, or (N, B) for N passes of B requests each (one
    pass per row, summed along the last axis: the same sums as one row alone). ``counts``
    (B,), if given, says how many identical requests each column stands for.

    Each request's keys are read once; its query tokens attend causally, so query i of t
    (i = 1..t) scores min(context + i, window) keys (:func:`attended_pairs`). ``prefill``:
    the pass is a prefill, whose scores cost ``group.prefill_flops_per_pair`` (MLA prefills
    run in the decompressed multi-head form; the other kinds cost the same either way).
    """
    seen = context_tokens + tokens
    if group.window_tokens != math.inf:  # full attention: the cap is inf, min() a no-op
        seen = np.minimum(seen, group.window_tokens)
    batch = tokens.shape[-1] if counts is None else counts.sum()
    kv_bytes = _batch_sum(seen, counts) * group.kv_bytes_per_token + batch * group.state_bytes
    per_pair = group.prefill_flops_per_pair if prefill else group.attention_flops_per_pair
    pairs = attended_pairs(tokens, context_tokens, group.window_tokens)
    pair_flops = _batch_sum(pairs, counts) * per_pair
    return _roofline(kv_bytes, pair_flops, bw, flops_per_s)


def attended_pairs(tokens, context_tokens, window: float = math.inf):
    """(query, key) pairs a request's ``tokens`` new tokens score under a causal mask after
    ``context_tokens`` cached ones: the sum over i = 1..t of min(c + i, window).

    Without a window that is t·c + t(t + 1)/2 (a decode token: c + 1; a prompt of L tokens:
    L(L + 1)/2, half the L² a mask-blind count gives). With one, the first
    m = clip(window − c, 0, t) queries see c + i keys and the rest see the window.

    >>> float(attended_pairs(np.array([4.0]), np.array([10.0]))[0])  # 11 + 12 + 13 + 14
    50.0
    >>> float(attended_pairs(np.array([4.0]), np.array([10.0]), 12.0)[0])  # 11 + 12 + 12 + 12
    47.0
    """
    if window == math.inf:
        return tokens * (context_tokens + (tokens + 1) / 2)
    below = np.clip(window - context_tokens, 0, tokens)
    return below * (context_tokens + (below + 1) / 2) + (tokens - below) * window


_add = np.add.reduce


def _batch_sum(values: np.ndarray, counts: np.ndarray | None):
    """Sum over the requests (last axis), a column standing for ``counts`` requests if given.

    On integer-valued tokens and contexts (as every pass has) each product and partial sum is
    an integer below 2**53, so the weighted sum equals the sum over the expanded batch exactly.
    """
    # np.add.reduce is what ndarray.sum calls, without its Python wrapper.
    total = _add(values, axis=-1) if counts is None else _add(values * counts, axis=-1)
    return float(total) if values.ndim == 1 else total  # one pass: a Python float


def kernel_floors_s(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    parallel: Parallelism | None = None,
) -> float:
    """Floors of one pass's kernels: Σ_groups layers · kernels per layer + the pass's own (+
    the dispatch kernels of every MoE layer that sends tokens to other GPUs' experts,
    :attr:`~simspec.costs.parallel.Parallelism.dispatches`), times the GPU's floor
    per kernel (CUDA graph or eager, ``params.cuda_graphs``; :mod:`simspec.physics.launches`)."""
    kernels = sum(g.count * g.kernels for g in shape.groups) + shape.pass_kernels
    if parallel is not None and parallel.dispatches:
        kernels += shape.num_moe_layers * EXPERT_PARALLEL_KERNELS
    return kernels * gpu.kernel_floor_s(params.cuda_graphs)


def untimed_kernel_floors_s(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    parallel: Parallelism | None = None,
) -> float:
    """:func:`kernel_floors_s` less the kernels a calibration profile's tables time (their
    floors are inside the measured times; :func:`simspec.physics.launches.table_kernels`)."""
    timed = sum(g.count * g.table_kernels for g in shape.groups) + TABLE_PASS_KERNELS
    return kernel_floors_s(shape, gpu, params, parallel) - timed * gpu.kernel_floor_s(
        params.cuda_graphs
    )
