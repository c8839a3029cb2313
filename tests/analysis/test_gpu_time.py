"""gpu_time_s is complete: its parts sum to the run's whole GPU time, for every engine preset."""

from __future__ import annotations

import math

import pytest

import simspec
from simspec import catalog
from simspec.analysis.results import GpuTime, PolicyResult, gpu_time_parts, step_parts
from simspec.costs.batch import StepCosts
from simspec.params import PassCost

SMALL = ["workload.num_requests=4", "workload.output_tokens=24", "workload.prompt_tokens=64"]

#: Small scenarios covering each way a step is priced: the deferred closed loop, the timed open
#: loop, a policy that reads costs, a draft tree, tensor and expert parallelism, a dense drafter.
SCENARIOS = {
    "closed": [*SMALL, "workload.concurrency=2"],
    "open": [
        *SMALL,
        "workload.loop=open",
        "workload.arrival_rate_per_s=200.0",
        "workload.max_batch_size=4",
    ],
    "tp2-tree": [
        *SMALL,
        "hardware.num_gpus=2",
        "hardware.tensor_parallel=2",
        "speculation.topk=3",
        "speculation.num_draft_tokens=6",
        "workload.concurrency=2",
    ],
    "ep2-dense-drafter": [
        *SMALL,
        "model.target=qwen3-235b-a22b",
        "model.drafter=qwen3-0.6b-draft",
        'model.precision="fp8"',  # bf16 would not fit a TP2 x EP2 share of one H200
        "hardware.gpu=h200",
        "hardware.num_gpus=4",
        "hardware.tensor_parallel=2",
        "hardware.expert_parallel=2",
        "workload.concurrency=3",
    ],
}
#: k = 0 only (no speculation) and a speculative mix (a fixed k and a cost-reading policy).
POLICIES = {
    "plain": '[{name = "fixed", draft_tokens = 0}]',
    "speculative": '[{name = "fixed", draft_tokens = 3}, {name = "cost_aware"}]',
}


def _run(preset: str, scenario: str, policies: str):
    overrides = [*SCENARIOS[scenario], f"engine.preset={preset}", f"policies={POLICIES[policies]}"]
    return simspec.run(simspec.load_scenario(None, overrides), keep_logs=True)


def _closed_form_s(log) -> tuple[float, float]:
    """(the steps' and prefills' durations summed, the last pass's end): the run's GPU time."""
    steps = [s.end_s - s.start_s for s in log.steps]
    prefills = [p.cost.total_s for p in log.prefills]
    ends = [s.end_s for s in log.steps] + [p.start_s + p.cost.total_s for p in log.prefills]
    return math.fsum(steps) + math.fsum(prefills), max(ends)


@pytest.mark.parametrize("policies", sorted(POLICIES))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("preset", catalog.engine_names())
def test_parts_sum_to_the_runs_gpu_time(preset, scenario, policies):
    result = _run(preset, scenario, policies)
    assert result.logs is not None
    for row in result.policies:
        log = result.logs[row.label]
        parts = row.gpu_time_s.parts
        assert tuple(parts) == gpu_time_parts()
        assert all(v >= 0 for v in parts.values()), parts
        durations, last_end = _closed_form_s(log)
        assert math.fsum(parts.values()) == pytest.approx(durations, rel=1e-9, abs=0)
        if scenario != "open":  # a closed loop keeps the GPU busy from 0 to the last pass
            assert math.fsum(parts.values()) == pytest.approx(last_end, rel=1e-9, abs=0)
        speculative = row.mean_k > 0
        assert (parts["draft"] > 0) == speculative
        if not speculative:
            assert parts["speculation_overhead"] == 0.0


@pytest.mark.parametrize("preset", ["sglang", "vllm"])
def test_the_speculation_overhead_is_a_part_when_the_preset_has_one(preset):
    """The two presets run a draft extend per speculative step (time gpu_time_s once hid):
    more speculation overhead than physics alone, and none without speculation."""
    spec = _run(preset, "closed", "speculative").get("fixed-3").gpu_time_s
    ideal = _run("ideal", "closed", "speculative").get("fixed-3").gpu_time_s
    assert spec["speculation_overhead"] > ideal["speculation_overhead"] >= 0
    plain = _run(preset, "closed", "plain").baseline.gpu_time_s
    assert plain["speculation_overhead"] == 0.0 and plain["draft"] == 0.0


