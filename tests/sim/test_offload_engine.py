"""The engine with experts offloaded ([offload], issue 29): the default stays byte-identical, a
cache holding every expert prices every pass as the resident one, runs are deterministic, and
sampled and analytic routing agree on the hit rate and the time per token."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import simspec
from simspec.costs.offload import pipeline as pipeline_of
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup

BASE = [
    "workload.num_requests=3",
    "workload.concurrency=1",
    "workload.prompt_tokens=64",
    "workload.output_tokens=48",
]
OFFLOAD = [
    *BASE,
    "hardware.gpu=rtx-4090",
    'offload.experts="host_pinned"',
    "offload.cache_experts_per_layer=32",
]


def _tpot(result: simspec.RunResult) -> list[float]:
    return [p.tpot_ms for p in result.policies]


def test_default_scenario_without_offload_is_unchanged():
    plain = simspec.run(None, BASE)
    explicit = simspec.run(None, [*BASE, 'offload.experts="gpu"'])
    assert plain.to_json() == explicit.to_json()
    assert "offload" not in plain.scenario
    assert all("expert_hit_rate" not in p.to_dict() for p in plain.policies)


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
def test_a_cache_of_every_expert_is_the_resident_pass(mode):
    full = [*BASE, f'routing.mode="{mode}"']
    resident = simspec.run(None, full)
    cached = simspec.run(
        None, [*full, 'offload.experts="host_pinned"', "offload.cache_experts_per_layer=128"]
    )
    assert _tpot(cached) == _tpot(resident)
    for p in cached.policies:
        assert p.expert_hit_rate == 1.0 and p.exposed_copy_s == 0.0
        # Only the prefill's loads are absent too: nothing crosses the link.
        assert p.link_gb == 0.0


def test_offloaded_runs_are_deterministic_and_report_the_link():
    a = simspec.run(None, OFFLOAD)
    b = simspec.run(None, OFFLOAD)
    assert a.to_json() == b.to_json()
    for p in a.policies:
        assert 0.0 < p.expert_hit_rate < 1.0
        assert 0.0 < p.link_busy_fraction <= 1.0
        assert p.link_gb > 0 and p.exposed_copy_s > 0
    # Offloading costs time against the resident run on the same GPU.
    same_gpu = [
        *OFFLOAD[:-3],
        'offload.experts="host_pinned"',
        "offload.cache_experts_per_layer=32",
    ]
    offloaded = simspec.run(None, same_gpu)
    resident = simspec.run(None, BASE)
    assert all(x > y for x, y in zip(_tpot(offloaded), _tpot(resident), strict=True))


def test_sampled_cache_and_analytic_expectation_agree():
    sampled = simspec.run(None, [*OFFLOAD, 'routing.mode="monte_carlo"'])
    analytic = simspec.run(None, [*OFFLOAD, 'routing.mode="analytic"'])
    for s, a in zip(sampled.policies, analytic.policies, strict=True):
        assert a.expert_hit_rate == pytest.approx(s.expert_hit_rate, abs=0.05)
        assert a.tpot_ms == pytest.approx(s.tpot_ms, rel=0.05)


def test_link_time_is_the_bytes_at_the_bandwidth():
    scenario = simspec.load_scenario(None, [*OFFLOAD, 'offload.cache_policy="none"'])
    setup = build_setup(scenario)
    log = run_policy(setup, scenario.policies[0].policy)
    off = log.offload
    assert off is not None
    model = setup.offload.model
    copies = np.array(off.copied)
    assert np.array(off.copy_s) == pytest.approx(copies * model.copy_s)
    # No cache, no prefetch: every needed expert is copied once.
    assert copies == pytest.approx(np.array(off.needed))
    assert np.array(off.missed) == pytest.approx(np.array(off.needed))


def test_more_cache_and_faster_links_help():
    @functools.cache
    def tpot(*extra: str) -> float:
        return simspec.run(None, [*OFFLOAD, *extra]).policies[-1].tpot_ms

    assert tpot("offload.cache_experts_per_layer=40") < tpot()
    assert tpot("offload.link_gb_per_s=50.0") < tpot("offload.link_gb_per_s=12.0")
    assert tpot('offload.experts="host_pageable"') > tpot()


@pytest.mark.parametrize("prefetch", ["none", "next_layer", "draft_guided"])
def test_deferred_and_timed_offloaded_runs_record_the_same(prefetch):
    scenario = simspec.load_scenario(
        None,
        [
            *OFFLOAD,
            'routing.mode="analytic"',
            "workload.concurrency=3",
            "workload.num_requests=5",
            f'offload.prefetch="{prefetch}"',
        ],
    )
    setup = build_setup(scenario)
    for spec in scenario.policies:
        timed = run_policy(setup, spec.policy, timed=True)
        deferred = run_policy(setup, spec.policy, timed=False)
        assert timed.steps == deferred.steps
        assert timed.prefills == deferred.prefills
        assert timed.requests == deferred.requests
        assert timed.offload == deferred.offload


def test_closed_form_price_is_the_pipeline():
    scenario = simspec.load_scenario(None, [*OFFLOAD, 'offload.prefetch="next_layer"'])
    model = build_setup(scenario).offload.model
    rng = np.random.default_rng(5)
    for _ in range(20):
        misses = rng.uniform(0, 6, model.num_moe_layers)
        union = misses + rng.uniform(0, 4, model.num_moe_layers)
        layer_s = float(rng.uniform(1e-5, 2e-3))
        fast = model.price(layer_s, union, misses, tokens=4)
        a = model.prefetch_accuracy
        full = np.full(model.num_moe_layers, layer_s)
        slow = pipeline_of(full, (1 - a) * misses * model.copy_s, misses * model.copy_s)
        assert fast.total_s == pytest.approx(slow.total_s, rel=1e-12)
        assert fast.copy_s == pytest.approx(slow.copy_s, rel=1e-12)


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
def test_host_moe_layers_offload_only_those_layers(mode):
    """--n-cpu-moe N: N layers' experts in host memory, the rest resident. GPU memory holds the
    others' experts; only the N layers miss, and the hit rate counts their experts alone."""
    from simspec.config.load import load_scenario

    base = [*OFFLOAD, "offload.cache_experts_per_layer=0", f'routing.mode="{mode}"']
    some = [*base, "offload.host_moe_layers=40", "hardware.memory_utilization=1.0"]
    every, part = load_scenario(overrides=base), load_scenario(overrides=some)
    shape = every.target.shape
    resident = (shape.num_moe_layers - 40) * shape.num_experts * shape.expert_bytes
    assert part.weight_bytes - every.weight_bytes == pytest.approx(resident)
    all_host, twelve = simspec.run(None, base), simspec.run(None, some)
    for a, p in zip(all_host.policies, twelve.policies, strict=True):
        assert p.expert_hit_rate == a.expert_hit_rate == 0.0  # no cache: every host use misses
        assert p.link_gb == pytest.approx(a.link_gb * 40 / shape.num_moe_layers, rel=0.05)
