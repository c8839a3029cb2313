"""Speculation-budget policies. Importing this package registers every implementation."""

from simspec.policies import fixed
from simspec.policies.base import POLICIES, BudgetPolicy, DecodeState
from simspec.policies.fixed import FixedPolicy

__all__ = ["POLICIES", "BudgetPolicy", "DecodeState", "FixedPolicy", "fixed"]
