"""Experts offloaded to host memory: what a pass finds in the GPU's expert cache, what it copies
over the host link, and how long the pass then takes.

When a GPU cannot hold every routed expert, they live in host memory and a per-layer expert
cache on the GPU keeps C of each MoE layer's N experts (Mixtral-offloading, MoE-Infinity,
HOBBIT, llama.cpp ``--n-cpu-moe``). A pass that needs the union U_l of its tokens' experts in
layer l finds h_l of them resident and copies the other m_l = u_l − h_l over the link (or, with
``miss = "cpu"``, computes them on the CPU at the host's memory bandwidth, as Fiddler and
llama.cpp do: after the layer's attention, beside the GPU's resident experts,
:meth:`OffloadModel.cpu_layer_s`). Only the first ``host_layers`` MoE layers need keep their
experts on the host (llama.cpp ``--n-cpu-moe N``); the others' never miss. Everything here is a
pure function of the pass's union sizes and misses:

* :func:`~simspec.costs.cache_hits.hit_fractions` — the analytic expectation of the fraction
  of a pass's union that is resident, per layer, for a cache policy;
* :func:`pipeline` — a copy stream and a compute stream per layer: layer l starts when its
  experts are resident; a prefetched copy for layer l is issued ahead (at layer l − 1's start
  for the next layer's gate applied early, during the draft phase for draft-guided prefetch) and
  a demand copy when layer l's router has run (the previous layer's end); one link, copies in
  issue order. Hence max(copies, compute) ≤ pass ≤ copies + compute;
* :class:`OffloadModel` — the scenario's constants and :meth:`OffloadModel.price`, a pass's
  exposed load time and link traffic from its misses.

The expected hit rates (analytic routing, and every policy's cost estimate) are
:mod:`simspec.costs.cache_hits`'s.

A wrongly predicted prefetch costs a copy too: prefetch with accuracy a copies m_l predicted
experts ahead, a·m_l of which are the ones missing, and the other (1 − a)·m_l are copied on
demand. A runtime that cancels stale prefetches (``cancel_wrong_prefetch``) drops the wrong
guesses still queued once the layer's router has run (:func:`pipeline`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from simspec.costs.base import CostModel
from simspec.costs.cache_hits import hit_fractions
from simspec.params import PassCost
from simspec.physics.experts import independent_union

_add = np.add.reduce  # what ndarray.sum calls, without its Python wrapper


class Pipeline(NamedTuple):
    """One pass under offloading (:func:`pipeline`), times from the verify pass's start."""

    total_s: float  # the pass, its layers waiting for their experts
    compute_s: float  # the layers' own time (the GPU's kernels and the runtime's host time)
    copy_s: float  # time the link spent copying for this pass
    link_start_s: float  # when the first copy started (< 0: during the draft phase)
    host_s: float = 0.0  # the runtime's host time inside compute_s (an offload framework's)

    @property
    def exposed_s(self) -> float:
        """Time the pass waited on copies (or on the CPU) beyond its compute."""
        return self.total_s - self.compute_s

    @property
    def added_s(self) -> float:
        """What offloading adds to the pass's kernels: the wait on copies and the runtime's
        host time."""
        return self.exposed_s + self.host_s


