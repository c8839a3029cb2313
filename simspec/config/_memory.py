"""Whether a scenario's weights fit its GPUs: pooled over every GPU, and on each GPU.

Each GPU of the serving group holds 1/t of the attention, dense and embedding weights and
1/(e · s) of the routed experts (t the tensor-parallel degree, e the expert-parallel degree,
s = max(t / e, 1) the shards of each expert inside its rank: :class:`~simspec.costs.parallel.
Parallelism`); the drafter is split like the dense weights. Weights that engines replicate
(MLA's latent down-projections, :func:`~simspec.physics.models.replicated_attention_params`,
and each MoE layer's router) sit whole on every GPU of the group. ``num_gpus = 8,
tensor_parallel = 1`` therefore puts the whole model on one GPU, however much memory the other
seven have.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from simspec.costs.parallel import Parallelism
from simspec.errors import ScenarioError
from simspec.physics.models import ModelSpec, kv_bytes_for_context
from simspec.physics.mtp import drafter_weight_bytes
from simspec.physics.precision import with_precision

if TYPE_CHECKING:
    from simspec.config.scenario import Scenario


def _split(s: Scenario) -> Parallelism:
    h = s.hardware
    return Parallelism.of(h.num_gpus, h.tensor_parallel, h.expert_parallel)


def weight_bytes_per_gpu(s: Scenario, target: ModelSpec | None = None) -> float:
    """Weights on the busiest GPU of the serving group (module docstring); with experts
    offloaded, the one GPU's resident weights and expert cache."""
    if s.offload.enabled and target is None:
        return offload_weight_bytes(s)
    shape = (target or s.target).shape
    split = _split(s)
    routed = shape.num_moe_layers * shape.num_experts * shape.expert_bytes
    drafter = drafter_weight_bytes(target or s.target, s.drafter, s.draft_model)
    rest = shape.total_weight_bytes - routed + drafter
    t = split.tensor
    replicated = _replicated_bytes(target or s.target)
    return rest / t + replicated * (t - 1) / t + routed / (split.expert * split.expert_shards)


def _replicated_bytes(target: ModelSpec) -> float:
    """Weights every rank of a tensor-parallel group holds whole: MLA's latent
    down-projections and each MoE layer's router (module docstring)."""
    shape = target.shape
    replicated = sum(g.count * g.replicated_attention_bytes for g in shape.groups)
    return replicated + shape.num_moe_layers * shape.router_bytes


def kv_capacity_bytes(s: Scenario) -> float:
    """GPU memory left for the KV cache: the GPUs' usable memory less the weights they hold,
    the replicated ones once per tensor-parallel rank (a t-way group holds t copies of them,
    not one); with experts offloaded, less the resident weights and the expert cache."""
    if s.offload.enabled:
        return s.usable_memory_bytes - s.weight_bytes
    extra = _replicated_bytes(s.target) * (_split(s).tensor - 1)
    return s.usable_memory_bytes - s.weight_bytes - extra


def _splits_heads(s: Scenario, t: int) -> bool:
    """True when tensor parallelism ``t`` splits the target's heads as engines can (the rule
    :func:`simspec.config.load._check_parallel` enforces)."""
    a = s.target.attention
    kv_ok = a.kind == "mla" or not (a.num_kv_heads % t and t % a.num_kv_heads)
    return a.num_heads % t == 0 and kv_ok


