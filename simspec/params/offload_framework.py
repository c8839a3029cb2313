"""Offload frameworks: the host time an offloading runtime adds to each MoE layer of a pass.

The physics of an offloaded pass (:mod:`simspec.costs.offload`) is the GPU's kernels, the copies
over the host link and the CPU's experts. A runtime written in eager PyTorch (Hugging Face
transformers with a Python expert cache: Mixtral-offloading, the systems built on it) adds host
time the GPU waits for: per decoder layer it runs the attention's and the router's operators one
Python call at a time, reads the router's choice back to the host (a synchronisation), and loops
over the experts the layer runs, each with its own launches and a read-back of its tokens. That
time is a property of the runtime and the host's CPU, not of the GPU or the link, so it lives in
a preset (one TOML file under ``simspec/catalog/offload_frameworks``, scenario key
``[offload] framework``), at most three terms of which are fitted:

- ``layer_host_s``: host time per decoder layer of a pass (fitted where the preset says so);
- ``expert_host_s``: host time per expert a layer runs (the loop body), on top of the layer's;
- ``draft_layer_host_s``: host time per decoder layer of a drafter pass (a drafter run eagerly:
  its layers have no expert loop and no read-back, so this is not ``layer_host_s``);
- ``copies_per_expert``: host-to-device copies one expert's load issues (a design fact: 1 when
  the runtime keeps each expert in one contiguous buffer, the number of its tensors otherwise),
  each paying the GPU's ``host_copy_latency_s``;
- ``swaps_evicted``: a miss into a full LRU/LFU cache swaps (a design fact): the runtime copies
  the loaded expert in and the evicted one back out to pinned host memory, both on one stream,
  so every miss (prefetched or on demand) takes two transfers of the link.

The host time adds to each layer's own time, so copies of the next layer overlap it
(:func:`simspec.costs.offload.pipeline`): a prefetcher hides copies behind host time too. The
``none`` preset (the default) adds nothing: the physics alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadFramework:
    """An offloading runtime's host time per layer and per expert (one catalog file)."""

    name: str = param(help="catalog key (the [offload] framework value)")
    display_name: str = param("", "human-readable name")
    source: str = param("", "what the values were fitted on or taken from")
    notes: str = param("", "assumptions")
    layer_host_s: float = param(
        0.0,
        "host time of one decoder layer's eager forward the GPU waits for (operators launched "
        "one Python call at a time, the router's read-back), s",
        ge=0,
        lt=0.1,
    )
    expert_host_s: float = param(
        0.0,
        "host time per expert a layer runs (its launches and the read-back of its tokens), s",
        ge=0,
        lt=0.1,
    )
    draft_layer_host_s: float = param(
        0.0,
        "host time per decoder layer of a drafter pass (the runtime runs the drafter eagerly "
        "too), s",
        ge=0,
        lt=0.1,
    )
    swaps_evicted: bool = param(
        False,
        "a miss into a full cache copies the evicted expert back to host memory on the same "
        "stream as the loaded one's copy (two transfers per miss; Mixtral-offloading's "
        "ExpertCache swaps); false: the evicted expert is dropped",
    )
    copies_per_expert: int = param(
        1,
        "host-to-device copies one expert's load issues (1: one contiguous buffer per expert), "
        "each paying the GPU's host_copy_latency_s",
        ge=1,
        le=1000,
    )
