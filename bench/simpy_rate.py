"""The raw SimPy event rate of this machine: the yardstick the other benchmarks divide by.

A bare process that yields ``env.timeout(1)`` ``events`` times; returns events per CPU second
(median of ``repeats``). Dividing a benchmark's rate by it gives a figure that moves less with
the machine and its load than the rate itself (both are interpreter-bound).

    python bench/simpy_rate.py
"""

from __future__ import annotations

import statistics
import time

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


if __name__ == "__main__":
    print(f"raw SimPy event rate: {simpy_event_rate():,.0f} events per CPU second")
