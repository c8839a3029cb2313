"""Speculation-budget policies. Importing this package registers every implementation."""

from simspec.policies import adaptive_ema, batch_table, cost_aware, fixed, threshold
from simspec.policies.adaptive_ema import AdaptiveEmaPolicy
from simspec.policies.base import (
    POLICIES,
    BatchView,
    BudgetPolicy,
    DecodeState,
    StepOutcome,
    batch_draft_lengths,
    initial_memory,
    observe,
    reads_confidence,
)
from simspec.policies.batch_table import BatchTablePolicy
from simspec.policies.cost_aware import CostAwarePolicy
from simspec.policies.fixed import FixedPolicy
from simspec.policies.threshold import ThresholdPolicy

__all__ = [
    "POLICIES",
    "AdaptiveEmaPolicy",
    "BatchTablePolicy",
    "BatchView",
    "BudgetPolicy",
    "CostAwarePolicy",
    "DecodeState",
    "FixedPolicy",
    "StepOutcome",
    "ThresholdPolicy",
    "adaptive_ema",
    "batch_draft_lengths",
    "batch_table",
    "cost_aware",
    "fixed",
    "initial_memory",
    "observe",
    "reads_confidence",
    "threshold",
]
