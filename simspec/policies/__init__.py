"""Speculation-budget policies: the protocol (:mod:`~simspec.policies.base`) and one module per
policy. ``POLICIES`` finds every module of this package itself; the names below are re-exported
for convenience only, so a new policy needs nothing but its own module."""

from simspec.policies.adaptive_ema import AdaptiveEmaPolicy
from simspec.policies.base import (
    POLICIES,
    BatchView,
    BudgetPolicy,
    DepthRule,
    Policy,
    StepFeedback,
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
    "DepthRule",
    "FixedPolicy",
    "Policy",
    "StepFeedback",
    "ThresholdPolicy",
]
