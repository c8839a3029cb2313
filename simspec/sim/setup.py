"""From a resolved scenario to what the engine needs: reference sequences, cost model, limits.

:func:`build_setup` is pure apart from building the reference sequences' random streams from the
scenario seed: the same scenario gives the same :class:`EngineSetup`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec import rng
from simspec.config._memory import cache_experts_per_layer, host_moe_layers, kv_capacity_bytes
from simspec.config.scenario import Scenario
from simspec.config.speculation import DEFAULT_RANK_DECAY
from simspec.costs.base import COST_MODELS, CostModel
from simspec.costs.cache_hits import pair_reuse
from simspec.costs.offload import OffloadCostModel, OffloadModel
from simspec.physics.experts import chance_overlap
from simspec.routing.config import RoutingConfig
from simspec.sim.tree import TreeSpeculation
from simspec.text.reference import ReferenceSet
from simspec.text.workload import WorkloadConfig, arrival_times


@dataclass(frozen=True)
class EngineSetup:
    """What a run needs besides the policy: the text, the costs and the batching limits."""

    references: ReferenceSet
    cost_model: CostModel
    workload: WorkloadConfig
    arrival_s: np.ndarray  # arrival time of each request (open loop)
    kv_capacity_bytes: float
    max_draft_tokens: int
    mean_draft_overlap: float  # mean lag-1 overlap of a draft with its predecessor (estimates)
    tree: TreeSpeculation | None = None  # draft trees ([speculation]); None: chains
    #: ``[speculation] rank_decay``: the trees of a tree-aware policy's shapes read it too.
    rank_decay: float = DEFAULT_RANK_DECAY
    #: Experts in host memory ([offload]): ``cost_model`` is this wrapper, which also holds
    #: the base model; None when every expert is resident.
    offload: OffloadCostModel | None = None
    #: Tensor-parallel ranks: a request's KV cache is reserved as many times as they hold it
    #: (:meth:`~simspec.physics.models.LayerGroup.kv_copies`).
    tensor_parallel: int = 1
    #: ``[engine] scheduler_recv_interval``: decode iterations between the scheduler's polls
    #: for newly arrived requests (:func:`simspec.sim.schedule.schedule`).
    recv_interval: int = 1


def mean_draft_overlap(routing: RoutingConfig, references: ReferenceSet) -> float:
    """Mean lag-1 overlap of a draft with its predecessor, for the policies' cost estimates.

    With independent routing this is the chance level Σ_e p_e² / k_e (k_e/N when popularity is
    uniform), p_e being each expert's usage.
    """
    if not references.num_experts:
        return 0.0
    true, draft = routing.layer_profiles(references.num_layers)
    profile = draft if draft is not None else true
    if profile.shape[1] == 0:
        p, k = references.inclusion_probabilities, references.shape.experts_per_token
        return chance_overlap(p, k, layer_mean=True)
    return float(profile[:, 0].mean())


def draft_bound(scenario: Scenario, *, oracle: bool = False) -> int | None:
    """The most drafts any run of ``scenario`` feeds at one state as a chain: the largest of
    its policies' budget caps (within the drafter's K_max); None (any, up to K_max) with the
    oracle, which weighs every k, or with draft trees, whose rejected nodes follow no chain."""
    cap = scenario.drafter.max_draft_tokens
    if oracle or scenario.speculation.is_tree:
        return None
    return max((min(p.policy.budget_cap(cap), cap) for p in scenario.policies), default=0)


def reference_set(
    scenario: Scenario, *, every_k: bool = False, trees: bool | None = None
) -> ReferenceSet:
    """The reference sequences of ``scenario``, drawn lazily: what its runs share (the text and
    its routing, from the seed), independent of costs, policies and draft shapes. ``every_k``:
    a reader may feed any k up to K_max (the oracle, or runs of other policies sharing the
    set), not only ``scenario``'s policies' budget caps (:func:`draft_bound`); ``trees``:
    whether draft trees will read them (default: ``scenario``'s own speculation)."""
    s = scenario
    replayed = s.replay_traces()  # recorded traces (routing.mode / acceptance.process "trace")
    tree_reads = s.speculation.is_tree if trees is None else trees
    return ReferenceSet(
        seed=s.seed,
        workload=s.workload,
        acceptance=s.acceptance,
        routing=s.routing,
        shape=s.target.shape,
        max_draft_tokens=s.drafter.max_draft_tokens,
        routing_trace=replayed[0],
        acceptance_trace=replayed[1],
        draft_bound=None if tree_reads else draft_bound(s, oracle=every_k),
        trees=tree_reads,
    )


def shares_text(references: ReferenceSet, scenario: Scenario) -> bool:
    """Whether ``references`` are the reference sequences :func:`reference_set` draws for
    ``scenario`` (same seed, workload, acceptance, routing, target and K_max), so a run of
    ``scenario`` may read them: scenarios that differ in costs, policies or draft shapes alone
    share them, and a run reads the same ids from a shared set as from its own."""
    s = scenario
    return (
        references.seed == s.seed
        and references.workload == s.workload
        and references.acceptance == s.acceptance
        and references.routing == s.routing
        and references.shape == s.target.shape
        and references.max_draft_tokens == s.drafter.max_draft_tokens
        and not (s.speculation.is_tree and not references.trees)
    )


def build_setup(
    scenario: Scenario, *, oracle: bool = False, references: ReferenceSet | None = None
) -> EngineSetup:
    """Reference sequences, cost model and limits of ``scenario``; ``oracle``: the oracle will
    read them too (every k up to K_max, :func:`draft_bound`). A run of a policy that drafts
    deeper than the bound still gets the right ids (the reference set draws what was left out
    again), only slower. ``references``: a reference set of an earlier setup whose scenario
    shares this one's text (:func:`shares_text`), reused with what it has drawn so far."""
    s = scenario
    target, drafter = s.target, s.drafter
    common: dict[str, Any] = {
        "target": target,
        "drafter": drafter,
        "gpu": s.gpu,
        "params": s.roofline,
        "num_gpus": s.hardware.num_gpus,
        "tensor_parallel": s.hardware.tensor_parallel,
        "expert_parallel": s.hardware.expert_parallel,
        "draft_model": s.draft_model,
    }
    profile = s.profile
    if profile is not None:  # efficiencies are fractions of the peaks the profile was fitted to
        common["gpu"] = profile.peak_gpu(s.gpu)
        if "profile" in COST_MODELS.parameters(s.costs.model):
            common["profile"] = profile  # a model that reads the measured tables
    cost_model: CostModel = COST_MODELS.create(s.costs.model, **common)
    if references is None:
        references = reference_set(s, every_k=oracle)
    elif not shares_text(references, s):
        raise ValueError(
            f"the reference set given was drawn for another text than scenario {s.name!r}'s "
            "(seed, workload, acceptance, routing, target or K_max differ)"
        )
    offload = offload_costs(s, cost_model, references) if s.offload.enabled else None
    return EngineSetup(
        references=references,
        cost_model=offload or cost_model,
        workload=s.workload,
        arrival_s=arrival_times(s.workload, rng.stream(s.seed, "arrivals")),
        kv_capacity_bytes=kv_capacity_bytes(s),
        tensor_parallel=s.hardware.tensor_parallel or s.hardware.num_gpus,
        max_draft_tokens=drafter.max_draft_tokens,
        mean_draft_overlap=mean_draft_overlap(s.routing, references),
        tree=(
            TreeSpeculation.from_config(
                s.speculation, s.acceptance, drafter.max_draft_tokens, s.seed
            )
            if s.speculation.is_tree
            else None
        ),
        rank_decay=s.speculation.rank_decay,
        offload=offload,
        recv_interval=s.engine.scheduler_recv_interval,
    )


def offload_costs(s: Scenario, base: CostModel, references: ReferenceSet) -> OffloadCostModel:
    """``base`` wrapped with the loads of ``s``'s offloaded experts
    (:class:`~simspec.costs.offload.OffloadCostModel`): the link, host, cache and runtime
    (offload framework) of ``[offload]``, the routing's popularity, and the lag-1 reuse of
    consecutive passes from the routing's expected unions
    (:func:`~simspec.costs.cache_hits.pair_reuse`, memoised per batch composition)."""
    o, shape, host = s.offload, s.target.shape, s.host
    link = (
        o.link_gb_per_s * 1e9
        if o.link_gb_per_s is not None
        else s.gpu.host_link_bytes_per_s(o.pinned)
    )
    layer_host_s, expert_host_s, copies_per_expert = o.host_times
    model = OffloadModel(
        num_moe_layers=shape.num_moe_layers,
        num_experts=shape.num_experts,
        experts_per_token=shape.experts_per_token,
        expert_bytes=shape.expert_bytes,
        expert_flops_per_token=2.0 * shape.expert_params,
        link_bytes_per_s=link,
        copy_latency_s=s.gpu.host_copy_latency_s,
        capacity=cache_experts_per_layer(s),
        policy=o.cache_policy,
        prefetch=o.prefetch,
        prefetch_accuracy=o.prefetch_accuracy,
        miss=o.miss,
        host_bytes_per_s=host.expert_bytes_per_s,
        cpu_flops_per_s=host.cpu_flops_per_s,
        inclusion=references.inclusion_probabilities,
        layer_host_s=layer_host_s,
        expert_host_s=expert_host_s,
        copies_per_expert=copies_per_expert,
        cancel_wrong_prefetch=o.cancel_wrong_prefetch,
        host_layers=host_moe_layers(s),
        transfers_per_miss=2 if swapping(s) else 1,
        working_set=s.routing.working_set or 0.0,
    )
    memo: dict[bytes, np.ndarray] = {}

    def reuse(tokens: np.ndarray) -> np.ndarray:
        fed = np.asarray(tokens, dtype=np.int64)
        key = fed.tobytes()
        found = memo.get(key)
        if found is None:
            single = references.expected_unique(fed, fed)
            double = references.expected_unique(2 * fed, 2 * fed)
            found = memo[key] = pair_reuse(single, double)
        return found

    draft_host_s = o.drafter_layer_host_s * drafter_layers(s)
    return OffloadCostModel(base, model, reuse, draft_host_s=draft_host_s)


def swapping(s: Scenario) -> bool:
    """A miss swaps (two transfers): the runtime copies evicted experts back to host memory and
    the misses are copied into an LRU/LFU cache that is full (every miss evicts one)."""
    o = s.offload
    cache = o.cache_policy in ("lru", "lfu") and cache_experts_per_layer(s) > 0
    return o.swaps_evicted and o.miss == "copy" and cache


def drafter_layers(s: Scenario) -> int:
    """Decoder layers of one drafter pass: the dense draft model's, or the head's (EAGLE-3,
    MTP); 0 without a drafter."""
    if s.draft_model is not None:
        return s.draft_model.num_layers
    return s.drafter.num_layers if s.drafter.max_draft_tokens else 0
