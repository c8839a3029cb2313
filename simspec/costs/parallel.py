"""Tensor and expert parallelism: what one GPU of a sharded model reads, and its collectives.

A model served on G GPUs with tensor-parallel degree t and expert-parallel degree e
(Shoeybi et al. 2019, Megatron-LM, arXiv:1909.08053; Lepikhin et al. 2020, GShard,
arXiv:2006.16668):

- **dense weights** (attention projections, dense FFNs, shared experts, router, LM head) and the
  KV cache are split t ways: each GPU reads 1/t of them and does 1/t of their FLOPs;
- **routed experts** are spread over e expert-parallel ranks, whole experts per rank, and each
  expert is split t_moe = max(t / e, 1) ways inside its rank. The MoE layer waits for the rank
  with the most distinct experts to read (:func:`max_rank_experts`);
- **collectives**, priced by the alpha-beta model (Hockney 1994; Thakur, Rabenseifner & Gropp
  2005, "Optimization of collective communication operations in MPICH"): a message of m bytes
  among r ranks costs ``alpha(r) + f(r) · m / beta``, beta the GPU's link bandwidth per
  direction. A ring all-reduce moves f = 2(r − 1)/r of the message per link in 2(r − 1)
  steps, an all-to-all f = (r − 1)/r in r − 1; its latency is NCCL's own model
  (src/graph/tuning.cc): alpha(r) = base + steps · per-step latency (the GPU's
  ``collective_latency_s`` and ``collective_step_latency_s``), so small-message collectives
  grow slower with the tensor-parallel degree, as nccl-tests measure (NCCL issue #1259).
  Every layer has two: after attention and after the FFN (an all-reduce over t GPUs each).
  With expert parallelism inside the attention group (e ≤ t, every expert-parallel rank one
  of the t GPUs) each GPU already holds every token: it runs its own experts on all of them
  and the MoE layer's partial outputs are summed by the same all-reduce over t. Only experts
  spread beyond the attention group (e > t: data-parallel attention) send tokens away, by a
  dispatch and a combine all-to-all over the e ranks. The engines choose the same way:
  vLLM's fused MoE uses its all-to-all kernels only with data parallelism
  (``FusedMoEParallelConfig.use_all2all_kernels``: dp_size > 1 and use_ep), TensorRT-LLM's
  only with attention data parallelism (``WideEPMoE.select_alltoall_method_type``);
- **data-parallel attention** (e > t: SGLang's ``--enable-dp-attention``, vLLM's data
  parallelism with expert parallelism, TensorRT-LLM's ``enable_attention_dp``): the G GPUs form
  d = G / t attention groups of t GPUs, and each group runs attention, the dense layers, the
  shared experts and the LM head for its own requests only (their KV cache lives on it), while
  every token meets the routed experts of all e ranks. The engines step all groups together
  (an idle group runs a dummy batch), so the busiest group sets the pace: with B requests spread
  evenly it holds ceil(B / d) of them, a share ceil(B / d) / B of the batch
  (:func:`attention_share`). Each rank then dispatches its group's tokens to the experts' ranks:
  n_g · k_e · h / t elements per rank for a group of n_g tokens.

All functions are pure. Each takes its token (or expert) count as a float or as an array of
them, one per pass, with the same arithmetic elementwise, so
:func:`simspec.costs.passes.pass_cost_many` prices many passes with these very functions.
With t = e = 1 nothing is split and no collective runs. Data-parallel replicas without expert
parallelism beyond the group (num_gpus larger than t, e ≤ t: independent copies of the model)
are not modelled: the whole batch runs on one group of t GPUs (while the KV-cache capacity
counts every GPU's memory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Bytes of one activation element exchanged by collectives (bf16 activations).
ACTIVATION_BYTES = 2.0
#: Most GPUs the engines' custom all-reduce spans: one NVLink board (vLLM's custom all-reduce
#: supports world sizes 2, 4, 6 and 8); a larger tensor-parallel group crosses nodes.
CUSTOM_ALLREDUCE_MAX_RANKS = 8


@dataclass(frozen=True, slots=True)
class Parallelism:
    """How a model is split over GPUs.

    ``tensor`` is the tensor-parallel degree t of attention and dense weights, ``expert`` the
    expert-parallel degree e of the routed experts; each expert is split ``expert_shards`` =
    max(t / e, 1) ways inside its rank. ``attention_groups`` is the number d of data-parallel
    attention groups (module docstring): G / t when the experts spread beyond one group
    (e > t), else 1.

    >>> Parallelism.of(num_gpus=8, tensor_parallel=0, expert_parallel=8)
    Parallelism(tensor=8, expert=8, expert_shards=1, attention_groups=1)
    >>> Parallelism.of(num_gpus=2, tensor_parallel=0, expert_parallel=1).expert_shards
    2
    >>> Parallelism.of(num_gpus=8, tensor_parallel=1, expert_parallel=8).attention_groups
    8
    """

    tensor: int = 1
    expert: int = 1
    expert_shards: int = 1
    attention_groups: int = 1

    @classmethod
    def of(cls, num_gpus: int, tensor_parallel: int, expert_parallel: int) -> Parallelism:
        """From the scenario keys: ``tensor_parallel`` 0 means all ``num_gpus`` GPUs."""
        t = tensor_parallel or num_gpus
        e = max(expert_parallel, 1)
        groups = max(num_gpus // t, 1) if e > t else 1
        return cls(tensor=t, expert=e, expert_shards=max(t // e, 1), attention_groups=groups)

    @property
    def is_split(self) -> bool:
        """True when the model runs on more than one GPU (collectives happen)."""
        return self.tensor > 1 or self.expert > 1

    @property
    def dispatches(self) -> bool:
        """True when a MoE layer sends tokens to other GPUs' experts (dispatch and combine
        all-to-alls): the experts are spread over more ranks than the attention group holds
        (module docstring); within it every GPU already has every token."""
        return self.expert > self.tensor


def attention_share(parallel: Parallelism, requests: float | np.ndarray) -> float | np.ndarray:
    """Share of a batch of ``requests`` requests that the busiest data-parallel attention group
    runs: ceil(B / d) / B for d groups (module docstring); exactly 1.0 without data-parallel
    attention, and for an empty batch. ``requests`` a float, or an array (one per pass).

    >>> attention_share(Parallelism(tensor=1, expert=8, attention_groups=8), 1.0)
    1.0
    >>> attention_share(Parallelism(tensor=1, expert=8, attention_groups=8), 12.0)
    0.16666666666666666
    >>> attention_share(Parallelism(tensor=8, expert=8), 12.0)
    1.0
    """
    d = parallel.attention_groups
    if d <= 1:
        return 1.0
    b = np.asarray(requests, dtype=float)
    share = np.divide(np.ceil(b / d), b, out=np.ones_like(b), where=b > 0)
    return float(share) if np.ndim(share) == 0 else share


def allreduce_s(
    nbytes: float | np.ndarray,
    ranks: int,
    latency_s: float,
    link_bytes_per_s: float,
    step_latency_s: float = 0.0,
    oneshot: tuple[float, float, float] = (0.0, 0.0, 0.0),
    mesh: bool = False,
) -> float | np.ndarray:
    """Ring all-reduce of ``nbytes`` among ``ranks`` GPUs:
    alpha + 2(r − 1)·step + 2(r − 1)/r · m / beta (NCCL's model, which RCCL keeps).

    Where the GPU states the engines' custom all-reduce (``oneshot`` = its latency a, per
    further GPU s and reached bandwidth b; a > 0 only then), the all-reduce costs the
    cheaper of that ring and a + s·(r − 1) + (r − 1)/r · m / b: vLLM, SGLang and TensorRT-LLM
    run decode-sized all-reduces inside one node with their own kernel and hand large ones
    (a long prefill's) to NCCL (RCCL), picking the faster path by message size; the minimum
    is continuous in m, so a batch that crosses over does not jump. Beyond
    :data:`CUSTOM_ALLREDUCE_MAX_RANKS` GPUs (more than one node) the ring alone.

    On a ``mesh`` fabric (a direct link to every peer: :attr:`~simspec.physics.hardware.
    GpuSpec.fabric`) ``link_bytes_per_s`` and b are one link's, and a collective over r GPUs
    drives r − 1 links at once, so both bandwidths are r − 1 times theirs (RCCL's rings and
    the custom all-reduce's reduce-scatter and all-gather each use every peer link).

    ``nbytes`` is a float or an array (one message per entry).

    >>> round(allreduce_s(0.0, 8, 6.6e-6, 4.5e11, 6e-7) * 1e6, 9)  # NCCL's model at TP8
    15.0

    >>> round(allreduce_s(1e6, 2, 5e-6, 1e11), 12)
    1.5e-05
    >>> allreduce_s(1e6, 1, 5e-6, 1e11)
    0.0
    >>> round(allreduce_s(7e6, 8, 0.0, 1e11, mesh=True) * 1e6, 6)  # 7 links: 7 x the bandwidth
    17.5
    """
    if ranks <= 1:
        return 0.0
    links = ranks - 1 if mesh else 1
    wire = (
        2.0 * (ranks - 1) / ranks * nbytes / (link_bytes_per_s * links) if link_bytes_per_s else 0.0
    )
    ring = latency_s + 2 * (ranks - 1) * step_latency_s + wire
    a, s, b = oneshot
    if a <= 0.0 or b <= 0.0 or ranks > CUSTOM_ALLREDUCE_MAX_RANKS:
        return ring
    custom = a + s * (ranks - 1) + (ranks - 1) / ranks * nbytes / (b * links)
    return np.minimum(custom, ring) if isinstance(custom, np.ndarray) else min(custom, ring)


def all_to_all_s(
    nbytes: float | np.ndarray,
    ranks: int,
    latency_s: float,
    link_bytes_per_s: float,
    step_latency_s: float = 0.0,
    mesh: bool = False,
) -> float | np.ndarray:
    """All-to-all where each rank holds ``nbytes`` to scatter:
    alpha + (r − 1)·step + (r − 1)/r · m / beta; on a ``mesh`` fabric beta is r − 1 links'
    (:func:`allreduce_s`)."""
    if ranks <= 1:
        return 0.0
    links = ranks - 1 if mesh else 1
    wire = (ranks - 1) / ranks * nbytes / (link_bytes_per_s * links) if link_bytes_per_s else 0.0
    return latency_s + (ranks - 1) * step_latency_s + wire


def max_rank_experts(
    unique_experts: float | np.ndarray, num_experts: int, ranks: int
) -> float | np.ndarray:
    """Expected distinct experts on the busiest of ``ranks`` expert-parallel ranks.

    U distinct experts fall on ranks holding N/r experts each; one rank's count is
    hypergeometric with mean U/r and variance U (1/r)(1 − 1/r)(N − U)/(N − 1). The expected
    maximum of r such counts is taken as mean + sd·sqrt(2 ln r) (the Gaussian extreme-value
    scale), kept within [U/r, min(U, N/r)]. ``unique_experts`` is a float (a float comes back)
    or an array of U values (an array of the same shape comes back, elementwise the same
    numbers).

    >>> max_rank_experts(8.0, 128, 1)
    8.0
    >>> max_rank_experts(128.0, 128, 8)  # every expert touched: the ranks are even
    16.0
    >>> max_rank_experts(np.array([8.0, 128.0]), 128, 8).tolist() == [
    ...     max_rank_experts(8.0, 128, 8), 16.0]
    True
    """
    if ranks <= 1:
        return unique_experts
    scalar = np.ndim(unique_experts) == 0
    u = np.asarray(unique_experts, dtype=float)
    mean = u / ranks
    if num_experts <= 1:
        return float(mean) if scalar else mean
    var = u * (1 / ranks) * (1 - 1 / ranks) * (num_experts - u)
    var = np.maximum(var / (num_experts - 1), 0.0)
    busiest = mean + np.sqrt(var) * math.sqrt(2.0 * math.log(ranks))
    out = np.maximum(mean, np.minimum(np.minimum(busiest, u), num_experts / ranks))
    return float(out) if scalar else out


def layer_collectives_s(
    tokens: float | np.ndarray,
    hidden_size: int,
    experts_per_token: int,
    is_moe: bool,
    parallel: Parallelism,
    latency_s: float,
    link_bytes_per_s: float,
    overhead_s: float = 0.0,
    step_latency_s: float = 0.0,
    oneshot: tuple[float, float, float] = (0.0, 0.0, 0.0),
    mesh: bool = False,
) -> float | np.ndarray:
    """Collectives of one layer over ``tokens`` tokens (module docstring); ``mesh``: the GPUs
    connect by a direct link to each peer (:func:`allreduce_s`).

    ``tokens`` is a float, or an array with one pass's token count per entry.

    Attention ends in an all-reduce of the n × h activations over the t GPUs; a dense FFN or
    a MoE layer in another. A MoE layer whose experts spread beyond the attention group
    (:attr:`Parallelism.dispatches`) instead dispatches each token's activations to its k_e
    experts' ranks and combines them back: two all-to-alls of n·k_e·h/t elements per rank,
    ``tokens`` then being one data-parallel attention group's (:func:`attention_share`).
    ``overhead_s`` is the engine's software time per layer on top
    (``RooflineParams.comm_s_per_layer``).

    >>> layer_collectives_s(1, 4096, 8, True, Parallelism(), 5e-6, 4.5e11)
    0.0
    """
    if not parallel.is_split:
        return 0.0
    message = tokens * hidden_size * ACTIVATION_BYTES
    t = parallel.tensor
    total = allreduce_s(message, t, latency_s, link_bytes_per_s, step_latency_s, oneshot, mesh)
    if is_moe and parallel.dispatches:
        e = parallel.expert
        per_rank = message * experts_per_token / t
        total += 2.0 * all_to_all_s(per_rank, e, latency_s, link_bytes_per_s, step_latency_s, mesh)
    else:
        total += allreduce_s(message, t, latency_s, link_bytes_per_s, step_latency_s, oneshot, mesh)
    return total + overhead_s
