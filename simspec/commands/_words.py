"""Counts in words: "1 policy", "2 policies", "0 axes"."""

from __future__ import annotations

#: Plurals that are not the singular plus "s".
IRREGULAR = {"axis": "axes", "policy": "policies", "replication": "replications"}


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, singular for exactly one.

    >>> count(1, "policy"), count(0, "axis"), count(3, "worker")
    ('1 policy', '0 axes', '3 workers')
    """
    return f"{n} {noun if n == 1 else IRREGULAR.get(noun, noun + 's')}"