def pipeline(
    layer_s: float | np.ndarray | list[float],
    demand_s: np.ndarray | list[float],
    ahead_s: np.ndarray | list[float],
    *,
    lead_s: float = 0.0,
    draft_guided: bool = False,
    cpu_s: np.ndarray | list[float] | None = None,
    wrong_s: np.ndarray | list[float] | None = None,
) -> Pipeline:
    """A pass of L MoE layers through a copy stream and a compute stream (module docstring).

    ``layer_s`` the GPU time of each layer (a float: every layer); ``demand_s[l]`` the copies
    layer l issues when its router has run; ``ahead_s[l]`` its prefetched copies, issued at the
    previous layer's start (``draft_guided``: from −``lead_s``, the draft phase's start, in
    layer order, so the first layers' copies end inside the draft phase); ``cpu_s[l]`` its
    missing experts computed on the CPU beside the GPU's (the layer takes the longer of the
    two). One link serves the copies in issue order.

    Layer l starts at S_l when its copies are in: its prefetches are issued at S_{l−1} and queue
    behind nothing (the link finished layer l − 1's copies before S_{l−1}), its demand copies
    follow at the end of layer l − 1 or of the prefetches, whichever is later. So
    S_0 = a_0 + d_0, S_l = S_{l−1} + max(a_l, c_{l−1}) + d_l and the pass ends at
    S_{L−1} + c_{L−1}: each layer's prefetch hides behind the previous layer's compute.

    ``wrong_s[l]`` (the part of ``ahead_s[l]`` that guessed wrong) is cancelled once layer l's
    router has run (at c_{l−1} after S_{l−1}; layer 0's at once), as a runtime that drops
    stale prefetches does: the copies are interleaved, so by then a share min(1, c_{l−1} / a_l)
    of every kind is done, the rest of the right ones continues and the wrong ones stop:
    S_l = S_{l−1} + c_{l−1} + r_l (1 − c_{l−1} / a_l) + d_l when a_l > c_{l−1} (r_l = a_l − w_l),
    else as above. Copies done inside the draft phase are never cancelled (no router has run).
    """
    demand = np.asarray(demand_s, dtype=float)
    ahead = np.asarray(ahead_s, dtype=float)
    layers = len(demand)
    compute = np.broadcast_to(np.asarray(layer_s, dtype=float), (layers,))
    work = float(compute.sum())  # the layers' own time: a wait on the CPU is exposed
    if cpu_s is not None:
        compute = np.maximum(compute, np.asarray(cpu_s, dtype=float))
    busy = float(ahead.sum() + demand.sum())
    if not layers:
        return Pipeline(0.0, 0.0, 0.0, 0.0)
    first = 0.0
    issued = ahead
    if draft_guided and lead_s > 0 and busy > 0:
        # The prefetch stream runs from −lead_s: what fits in the draft phase is hidden.
        done = np.minimum(np.cumsum(ahead), lead_s)
        ahead = ahead - np.diff(done, prepend=0.0)
        first = -float(done[-1]) if done[-1] > 0 else 0.0
    if wrong_s is not None:
        # Wrong guesses still queued when the router has run are dropped (docstring).
        left = np.divide(ahead, issued, out=np.zeros_like(ahead), where=issued > 0)
        wrong = np.asarray(wrong_s, dtype=float) * left  # what the draft phase did not copy
        router = np.concatenate([[0.0], compute[:-1]])
        share = np.divide(router, ahead, out=np.ones_like(ahead), where=ahead > router)
        late = (ahead - wrong) * (1 - np.minimum(share, 1.0))
        total = float((np.maximum(router, np.minimum(ahead, router) + late) + demand).sum())
        busy -= float((ahead - np.minimum(ahead, router) - late).sum())
        return Pipeline(total + float(compute[-1]), work, busy, first)
    total = ahead[0] + demand.sum() + np.maximum(ahead[1:], compute[:-1]).sum() + compute[-1]
    return Pipeline(float(total), work, busy, first)


