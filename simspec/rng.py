"""Named, independent random streams derived from the one scenario seed.

Every random draw in simspec comes from a ``numpy.random.Generator`` made here from the
scenario seed, a stream name and (optionally) an index, e.g. ``stream(seed, "acceptance", 7)``
for request 7. The name is mapped to a fixed integer (never ``hash()``, which is salted per
process), so the same (seed, name, index) gives the same numbers in every process and every
policy run. That is what makes policy comparisons paired (common random numbers).
"""

from __future__ import annotations

import numpy as np

#: Fixed stream identifiers. Append new names; never renumber (results would change).
STREAMS: dict[str, int] = {
    "workload": 1,
    "arrivals": 2,
    "acceptance": 3,
    "routing": 4,
    "rejected_routing": 5,
    "popularity": 6,
    "delta_control": 7,
    "tree_ranks": 8,
}


def seed_sequence(seed: int, name: str, *index: int) -> np.random.SeedSequence:
    """The SeedSequence of stream ``name`` (and sub-index ``index``) for ``seed``."""
    return np.random.SeedSequence(entropy=seed, spawn_key=(STREAMS[name], *index))


def stream(seed: int, name: str, *index: int) -> np.random.Generator:
    """A fresh Generator for stream ``name``: same arguments, same numbers."""
    return np.random.Generator(np.random.PCG64(seed_sequence(seed, name, *index)))


def replication_seed(seed: int, replication: int) -> int:
    """The scenario seed of replication ``replication`` of a scenario whose seed is ``seed``.

    Replication 0 runs ``seed`` itself (so one replication is the plain run); replication r > 0
    runs 63 bits drawn from ``numpy.random.SeedSequence([seed, r])``: independent of the other
    replications, reproducible, and the same in a sweep and in ``simspec run --replications``.
    """
    if replication == 0:
        return seed
    state = np.random.SeedSequence([seed, replication]).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1]))
