"""One target pass from per-model constants: :mod:`simspec.costs.kernels`' terms added up.

:func:`pass_constants` derives once per (model, GPU, params, parallelism) what every pass reads
(:class:`PassConstants`); :func:`pass_terms` is the one body behind a single pass
(:func:`pass_cost`) and many at once (:func:`pass_cost_many`: the oracle's (state, k) tables as
one array expression, each row costing bit for bit what that pass costs alone), so the two
cannot drift apart. A single pass memoises the terms that depend on its token count alone and
the MoE total of a repeated (token count, experts) pair: a decode loop asks for the same ones
again and again, and the memo returns the very floats the arithmetic gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simspec.costs.kernels import _batch_sum, attention_core_s, kernel_floors_s, routed_experts_s
from simspec.costs.parallel import (
    Parallelism,
    attention_share,
    layer_collectives_s,
    max_rank_experts,
)
from simspec.params import PassCost, RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelShape

#: Entries each memo of :class:`PassConstants` holds before it starts afresh.
MEMO_ENTRIES = 4096


@dataclass(frozen=True, slots=True)
class PassConstants:
    """What a target pass's cost takes from (shape, GPU, params, parallelism) alone.

    Built once per cost model (:func:`pass_constants`) so a pass does not re-derive them. On
    one GPU every parallel factor is 1 and the terms reduce to the single-device roofline.
    Split over GPUs (:mod:`simspec.costs.parallel`), ``bw`` and ``flops_per_s`` are one GPU's
    times t: each GPU reads and computes 1/t of every dense weight and of the KV cache; the
    routed experts use ``moe_bw`` / ``moe_flops_per_s`` (one GPU's times the t_moe shards).
    """

    shape: ModelShape
    params: RooflineParams
    num_gpus: int
    bw: float
    flops_per_s: float
    w_bw: float  # bandwidth of dense weight reads
    kv_bw: float  # bandwidth of KV reads
    fixed_bytes: float  # shared experts + router, per MoE layer
    fixed_bpp: float  # their bytes per parameter
    num_layers: int
    parallel: Parallelism = Parallelism()
    moe_bw: float = 0.0  # bandwidth behind one expert's shards (one GPU's × t_moe)
    moe_flops_per_s: float = 0.0
    moe_l2_bytes: float = 0.0  # L2 behind one expert's shards (one GPU's × t_moe)
    moe_latency_scale: float = 1.0  # the MoE kernel's fixed times on this GPU's clock
    moe_engine_s: float = 0.0  # the engine's own per MoE layer (fp8_moe_s_per_layer on FP8)
    hidden_size: int = 0
    collective_latency_s: float = 0.0
    link_bytes_per_s: float = 0.0
    collective_step_latency_s: float = 0.0
    mesh_fabric: bool = False  # a direct link to each peer GPU (GpuSpec.mesh)
    #: The engines' custom all-reduce (latency, per further GPU, reached bandwidth); a
    #: latency of 0 = NCCL's ring only (:func:`simspec.costs.parallel.allreduce_s`).
    oneshot_allreduce: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Kernel floors of one pass: every kernel its layers and its head and tail launch
    #: (:mod:`simspec.physics.launches`) times the GPU's per-kernel floor.
    floor_s: float = 0.0
    #: One wave of a sampled verify's top-p renormalisation (:func:`renorm_wave_s`) and the
    #: rows a wave holds (the GPU's SMs: one thread block per row); 0 when greedy.
    renorm_wave_s: float = 0.0
    renorm_rows: int = 1
    #: A verify pass's tree mask (:func:`tree_attention_s`): bytes moved per mask entry (one
    #: query token × one key it may see) at ``mask_bw`` (one GPU's: every rank builds and
    #: reads the whole mask), and the floor of the kernel that packs it; 0 for a prefill.
    mask_bytes_per_entry: float = 0.0
    mask_bw: float = 1.0
    mask_floor_s: float = 0.0
    #: Bytes a verify writes per verified token beyond a request's first, at ``kv_bw``
    #: (:func:`verify_state_bytes`); 0 without linear attention.
    verify_state_bytes: float = 0.0
    prefill: bool = False  # a prefill: its scores cost LayerGroup.prefill_flops_per_pair
    #: Memos of :func:`pass_terms` for one pass: the terms of a token count, and the MoE total
    #: of a (token count, read-only experts array) pair. Pure functions of their keys, so a
    #: pass costs the same with or without them; each is cleared at :data:`MEMO_ENTRIES`.
    token_memo: dict = field(default_factory=dict, compare=False, repr=False)
    moe_memo: dict = field(default_factory=dict, compare=False, repr=False)


def pass_constants(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    num_gpus: int = 1,
    *,
    parallel: Parallelism | None = None,
    hidden_size: int = 0,
) -> PassConstants:
    """The per-(model, GPU, params, parallelism) constants of :func:`target_pass_cost`.

    ``parallel`` defaults to tensor parallelism over ``num_gpus``; ``hidden_size`` sizes the
    collectives' messages (0: latency-only collectives).
    """
    split = parallel or Parallelism.of(num_gpus, 0, 1)
    bw = gpu.hbm_bytes_per_s * split.tensor
    wb = shape.weight_bytes_per_param
    # The router is one replicated weight on every tensor-parallel rank (vLLM's and SGLang's
    # MoE blocks: ``self.gate = ReplicatedLinear(hidden, num_experts)``): the t ranks read it t
    # times between them, the shared experts once.
    router = shape.router_bytes * split.tensor
    fixed_bytes = shape.shared_expert_bytes + router
    fixed_bpp = wb
    if shape.num_moe_layers and shape.ffn_bytes_per_param != wb:  # shared experts quantised
        params_count = shape.shared_expert_bytes / shape.ffn_bytes_per_param
        fixed_bpp = fixed_bytes / (params_count + router / wb)
    return PassConstants(
        shape=shape,
        params=params,
        num_gpus=num_gpus,
        bw=bw,
        flops_per_s=gpu.bf16_flops_per_s * split.tensor * params.compute_efficiency,
        w_bw=bw * params.weight_efficiency,
        kv_bw=bw * params.kv_efficiency,
        fixed_bytes=fixed_bytes,
        fixed_bpp=fixed_bpp,
        num_layers=sum(g.count for g in shape.groups),
        parallel=split,
        moe_bw=gpu.hbm_bytes_per_s * split.expert_shards,
        moe_flops_per_s=gpu.bf16_flops_per_s * split.expert_shards * params.compute_efficiency,
        moe_l2_bytes=gpu.l2_bytes * split.expert_shards,
        moe_latency_scale=gpu.latency_scale,
        moe_engine_s=params.moe_engine_s(shape.fp8_experts),
        hidden_size=hidden_size,
        collective_latency_s=gpu.collective_latency_s,
        link_bytes_per_s=gpu.link_bytes_per_s,
        collective_step_latency_s=gpu.collective_step_latency_s,
        mesh_fabric=gpu.mesh,
        oneshot_allreduce=gpu.custom_allreduce,
        floor_s=kernel_floors_s(shape, gpu, params, split),
        renorm_wave_s=renorm_wave_s(shape, gpu, params),
        renorm_rows=max(gpu.num_sms, 1),
        mask_bytes_per_entry=tree_mask_bytes_per_entry(shape),
        mask_bw=gpu.hbm_bytes_per_s * params.kv_efficiency,
        mask_floor_s=TREE_MASK_KERNELS * gpu.kernel_floor_s(params.cuda_graphs),
        verify_state_bytes=verify_state_bytes(shape, split.tensor),
    )


#: Bytes of one entry of the verify mask as the engine builds it (a bool per (query, key)).
MASK_BUILD_BYTES = 1.0
#: Bytes of one entry of the packed mask the attention kernel reads (one bit).
MASK_PACKED_BYTES = 1.0 / 8.0
#: Kernels a verify's mask adds to the pass besides :data:`~simspec.physics.launches.
#: VERIFY_KERNELS` (which builds it): packing it into bits (FlashInfer's segment_packbits).
TREE_MASK_KERNELS = 1


def tree_mask_bytes_per_entry(shape: ModelShape) -> float:
    """Bytes one entry of a verify pass's attention mask moves over the pass.

    SGLang verifies draft tokens (chains and trees alike) with a custom mask of n_b × (c_b +
    n_b) entries per request (``seq_mask_len = num_draft_tokens * (seq_lens +
    num_draft_tokens)`` in the target-verify branch of its attention backends,
    python/sglang/srt/layers/attention/flashinfer_backend.py and triton_backend.py): its
    build kernel writes one bool per entry; FlashInfer's prefill plan packs it into bits
    (read the bools, write the bits) and every attention layer's kernel reads the packed
    mask next to the KV cache (which :func:`~simspec.costs.kernels.attention_core_s` already
    reads once per request). Linear-attention layers take no mask.
    """
    masked = sum(g.count for g in shape.groups if g.kv_bytes_per_token > 0)
    return 2.0 * MASK_BUILD_BYTES + MASK_PACKED_BYTES * (1 + masked)


def verify_state_bytes(shape: ModelShape, tensor: int = 1) -> float:
    """Bytes of one float32 recurrent state per linear-attention (Gated DeltaNet) layer, over
    the ``tensor`` ranks together. A decode step reads and writes each request's state
    (:func:`~simspec.costs.kernels.attention_core_s`). The accepted prefix may end at any
    verified token, so SGLang's verify kernel writes the state after each of a request's n_b
    tokens (``intermediate_ssm_state_cache``, layers × requests × draft tokens × state) and
    ``update_mamba_state_after_mtp_verify`` then copies the accepted one into the request's
    slot (a read and a write): n_b + 1 states per request beyond a decode step's."""
    return sum(g.count * (g.state_bytes / 2) * g.kv_copies(tensor) for g in shape.groups)


def tree_attention_s(c: PassConstants, tokens, ctx, counts=None, share: float = 1.0):
    """A verify's attention beyond a decode step's, in a pass of ``tokens`` (B,) or (N, B) at
    contexts ``ctx``: its mask, Σ_b n_b·(c_b + n_b) entries × :func:`tree_mask_bytes_per_entry`
    at one GPU's KV bandwidth plus the packing kernel's floor, and the linear-attention states
    kept and committed, Σ_b (n_b + 1) × :func:`verify_state_bytes` at the pass's. 0 for a pass
    that verifies no drafts (every n_b = 1) and for a prefill (``mask_bytes_per_entry`` 0). A
    float for one pass, else (N,). ``share``: the busiest data-parallel attention group's share
    (:func:`~simspec.costs.parallel.attention_share`)."""
    if not c.mask_bytes_per_entry:
        return 0.0
    n = _batch_sum(tokens, counts)
    requests = tokens.shape[-1] if counts is None else float(np.sum(counts))
    entries = _batch_sum(tokens * (ctx + tokens), counts)
    if share != 1.0:
        entries = entries * share
    time = entries * (c.mask_bytes_per_entry / c.mask_bw) + c.mask_floor_s
    if c.verify_state_bytes:
        time = time + (n + requests) * share * (c.verify_state_bytes / c.kv_bw)
    if isinstance(n, float):
        return time if n > requests else 0.0
    return np.where(n > requests, time, 0.0)


#: Bytes of one probability a sampler reads (fp32).
PROBABILITY_BYTES = 4.0


def renorm_wave_s(shape: ModelShape, gpu: GpuSpec, params: RooflineParams) -> float:
    """One wave of the top-p renormalisation of a sampled verify pass, s (0 when greedy).

    With temperature > 0 and top_p < 1 a speculative verify renormalises the target's
    probabilities of every verified token before the accept kernel (SGLang's
    ``top_p_renorm_prob`` before ``tree_speculative_sampling_target_only``; it dominates a
    sampled verify, flashinfer issue #1514, sglang issue #6949, the skip at top_p = 1 in
    sglang PR #9404). FlashInfer's kernel runs one thread block per row and makes
    ``top_p_renorm_passes`` passes over the vocabulary (a ternary search, flashinfer PR
    #2752), so a row reads passes · V · 4 bytes at one SM's share of HBM bandwidth, and a wave
    of up to one row per SM runs at once: t = ceil(rows / SMs) · this.
    """
    if params.temperature <= 0 or params.top_p >= 1 or not params.top_p_renorm_passes:
        return 0.0
    row_bytes = params.top_p_renorm_passes * shape.vocab_size * PROBABILITY_BYTES
    return row_bytes * max(gpu.num_sms, 1) / gpu.hbm_bytes_per_s


def renorm_s(c: PassConstants, n, requests):
    """Top-p renormalisation of a pass over ``n`` tokens from ``requests`` requests: waves of
    :func:`renorm_wave_s` over its n rows when it verifies drafts (n > requests), else 0.
    ``n`` a float, or an array of one count per pass (then an array)."""
    if not c.renorm_wave_s:
        return 0.0
    waves = np.ceil(np.asarray(n, dtype=float) / c.renorm_rows) * c.renorm_wave_s
    time = np.where(np.asarray(n) > requests, waves, 0.0)
    return float(time) if np.ndim(time) == 0 else time


def routed_experts_split_s(
    c: PassConstants, unique_experts: np.ndarray, n: float | np.ndarray
) -> np.ndarray:
    """Routed experts per MoE layer on the busiest expert-parallel rank.

    Without expert parallelism every GPU reads its 1/t shard of each distinct expert (the
    single-device formula with t GPUs' bandwidth). With e ranks the rank holding the most
    distinct experts sets the time (:func:`~simspec.costs.parallel.max_rank_experts`), over
    its share n·k_e / e of the (token, expert) rows.

    One pass: ``unique_experts`` (layers,) and ``n`` a float. N passes: ``unique_experts``
    (N, layers) and ``n`` an array (N,); the result is (N, layers).
    """
    shape, split = c.shape, c.parallel
    rows = n * shape.experts_per_token
    if isinstance(rows, np.ndarray):  # one row count per pass, against the layer axis
        rows = rows[..., None]
    if split.expert <= 1:
        return routed_experts_s(
            shape,
            c.params,
            unique_experts,
            rows,
            c.moe_bw,
            c.moe_flops_per_s,
            c.moe_l2_bytes,
            c.moe_latency_scale,
        )
    busiest = np.asarray(
        max_rank_experts(np.asarray(unique_experts, dtype=float), shape.num_experts, split.expert)
    )
    return routed_experts_s(
        shape,
        c.params,
        busiest,
        rows / split.expert,
        c.moe_bw,
        c.moe_flops_per_s,
        c.moe_l2_bytes,
        c.moe_latency_scale,
    )


def collectives_s(c: PassConstants, n: float | np.ndarray) -> float | np.ndarray:
    """All collectives of one pass over ``n`` tokens (0 on one GPU), every layer's summed;
    with data-parallel attention ``n`` is the busiest attention group's tokens
    (:func:`~simspec.costs.parallel.layer_collectives_s`).

    ``n`` may be an array of token counts, one per pass (then one total per pass).
    """
    if not c.parallel.is_split:
        return 0.0
    return sum(
        g.count
        * layer_collectives_s(
            n,
            c.hidden_size,
            c.shape.experts_per_token,
            g.is_moe,
            c.parallel,
            c.collective_latency_s,
            c.link_bytes_per_s,
            c.params.comm_s_per_layer,
            c.collective_step_latency_s,
            c.oneshot_allreduce,
            c.mesh_fabric,
        )
        for g in c.shape.groups
    )


def _weights(nbytes: float, tokens, bpp: float, bw: float, flops_per_s: float):
    """:func:`weights_s` (same operations, same order): on a Python float ``tokens`` with
    Python floats (no numpy scalars), on an array of token counts elementwise."""
    memory, compute = nbytes / bw, 2.0 * tokens * nbytes / bpp / flops_per_s
    return np.maximum(memory, compute) if isinstance(compute, np.ndarray) else max(memory, compute)


def pass_terms(
    c: PassConstants,
    tokens: np.ndarray,
    ctx: np.ndarray,
    unique_experts: np.ndarray,
    counts: np.ndarray | None = None,
    routed: np.ndarray | None = None,
):
    """(moe, attention, other, collectives, tree attention) seconds of one pass (``tokens``
    (B,)) or of N passes (``tokens`` (N, B), ``unique_experts`` (N, layers)): the one body behind
    :func:`pass_cost` and :func:`simspec.costs.passes.pass_cost_many`, so the two cannot drift
    apart.

    Every sum over requests or layers runs along the last axis, row by row, which is the same
    summation as on one row alone; the rest is elementwise. So each of N passes costs, bit for
    bit, what it costs alone. ``counts``: see :func:`simspec.costs.passes.pass_cost_many`;
    ``routed``: :func:`routed_experts_split_s` of the passes, if the caller has it.

    With data-parallel attention (:mod:`simspec.costs.parallel`) everything but the routed
    experts runs on the busiest attention group's share of the batch
    (:func:`~simspec.costs.parallel.attention_share`); the routed experts see every token.
    """
    shape = c.shape
    n = _batch_sum(tokens, counts)  # a Python float for one pass (faster than numpy scalars)
    one = isinstance(n, float)
    share = 1.0
    if c.parallel.attention_groups > 1:
        requests = float(tokens.shape[-1]) if counts is None else float(np.sum(counts))
        share = float(attention_share(c.parallel, requests))
    key = n if share == 1.0 else (n, share)
    terms = c.token_memo.get(key) if one else None
    if terms is None:
        terms = _token_terms(c, n if share == 1.0 else n * share)
        if one:
            _remember(c.token_memo, key, terms)
    fixed, projections, other, comm = terms

    moe = 0.0
    if shape.num_moe_layers:
        key = None
        if one and routed is None:
            u = np.asarray(unique_experts, dtype=float)
            if not u.flags.writeable:  # a predictor's cached answer: likely to come again
                key = (n, u.tobytes())
        known = None if key is None else c.moe_memo.get(key)
        if known is not None:
            moe = known
        else:
            if routed is None:
                routed = routed_experts_split_s(c, unique_experts, n)
            moe = routed.sum(axis=-1) + shape.num_moe_layers * (fixed + c.moe_engine_s)
            if key is not None:
                _remember(c.moe_memo, key, moe)

    attention = 0.0
    for g, proj in zip(shape.groups, projections, strict=True):
        kv_bw = c.kv_bw / g.kv_copies(c.parallel.tensor)  # a replicated KV cache, read t times
        core = attention_core_s(g, tokens, ctx, kv_bw, c.flops_per_s, counts, prefill=c.prefill)
        if share != 1.0:
            core = core * share
        attention += g.count * (proj + core)
    if c.renorm_wave_s:
        requests = tokens.shape[-1] if counts is None else float(np.sum(counts))
        if share == 1.0:
            other = other + renorm_s(c, n, requests)
        else:
            other = other + renorm_s(c, n * share, requests * share)
    tree = tree_attention_s(c, tokens, ctx, counts, share)
    return moe, attention, other, comm, tree


def _remember(memo: dict, key, value) -> None:
    """Store ``value`` under ``key``, starting the memo afresh once it holds MEMO_ENTRIES."""
    if len(memo) >= MEMO_ENTRIES:
        memo.clear()
    memo[key] = value


def _token_terms(c: PassConstants, n):
    """The terms of a pass that depend on its token count ``n`` alone (a float, or an array of
    one count per pass): the shared experts and router of one MoE layer, each layer group's
    attention projections, ``other`` (dense FFNs and LM head, summed) and the collectives.
    With data-parallel attention ``n`` is the busiest attention group's tokens.
    """
    shape, flops_per_s, w_bw = c.shape, c.flops_per_s, c.w_bw
    fixed = 0.0
    if shape.num_moe_layers:
        fixed = _weights(c.fixed_bytes, n, c.fixed_bpp, w_bw, flops_per_s)
    projections = []
    other = 0.0
    for g in shape.groups:
        projections.append(
            _weights(
                g.attention_bytes_read(c.parallel.tensor),
                n,
                shape.attention_bytes_per_param,
                w_bw,
                flops_per_s,
            )
        )
        if g.ffn_weight_bytes:
            ffn = _weights(g.ffn_weight_bytes, n, shape.ffn_bytes_per_param, w_bw, flops_per_s)
            other += g.count * ffn
    other += _weights(shape.lm_head_bytes, n, shape.weight_bytes_per_param, w_bw, flops_per_s)
    comm = collectives_s(c, n) if c.parallel.is_split else 0.0
    return fixed, tuple(projections), other, comm


def pass_cost(
    c: PassConstants,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    overhead_s: float | None = None,
) -> PassCost:
    """:func:`target_pass_cost` from precomputed constants (same parameters otherwise).

    Integer arrays are used as they are: every product and sum of the pass is then an exact
    integer, the same number the float arithmetic gives below 2**53, without two conversions.
    """
    tokens, ctx = _numbers(tokens_per_request), _numbers(context_tokens)
    moe, attention, other, comm, tree = pass_terms(c, tokens, ctx, unique_experts)
    return PassCost(
        overhead_s=host_overhead_s(c, overhead_s),
        moe_s=float(moe),
        attention_s=float(attention),
        other_s=float(other),
        floors_s=c.floor_s,
        collectives_s=float(comm),
        tree_attention_s=float(tree),
    )


def _numbers(values) -> np.ndarray:
    """``values`` as an array: an int64 array as it is, anything else as floats."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64:
        return values
    return np.asarray(values, dtype=float)


def host_overhead_s(c: PassConstants, overhead_s: float | None) -> float:
    """The engine's host time of a pass: ``overhead_s`` if given (draft steps, extends), else
    the target pass's ``pass_overhead_s`` (its kernels' floors are ``c.floor_s``, apart).
    Shared by :func:`pass_cost` and :func:`pass_cost_many`."""
    return c.params.pass_overhead_s if overhead_s is None else overhead_s


def target_pass_cost(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    num_gpus: int = 1,
    overhead_s: float | None = None,
    parallel: Parallelism | None = None,
    hidden_size: int = 0,
) -> PassCost:
    """Roofline time of one target pass (module docstring formula).

    Parameters
    ----------
    shape : ModelShape
        Derived architecture (``ModelSpec.shape``).
    gpu : GpuSpec
        Peak numbers of one GPU (and its links, for collectives).
    params : RooflineParams
        Efficiencies and overheads.
    tokens_per_request : array of int, shape (B,)
        Tokens each request feeds in this pass (k_b + 1 for a verify pass).
    context_tokens : array of int, shape (B,)
        Tokens each request already holds in its KV cache.
    unique_experts : array, shape (num_moe_layers,)
        Distinct routed experts touched per MoE layer (the union over all tokens).
    overhead_s : float, optional
        Host time of the pass on top of its kernel floors; defaults to
        ``params.pass_overhead_s``.
    num_gpus, parallel, hidden_size
        How the model is split (:class:`~simspec.costs.parallel.Parallelism`; default: tensor
        parallel over ``num_gpus``) and its hidden size (collective message size).

    Returns
    -------
    PassCost

    Examples
    --------
    Its kernels' floors, 32 layers of 10 kernels and 5 more at 2 µs each (the engine's host
    time, ``overhead_s``, is 0 by default):

    >>> from simspec import catalog
    >>> m = catalog.get_model("llama-3.1-8b")
    >>> c = target_pass_cost(m.shape, catalog.get_gpu("h100-sxm"), RooflineParams(),
    ...                      np.array([1]), np.array([0]), np.zeros(0))
    >>> round(c.floors_s * 1e6, 6), c.overhead_s
    (770.25, 0.0)
    """
    return pass_cost(
        pass_constants(shape, gpu, params, num_gpus, parallel=parallel, hidden_size=hidden_size),
        tokens_per_request,
        context_tokens,
        unique_experts,
        overhead_s=overhead_s,
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
    moe, attention, other, comm, tree = pass_terms(c, tokens, ctx, unique, weights, routed)
    host = host_overhead_s(c, overhead_s)
    return host + moe + attention + other + c.floor_s + comm + tree  # PassCost.total_s's order


def _routed_gathered(
    c: PassConstants, n: np.ndarray, values: np.ndarray, index: np.ndarray
) -> np.ndarray:
    """Routed-expert seconds (N, layers) of passes with ``n`` tokens and U = values[index, l]:
    :func:`~simspec.costs.passes.routed_experts_split_s` on the grid of distinct totals ×
    values, then one gather (elementwise the same inputs, so the same numbers)."""
    totals, which = np.unique(n, return_inverse=True)
    grid = routed_experts_split_s(c, values[None], totals[:, None])  # (totals, V, layers)
    count, layers = values.shape
    flat = index.astype(np.intp)  # a fresh array, computed in place from here
    flat *= layers
    flat += np.arange(layers)
    flat += (which.reshape(-1, 1) * (count * layers)).astype(np.intp)
    return grid.reshape(-1).take(flat)
