"""A reference per-layer LRU expert cache, written the textbook way (an ordered dict per layer,
move-to-end on use, evict the oldest), to check :class:`simspec.sim.expert_cache.ExpertCache`."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class ReferenceLru:
    """One ordered dict per layer: the least recently used expert first."""

    def __init__(self, capacity: int | list[int], popularity: np.ndarray):
        layers = len(popularity)
        self.capacities = [capacity] * layers if isinstance(capacity, int) else list(capacity)
        # Within one pass, experts are touched least popular first (the most popular is the
        # most recent), and the cache starts with the most popular ``capacity``.
        self.order = np.argsort(-np.asarray(popularity), axis=1, kind="stable")[:, ::-1]
        warm = [row[::-1][:c].tolist() for row, c in zip(self.order, self.capacities, strict=True)]
        # The warm set is "used" in reverse popularity order: the most popular most recently.
        self.layers = [OrderedDict((e, None) for e in reversed(w)) for w in warm]

    def misses(self, needed: np.ndarray) -> list[int]:
        """Needed experts not resident, per layer (nothing changes)."""
        return [
            sum(1 for e in np.flatnonzero(row).tolist() if e not in cache)
            for row, cache in zip(needed, self.layers, strict=True)
        ]

    def use(self, needed: np.ndarray) -> None:
        """A pass used ``needed`` ((layers, N) membership; at most ``capacity`` per layer)."""
        for row, cache, order, capacity in zip(
            needed, self.layers, self.order, self.capacities, strict=True
        ):
            for e in order[row[order]].tolist():
                cache[e] = None
                cache.move_to_end(e)
            while len(cache) > capacity:
                cache.popitem(last=False)
