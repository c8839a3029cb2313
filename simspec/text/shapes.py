"""Tree shapes as engines take them: (steps, topk, num_draft_tokens), presets, and their E[AL].

A *shape* is SGLang's triple of speculative flags: ``steps`` draft steps (the tree's depth d),
``topk`` candidates kept per step (its width w) and ``num_draft_tokens`` tokens verified per
request, the root included (its node budget n); :mod:`simspec.text.tree` grows and prunes the
tree a shape names. A chain of k drafts is ``(k, 1, k + 1)``; no speculation is ``(0, 1, 1)``.
``num_draft_tokens = 0`` means every node the tree grows (``[speculation]``'s convention), and
:func:`validate` rejects a budget the tree cannot fill (SGLang would verify padding).

**Families.** A tree-aware policy or the tree oracle chooses among a *family*: a tuple of shapes
whose entry 0 is no speculation (:func:`family`). Choosing index s for a request is choosing
``family[s]`` for its step.

**Engine defaults** (:data:`PRESETS`), each with its source:

* ``sglang_eagle`` (5, 4, 8): SGLang's ``auto_choose_speculative_params`` for EAGLE/EAGLE-3 on
  every architecture but DeepSeek's (Llama, Grok and "all other models");
* ``sglang_mtp`` (3, 1, 4): the same function's DeepSeek-V3/V2 value, the MTP chain SGLang
  runs on the model's own next-token layer
  (https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py);
* ``vllm_mtp`` (1, 1, 2): vLLM's MTP default, ``num_speculative_tokens`` = the draft config's
  ``n_predict`` (DeepSeek-V3's one MTP layer), drafted as a chain because
  ``speculative_token_tree`` defaults to None, "a chain of num_speculative_tokens"
  (https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py). vLLM's EAGLE
  has no default ``num_speculative_tokens`` (the user sets it) and no default tree, so it has
  no preset: its chain is ``fixed_tree`` with ``topk = 1``.

**Expected acceptance of a shape.** :func:`acceptance_lengths` tabulates E[AL] of a shape on a
grid of i.i.d. acceptance rates (:func:`simspec.text.tree.expected_acceptance_length` at each),
and :func:`alpha_for_accepted` inverts a family's table for an observed mean accepted length:
what a policy that knows only the batch's accepted tokens can estimate.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from simspec.text.tree import expected_acceptance_length, tree_capacity

#: Acceptance rates at which :func:`acceptance_lengths` tabulates E[AL] (linear in between).
ALPHA_GRID = np.linspace(0.0, 1.0, 41)


class TreeShape(NamedTuple):
    """One speculation step's shape, as SGLang's flags name it (module docstring)."""

    steps: int  # speculative_num_steps: draft steps, the tree's depth
    topk: int  # speculative_eagle_topk: candidates kept per step
    num_draft_tokens: int  # speculative_num_draft_tokens: verified tokens, root included

    @property
    def verified_drafts(self) -> int:
        """Draft nodes the verify pass feeds besides the root (0 for no speculation)."""
        capacity = tree_capacity(self.steps, self.topk)
        if self.num_draft_tokens <= 0:
            return capacity
        return min(self.num_draft_tokens - 1, capacity)

    def label(self) -> str:
        """``(steps, topk, num_draft_tokens)`` as a short text."""
        return f"({self.steps}, {self.topk}, {self.num_draft_tokens})"


NO_SPECULATION = TreeShape(0, 1, 1)

#: The engines' default shapes (module docstring for the sources).
PRESETS: dict[str, TreeShape] = {
    "sglang_eagle": TreeShape(5, 4, 8),
    "sglang_mtp": TreeShape(3, 1, 4),
    "vllm_mtp": TreeShape(1, 1, 2),
}


def chain(k: int) -> TreeShape:
    """The chain of ``k`` drafts, (k, 1, k + 1)."""
    return TreeShape(k, 1, k + 1) if k > 0 else NO_SPECULATION


def validate(shape: TreeShape) -> str | None:
    """None if ``shape`` is one an engine runs, else what ``num_draft_tokens`` (or the depth and
    width) should be: a budget the tree cannot fill is refused, as SGLang does."""
    steps, topk, budget = shape
    if steps < 0 or topk < 1:
        return "steps >= 0 and topk >= 1"
    if steps == 0:
        return None if budget in (0, 1) else "1 (no draft step verifies the root alone)"
    if budget == 1:
        return "0 (every node) or at least 2 (the root and one draft)"
    most = tree_capacity(steps, topk) + 1
    if budget > most:
        return (
            f"at most {most}: the root and the topk + (steps - 1)·topk² = {most - 1} nodes "
            f"that {steps} steps of topk {topk} grow"
        )
    return None


def family(shapes: Iterable[TreeShape]) -> tuple[TreeShape, ...]:
    """No speculation first, then ``shapes`` in order without repeats."""
    out = [NO_SPECULATION]
    for shape in shapes:
        shape = TreeShape(*map(int, shape))
        if shape not in out:
            out.append(shape)
    return tuple(out)


def grid_family(
    max_steps: int, topks: Sequence[int], budgets: Sequence[int]
) -> tuple[TreeShape, ...]:
    """Chains of 1..``max_steps`` drafts, then for every topk > 1, depth and budget the trees
    whose budget the tree can fill (:func:`validate`): the family a search over SGLang's flags
    walks."""
    shapes = [chain(k) for k in range(1, max_steps + 1)]
    for w in sorted(set(topks) - {1}):
        for d in range(1, max_steps + 1):
            for n in sorted(set(budgets)):
                shape = TreeShape(d, w, n)
                if validate(shape) is None:
                    shapes.append(shape)
    return family(shapes)


@functools.lru_cache(maxsize=4096)
def acceptance_lengths(shape: TreeShape, rank_decay: float) -> np.ndarray:
    """E[AL] of ``shape`` at every acceptance rate of :data:`ALPHA_GRID` (1 at depth 0)."""
    if shape.steps <= 0:
        return np.ones(len(ALPHA_GRID))
    table = [
        expected_acceptance_length(
            float(a), shape.steps, shape.topk, shape.num_draft_tokens, rank_decay
        )
        for a in ALPHA_GRID
    ]
    return np.array(table)


def expected_lengths(shapes: Sequence[TreeShape], alpha: float, rank_decay: float) -> np.ndarray:
    """E[AL] of each shape at i.i.d. acceptance ``alpha`` (linear between grid points)."""
    return np.array(
        [np.interp(alpha, ALPHA_GRID, acceptance_lengths(s, rank_decay)) for s in shapes]
    )


def alpha_for_accepted(shapes: Sequence[TreeShape], accepted: float, rank_decay: float) -> float:
    """The i.i.d. acceptance rate at which ``shapes`` (one per request) accept ``accepted``
    drafts in all, in expectation: the inverse of their summed E[AL] − 1 on the grid (it rises
    with alpha). 0 or 1 at the ends; NaN when no shape drafts."""
    total = sum(
        (acceptance_lengths(s, rank_decay) - 1.0 for s in shapes), np.zeros(len(ALPHA_GRID))
    )
    if total[-1] <= 0:
        return float("nan")
    return float(np.interp(accepted, total, ALPHA_GRID))
