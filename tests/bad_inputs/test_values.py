"""Bad values (issue 13, 2 and 4): every physical input has a range; validate = run.

A value outside its documented range (``simspec.schema.param`` bounds) is rejected with exit 2
naming the file, the key, the range and the value; nothing a run would reject passes
``validate`` or a sweep's expansion; a non-finite metric is an internal error naming it.
"""

from __future__ import annotations

import math

import pytest

from simspec.analysis.results import GpuTime, NonFiniteResult, PolicyResult, gpu_time_parts

from .rejects import assert_rejected, scenario, write_scenario

OPEN = {"workload.loop": "open"}

#: id -> (edits, key path, fragment of "expected ...")
OUT_OF_RANGE: dict[str, tuple[dict, str, str]] = {
    "pass_overhead 1e308": ({"costs.pass_overhead_s": 1e308}, "costs.pass_overhead_s", "< 1"),
    "pass_overhead 1.5 s": ({"costs.pass_overhead_s": 1.5}, "costs.pass_overhead_s", "< 1"),
    "pass_overhead negative": ({"costs.pass_overhead_s": -1e-9}, "costs.pass_overhead_s", ">= 0"),
    "draft_step_overhead 2 s": (
        {"costs.draft_step_overhead_s": 2.0},
        "costs.draft_step_overhead_s",
        "< 1",
    ),
    "moe_efficiency_max 5e-324": (
        {"costs.moe_efficiency_max": 5e-324},
        "costs.moe_efficiency_max",
        ">= 0.002",
    ),
    "moe_efficiency_max 1.5": (
        {"costs.moe_efficiency_max": 1.5},
        "costs.moe_efficiency_max",
        "<= 1",
    ),
    "weight_efficiency 5e-324": (
        {"costs.weight_efficiency": 5e-324},
        "costs.weight_efficiency",
        ">= 0.002",
    ),
    "kv_efficiency -0.0": ({"costs.kv_efficiency": -0.0}, "costs.kv_efficiency", ">= 0.002"),
    "kv_efficiency nan": ({"costs.kv_efficiency": math.nan}, "costs.kv_efficiency", "<= 1"),
    "compute_efficiency 1e-300": (
        {"costs.compute_efficiency": 1e-300},
        "costs.compute_efficiency",
        ">= 0.002",
    ),
    "compute_efficiency inf": (
        {"costs.compute_efficiency": math.inf},
        "costs.compute_efficiency",
        "<= 1",
    ),
    "moe_saturation_bytes 1.7e308": (
        {"costs.moe_saturation_bytes": 1.7e308},
        "costs.moe_saturation_bytes",
        "<= 1e+11",
    ),
    "moe_saturation_bytes 0.5": (
        {"costs.moe_saturation_bytes": 0.5},
        "costs.moe_saturation_bytes",
        ">= 1",
    ),
    "comm_s_per_layer 1 s": ({"costs.comm_s_per_layer": 1.0}, "costs.comm_s_per_layer", "< 0.01"),
    "arrival_rate 5e-324": (
        {**OPEN, "workload.arrival_rate_per_s": 5e-324},
        "workload.arrival_rate_per_s",
        ">= 0.001",
    ),
    "arrival_rate 1e-300": (
        {**OPEN, "workload.arrival_rate_per_s": 1e-300},
        "workload.arrival_rate_per_s",
        ">= 0.001",
    ),
    "arrival_rate 1e7": (
        {**OPEN, "workload.arrival_rate_per_s": 1e7},
        "workload.arrival_rate_per_s",
        "<= 1e+06",
    ),
    "arrival span beyond 1e7 s": (
        {**OPEN, "workload.arrival_rate_per_s": 0.002, "workload.num_requests": 100_000},
        "workload.arrival_rate_per_s",
        "within 1e+07 s",
    ),
    "max_batch_size 1e6": (
        {"workload.max_batch_size": 1_000_000},
        "workload.max_batch_size",
        "<= 65536",
    ),
    "prompt_tokens 1e9": ({"workload.prompt_tokens": 10**9}, "workload.prompt_tokens", "<= 1000"),
    "output_tokens 1e8": ({"workload.output_tokens": 10**8}, "workload.output_tokens", "<= 1000"),
    "memory_utilization 5e-324": (
        {"hardware.memory_utilization": 5e-324},
        "hardware.memory_utilization",
        ">= 0.05",
    ),
    "confidence_concentration 1e308": (
        {"acceptance.confidence_concentration": 1e308},
        "acceptance.confidence_concentration",
        "<= 10000",
    ),
    "confidence_concentration 5e-324": (
        {"acceptance.confidence_concentration": 5e-324},
        "acceptance.confidence_concentration",
        ">= 0.01",
    ),
    "zipf_exponent 1e308": (
        {"routing.popularity": "zipf", "routing.zipf_exponent": 1e308},
        "routing.zipf_exponent",
        "<= 10",
    ),
    "dirichlet_concentration 5e-324": (
        {"routing.popularity": "dirichlet", "routing.dirichlet_concentration": 5e-324},
        "routing.dirichlet_concentration",
        ">= 0.001",
    ),
    "efficiency as a string 'nan'": (
        {"costs.kv_efficiency": "nan"},
        "costs.kv_efficiency",
        "a number",
    ),
}


@pytest.mark.parametrize("case", sorted(OUT_OF_RANGE), ids=sorted(OUT_OF_RANGE))
@pytest.mark.parametrize("command", ["run", "validate"])
def test_out_of_range_value_is_rejected(tmp_path, capsys, case, command):
    edits, key, expected = OUT_OF_RANGE[case]
    path = write_scenario(tmp_path, scenario(edits))
    argv = [command, str(path)] + (
        ["--json", str(tmp_path / "out.json")] if command == "run" else []
    )
    assert_rejected(capsys, argv, tmp_path, [str(path), f"{key}: expected", expected, "found"])


