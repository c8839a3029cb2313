"""Routed experts in host memory behind a GPU expert cache (scenario table ``[offload]``).

A single GPU that cannot hold every expert keeps them in host memory and copies what a pass
misses over the host link (PCIe; the GPU catalog's ``host_link_*`` keys), with a per-layer
expert cache, a prefetcher and, optionally, the misses computed on the CPU instead
(:mod:`simspec.costs.offload` holds the physics). Without the table every expert is resident
and results are unchanged.

```toml
[offload]
experts = "host_pinned"        # gpu (default: nothing offloaded) | host_pinned | host_pageable
cache_experts_per_layer = 4    # or cache_gb = 6.0 (all layers); neither: what memory is left
cache_policy = "lru"           # lru | lfu | static (most popular) | none
prefetch = "next_layer"        # none | next_layer | draft_guided
prefetch_accuracy = 0.9        # fraction of a layer's missing experts the prefetcher predicts
cancel_wrong_prefetch = false  # drop wrong guesses still queued when the router has run
miss = "copy"                  # copy (wait for it) | cpu (compute it on the host)
host_moe_layers = -1           # MoE layers whose experts live on the host (-1 = all)
framework = "none"             # the runtime's host time: a preset (none, hf-eager, ...)
```
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec import catalog
from simspec.errors import FieldError
from simspec.schema import param

#: Where experts can live.
PLACEMENTS = ("gpu", "host_pinned", "host_pageable")
CACHE_POLICIES = ("lru", "lfu", "static", "none")
PREFETCHERS = ("none", "next_layer", "draft_guided")
MISS_MODES = ("copy", "cpu")


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadConfig:
    """Where routed experts live and how the GPU caches them (scenario table ``[offload]``)."""

    experts: str = param(
        "gpu",
        "where routed experts live: gpu (all resident, no offloading), host_pinned or "
        "host_pageable (host memory, copied over the host link at its pinned / pageable "
        "bandwidth)",
        choices=PLACEMENTS,
    )
    cache_experts_per_layer: int = param(
        -1,
        "GPU expert-cache slots per MoE layer (-1 = set by cache_gb, else what GPU memory is "
        "left after the other weights and the workload's KV cache)",
        ge=-1,
        le=4096,
    )
    cache_gb: float = param(
        -1.0,
        "GPU expert cache over all MoE layers, GB (-1 = unset); at most one of this and "
        "cache_experts_per_layer",
        ge=-1,
        le=1e5,
    )
    cache_policy: str = param(
        "lru",
        "what the cache keeps: lru (least recently used out), lfu (least frequently used out), "
        "static (the most popular experts, fixed) or none (no cache: every pass copies its "
        "experts)",
        choices=CACHE_POLICIES,
    )
    prefetch: str = param(
        "none",
        "copies started before a layer needs them: none, next_layer (the next layer's gate "
        "applied early, copies overlap this layer's compute) or draft_guided (the drafts "
        "predict the verify pass's experts, copies overlap the draft phase)",
        choices=PREFETCHERS,
    )
    prefetch_accuracy: float = param(
        0.9,
        "fraction of a layer's missing experts the prefetcher predicts (the rest are wrong "
        "guesses, copied for nothing, and the missing ones are copied on demand); ~0.9 "
        "published for next-layer gates and draft-guided prediction",
        ge=0,
        le=1,
    )
    miss: str = param(
        "copy",
        "what a missing expert costs: copy (the layer waits for its copy) or cpu (the host "
        "computes it at its memory bandwidth while the GPU computes the resident ones)",
        choices=MISS_MODES,
    )
    host_moe_layers: int = param(
        -1,
        "MoE layers whose routed experts live in host memory, the others' stay resident on the "
        "GPU (llama.cpp --n-cpu-moe N; -1 = every MoE layer)",
        ge=-1,
        le=4096,
    )
    cancel_wrong_prefetch: bool = param(
        False,
        "the runtime drops wrongly guessed prefetches still queued once a layer's router has "
        "run (false: every guess is copied in full, as Mixtral-offloading does)",
    )
    link_gb_per_s: float | None = param(
        None,
        "host-to-device bandwidth of the copies, GB/s (unset: the GPU's pinned or pageable "
        "host link)",
        ge=1e-3,
        le=1e4,
    )

    framework: str = param(
        "none",
        "the offloading runtime's host time per layer and per expert: an offload framework "
        "preset (simspec/catalog/offload_frameworks: none = physics only, hf-eager = Hugging "
        "Face transformers in eager PyTorch with a Python expert cache, as Mixtral-offloading; "
        "mixtral-offloading-release = the same with the released repository's swapping cache)",
    )
    layer_host_s: float | None = param(
        None,
        "host time per decoder layer of a pass, s (unset: the framework preset's)",
        ge=0,
        lt=0.1,
    )
    expert_host_s: float | None = param(
        None,
        "host time per expert a layer runs, s (unset: the framework preset's)",
        ge=0,
        lt=0.1,
    )

    draft_layer_host_s: float | None = param(
        None,
        "host time per decoder layer of a drafter pass, s (unset: the framework preset's)",
        ge=0,
        lt=0.1,
    )

    def __post_init__(self) -> None:
        names = catalog.offload_framework_names()
        if self.framework not in names:
            raise FieldError("framework", "one of " + ", ".join(map(repr, names)), self.framework)
        if self.cache_experts_per_layer >= 0 and self.cache_gb >= 0:
            raise FieldError(
                "cache_gb",
                "unset (-1) when cache_experts_per_layer is set (one capacity)",
                self.cache_gb,
            )

    @property
    def enabled(self) -> bool:
        """True when experts live in host memory."""
        return self.experts != "gpu"

    @property
    def host_times(self) -> tuple[float, float, int]:
        """The runtime's host time per layer and per expert, s, and the copies per expert's
        load: the framework preset's, each overridden where the table sets it."""
        preset = catalog.get_offload_framework(self.framework)
        layer = preset.layer_host_s if self.layer_host_s is None else self.layer_host_s
        expert = preset.expert_host_s if self.expert_host_s is None else self.expert_host_s
        return layer, expert, preset.copies_per_expert

    @property
    def swaps_evicted(self) -> bool:
        """The runtime copies an evicted expert back to host memory (two transfers per miss
        into a full cache): the framework preset's."""
        return catalog.get_offload_framework(self.framework).swaps_evicted

    @property
    def drafter_layer_host_s(self) -> float:
        """The runtime's host time per drafter decoder layer, s (the preset's unless set)."""
        if self.draft_layer_host_s is not None:
            return self.draft_layer_host_s
        return catalog.get_offload_framework(self.framework).draft_layer_host_s

    @property
    def pinned(self) -> bool:
        """True when copies come from pinned host memory."""
        return self.experts == "host_pinned"
