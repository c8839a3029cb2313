"""Stored rejected drafts: one depth of a block of requests, at the states a reader can reach.

The r-th rejected draft at state i is fed only by a pass that drafts k tokens there and has
r or more of them rejected: k − min(k, m_i) ≥ r, m_i being the state's match length. A chain
whose readers never draft more than a bound K_b tokens at one state (every policy's budget cap)
therefore reads depth r only at the states with m_i ≤ K_b − r. With i.i.d. acceptance 0.7 and
K_b = 4 that is 1 − 0.7^(5−r) of the states: 76 % at depth 1, 30 % at depth 4, 56 % of the four
depths' ids in all (57 % measured, the end of each text adding a few; 180 instead of 314 MB for
the 10^6 tokens of ``bench/bench_memory.py``).

Every state's draft is still drawn, or at least its random numbers are (the samplers draw whole
blocks, in a fixed order, so a row left out changes no other row; the draw is told which rows
will be kept and may compute only those, as the reachable states of depth r + 1 are reachable at
depth r); :class:`RejectedLevel` keeps the rows a mask selects, plus an index from (request,
state) to row. A read of a row that was left out returns None, and the
block is drawn again with every row kept (:class:`RejectedStore`, which
:class:`~simspec.text.reference.ReferenceSet` fills from the same streams: the same ids).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


def reachable_states(
    match_lengths: np.ndarray, output_tokens: np.ndarray, bound: int, depth: int
) -> np.ndarray:
    """Which (request, state) cells of a block a chain reader can feed rejected depth ``depth``
    from, when it drafts at most ``bound`` tokens at a state: m_i ≤ bound − depth, for the states
    i < L of each request (``match_lengths`` (requests, length), padded; ``output_tokens`` L per
    request). A bool array (requests, length).

    Examples
    --------
    >>> m = np.array([[0, 1, 3, 2, 0]])
    >>> reachable_states(m, np.array([4]), bound=3, depth=2).astype(int).tolist()
    [[1, 1, 0, 0, 0]]
    """
    inside = np.arange(match_lengths.shape[1])[None, :] < np.asarray(output_tokens)[:, None]
    return (match_lengths <= bound - depth) & inside


class RejectedLevel:
    """The ids (requests, length, layers, k_e) of one rejected depth of a block, all of them or
    the rows of a mask (module docstring)."""

    __slots__ = ("ids", "rows", "whole")

    def __init__(self, ids: np.ndarray, keep: np.ndarray | None = None, *, compact: bool = True):
        """``ids`` the whole depth; ``keep`` (requests, length) the rows to store (None: all),
        copied out when ``compact``, else read in place (the rows left out are not valid)."""
        #: The whole depth, when read in place (a request's states are then one view).
        self.whole: np.ndarray | None = None
        if keep is None or bool(keep.all()):
            self.ids = ids  #: (requests, length, layers, k_e), or (rows, layers, k_e)
            self.rows: np.ndarray | None = None  #: row of each (request, state), −1: left out
            return
        if compact:
            rows = np.full(keep.shape, -1, dtype=np.int32)
            rows[keep] = np.arange(int(np.count_nonzero(keep)), dtype=np.int32)
            self.ids = ids[keep]  # a copy: the full array can go
        else:
            rows = np.where(keep, np.arange(keep.size, dtype=np.int32).reshape(keep.shape), -1)
            self.ids = ids.reshape(keep.size, *ids.shape[2:])
            self.whole = ids
        self.rows = rows

    @property
    def dense(self) -> bool:
        """Whether every row is stored."""
        return self.rows is None

    def get(self, request: int | np.ndarray, state: int | np.ndarray) -> np.ndarray | None:
        """The ids at (request, state) (scalars or arrays, broadcast as numpy indexes), or None
        when one of them was left out."""
        if self.rows is None:
            return self.ids[request, state]
        row = self.rows[request, state]
        if np.any(row < 0):
            return None
        return self.ids[row]

    def states(self, request: int, last: int, needed: np.ndarray) -> np.ndarray | None:
        """Request ``request``'s ids at states 0..last − 1 as one (last, layers, k_e) array
        (a view when the depth is read in place; else a copy whose left-out rows are zeros), or None
        when a row that ``needed`` (bool (last,)) marks was left out."""
        if self.rows is None:
            return self.ids[request, :last]
        rows = self.rows[request, :last]
        if np.any(rows[needed] < 0):
            return None
        if self.whole is not None:
            return self.whole[request, :last]
        out = np.zeros((last, *self.ids.shape[1:]), dtype=self.ids.dtype)
        kept = rows >= 0
        out[kept] = self.ids[rows[kept]]
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held (ids and index)."""
        return self.ids.nbytes + (0 if self.rows is None else self.rows.nbytes)