POLICY_PARAMS = {
    "cost_aware margin 1e308": ({"name": "cost_aware", "margin": 1e308}, "margin", "<= 100"),
    "adaptive_ema warmup 1e12": (
        {"name": "adaptive_ema", "warmup_steps": 10**12},
        "warmup_steps",
        "<= 1000000",
    ),
    "adaptive_ema hysteresis 1e308": (
        {"name": "adaptive_ema", "down_hysteresis": 1e308},
        "down_hysteresis",
        "<= 64",
    ),
    "batch_table batch size 1e9": (
        {"name": "batch_table", "batch_sizes": [1, 10**9], "draft_tokens": [3, 0]},
        "batch_sizes[1]",
        "<= 65536",
    ),
}


@pytest.mark.parametrize("case", sorted(POLICY_PARAMS), ids=sorted(POLICY_PARAMS))
def test_out_of_range_policy_parameter_is_rejected(tmp_path, capsys, case):
    policy, key, expected = POLICY_PARAMS[case]
    path = write_scenario(tmp_path, scenario({"policies": [policy]}))
    argv = ["run", str(path), "--json", str(tmp_path / "out.json")]
    assert_rejected(capsys, argv, tmp_path, [str(path), f"policies[0].{key}", expected])


def test_out_of_range_value_through_set_is_rejected(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario())
    argv = ["run", str(path), "--set", "costs.pass_overhead_s=1e308", "--json", str(tmp_path / "o")]
    assert_rejected(capsys, argv, tmp_path, [str(path), "costs.pass_overhead_s", "1e+308"])


# -- validate = run (issue 13, 4) -----------------------------------------------------------------

INFEASIBLE_ROUTING = {
    "overlaps 0.1 0.9 0.95": ({"routing.overlaps": [0.1, 0.9, 0.95]}, "routing.overlaps"),
    "overlaps 0.9 0.1": ({"routing.overlaps": [0.9, 0.1]}, "routing.overlaps"),
    "analytic overlaps 0.1 0.9 0.95": (
        {"routing.mode": "analytic", "routing.overlaps": [0.1, 0.9, 0.95]},
        "routing.overlaps",
    ),
    "zipf 3 with overlap 0": (
        {"routing.popularity": "zipf", "routing.zipf_exponent": 3.0, "routing.overlap": 0.0},
        "routing.overlap",
    ),
}


@pytest.mark.parametrize("case", sorted(INFEASIBLE_ROUTING), ids=sorted(INFEASIBLE_ROUTING))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_unreachable_routing_statistics_fail_validate_like_run(tmp_path, capsys, case, command):
    edits, key = INFEASIBLE_ROUTING[case]
    data = scenario(edits, drop=["routing.overlap"] if "routing.overlap" not in edits else ())
    path = write_scenario(tmp_path, data)
    argv = [command, str(path)] + (["--json", str(tmp_path / "o.json")] if command == "run" else [])
    assert_rejected(
        capsys, argv, tmp_path, [str(path), f"{key}: expected", "a top-k router can have"]
    )


def test_sweep_with_one_unreachable_point_fails_before_running(tmp_path, capsys):
    data = scenario(drop=["routing.overlap"])
    data["sweep"] = {
        "grid": {"routing.overlaps": [[0.3], [0.3, 0.2], [0.1, 0.9, 0.95], [0.4], [0.5], [0.6]]}
    }
    path = write_scenario(tmp_path, data)
    out = tmp_path / "sweep"
    assert_rejected(
        capsys,
        ["sweep", str(path), "--out", str(out)],
        tmp_path,
        [str(path), "routing.overlaps", "0.1, 0.9, 0.95", "a top-k router can have"],
    )
    assert not out.exists()


# -- finite results -------------------------------------------------------------------------------


def _row(**changes: float) -> dict:
    values = dict.fromkeys(
        (
            "tokens_per_s",
            "tpot_ms",
            "ttft_ms",
            "acceptance_length",
            "acceptance_rate",
            "mean_k",
            "verify_over_decode",
            "unique_experts_per_layer",
            "speedup_vs_no_spec",
            *(f"{m}_p{q}_ms" for m in ("tpot", "ttft") for q in (50, 90, 99)),
        ),
        1.0,
    )
    values.update(changes)
    return values


@pytest.mark.parametrize("metric", ["tpot_ms", "tokens_per_s", "speedup_vs_no_spec"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_metric_is_an_internal_error_naming_it(metric, bad):
    with pytest.raises(NonFiniteResult, match=rf"fixed-3: {metric} is"):
        PolicyResult(
            name="fixed",
            label="fixed-3",
            params={},
            gpu_time_s=GpuTime(dict.fromkeys(gpu_time_parts(), 1.0)),
            requests=1,
            tokens=2,
            cost_fallbacks=0,
            **_row(**{metric: bad}),
        )


def test_a_non_finite_gpu_time_is_an_internal_error_naming_it():
    with pytest.raises(NonFiniteResult, match=r"gpu_time_s\.verify_overhead"):
        PolicyResult(
            name="fixed",
            label="fixed-3",
            params={},
            gpu_time_s=GpuTime(
                dict.fromkeys(gpu_time_parts(), 1.0) | {"verify_overhead": math.inf}
            ),
            requests=1,
            tokens=2,
            cost_fallbacks=0,
            **_row(),
        )