def _gpus_for(s: Scenario, pooled: float, per_gpu_usable: float) -> int:
    """The fewest GPUs whose usable memory holds ``pooled`` bytes of weights and whose count
    splits the target's heads (tensor_parallel = 0 puts every GPU in the split)."""
    need = max(int(-(-pooled // per_gpu_usable)), 1)
    return next((n for n in range(need, 1025) if _splits_heads(s, n)), need)


def _fp8_hint(s: Scenario, per_gpu_usable: float, usable: float) -> str:
    """What FP8 weights would change (empty when the target already is FP8 or would not shrink):
    fit as the scenario is split, or the GPUs they would need."""
    fp8 = with_precision(s.target, "fp8")
    now, then = s.target.shape.total_weight_bytes, fp8.shape.total_weight_bytes
    if s.model.precision == "fp8" or not then < now:
        return ""
    pooled = s.weight_bytes - now + then
    if weight_bytes_per_gpu(s, fp8) < per_gpu_usable and pooled < usable:
        return 'They would fit in FP8: set [model] precision = "fp8".'
    return (
        f'In FP8 ([model] precision = "fp8") they take {pooled / 1e9:.1f} GB: at least '
        f"{_gpus_for(s, pooled, per_gpu_usable)} GPUs with tensor_parallel = 0 hold them."
    )


def check_weights_fit(s: Scenario, source: str) -> None:
    """A ScenarioError when the weights exceed the GPUs' memory, with what would fit.

    With a tensor-parallel degree below ``num_gpus`` the share on one GPU is what fails (more
    GPUs of that split would not help), so that share is reported first."""
    per_gpu_usable = s.gpu.memory_bytes * s.hardware.memory_utilization
    pooled, usable = s.weight_bytes, s.usable_memory_bytes
    on_one = weight_bytes_per_gpu(s)
    split = _split(s)
    share_fails = on_one >= per_gpu_usable
    if pooled >= usable and not (share_fails and split.tensor < s.hardware.num_gpus):
        need = int(-(-pooled // per_gpu_usable))
        if not s.hardware.tensor_parallel:  # the count must also split the heads
            need = _gpus_for(s, pooled, per_gpu_usable)
        raise ScenarioError(
            source,
            "hardware.num_gpus",
            f"enough GPUs to hold {pooled / 1e9:.1f} GB of weights (at least {need})",
            f"{s.hardware.num_gpus} x {s.gpu.memory_bytes / 1e9:.0f} GB x "
            f"{s.hardware.memory_utilization} usable",
            _fp8_hint(s, per_gpu_usable, usable),
        )
    if share_fails:
        raise ScenarioError(
            source,
            "hardware.tensor_parallel",
            f"a split whose share of the weights fits one GPU ({per_gpu_usable / 1e9:.1f} GB "
            "usable): a larger tensor_parallel (0 = all num_gpus) or expert_parallel",
            f"tensor_parallel = {split.tensor}, expert_parallel = {split.expert}: "
            f"{on_one / 1e9:.1f} GB on each GPU",
            _fp8_hint(s, per_gpu_usable, usable),
        )


# -- experts offloaded to host memory ([offload]) ----------------------------------------------
#: Experts of one layer a staging buffer holds besides the cache, in units of top-k_e: the
#: layer being computed and the next one's copies (a double buffer, as Mixtral-offloading).
STAGING_LAYERS = 2


def host_moe_layers(s: Scenario) -> int:
    """MoE layers whose routed experts live in host memory: ``offload.host_moe_layers``, or
    (-1) every MoE layer of the target."""
    layers = s.target.shape.num_moe_layers
    chosen = s.offload.host_moe_layers
    return layers if chosen < 0 else min(chosen, layers)


def routed_bytes(s: Scenario) -> float:
    """The routed experts offloading moves to the host, bytes: every expert of the
    :func:`host_moe_layers` (the other layers' stay on the GPU)."""
    shape = s.target.shape
    return host_moe_layers(s) * shape.num_experts * shape.expert_bytes


def staging_bytes(s: Scenario) -> float:
    """The buffer offloaded experts are copied into besides the cache (:data:`STAGING_LAYERS`);
    none when misses run on the CPU (nothing is copied)."""
    if s.offload.miss == "cpu":
        return 0.0
    shape = s.target.shape
    return STAGING_LAYERS * shape.experts_per_token * shape.expert_bytes


def resident_bytes(s: Scenario) -> float:
    """Weights on the GPU besides the expert cache when experts are offloaded: the target's
    other weights, the drafter's and the staging buffer."""
    drafter = drafter_weight_bytes(s.target, s.drafter, s.draft_model)
    return s.target.shape.total_weight_bytes - routed_bytes(s) + drafter + staging_bytes(s)


def workload_kv_bytes(s: Scenario) -> float:
    """KV cache of the most requests the workload runs at once, each at its longest."""
    w = s.workload
    batch = min(w.concurrency, w.max_batch_size) if w.loop == "closed" else w.max_batch_size
    longest = (
        (w.prompt_tokens + w.output_tokens) * (1 + w.length_jitter) + s.drafter.max_draft_tokens + 2
    )
    return batch * kv_bytes_for_context(s.target.shape, longest, _split(s).tensor)


def cache_experts_per_layer(s: Scenario) -> float:
    """Expert-cache slots per MoE layer: ``cache_experts_per_layer``, ``cache_gb`` spread over
    the layers, or (neither) what the usable memory leaves after :func:`resident_bytes` and
    :func:`workload_kv_bytes`; whole experts in all (a mean per layer, which need not be whole:
    some layers hold one more, :func:`simspec.sim.expert_cache.layer_slots`), at most every
    expert of a layer."""
    o, shape = s.offload, s.target.shape
    if o.cache_policy == "none":
        return 0.0
    if o.cache_experts_per_layer >= 0:
        return float(o.cache_experts_per_layer)
    layers = host_moe_layers(s)
    per_expert = layers * shape.expert_bytes
    if not per_expert:
        return 0.0
    if o.cache_gb >= 0:
        room = o.cache_gb * 1e9
    else:
        room = s.usable_memory_bytes - resident_bytes(s) - workload_kv_bytes(s)
    whole = max(math.floor(room / shape.expert_bytes * (1 + 1e-12)), 0)  # GB rounding
    return float(min(whole / layers, shape.num_experts))


def offload_weight_bytes(s: Scenario) -> float:
    """Weights on the GPU when experts are offloaded: :func:`resident_bytes` + the cache."""
    shape = s.target.shape
    cache = cache_experts_per_layer(s) * host_moe_layers(s) * shape.expert_bytes
    return resident_bytes(s) + cache


def check_offload(s: Scenario, source: str) -> None:
    """A ScenarioError when offloading cannot run as configured: on more than one GPU, on a
    dense target, without a host link, with a cache larger than the experts, or with no GPU
    memory left for the cache."""
    o, shape = s.offload, s.target.shape
    if not o.enabled:
        return
    if s.hardware.num_gpus != 1:
        raise ScenarioError(
            source,
            "hardware.num_gpus",
            "1 with [offload] experts in host memory (single-GPU offloading)",
            str(s.hardware.num_gpus),
        )
    if not shape.num_moe_layers or not shape.num_experts:
        raise ScenarioError(
            source, "offload.experts", f'"gpu" ({s.target.name} has no routed experts)', o.experts
        )
    if o.link_gb_per_s is None and s.gpu.host_link_bytes_per_s(o.pinned) <= 0:
        raise ScenarioError(
            source,
            "offload.link_gb_per_s",
            f"a host link above 0 GB/s ({s.gpu.name} states none: set offload.link_gb_per_s "
            "or the GPU's pcie_generation and pcie_lanes)",
            "0 GB/s",
        )
    if o.host_moe_layers > shape.num_moe_layers:
        raise ScenarioError(
            source,
            "offload.host_moe_layers",
            f"at most {s.target.name}'s {shape.num_moe_layers} MoE layers (-1 = all)",
            str(o.host_moe_layers),
        )
    per_layer = host_moe_layers(s) * shape.expert_bytes
    if o.cache_experts_per_layer > shape.num_experts:
        raise ScenarioError(
            source,
            "offload.cache_experts_per_layer",
            f"at most {s.target.name}'s {shape.num_experts} experts per layer",
            str(o.cache_experts_per_layer),
        )
    if o.cache_gb * 1e9 > shape.num_experts * per_layer * (1 + 1e-9):
        raise ScenarioError(
            source,
            "offload.cache_gb",
            f"at most the {shape.num_experts * per_layer / 1e9:.2f} GB of {s.target.name}'s "
            "routed experts",
            f"{o.cache_gb:g}",
        )
    room = s.usable_memory_bytes - resident_bytes(s) - workload_kv_bytes(s)
    cache = cache_experts_per_layer(s) * per_layer
    auto = o.cache_experts_per_layer < 0 and o.cache_gb < 0 and o.cache_policy != "none"
    if (auto and cache < shape.expert_bytes) or (not auto and room < cache):
        key = (
            "offload.cache_experts_per_layer"
            if o.cache_experts_per_layer >= 0
            else "offload.cache_gb"
        )
        raise ScenarioError(
            source,
            key,
            f"a cache that fits the {max(room, 0) / 1e9:.2f} GB of GPU memory left after "
            f"{resident_bytes(s) / 1e9:.2f} GB of other weights and staging and "
            f"{workload_kv_bytes(s) / 1e9:.2f} GB of KV cache (at least one expert, "
            f"{shape.expert_bytes / 1e9:.3f} GB)",
            "nothing left for it" if auto else f"{cache / 1e9:.2f} GB",
        )