class BlockInputs(NamedTuple):
    """What drawing a block's rejected depths reads: its true tokens' ids (requests, length,
    layers, k_e), the match length m_i of every (request, state) (padded with 0), each
    request's length L, and the anchor i + m_i (the last accepted token) of every state."""

    true: np.ndarray
    matches: np.ndarray
    outputs: np.ndarray
    anchor: np.ndarray


#: ``draw(block, level, inputs, shallower, keep)``: rejected depth ``level`` + 1 of ``block``,
#: after the shallower depths (every row of each, or an empty array for one that no later depth
#: reads, see ``memory``): every row, or with ``keep`` (requests, length) set, at least the rows
#: it marks (the others may hold anything).
Draw = Callable[[int, int, BlockInputs, list[np.ndarray], np.ndarray | None], np.ndarray]


class RejectedStore:
    """Every block's rejected depths, drawn on first use from the caller's ``draw`` and kept
    at the states a chain within ``bound`` drafts can read, or without a bound depth by depth
    as readers ask, at the states a chain within ``cap`` (K_max) drafts can read (module
    docstring).

    ``memory()`` is how many shallower depths a draw conditions on (1 for a Markov sampler):
    with a bound, older full depths are let go once the stored rows are copied out. Any read of
    a row left out makes its block draw every depth again with every row (the same streams
    give the same ids), so bound and cap save work and memory and never change an answer.
    """

    def __init__(
        self,
        inputs: Callable[[int], BlockInputs],
        draw: Draw,
        bound: int | None,
        memory: Callable[[], int],
        cap: int | None = None,
    ):
        self.bound = bound
        self.cap = cap
        self._inputs, self._draw, self._memory = inputs, draw, memory
        self._levels: dict[int, list[RejectedLevel]] = {}
        self._full: dict[int, list[np.ndarray]] = {}  # without a bound: every depth's array
        self.dense_blocks: set[int] = set()  #: blocks that keep every row

    def stored(self, block: int) -> list[RejectedLevel]:
        """The depths of ``block`` drawn so far."""
        return self._levels.get(block, [])

    def levels(self, block: int, depth: int) -> list[RejectedLevel]:
        """Depths 1..``depth`` (or more) of ``block``: with a bound, every depth up to it at
        once, each at its reachable states; else (or beyond the bound) every row, depth by
        depth as readers ask."""
        levels = self._levels.setdefault(block, [])
        if len(levels) >= depth:
            return levels
        bound = self.bound if block not in self.dense_blocks else None
        if bound is not None and (levels or depth > bound):  # deeper than the bound: every row
            self.dense_blocks.add(block)
            levels.clear()
            bound = None
        inputs = self._inputs(block)
        if bound is None:  # depth by depth, each array kept whole for the deeper ones
            full = self._full.setdefault(block, [])
            cap = self.cap if block not in self.dense_blocks else None
            for level in range(len(levels), depth):
                keep = None
                if cap is not None:
                    keep = reachable_states(inputs.matches, inputs.outputs, cap, level + 1)
                full.append(self._draw(block, level, inputs, full, keep))
                levels.append(RejectedLevel(full[-1], keep, compact=False))
            return levels
        full = []  # every row of the depths drawn so far
        for level in range(bound):
            keep = reachable_states(inputs.matches, inputs.outputs, bound, level + 1)
            full.append(self._draw(block, level, inputs, full, keep))
            levels.append(RejectedLevel(full[-1], keep))
            spent = level - self._memory()  # no later depth of this block reads it
            if spent >= 0:
                full[spent] = full[spent][:0]  # let every row go (the stored ones are a copy)
        return levels

    def ids(
        self, block: int, depth: int, request: int | np.ndarray, state: int | np.ndarray
    ) -> np.ndarray:
        """Ids of depth ``depth`` of ``block`` at (request, state), scalars or arrays."""
        ids = self.levels(block, depth)[depth - 1].get(request, state)
        if ids is None:
            self.keep_every_row(block)
            ids = self.levels(block, depth)[depth - 1].get(request, state)
            assert ids is not None
        return ids

    def states(self, block: int, request: int, last: int, rejected: np.ndarray) -> list[np.ndarray]:
        """Depths 1..max(rejected) of ``request`` at states 0..last − 1, (last, layers, k_e)
        each, where state i feeds ``rejected[i]`` rejected drafts (other rows: any value)."""
        deepest = int(rejected.max(initial=0))
        for _ in range(2):  # once more with every row kept if a needed row was left out
            levels = self.levels(block, deepest)
            rows = [levels[r].states(request, last, rejected > r) for r in range(deepest)]
            stored = [r for r in rows if r is not None]
            if len(stored) == deepest:
                return stored
            self.keep_every_row(block)
        raise AssertionError("every row is kept after a second draw")

    def keep_every_row(self, block: int) -> None:
        """Draw ``block``'s depths again with every row kept (same streams, same ids)."""
        depth = len(self._levels.pop(block, []))
        self._full.pop(block, None)
        self.dense_blocks.add(block)
        self.levels(block, depth)
