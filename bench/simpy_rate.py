"""The raw SimPy event rate of this machine: the yardstick the other benchmarks divide by.

A bare process that yields ``env.timeout(1)`` ``events`` times; returns events per CPU second
(median of ``repeats``). Dividing a benchmark's rate by it gives a figure that moves less with
the machine and its load than the rate itself (both are interpreter-bound).

    python bench/simpy_rate.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import simpy


def simpy_event_rate(events: int = 200_000, repeats: int = 5) -> float:
    """Timeout events per CPU second of a bare SimPy loop (median of ``repeats``)."""

    def ticker(env: simpy.Environment):
        for _ in range(events):
            yield env.timeout(1)

    rates = []
    for _ in range(repeats):
        env = simpy.Environment()
        env.process(ticker(env))
        start = time.process_time()
        env.run()
        rates.append(events / (time.process_time() - start))
    return statistics.median(rates)


def bracketed(run: Callable[[], Any], events: int = 100_000) -> tuple[float, float, Any]:
    """CPU seconds of ``run()``, the SimPy event rate around it (the mean of one short
    measurement just before and one just after) and what ``run`` returned.

    This machine's speed moves by up to 2x within minutes (a shared host): one rate measured at
    the start of a benchmark can belong to another speed than a run a minute later, so each
    timed run gets its own yardstick, and the per-event figure is taken run by run.
    """
    before = simpy_event_rate(events, 1)
    start = time.process_time()
    value = run()
    cpu = time.process_time() - start
    return cpu, (before + simpy_event_rate(events, 1)) / 2, value


if __name__ == "__main__":
    print(f"raw SimPy event rate: {simpy_event_rate():,.0f} events per CPU second")
