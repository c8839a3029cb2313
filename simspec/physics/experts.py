"""Distinct experts: the few closed forms every part of simspec shares (one home for each).

With N routed experts per layer and k_e of them picked per token:

- the expected number of distinct experts of t tokens routed independently and uniformly is
  N·(1 − (1 − k_e/N)^t) (MoESD, Li et al. 2025), :func:`independent_union`;
"""

from __future__ import annotations


def independent_union(num_experts: int, experts_per_token: int, tokens: float) -> float:
    """Expected distinct experts of ``tokens`` tokens routed independently and uniformly.

    N·(1 − (1 − k_e/N)^t); 0 for a dense model (N = 0).

    >>> independent_union(128, 8, 1)
    8.0
    """
    if num_experts == 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)