@dataclass(frozen=True)
class OffloadModel:
    """Where the experts live and the link and cache that serve them: everything a pass's load
    time takes besides its misses (built from the scenario by :mod:`simspec.sim.setup`)."""

    num_moe_layers: int
    num_experts: int
    experts_per_token: int
    expert_bytes: float
    expert_flops_per_token: float  # 2 · parameters of one expert
    link_bytes_per_s: float
    copy_latency_s: float
    capacity: float  # experts cached per layer
    policy: str  # lru, lfu, static, none
    prefetch: str  # none, next_layer, draft_guided
    prefetch_accuracy: float
    miss: str  # copy, cpu
    host_bytes_per_s: float
    cpu_flops_per_s: float
    inclusion: np.ndarray = field(repr=False, compare=False)  # (L, N) p_e per token
    _hits: dict = field(default_factory=dict, repr=False, compare=False)
    _per_layer: dict = field(default_factory=dict, repr=False, compare=False)
    _groups: list = field(default_factory=list, repr=False, compare=False)
    # The runtime (an offload framework preset, simspec.params.offload_framework): host time
    # per layer and per expert a layer runs, and the copies one expert's load issues.
    layer_host_s: float = 0.0
    expert_host_s: float = 0.0
    copies_per_expert: int = 1
    #: Wrong prefetch guesses still queued when the layer's router has run are dropped
    #: (:func:`pipeline`'s ``wrong_s``); False: every guess is copied in full.
    cancel_wrong_prefetch: bool = False
    #: MoE layers whose experts live on the host, the first ones (llama.cpp --n-cpu-moe); the
    #: others' experts are resident and never miss. -1: every MoE layer.
    host_layers: int = -1
    #: Per-request working sets' concentration (``[routing] working_set``; 0: none).
    working_set: float = 0.0

    def on_host(self, per_layer: np.ndarray) -> np.ndarray:
        """``per_layer`` with the layers whose experts stay on the GPU zeroed (none missing)."""
        h, values = self.host_layers, np.asarray(per_layer, dtype=float)
        return values if not 0 <= h < len(values) else np.concatenate([values[:h], 0 * values[h:]])

    #: Link transfers per missed expert: 2 when the runtime swaps the evicted expert back out
    #: on the same stream (an offload framework's ``swaps_evicted``, a full cache), else 1.
    transfers_per_miss: int = 1

    @property
    def copy_s(self) -> float:
        """One missed expert over the link: its bytes at the link's bandwidth plus the latency
        of each copy its load issues, per transfer (:attr:`transfers_per_miss`)."""
        one = self.expert_bytes / self.link_bytes_per_s
        return self.transfers_per_miss * (one + self.copies_per_expert * self.copy_latency_s)

    def host_s(self, union: np.ndarray) -> float | np.ndarray | None:
        """The runtime's host time per layer of a pass whose layers run ``union`` experts:
        ``layer_host_s`` + ``expert_host_s`` x union (one float when it does not depend on the
        union; None when the runtime adds none)."""
        if not self.expert_host_s:
            return self.layer_host_s or None
        return self.layer_host_s + self.expert_host_s * np.asarray(union, dtype=float)

    def expected_misses(
        self, union: np.ndarray, reuse: np.ndarray | float, requests: int = 1
    ) -> np.ndarray:
        """Expected experts of a pass of ``requests`` requests not resident, per layer
        (analytic; memoised on inputs)."""
        u = np.asarray(union, dtype=float)
        r = np.broadcast_to(np.asarray(reuse, dtype=float), u.shape)
        requests = requests if self.working_set > 0 else 1  # only working sets tell them apart
        key = (u.tobytes(), r.tobytes(), requests)
        hit = self._hits.get(key)
        if hit is None:
            if len(self._hits) > 4096:
                self._hits.clear()
            hit = self._layer_hits(u, r, requests)
            self._hits[key] = hit
        return u * (1 - hit)

    def _layer_hits(self, u: np.ndarray, r: np.ndarray, requests: int = 1) -> np.ndarray:
        """:func:`hit_fractions` per layer, each (popularity, union, reuse) solved once: a
        layer's answer depends on those alone, and sampled unions repeat per layer."""
        if not self._groups:
            rows, group = np.unique(self.inclusion, axis=0, return_inverse=True)
            self._groups.extend([rows, group.ravel()])
        rows, group = self._groups
        memo = self._per_layer
        keys = [
            (*key, requests) for key in zip(group.tolist(), u.tolist(), r.tolist(), strict=True)
        ]
        todo = [i for i, k in enumerate(keys) if k not in memo]
        if todo:
            if len(memo) > 65536:
                memo.clear()
            solved = hit_fractions(
                rows[group[todo]],
                u[todo],
                self.capacity,
                self.policy,
                r[todo],
                self.working_set,
                requests,
            )
            for i, h in zip(todo, solved.tolist(), strict=True):
                memo[keys[i]] = h
        return np.array([memo[k] for k in keys])

    def price(
        self,
        layer_s: float,
        union: np.ndarray,
        misses: np.ndarray,
        tokens: int,
        lead_s: float = 0.0,
        predicted: bool = True,
        moe_layer_s: float = 0.0,
    ) -> Pipeline:
        """The pass of ``tokens`` tokens whose layers need ``union`` experts, ``misses`` of them
        absent (layers whose experts stay on the GPU miss none, :meth:`on_host`), each layer
        computing for ``layer_s`` on the GPU plus the runtime's host time (:meth:`host_s`;
        copies overlap both, :func:`pipeline`); ``predicted`` False: no prefetch (nothing
        predicts this pass's experts). ``moe_layer_s``: the part of ``layer_s`` that is the
        GPU's experts (misses computed on the CPU run beside it, :meth:`cpu_layer_s`)."""
        misses = self.on_host(misses)
        host = self.host_s(union)
        if host is not None:
            pipe = self._price(
                layer_s + host, union, misses, tokens, lead_s, predicted, moe_layer_s
            )
            spent = host * len(union) if isinstance(host, float) else float(_add(host))
            return pipe._replace(host_s=spent)
        return self._price(layer_s, union, misses, tokens, lead_s, predicted, moe_layer_s)

    def cpu_layer_s(
        self,
        layer_s: float | np.ndarray,
        moe_layer_s: float,
        union: np.ndarray,
        on_cpu: np.ndarray,
        tokens: int,
    ) -> np.ndarray:
        """Each layer's time when ``on_cpu`` of its ``union`` experts run on the CPU: attention
        and router on the GPU, then the GPU's resident experts (a share (u − c)/u of
        ``moe_layer_s``) beside the host, which gets the hidden states, streams each CPU
        expert's weights from DRAM and sends the output back (a copy each way):
        (layer − moe) + max(moe (u − c)/u, CPU experts + 2 copies). A CPU expert takes
        max(bytes / ``host_bytes_per_s``, its rows' FLOPs / ``cpu_flops_per_s``): a GEMV over
        stored (quantised) weights is bound by the host's memory bandwidth."""
        u = np.asarray(union, dtype=float)
        c = np.asarray(on_cpu, dtype=float)
        rows = np.divide(tokens * self.experts_per_token, u, out=np.zeros_like(u), where=u > 0)
        one = np.maximum(
            self.expert_bytes / self.host_bytes_per_s,
            rows * self.expert_flops_per_token / self.cpu_flops_per_s,
        )
        gpu_share = np.divide(u - c, u, out=np.ones_like(u), where=u > 0)
        cpu = np.where(c > 0, c * one + 2 * self.copy_latency_s, 0.0)
        moe = min(moe_layer_s, float(np.min(layer_s)))
        return np.asarray(layer_s, dtype=float) - moe + np.maximum(moe * gpu_share, cpu)

    def _price(
        self,
        layer_s: float | np.ndarray,
        union: np.ndarray,
        misses: np.ndarray,
        tokens: int,
        lead_s: float,
        predicted: bool,
        moe_layer_s: float = 0.0,
    ) -> Pipeline:
        """:meth:`price` with ``layer_s`` each layer's whole time (a float: every layer's)."""
        m = np.asarray(misses, dtype=float)
        copy = self.copy_s
        a = self._accuracy(predicted)
        late = m if a == 0 else (1 - a) * m
        scalar = isinstance(layer_s, float)
        cancel = self.cancel_wrong_prefetch and a > 0
        fast = a == 0 or (self.prefetch == "next_layer" and not cancel)
        if scalar and self.miss == "copy" and fast and len(m):
            # pipeline()'s closed form with one compute time per layer: a_l = m_l · copy ahead
            # (next layer), d_l = (1 − accuracy) · m_l · copy on demand
            assert isinstance(layer_s, float)
            missed = float(_add(m))
            work = layer_s * len(m)
            demand = missed * (1 - a) * copy
            if a == 0:
                return Pipeline(work + demand, work, demand, 0.0)
            ahead = m * copy
            hidden = float(_add(np.maximum(ahead[1:], layer_s)))
            total = float(ahead[0]) + demand + hidden + layer_s
            return Pipeline(total, work, missed * copy + demand, 0.0)
        ahead = m * copy if a > 0 else np.zeros(len(m))
        guided = self.prefetch == "draft_guided" and a > 0
        wrong = (1 - a) * m * copy if cancel else None
        if self.miss == "cpu":
            return pipeline(
                layer_s,
                np.zeros(len(m)),
                ahead,
                lead_s=lead_s,
                draft_guided=guided,
                cpu_s=self.cpu_layer_s(layer_s, moe_layer_s, union, late, tokens),
                wrong_s=wrong,
            )
        return pipeline(
            layer_s, late * copy, ahead, lead_s=lead_s, draft_guided=guided, wrong_s=wrong
        )

    def _accuracy(self, predicted: bool) -> float:
        """The prefetcher's accuracy (0: no prefetch)."""
        return self.prefetch_accuracy if predicted and self.prefetch != "none" else 0.0

    def copied(self, misses: np.ndarray, predicted: bool = True) -> float:
        """Experts a pass with ``misses`` sends over the link (prefetched and on demand)."""
        total = float(_add(misses))
        a = self._accuracy(predicted)
        if self.miss == "cpu":
            return total if a > 0 else 0.0
        return total * (1 + (1 - a)) if a > 0 else total


