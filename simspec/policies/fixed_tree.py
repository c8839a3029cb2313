"""Fixed tree: the same (steps, topk, num_draft_tokens) every step, as an engine is launched.

SGLang runs one shape for the whole server (``--speculative-num-steps``,
``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``); this policy is that shape,
given as numbers or as an engine's default (``preset``, :data:`simspec.text.shapes.PRESETS`:
``sglang_eagle`` (5, 4, 8), ``sglang_mtp`` (3, 1, 4), ``vllm_mtp`` (1, 1, 2)). It is a
tree-aware policy (:mod:`simspec.policies.base`): its family is no speculation and the shape,
and it answers index 1 for every request. ``topk = 1`` with ``num_draft_tokens = steps + 1``
is the chain of ``fixed`` with ``draft_tokens = steps`` (vLLM's EAGLE chain).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.policies.base import POLICIES, BatchView, Policy, _constant
from simspec.schema import param
from simspec.text.shapes import PRESETS, TreeShape, family, validate


@POLICIES.register("fixed_tree")
@dataclass(frozen=True, slots=True, kw_only=True)
class FixedTreePolicy(Policy):
    """Verify the same draft tree every step."""

    steps: int = param(5, "draft steps, the tree's depth (speculative_num_steps)", ge=1, le=64)
    topk: int = param(4, "candidates kept per step (speculative_eagle_topk)", ge=1, le=64)
    num_draft_tokens: int = param(
        8,
        "tokens verified per request, the root included (speculative_num_draft_tokens; "
        "0 = every node the tree grows)",
        ge=0,
        le=1024,
    )
    preset: str = param(
        "",
        "an engine's default shape instead of the three numbers ('' = use them)",
        choices=("", *PRESETS),
    )

    def __post_init__(self) -> None:
        if not self.preset:
            why = validate(self.shape)
            if why is not None:
                raise FieldError("num_draft_tokens", why, self.num_draft_tokens)

    @property
    def shape(self) -> TreeShape:
        """The shape every step verifies."""
        if self.preset:
            return PRESETS[self.preset]
        return TreeShape(self.steps, self.topk, self.num_draft_tokens)

    def tree_family(self) -> tuple[TreeShape, ...]:
        """No speculation and the shape."""
        return family([self.shape])

    def decide(self, view: BatchView) -> np.ndarray:
        """Index 1 (the shape) for every request; 0 if the step allows no draft."""
        index = 1 if min(self.shape.steps, view.max_draft_tokens, view.cap) > 0 else 0
        return _constant(view.batch_size, index)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The tree's depth, within the drafter's cap."""
        return min(self.shape.steps, max_draft_tokens)
