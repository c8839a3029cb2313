"""SGLang-style adaptive speculation: a few draft-length tiers chosen from an EMA.

SGLang's adaptive speculative decoding keeps CUDA graphs for a few chain lengths ("tiers",
e.g. [1, 3, 7]). After every verify pass it updates an exponential moving average (weight 0.2) of
the batch's mean accepted draft tokens and targets about round(EMA) + 1 drafts, after a warm-up
and only every few steps, with hysteresis so it does not flap between tiers. Here: the tier is
the smallest tier >= round(EMA) + 1 (the largest if none is); a move down needs the EMA to clear
the boundary by ``down_hysteresis``, a move up by ``up_hysteresis``. The EMA, the step count and
the current tier are the policy's memory, threaded by the engine (see ``policies.base``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.policies.base import POLICIES, BatchView, Policy, StepFeedback, uniform
from simspec.schema import param


@dataclass(frozen=True, slots=True)
class EmaMemory:
    """EMA of mean accepted drafts per request, steps seen, and the tier in force."""

    ema: float | None
    steps: int
    tier: int


@POLICIES.register("adaptive_ema")
@dataclass(frozen=True, slots=True, kw_only=True)
class AdaptiveEmaPolicy(Policy):
    """Pick a draft-length tier from an EMA of the batch's accepted drafts."""

    tiers: tuple[int, ...] = param((1, 3, 7), "allowed draft lengths, ascending", ge=0, le=64)
    initial_tier: int = param(3, "draft length during warm-up (one of tiers)", ge=0, le=64)
    ema_weight: float = param(0.2, "weight of the newest step in the EMA", gt=0, le=1)
    warmup_steps: int = param(10, "steps before the first tier change", ge=0, le=1_000_000)
    update_interval: int = param(5, "steps between tier changes", ge=1, le=1_000_000)
    down_hysteresis: float = param(0.25, "EMA margin needed to move to a lower tier", ge=0, le=64)
    up_hysteresis: float = param(0.0, "EMA margin needed to move to a higher tier", ge=0, le=64)

    def __post_init__(self) -> None:
        if not self.tiers or list(self.tiers) != sorted(set(self.tiers)):
            raise FieldError("tiers", "a non-empty strictly ascending array", list(self.tiers))
        if self.initial_tier not in self.tiers:
            raise FieldError("initial_tier", f"one of tiers {list(self.tiers)}", self.initial_tier)

    def tier_for(self, ema: float) -> int:
        """The smallest tier >= round(ema) + 1 (the largest tier if none)."""
        target = round(ema) + 1
        return next((t for t in self.tiers if t >= target), self.tiers[-1])

    def initial_memory(self) -> EmaMemory:
        """No EMA yet; the initial tier."""
        return EmaMemory(None, 0, self.initial_tier)

    def observe(self, memory: EmaMemory, feedback: StepFeedback) -> EmaMemory:
        """Fold one verify pass into the EMA; maybe change tier."""
        mean_accepted = feedback.accepted / max(feedback.batch_size, 1)
        ema = (
            mean_accepted
            if memory.ema is None
            else (1 - self.ema_weight) * memory.ema + self.ema_weight * mean_accepted
        )
        steps = memory.steps + 1
        tier = memory.tier
        if steps >= self.warmup_steps and (steps - self.warmup_steps) % self.update_interval == 0:
            wanted = self.tier_for(ema)
            if wanted > tier and self.tier_for(ema - self.up_hysteresis) > tier:
                tier = self.tier_for(ema - self.up_hysteresis)
            elif wanted < tier and self.tier_for(ema + self.down_hysteresis) < tier:
                tier = self.tier_for(ema + self.down_hysteresis)
        return EmaMemory(ema, steps, tier)

    def decide(self, view: BatchView) -> np.ndarray:
        """Every request drafts the current tier."""
        memory = view.memory if isinstance(view.memory, EmaMemory) else self.initial_memory()
        return uniform(view, memory.tier)

    def budget_cap(self, max_draft_tokens: int) -> int:
        """The largest tier within the drafter's cap."""
        return min(max(self.tiers), max_draft_tokens)