class LoadedPass(NamedTuple):
    """A pass priced with its loads: the cost (the exposed load time and the runtime's host
    time inside ``moe_s``: the MoE layers wait for their experts), the pipeline, and its cache
    traffic per pass."""

    cost: PassCost
    pipeline: Pipeline
    needed: float  # Σ_l distinct experts the pass needed
    missed: float  # Σ_l of them not resident
    copied: float  # experts sent over the link (prefetched, right or wrong, and on demand)
    copied_bytes: float


@dataclass(frozen=True)
class OffloadCostModel:
    """A cost model whose passes also load their missing experts (the scenario's cost model
    wraps in this when ``[offload]`` puts experts in host memory).

    Its :meth:`verify_pass` adds the *expected* load time (:meth:`OffloadModel.expected_misses`
    from the pass's union and its lag-1 reuse ``reuse(tokens)``): what every policy's cost
    estimate and the oracle see. The engine prices each pass from the misses it actually had
    (:meth:`load`) when routing is sampled; draft steps run from GPU-resident drafter weights.
    """

    base: CostModel
    model: OffloadModel
    reuse: Callable[[np.ndarray], np.ndarray]  # tokens per request -> lag-1 reuse per layer
    _misses: dict = field(default_factory=dict, repr=False, compare=False)
    #: The runtime's host time per drafter pass: its draft_layer_host_s per drafter decoder
    #: layer (an eager runtime runs the drafter eagerly too).
    draft_host_s: float = 0.0

    def expected_misses(self, tokens_per_request: np.ndarray, union: np.ndarray) -> np.ndarray:
        """Expected misses per layer of a pass feeding ``tokens_per_request`` whose layers need
        ``union`` experts (memoised on both)."""
        key = (np.asarray(tokens_per_request).tobytes(), np.asarray(union).tobytes())
        found = self._misses.get(key)
        if found is None:
            if len(self._misses) > 65536:
                self._misses.clear()
            reuse = self.reuse(tokens_per_request)
            found = self.model.expected_misses(union, reuse, len(tokens_per_request))
            self._misses[key] = found
        return found

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """The base pass plus its expected exposed load time."""
        cost = self.base.verify_pass(tokens_per_request, context_tokens, unique_experts)
        misses = self.expected_misses(tokens_per_request, unique_experts)
        tokens = int(np.sum(tokens_per_request))
        return self.load(cost, unique_experts, misses, tokens).cost

    def expected_exposed_s(
        self, base_total_s: float, tokens_per_request: np.ndarray, unique_experts: np.ndarray
    ) -> float:
        """What :meth:`verify_pass` adds to a base pass of ``base_total_s``: its expected wait
        on loads and the runtime's host time (:func:`simspec.costs.batch.verify_totals` prices
        many passes with it)."""
        m = self.model
        misses = self.expected_misses(tokens_per_request, unique_experts)
        layer_s = base_total_s / max(m.num_moe_layers, 1)
        tokens = int(np.sum(tokens_per_request))
        return m.price(layer_s, unique_experts, misses, tokens).added_s

    def load(
        self,
        cost: PassCost,
        union: np.ndarray,
        misses: np.ndarray,
        tokens: int,
        lead_s: float = 0.0,
        predicted: bool = True,
    ) -> LoadedPass:
        """``cost`` (the pass with every expert resident) with ``misses`` loaded
        (:meth:`OffloadModel.price`; ``lead_s`` of draft phase before it, ``predicted`` False
        when nothing predicts its experts, e.g. draft-guided prefetch without drafts)."""
        m = self.model
        layers = max(m.num_moe_layers, 1)
        misses, per_layer = m.on_host(misses), (cost.total_s / layers, cost.moe_s / layers)
        pipe = m.price(per_layer[0], union, misses, tokens, lead_s, predicted, per_layer[1])
        loaded = dataclasses.replace(cost, moe_s=cost.moe_s + pipe.added_s)
        copied = m.copied(misses, predicted)
        if m.cancel_wrong_prefetch and m.miss == "copy" and m.copy_s > 0:
            copied = pipe.copy_s / m.copy_s  # what the link sent, cancelled guesses left out
        needed = float(_add(union if m.host_layers < 0 else union[: m.host_layers]))  # on host
        moved = copied * m.expert_bytes * m.transfers_per_miss  # both ways when swapping
        return LoadedPass(loaded, pipe, needed, float(_add(misses)), copied, moved)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """The drafter's step (its weights stay on the GPU) plus the runtime's host time."""
        step = self.base.draft_step(context_tokens)
        if self.draft_host_s and len(context_tokens):
            return step + self.draft_host_s
        return step

    def prefill(self, prompt_tokens: np.ndarray) -> PassCost:
        """The base prefill plus its expected loads (a prefill touches nearly every expert)."""
        return self.prefill_loaded(prompt_tokens).cost

    def prefill_loaded(
        self,
        prompt_tokens: np.ndarray,
        cache: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> LoadedPass:
        """:meth:`prefill` with its traffic: its expected misses, or (``cache``: a sampled
        cache's prefill, union per layer -> misses, which updates the cache,
        :meth:`simspec.sim.expert_cache.ExpertCache.prefill`) its misses against the cache."""
        m = self.model
        cost = self.base.prefill(prompt_tokens)
        tokens = float(np.sum(prompt_tokens))
        union = np.full(
            m.num_moe_layers, independent_union(m.num_experts, m.experts_per_token, tokens)
        )
        if cache is None:
            misses = m.expected_misses(union, 0.0)
        else:  # whole experts: the ones the cache sees
            union = np.minimum(np.rint(union), m.num_experts)
            misses = cache(union)
        return self.load(cost, union, misses, int(tokens), predicted=False)

    def speculation_overhead_s(
        self, accepted_tokens: np.ndarray, context_tokens: np.ndarray
    ) -> float:
        """The base model's."""
        return self.base.speculation_overhead_s(accepted_tokens, context_tokens)
