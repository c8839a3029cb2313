"""Draft length by batch size: vLLM's dynamic speculation table, TensorRT-LLM's draft_len_schedule.

Larger batches make the target pass compute-bound sooner (and, on an MoE target, already cover
more experts), so engines shrink the draft as the batch grows. ``batch_sizes[i]`` is the smallest
batch for which ``draft_tokens[i]`` applies; below the first entry the first length applies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.policies.base import POLICIES, BatchView, Policy, uniform
from simspec.schema import param


@POLICIES.register("batch_table")
@dataclass(frozen=True, slots=True, kw_only=True)
class BatchTablePolicy(Policy):
    """Look the draft length up from the current batch size."""

    batch_sizes: tuple[int, ...] = param(
        (1, 8, 32, 128), "ascending batch-size thresholds", ge=1, le=65536
    )
    draft_tokens: tuple[int, ...] = param(
        (4, 3, 2, 0), "draft length from each threshold on", ge=0, le=64
    )

    def __post_init__(self) -> None:
        if not self.batch_sizes or list(self.batch_sizes) != sorted(set(self.batch_sizes)):
            raise FieldError(
                "batch_sizes", "a non-empty strictly ascending array", list(self.batch_sizes)
            )
        if len(self.draft_tokens) != len(self.batch_sizes):
            raise FieldError(
                "draft_tokens",
                f"{len(self.batch_sizes)} entries (one per batch_sizes entry)",
                list(self.draft_tokens),
            )

    def draft_length(self, batch_size: int) -> int:
        """The table's entry for ``batch_size``."""
        chosen = self.draft_tokens[0]
        for threshold, length in zip(self.batch_sizes, self.draft_tokens, strict=True):
            if batch_size >= threshold:
                chosen = length
        return chosen

    def decide(self, view: BatchView) -> np.ndarray:
        """The table's length for this batch, for every request."""
        return uniform(view, self.draft_length(view.batch_size))

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The table's largest entry within the drafter's cap."""
        return min(max(self.draft_tokens), max_draft_tokens)
