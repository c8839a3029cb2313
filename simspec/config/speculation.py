"""The shape of a speculation step (scenario table ``[speculation]``).

A policy decides how many draft steps (the depth k) each request takes; this table decides
whether the drafts form a chain (one token per step) or a tree (``topk`` candidates per step,
the best ``num_draft_tokens`` tokens verified), as SGLang's EAGLE worker does
(:mod:`simspec.text.tree` builds the tree and gives its acceptance).

Names in the engines (SGLang's server arguments):

* the policy's k is ``speculative_num_steps`` (draft steps, the tree's depth);
* ``topk`` is ``speculative_eagle_topk`` (candidates kept per step);
* ``num_draft_tokens`` is ``speculative_num_draft_tokens`` (tokens verified per request, the
  root included: a chain of k steps verifies k + 1).

vLLM's EAGLE chain is ``topk = 1`` with its ``num_speculative_tokens`` as the policy's k.
``num_draft_tokens = 0`` verifies every node the tree grew, topk + (k − 1)·topk² drafts. A
value beyond what the deepest tree the policies draft can grow (their largest k) is an error,
checked by the loader (a setting no step could run); below it, a step whose policy chooses a
smaller k has its tree clamped per request to what that depth grows.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.schema import param

#: Rank decay fitted to SpecForge #339 (Qwen3-30B-A3B, EAGLE-3, SGLang, bs 1): with the chain's
#: alpha from its (3, 1, 4) row (AL 1.86), the trees (3, 3, 8), (7, 4, 16), (6, 4, 12) and
#: (8, 8, 60) reproduce their measured AL at rho = 0.59, 0.65, 0.66 and 0.77.
DEFAULT_RANK_DECAY = 0.65


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculationConfig:
    """Chain or tree drafts (scenario table ``[speculation]``)."""

    topk: int = param(1, "draft candidates kept per step (1 = a chain)", ge=1, le=64)
    num_draft_tokens: int = param(
        0,
        "tokens verified per request and step, the root included as SGLang counts them "
        "(0 = every node the tree grew; a chain of k drafts verifies k + 1)",
        ge=0,
        le=1024,
    )
    rank_decay: float = param(
        DEFAULT_RANK_DECAY,
        "rho: the r-th ranked sibling is the target's token with probability "
        "alpha·(rho·(1 − alpha))^(r − 1) (0 = only the top candidate counts, 1 = geometric rank)",
        ge=0,
        le=1,
    )

    def __post_init__(self) -> None:
        if self.num_draft_tokens == 1:
            raise FieldError(
                "num_draft_tokens",
                "0 (every node) or at least 2 (the root and one draft token)",
                self.num_draft_tokens,
            )

    @property
    def is_tree(self) -> bool:
        """True when the step is not the plain chain (a wider or a pruned tree)."""
        return self.topk > 1 or self.num_draft_tokens > 0
