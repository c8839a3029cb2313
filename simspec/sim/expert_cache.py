"""The GPU's expert cache when routing is sampled: one resident set per MoE layer, shared by
every request of the batch, changed by each verify pass's experts.

A pass needs, per layer, the union of its tokens' experts (the same sampled routing, common
random numbers, that prices every pass, so two policies' caches see the same text). Its misses
are the needed experts not resident; after the pass the policy decides what stays
(:meth:`ExpertCache.after`), the ``capacity`` slots per layer going, in order, to:

* ``lru``: the experts this pass used, then the most recently used ones;
* ``lfu``: the most frequently used ones (counts over the run, this pass's included);
* ``static``: the ``capacity`` most popular experts (by the routing's inclusion probabilities),
  fixed for the run; misses pass through a staging buffer;
* ``none``: nothing stays.

A capacity that is not a whole number per layer (a cache sized in GB holds whole experts, not
a whole number per layer) gives some layers one slot more than others (:func:`layer_slots`).

The cache starts warm, holding each layer's ``capacity`` most popular experts (a prefill
touches nearly every expert); each prefill then passes through it like a decode pass
(:meth:`ExpertCache.prefill`: it uses its expected union of the most popular experts). Ties
are broken by popularity, then by expert id, so the state is a function of the passes.
A copy in flight is modelled by the pass pipeline (:mod:`simspec.costs.offload`): an expert is
resident for the next pass once its pass has ended. The analytic counterpart (expected hit
rates) is :func:`simspec.costs.cache_hits.hit_fractions`.
"""

from __future__ import annotations

import numpy as np


def layer_slots(capacity: float, layers: int, experts: int) -> np.ndarray:
    """Slots per layer of a cache of ``capacity`` experts per layer on average: C experts in all
    (C = round(capacity x layers)), ⌊C / L⌋ per layer and one more in the first C mod L layers
    (a cache sized in GB holds whole experts, not a whole number per layer); at most
    ``experts``."""
    total = max(round(float(capacity) * layers), 0)
    slots = np.full(layers, total // layers, dtype=np.int64)
    slots[: total % layers] += 1
    return np.minimum(slots, experts)


class ExpertCache:
    """Resident experts per MoE layer and what the policy remembers of their use."""

    def __init__(self, capacity: float, policy: str, inclusion: np.ndarray):
        p = np.asarray(inclusion, dtype=float)
        layers, experts = p.shape
        slots = layer_slots(capacity, layers, experts) if policy != "none" else np.zeros(layers)
        self.slots = slots.astype(np.int64)  # per layer
        self.capacity = int(self.slots.max()) if layers else 0  # the fullest layer's
        self._even = bool((self.slots == self.capacity).all())
        self.policy = policy
        # A rank of popularity per (layer, expert) in [0, 1): the tie-break of every policy.
        order = np.argsort(-p, axis=1, kind="stable")
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(experts)[None, :], axis=1)
        self._tie = 1.0 - (rank + 1.0) / (experts + 1.0)
        self._rank = rank  # 0 = the layer's most popular expert
        self.resident = np.zeros((layers, experts), dtype=bool)
        self.score = np.zeros((layers, experts))  # last use (lru) or uses (lfu)
        self.clock = 0
        if self.capacity:  # warm: the prefill touched every expert, the popular ones stay
            np.put_along_axis(self.resident, order[:, : self.capacity], True, axis=1)
            if not self._even:
                self.resident &= rank < self.slots[:, None]

    def misses(self, needed: np.ndarray) -> np.ndarray:
        """Needed experts not resident, per layer ((L, N) membership -> (L,) counts)."""
        return np.count_nonzero(needed & ~self.resident, axis=1).astype(float)

    def prefill(self, union: np.ndarray) -> np.ndarray:
        """A prefill whose layers use ``union`` experts (its expected union per layer, rounded):
        the most popular ones (its many tokens use nearly every expert, the popular ones
        surely). Its misses per layer; the cache is then updated as after any pass."""
        count = np.clip(np.rint(np.asarray(union, dtype=float)), 0, self.resident.shape[1])
        needed = self._rank < count[:, None]
        misses = self.misses(needed)
        self.after(needed)
        return misses

    def after(self, needed: np.ndarray) -> None:
        """Update the cache after a pass that used ``needed`` (module docstring)."""
        if self.policy in ("static", "none") or not self.capacity:
            return
        self.clock += 1
        if self.policy == "lru":
            self.score = np.where(needed, float(self.clock), self.score)
        else:
            self.score = self.score + needed
        candidates = self.resident | needed
        key = np.where(candidates, self.score + self._tie, -1.0)
        resident = np.zeros_like(self.resident)
        if self._even:
            keep = np.argpartition(-key, self.capacity - 1, axis=1)[:, : self.capacity]
            np.put_along_axis(resident, keep, True, axis=1)
        else:  # layers of fewer slots keep their best ones only
            keep = np.argsort(-key, axis=1, kind="stable")[:, : self.capacity]
            mine = np.arange(self.capacity)[None, :] < self.slots[:, None]
            np.put_along_axis(resident, keep, mine, axis=1)
        self.resident = resident & candidates