def test_parts_follow_the_cost_components():
    """Every time component of a step's costs (StepCosts, PassCost: fields in s) is a part."""
    components = [name for name in StepCosts._fields if name.endswith("_s")]
    assert [name for _, name in step_parts()] == components
    verify = [f"verify_{name.removesuffix('_s')}" for name in PassCost.__dataclass_fields__]
    assert set(verify) - {"verify_fallback_terms"} <= set(gpu_time_parts())
    assert gpu_time_parts()[-1] == "prefill"


def test_a_results_file_without_a_current_part_does_not_load():
    row = _run("ideal", "closed", "plain").policies[0].to_dict()
    old = dict(row, gpu_time_s={k: v for k, v in row["gpu_time_s"].items() if k != "draft"})
    with pytest.raises(KeyError, match=r"gpu_time_s\.draft"):
        PolicyResult.from_dict(old)
    unknown = dict(row, gpu_time_s={**row["gpu_time_s"], "overhead": 0.0})
    with pytest.raises(ValueError, match="unknown part 'overhead'"):
        PolicyResult.from_dict(unknown)
    assert PolicyResult.from_dict(row).gpu_time_s == GpuTime(row["gpu_time_s"])


def _random_overrides(draw) -> list[str]:
    """A small random scenario: preset, loop, batch, routing, draft tree, engine costs,
    expert offloading and a mix of policies (the options that change how a step is priced)."""
    from hypothesis import strategies as st

    overrides = [*SMALL, f"engine.preset={draw(st.sampled_from(catalog.engine_names()))}"]
    overrides.append(f'routing.mode="{draw(st.sampled_from(["analytic", "monte_carlo"]))}"')
    if draw(st.booleans()):
        overrides += [f"workload.concurrency={draw(st.integers(1, 4))}"]
    else:
        rate = draw(st.sampled_from([50.0, 400.0]))
        overrides += ['workload.loop="open"', f"workload.arrival_rate_per_s={rate}"]
        overrides += [f"workload.max_batch_size={draw(st.integers(1, 4))}"]
    tree = draw(st.booleans())
    if tree:
        overrides += [
            "speculation.topk=2",
            f"speculation.num_draft_tokens={draw(st.integers(3, 6))}",
        ]
    overrides.append(f"costs.verify_overhead_s={draw(st.sampled_from([0.0, 0.003]))}")
    overrides.append(f"costs.draft_extend_passes={draw(st.sampled_from([0, 1, 2]))}")
    if draw(st.booleans()):
        overrides += [
            f'offload.experts="{draw(st.sampled_from(["host_pinned", "host_pageable"]))}"'
        ]
        overrides += [f"offload.cache_experts_per_layer={draw(st.sampled_from([8, 32, 96]))}"]
        prefetch = draw(st.sampled_from(["none", "next_layer", "draft_guided"]))
        overrides += [f'offload.prefetch="{prefetch}"']
        overrides += [f'offload.miss="{draw(st.sampled_from(["copy", "cpu"]))}"']
    policies = [f'{{name = "fixed", draft_tokens = {k}}}' for k in (0, 1, 3)]
    policies += ['{name = "cost_aware"}', '{name = "threshold", tau = 0.5}']
    chosen = draw(st.lists(st.sampled_from(policies), min_size=1, max_size=3, unique=True))
    if tree and policies[2] not in chosen:  # a policy deep enough to grow the tree
        chosen.append(policies[2])
    overrides.append(f"policies=[{', '.join(chosen)}]")
    return overrides


def test_parts_sum_to_the_gpu_time_of_random_scenarios():
    """The property over random scenarios: every policy's parts sum to the steps' and prefills'
    durations (and, in a closed loop, to the end of the last pass), none is negative, a policy
    that drafted has a draft part and plain decoding none."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data):
        overrides = _random_overrides(data.draw)
        result = simspec.run(simspec.load_scenario(None, overrides), keep_logs=True)
        assert result.logs is not None
        for row in result.policies:
            parts = row.gpu_time_s.parts
            assert all(v >= 0 for v in parts.values()), (overrides, parts)
            durations, last_end = _closed_form_s(result.logs[row.label])
            total = math.fsum(parts.values())
            assert total == pytest.approx(durations, rel=1e-9, abs=0), (overrides, row.label)
            if not any(o.startswith("workload.loop") for o in overrides):
                assert total == pytest.approx(last_end, rel=1e-9, abs=0), (overrides, row.label)
            if row.mean_k > 0:
                assert parts["draft"] > 0, (overrides, row.label)
            if row.is_baseline:  # k = 0 never runs the drafter (a reading policy may, to decide)
                assert parts["draft"] == parts["speculation_overhead"] == 0.0, overrides

    check()
