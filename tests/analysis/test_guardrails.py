"""Guardrails: a warning when a run extrapolates a preset's fit or the best k is at the edge."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from simspec import catalog
from simspec.analysis import guardrails
from simspec.analysis.experiment import run_experiment
from simspec.analysis.guardrails import (
    K_AT_EDGE,
    PRESET_RANGE,
    WITHIN_ERROR,
    at_batch,
    best_k_at_edge,
    preset_range_warnings,
    speculative_accuracy,
    within_error_warning,
)
from simspec.analysis.recommend import recommend
from simspec.analysis.results import RunResult
from simspec.params.presets import EnginePreset
from simspec.params.ranges import FittedRange
from tests.analysis.test_recommend import replicated
from tests.helpers import tiny

#: A preset fitted on Qwen3 rows on H100 SXMs at TP 1-2, EP 1, batch 1-8; its speculative term
#: on speculative rows at TP 2 only.
FAKE = EnginePreset(
    name="sglang",
    pass_overhead_s=1e-3,
    verify_overhead_s=2e-3,
    draft_step_overhead_s=0.0,
    fitted_range=(
        FittedRange(
            terms=("pass_overhead_s",),
            rows=10,
            gpus=("h100-sxm",),
            families=("qwen3",),
            tp=(1, 2),
            ep=(1, 1),
            batch=(1, 8),
        ),
        FittedRange(
            terms=("verify_overhead_s", "draft_step_overhead_s"),
            rows=4,
            speculative=True,
            gpus=("h100-sxm",),
            families=("qwen3",),
            tp=(2, 2),
            ep=(1, 1),
            batch=(1, 8),
        ),
    ),
)


@pytest.fixture
def fake_preset(monkeypatch):
    real = catalog.get_engine
    monkeypatch.setattr(
        catalog, "get_engine", lambda name: FAKE if name == "sglang" else real(name)
    )


@pytest.fixture
def no_accuracy(monkeypatch):
    """No accuracy table: the tests of other warnings see no ``within-error`` one."""
    monkeypatch.setattr(catalog, "accuracy", lambda: {"engines": {}})


def _codes(warnings) -> list[str]:
    return [w.split(":")[0] for w in warnings]


def test_inside_the_fitted_rows_there_is_no_warning(fake_preset):
    scenario = tiny("engine.preset=sglang", "hardware.num_gpus=2")
    assert preset_range_warnings(scenario, batch=4, speculates=True) == []


@pytest.mark.parametrize(
    ("overrides", "batch", "named"),
    [
        (["hardware.gpu=h200"], 4, "GPU h200"),
        (["model.target=gpt-oss-120b", "model.drafter=eagle3-gpt-oss-120b"], 4, "family gpt-oss"),
        (["hardware.num_gpus=4"], 4, "TP 4"),
        (
            ["hardware.num_gpus=2", "hardware.tensor_parallel=1", "hardware.expert_parallel=2"],
            4,
            "EP 2",
        ),
        ([], 16, "batch 16"),
    ],
)
def test_each_dimension_outside_the_fitted_rows_is_named(fake_preset, overrides, batch, named):
    scenario = tiny("engine.preset=sglang", *overrides)
    warnings = preset_range_warnings(scenario, batch=batch, speculates=False)
    assert len(warnings) == 1 and warnings[0].startswith(f"{PRESET_RANGE}: ")
    assert named in warnings[0] and "pass_overhead_s" in warnings[0]
    assert "\n" not in warnings[0]


def test_data_parallel_attention_is_outside_rows_that_did_not_run_it(fake_preset, monkeypatch):
    """Experts beyond the tensor-parallel group (EP 2 over TP 1) run data-parallel attention: a
    preset fitted on no such row warns so, and one fitted on such rows does not."""
    scenario = tiny(
        "engine.preset=sglang",
        "hardware.num_gpus=2",
        "hardware.tensor_parallel=1",
        "hardware.expert_parallel=2",
    )
    (warning,) = preset_range_warnings(scenario, batch=4, speculates=False)
    assert "data-parallel attention" in warning
    wide = dataclasses.replace(FAKE.fitted_range[0], ep=(1, 2), attention_dp=True)
    dp_fitted = dataclasses.replace(FAKE, fitted_range=(wide,))
    monkeypatch.setattr(catalog, "get_engine", lambda name: dp_fitted)
    assert preset_range_warnings(scenario, batch=4, speculates=False) == []
    # The same GPUs at TP 2 with EP 2 run no data-parallel attention: the rows' TP 1-2 cover it.
    inside = tiny("engine.preset=sglang", "hardware.num_gpus=2", "hardware.expert_parallel=2")
    monkeypatch.setattr(catalog, "get_engine", lambda name: FAKE)
    assert all("data-parallel" not in w for w in preset_range_warnings(inside, 4, False))


def test_speculative_terms_count_only_when_the_run_speculates(fake_preset):
    scenario = tiny("engine.preset=sglang")  # TP 1: outside the speculative rows' TP 2
    assert preset_range_warnings(scenario, batch=4, speculates=False) == []
    (warning,) = preset_range_warnings(scenario, batch=4, speculates=True)
    assert "verify_overhead_s" in warning and "TP 1" in warning
    assert "draft_step_overhead_s" not in warning  # fitted to 0: it adds nothing


def test_a_measured_term_outside_the_rows_that_measured_it_says_so(monkeypatch):
    """A term measured directly (``measured = true``) names its measurement, not a fit; the
    shipped sglang preset's verify overhead was measured on one DeepSeek-V3 TP8 H200 row."""
    measured = dataclasses.replace(FAKE.fitted_range[1], rows=1, measured=True)
    preset = dataclasses.replace(FAKE, fitted_range=(FAKE.fitted_range[0], measured))
    monkeypatch.setattr(catalog, "get_engine", lambda name: preset)
    (warning,) = preset_range_warnings(tiny("engine.preset=sglang"), batch=4, speculates=True)
    assert "verify_overhead_s was measured on 1 speculative row (" in warning
    (fitted,) = preset_range_warnings(
        tiny("engine.preset=sglang", "hardware.gpu=h200"), batch=4, speculates=False
    )
    assert "pass_overhead_s was fitted on 10 rows (" in fitted
    monkeypatch.undo()
    shipped = [e for e in catalog.get_engine("sglang").fitted_range if e.measured]
    assert [e.terms for e in shipped] == [("verify_overhead_s",)]
    assert shipped[0].speculative and shipped[0].families == ("deepseek-v3",)


def test_a_term_the_scenario_sets_itself_is_not_the_presets(fake_preset):
    scenario = tiny("engine.preset=sglang", "hardware.gpu=h200", "costs.pass_overhead_s=0.002")
    assert preset_range_warnings(scenario, batch=4, speculates=False) == []


@pytest.mark.parametrize(("expert", "warns"), [("fp8", True), ("nvfp4", False), ("bf16", False)])
def test_the_shipped_trtllm_fp8_term_warns_only_a_run_with_fp8_experts(expert, warns):
    """TensorRT-LLM's per-layer term prices FP8 routed experts only: a B200 run (outside its
    Hopper rows) with FP8 experts leans on it, one with NVFP4 or bf16 experts does not."""
    assert catalog.get_engine("trtllm").fp8_moe_s_per_layer
    scenario = tiny(
        "engine.preset=trtllm", "hardware.gpu=b200", "hardware.num_gpus=2",
        f"model.expert_precision={expert}",
    )  # fmt: skip
    warnings = preset_range_warnings(scenario, batch=4, speculates=False)
    assert bool(warnings) is warns
    assert all("fp8_moe_s_per_layer" in w and "GPU b200" in w for w in warnings)


def test_the_physics_only_preset_never_warns():
    scenario = tiny("hardware.gpu=a100-sxm-80gb", "hardware.num_gpus=8")
    assert preset_range_warnings(scenario, batch=512, speculates=True) == []


def test_a_run_lists_its_warnings_in_the_json_the_same_each_time(fake_preset):
    scenario = tiny("engine.preset=sglang", "hardware.gpu=h200")
    first, second = run_experiment(scenario), run_experiment(scenario)
    assert _codes(first.warnings)[:1] == [PRESET_RANGE]
    assert first.to_json() == second.to_json()
    data = json.loads(first.to_json())
    assert data["warnings"] == list(first.warnings)
    assert RunResult.from_dict(data).warnings == first.warnings
    del data["warnings"]
    with pytest.raises(KeyError):  # a results file of an earlier version: no default
        RunResult.from_dict(data)


# -- the best k at the edge of the range searched --------------------------------------------


def test_best_k_at_the_largest_searched_warns():
    warning = best_k_at_edge([0, 1, 2, 3], [1.0, 1.2, 1.3, 1.4], limit=8)
    assert warning is not None and warning.startswith(f"{K_AT_EDGE}: ")
    assert "k = 3" in warning and "larger k may be faster" in warning
    at_limit = best_k_at_edge([0, 1, 2, 3], [1.0, 1.2, 1.3, 1.4], limit=3)
    assert at_limit is not None and "drafter's maximum" in at_limit


@pytest.mark.parametrize(
    ("ks", "speedups"),
    [
        ([0, 1, 2, 3], [1.0, 1.2, 1.4, 1.3]),  # interior optimum
        ([0, 1, 2], [1.0, 0.9, 0.8]),  # k = 0 best: the range's natural floor
        ([0, 1, 2], [1.0, 1.3, 1.3]),  # tie: the smaller k is the best
        ([3], [1.2]),  # nothing was searched
    ],
)
def test_best_k_inside_the_range_does_not_warn(ks, speedups):
    assert best_k_at_edge(ks, speedups) is None


def test_a_run_whose_best_fixed_k_is_the_largest_warns_and_one_inside_does_not(no_accuracy):
    low = tiny(
        "acceptance.alpha=0.9", policies=[{"name": "fixed", "draft_tokens": k} for k in (0, 1)]
    )
    edge = run_experiment(low)
    assert edge.get("fixed-1").speedup_vs_no_spec > 1  # premise: k = 1 beats k = 0
    assert _codes(edge.warnings) == [K_AT_EDGE]
    wide = tiny(
        "acceptance.alpha=0.5", policies=[{"name": "fixed", "draft_tokens": k} for k in (0, 2, 8)]
    )
    inside = run_experiment(wide)
    speedups = [inside.get(f"fixed-{k}").speedup_vs_no_spec for k in (0, 2, 8)]
    assert speedups[1] > max(speedups[0], speedups[2])  # premise: an interior optimum
    assert inside.warnings == ()


def test_recommend_warns_when_its_best_k_is_the_largest_searched():
    reps = 3
    rising = {k: np.full(reps, 1.0 + 0.1 * k) + 0.01 * np.arange(reps) for k in range(4)}
    rec = recommend(replicated(rising, {}, np.full(reps, 2.0)), batch=4, max_draft_tokens=8)
    assert rec.best_k == 3 and _codes(rec.warnings) == [K_AT_EDGE]
    assert rec.to_dict()["warnings"] == list(rec.warnings)
    peaked = {k: np.full(reps, 1.0 + 0.1 * min(k, 4 - k)) for k in range(5)}
    assert recommend(replicated(peaked, {}, np.full(reps, 2.0)), batch=4).warnings == ()


def test_warnings_print_once_each_on_one_line(capsys):
    guardrails.print_warnings(["a: x", "b: y", "a: x"])
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "simspec: warning: a: x\nsimspec: warning: b: y\n"


def _on_default_acceptance(*policies: int, stated: dict | None = None):
    """gpt-oss-120b with its EAGLE-3 head, whose catalog entry documents an acceptance length
    at (3, 1, 4); ``stated``: an [acceptance] table of the scenario's own instead."""
    from simspec.config.load import scenario_from_dict

    data = {
        "name": "default-acceptance",
        "seed": 1,
        "model": {"target": "gpt-oss-120b", "drafter": "eagle3-gpt-oss-120b"},
        "hardware": {"gpu": "h200"},
        "routing": {"overlap": 0.38},
        "workload": {"concurrency": 1, "num_requests": 2, "output_tokens": 48},
        "policies": [{"name": "fixed", "draft_tokens": k} for k in policies],
    }
    if stated is not None:
        data["acceptance"] = stated
    return scenario_from_dict(data, "default-acceptance.toml")


def test_a_depth_beyond_the_drafters_measured_default_warns():
    scenario = _on_default_acceptance(0, 3)
    drafter = scenario.drafter
    measured = drafter.default_acceptance_setting[0]
    assert drafter.default_acceptance_length and measured == 3  # premise: a documented default
    assert guardrails.acceptance_warning(scenario, measured) is None
    warning = guardrails.acceptance_warning(scenario, measured + 1)
    assert warning is not None
    assert warning.startswith(f"{guardrails.ACCEPTANCE_EXTRAPOLATED}: ")
    assert drafter.name in warning and "acceptance_length" in warning
    assert f"{drafter.default_acceptance_length:g}" in warning


def test_an_acceptance_the_scenario_states_never_counts_as_extrapolated():
    for stated in (
        {"acceptance_length": 2.6, "acceptance_setting": [3, 1, 4]},
        {"process": "iid", "alpha": 0.7},
    ):
        assert guardrails.acceptance_warning(_on_default_acceptance(0, 3, stated=stated), 8) is None


def test_a_run_whose_best_k_lies_beyond_the_measured_default_says_so():
    result = run_experiment(_on_default_acceptance(0, 5))
    assert result.get("fixed-5").speedup_vs_no_spec > 1  # premise: k = 5 is the best of the two
    assert guardrails.ACCEPTANCE_EXTRAPOLATED in _codes(result.warnings)
    inside = run_experiment(_on_default_acceptance(0, 2))
    assert guardrails.ACCEPTANCE_EXTRAPOLATED not in _codes(inside.warnings)


def test_a_changed_copy_keeps_its_default_acceptance_unless_the_acceptance_changes():
    from simspec.config.load import with_overrides

    scenario = _on_default_acceptance(0, 3)
    name = scenario.drafter.name
    batch = with_overrides(scenario, {"workload.concurrency": 2, "policies[1].draft_tokens": 5})
    assert batch.acceptance_fit is not None and batch.acceptance_fit.default_of == name
    assert guardrails.acceptance_warning(batch, 5) is not None
    for changed in ({"acceptance.alpha": 0.5}, ["acceptance.alpha=0.5"], {"speculation.topk": 2}):
        assert with_overrides(scenario, changed).acceptance_fit is None, changed


# -- the within-error guardrail -------------------------------------------------------------

#: A table whose sglang entry is 30 % (enough rows and reporters), vllm's too thin to stand
#: alone (the pooled 10 % stands for it), and the physics-only preset 50 %.
TABLE = {
    "engines": {
        "sglang": {"speculative": {"rows": 12, "reporters": 3, "median_abs_relative_error": 0.3,
                                   "wrong_signs": 2, "signs_checked": 10}},
        "vllm": {"speculative": {"rows": 2, "reporters": 1, "median_abs_relative_error": 0.9,
                                 "wrong_signs": 0, "signs_checked": 2}},
        "all": {"speculative": {"rows": 20, "reporters": 5, "median_abs_relative_error": 0.1,
                                "wrong_signs": 0, "signs_checked": 0}},
        "ideal": {"speculative": {"rows": 20, "reporters": 5, "median_abs_relative_error": 0.5,
                                  "wrong_signs": 4, "signs_checked": 18}},
    }
}  # fmt: skip


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(catalog, "accuracy", lambda: TABLE)


@pytest.mark.parametrize(
    ("speedup", "warns"),
    [
        (1.25, True),  # 1.25 / 1.3 < 1: a typical overprediction would make it a loss
        (1.31, False),  # 1.31 / 1.3 > 1: a gain even then
        (0.75, True),  # 0.75 / 0.7 > 1: a typical underprediction would make it a gain
        (0.69, False),  # 0.69 / 0.7 < 1: a loss even then
        (1.0, True),
    ],
)
def test_a_speedup_within_the_presets_typical_error_warns(table, speedup, warns):
    warning = within_error_warning(tiny("engine.preset=sglang"), "fixed-3", speedup)
    assert (warning is not None) == warns
    if warning:
        assert warning.startswith(f"{WITHIN_ERROR}: ") and "\n" not in warning
        assert "fixed-3" in warning and "30%" in warning and "12 published rows" in warning
        assert "2 of 10" in warning


def test_a_preset_with_too_few_held_out_rows_falls_back_on_the_pooled_errors(table):
    entry, scope = speculative_accuracy("vllm")
    assert entry["median_abs_relative_error"] == 0.1 and "pooled" in scope
    assert within_error_warning(tiny("engine.preset=vllm"), "fixed-3", 1.15) is None  # > 1.1
    assert within_error_warning(tiny("engine.preset=vllm"), "fixed-3", 1.05) is not None
    entry, scope = speculative_accuracy("ideal")
    assert entry["median_abs_relative_error"] == 0.5 and scope == "physics only"


def test_at_batch_one_the_batch_one_rows_stand_and_their_lean_is_named(monkeypatch):
    """At batch 1 the errors of the rows measured at batch 1 stand for the preset (its own
    where there are enough, else the pooled ones), and the text names which way they lean; at
    another batch, or with too few batch-1 rows, the preset's errors stand as before."""
    one = {"rows": 9, "reporters": 3, "median_abs_relative_error": 0.2,
           "median_relative_error": 0.15, "wrong_signs": 1, "signs_checked": 8}  # fmt: skip
    table = {"engines": {
        "sglang": {"speculative": {**TABLE["engines"]["all"]["speculative"], "rows": 12,
                                   "reporters": 3, "batch_one": {**one, "reporters": 1}}},
        "all": {"speculative": {**TABLE["engines"]["all"]["speculative"], "batch_one": one}},
    }}  # fmt: skip
    monkeypatch.setattr(catalog, "accuracy", lambda: table)
    scenario = tiny("engine.preset=sglang")
    # 1.15 / 1.1 > 1 with the preset's 10 %, but 1.15 / 1.2 < 1 with the batch-1 rows' 20 %.
    assert within_error_warning(scenario, "fixed-3", 1.15) is None
    assert within_error_warning(scenario, "fixed-3", 1.15, batch=8) is None
    warning = within_error_warning(scenario, "fixed-3", 1.15, batch=1)
    assert warning is not None and "rows at batch 1" in warning and "pooled" in warning
    assert "20%" in warning and "9 published rows from 3 reporters" in warning
    assert "a median 15% above the measured speedup" in warning
    # The preset's own batch-1 rows, from enough reporters, stand before the pooled ones.
    table["engines"]["sglang"]["speculative"]["batch_one"]["reporters"] = 2
    entry, scope = speculative_accuracy("sglang", 1)
    assert entry["reporters"] == 2 and scope == "the sglang preset, out of sample, rows at batch 1"
    # A run at batch 1 passes its batch on: the run's warning uses the batch-1 rows.
    policies = [{"name": "fixed", "draft_tokens": k} for k in (0, 2)]
    run = run_experiment(tiny("engine.preset=sglang", "workload.concurrency=1",
                              "acceptance.alpha=0.5", policies=policies))  # fmt: skip
    best = max(p.speedup_vs_no_spec for p in run.policies if p.mean_k > 0)
    assert 1.1 < best < 1.2  # premise: outside the preset's 10 %, within the batch-1 rows' 20 %
    assert [w for w in run.warnings if w.startswith(WITHIN_ERROR) and "rows at batch 1" in w]


def test_no_table_no_warning(monkeypatch):
    monkeypatch.setattr(catalog, "accuracy", lambda: {"engines": {}})
    assert within_error_warning(tiny("engine.preset=sglang"), "fixed-3", 1.0) is None


def test_a_run_lists_the_warning_when_its_best_drafting_policy_gains_little(table):
    policies = [{"name": "fixed", "draft_tokens": k} for k in (0, 1, 3)]
    weak = run_experiment(tiny("engine.preset=sglang", "acceptance.alpha=0.3", policies=policies))
    best = max(p.speedup_vs_no_spec for p in weak.policies if p.mean_k > 0)
    assert 0.7 < best < 1.3  # premise: within sglang's 30 %
    assert [w for w in weak.warnings if w.startswith(WITHIN_ERROR)]
    strong = run_experiment(tiny("engine.preset=sglang", "acceptance.alpha=0.9",
                                 "costs.pass_overhead_s=0.02", policies=policies))  # fmt: skip
    best = max(p.speedup_vs_no_spec for p in strong.policies if p.mean_k > 0)
    assert best > 1.3  # premise: high acceptance and a large per-pass cost make drafting pay
    assert not [w for w in strong.warnings if w.startswith(WITHIN_ERROR)]


def test_a_recommendation_names_the_batch_of_its_within_error_warning():
    assert at_batch(f"{WITHIN_ERROR}: the best", 8) == f"{WITHIN_ERROR}: at batch 8, the best"
    assert at_batch(f"{K_AT_EDGE}: the best", 2) == f"{K_AT_EDGE}: at batch 2, the best"
    assert at_batch(f"{PRESET_RANGE}: the preset", 8) == f"{PRESET_RANGE}: the preset"


def test_a_run_priced_from_a_calibration_profile_gets_no_within_error_warning(table):
    profile = Path(__file__).resolve().parents[2] / "calibration" / "h100-sxm-analytic.json"
    scenario = tiny("engine.preset=sglang", f'costs.profile="{profile}"')
    assert scenario.profile is not None  # premise: the run is priced from the profile
    assert within_error_warning(scenario, "fixed-3", 1.0) is None
    assert within_error_warning(tiny("engine.preset=sglang"), "fixed-3", 1.0) is not None


# -- the published-miss guardrail -------------------------------------------------------------


def _miss(rows: int, error: float) -> dict:
    return {"rows": rows, "reporters": 1, "median_abs_relative_error": error,
            "wrong_signs": 0, "signs_checked": 0, "faster": rows}  # fmt: skip


#: Qwen3-30B-A3B on H100 at TP 2: the sglang preset misses decode rows by 40 % and speculative
#: ones by 20 % (below the threshold); at TP 1 only two rows, each missed by 90 %.
PUBLISHED = {
    "engines": {},
    "published": {
        guardrails.published_key("qwen3-30b-a3b", "h100-sxm", 2): {
            "sglang": {"decode": _miss(5, 0.4), "speculative": _miss(6, 0.2)},
            "ideal": {"speculative": _miss(6, 0.5)},
        },
        guardrails.published_key("qwen3-30b-a3b", "h100-sxm", 1): {
            "sglang": {"decode": _miss(2, 0.9)},
        },
    },
}


@pytest.fixture
def published(monkeypatch):
    monkeypatch.setattr(catalog, "accuracy", lambda: PUBLISHED)


def test_an_unset_tensor_parallel_degree_is_every_gpu_for_the_published_rows(published):
    """``tensor_parallel = 0`` (the default) means TP over every GPU: the run reads the rows of
    that degree, as one that states it does."""
    stated = guardrails.published_miss_warnings(
        tiny("engine.preset=sglang", "hardware.num_gpus=2", "hardware.tensor_parallel=2"), False
    )
    unset = guardrails.published_miss_warnings(
        tiny("engine.preset=sglang", "hardware.num_gpus=2"), False
    )
    assert len(stated) == 1 and unset == stated


def test_published_rows_of_the_runs_model_gpu_and_degree_that_simspec_misses_warn(published):
    """Only the entry of the run's model, GPU, TP degree and preset counts; a category warns
    at a median miss of at least PUBLISHED_MISS_ERROR over PUBLISHED_MIN_ROWS rows or more;
    speculative rows only when the run speculates."""
    tp2 = ("hardware.num_gpus=2", "hardware.tensor_parallel=2")
    (decode,) = guardrails.published_miss_warnings(tiny("engine.preset=sglang", *tp2), True)
    assert decode.startswith(f"{guardrails.PUBLISHED_MISS}: ") and "decode step times" in decode
    assert "at TP 2 with the sglang preset" in decode and "median 40%" in decode
    assert "5 rows, 1 reporter; 5 predicted faster" in decode and "\n" not in decode
    (spec,) = guardrails.published_miss_warnings(tiny(*tp2), True)  # ideal: 50 % speculative
    assert "speculative speedups" in spec and "ideal preset" in spec
    assert guardrails.published_miss_warnings(tiny(*tp2), False) == []  # plain decoding only
    assert guardrails.published_miss_warnings(tiny("engine.preset=sglang"), True) == []  # 2 rows
    assert guardrails.published_miss_warnings(tiny("engine.preset=vllm", *tp2), True) == []
    assert guardrails.PUBLISHED_MIN_ROWS == 3 and guardrails.PUBLISHED_MISS_ERROR == 0.30


def test_a_run_lists_the_published_miss_and_a_calibrated_run_does_not(published):
    tp2 = ("engine.preset=sglang", "hardware.num_gpus=2", "hardware.tensor_parallel=2")
    result = run_experiment(tiny(*tp2))
    assert guardrails.PUBLISHED_MISS in _codes(result.warnings)
    assert guardrails.PUBLISHED_MISS in _codes(guardrails.planned_warnings(tiny(*tp2)))
    profile = Path(__file__).resolve().parents[2] / "calibration" / "h100-sxm-analytic.json"
    calibrated = tiny(*tp2, f'costs.profile="{profile}"')
    assert guardrails.published_miss_warnings(calibrated, True) == []


def test_the_shipped_table_names_the_misses_the_report_shows():
    """The catalog's ``published`` entries are those of validation/REPORT.md's rows: e.g.
    gpt-oss-120b on one MI300X with vLLM (InferenceX PR #1061, predicted about twice too fast
    at concurrency 64-256) is missed by more than the threshold, every row predicted faster."""
    table = catalog.accuracy()["published"]
    entry = table[guardrails.published_key("gpt-oss-120b", "mi300x", 1)]["vllm"]["decode"]
    assert entry["rows"] == 4 and entry["faster"] == 4
    assert entry["median_abs_relative_error"] >= guardrails.PUBLISHED_MISS_ERROR
    fine = table[guardrails.published_key("gpt-oss-120b", "h100-sxm", 8)]["vllm"]["decode"]
    assert fine["median_abs_relative_error"] < 0.15  # SemiAnalysis's TP8 rows: predicted well
    # The README's other examples: DeepSeek-V3 at TP8 on H100 (vLLM, physics only) and
    # Qwen3-235B-A22B at TP4 on GB200.
    for model, gpu, tp, presets in (
        ("deepseek-v3", "h100-sxm", 8, ("vllm", "ideal")),
        ("qwen3-235b-a22b", "gb200", 4, ("trtllm", "ideal")),
    ):
        for preset in presets:
            miss = table[guardrails.published_key(model, gpu, tp)][preset]["decode"]
            assert miss["rows"] >= guardrails.PUBLISHED_MIN_ROWS, (model, preset)
            assert miss["median_abs_relative_error"] >= guardrails.PUBLISHED_MISS_ERROR


#: PUBLISHED with pooled rows of NVIDIA GPUs: the sglang preset misses 9 of them by 45 %,
#: vllm misses 2 by 90 % (too few to warn), physics only misses 9 by 10 %; at TP 4 the run's
#: own model, GPU and degree have 4 rows missed by 10 %.
POOLED = {
    "engines": {},
    "published": {
        **PUBLISHED["published"],
        guardrails.published_key("qwen3-30b-a3b", "h100-sxm", 4): {
            "sglang": {"decode": _miss(4, 0.1)},
        },
        "maker:NVIDIA": {
            "sglang": {"decode": _miss(9, 0.45)},
            "vllm": {"decode": _miss(2, 0.9)},
            "ideal": {"decode": _miss(9, 0.1)},
        },
    },
}


def test_a_maker_s_published_rows_stand_in_where_the_runs_own_are_too_few(monkeypatch):
    """With fewer than PUBLISHED_MIN_ROWS rows of the run's model, GPU and degree, the rows of
    every model on the GPU's maker decide (and the warning says so); with enough rows of its
    own, the run's own decide, warning or not."""
    monkeypatch.setattr(catalog, "accuracy", lambda: POOLED)
    assert guardrails.maker_key(catalog.get_gpu("h100-sxm").display_name) == "maker:NVIDIA"
    (pooled,) = guardrails.published_miss_warnings(tiny("engine.preset=sglang"), False)  # TP 1
    assert "on NVIDIA GPUs (every published model and degree) with the sglang preset" in pooled
    assert "median 45%" in pooled and "9 rows, 1 reporter" in pooled
    tp2 = ("hardware.num_gpus=2", "hardware.tensor_parallel=2")
    (own,) = guardrails.published_miss_warnings(tiny("engine.preset=sglang", *tp2), False)
    assert "for qwen3-30b-a3b on h100-sxm at TP 2" in own and "median 40%" in own
    tp4 = ("engine.preset=sglang", "hardware.num_gpus=4", "hardware.tensor_parallel=4")
    assert guardrails.published_miss_warnings(tiny(*tp4), False) == []  # its own 4 rows: 10 %
    assert guardrails.published_miss_warnings(tiny("engine.preset=vllm"), False) == []  # 2 rows
    assert guardrails.published_miss_warnings(tiny(), False) == []  # ideal: 10 %


def test_the_shipped_table_pools_amd_s_rows_and_an_unpublished_amd_run_is_warned():
    """Every published decode row on AMD GPUs (InferenceX's ROCm runs) is predicted faster
    than measured, physics only; a run of a model with no AMD row of its own on an MI300X is
    warned by the pooled rows, and the same run on an H100 is not."""
    table = catalog.accuracy()["published"]
    amd = table["maker:AMD"]["ideal"]["decode"]
    assert amd["rows"] >= 30 and amd["faster"] == amd["rows"]
    assert amd["median_abs_relative_error"] >= guardrails.PUBLISHED_MISS_ERROR
    nvidia = [e for entry in table["maker:NVIDIA"].values() for e in entry.values()]
    assert nvidia and all(  # CHANGES: no NVIDIA run gains a warning from the pooled rows
        e["median_abs_relative_error"] < guardrails.PUBLISHED_MISS_ERROR for e in nvidia
    )
    for preset in ("ideal", "sglang", "vllm"):  # README: every such run on an AMD GPU
        run = tiny('hardware.gpu="mi300x"', f"engine.preset={preset}")
        (warning,) = guardrails.published_miss_warnings(run, False)
        assert f"on AMD GPUs (every published model and degree) with the {preset} preset" in (
            warning
        )
        assert guardrails.published_miss_warnings(tiny(f"engine.preset={preset}"), False) == []


def test_the_catalog_forgets_its_parsed_entries_when_asked():
    """After a command rewrote catalog files it reads them again (``forget_parsed``)."""
    catalog.get_engine("sglang")
    assert catalog._entry.cache_info().currsize > 0
    catalog.forget_parsed()
    assert catalog._entry.cache_info().currsize == 0
    assert catalog.get_engine("sglang").name == "sglang"


def _on_custom_gpu(num_gpus: int, cuda_graphs: bool = True, **gpu):
    """A scenario on an inline GPU (``[hardware.custom]``) with the given keys; kernel floors as
    a catalog GPU's unless ``gpu`` sets them."""
    from simspec.config.load import scenario_from_dict

    spec = {
        "memory_bytes": 8e10,
        "hbm_bytes_per_s": 3e12,
        "bf16_flops_per_s": 9e14,
        "kernel_floor_graph_s": 2.37e-6,
        "kernel_floor_eager_s": 6e-6,
        **gpu,
    }
    data = {
        "name": "custom-gpu",
        "model": {"target": "qwen3-30b-a3b"},
        "hardware": {"custom": spec, "num_gpus": num_gpus},
        "engine": {"cuda_graphs": cuda_graphs},
        "workload": {"concurrency": 1, "num_requests": 2, "output_tokens": 8},
        "policies": [{"name": "fixed", "draft_tokens": 0}],
    }
    return scenario_from_dict(data, "custom-gpu.toml")


@pytest.mark.parametrize(
    "num_gpus, gpu, warns",
    [
        (2, {}, True),  # split over GPUs that state nothing: all-reduces cost nothing
        (2, {"link_bytes_per_s": 4.5e11}, True),  # bytes over the link only
        (2, {"collective_latency_s": 6.6e-6}, False),
        (2, {"custom_allreduce_latency_s": 3.6e-6, "custom_allreduce_bytes_per_s": 3e10}, False),
        (1, {}, False),  # one GPU: no collective
    ],
)
def test_a_split_run_on_a_gpu_without_collective_costs_warns(num_gpus, gpu, warns):
    scenario = _on_custom_gpu(num_gpus, **gpu)
    found = [w for w in guardrails.gpu_warnings(scenario) if w.startswith("collectives")]
    assert bool(found) is warns
    assert (
        guardrails.COLLECTIVES_UNPRICED in _codes(guardrails.planned_warnings(scenario))
    ) is warns
    if warns:
        assert "custom-gpu" in found[0] and f"across {num_gpus} GPUs" in found[0]
        assert ("bytes over the link" in found[0]) is bool(gpu.get("link_bytes_per_s"))


@pytest.mark.parametrize(
    "floors, graphs, warns",
    [
        ({"kernel_floor_graph_s": 0.0}, True, True),
        ({"kernel_floor_graph_s": 0.0}, False, False),  # eager: its own floor is stated
        ({"kernel_floor_eager_s": 0.0, "kernel_floor_graph_s": 0.0}, False, True),
        ({}, True, False),
    ],
)
def test_a_gpu_without_the_runs_kernel_floor_warns(floors, graphs, warns):
    scenario = _on_custom_gpu(1, cuda_graphs=graphs, **floors)
    assert scenario.roofline.cuda_graphs is graphs
    found = [w for w in guardrails.gpu_warnings(scenario) if w.startswith("kernels")]
    assert bool(found) is warns
    if warns:
        key = "kernel_floor_graph_s" if graphs else "kernel_floor_eager_s"
        assert key in found[0] and "custom-gpu" in found[0]
    # every catalog GPU states both floors: no catalog run warns
    assert not guardrails.gpu_warnings(tiny())


@pytest.mark.parametrize(
    "gpu, num_gpus, layout, warns",
    [
        ("h100-sxm", 8, {}, False),  # one HGX node
        ("h100-sxm", 16, {}, True),  # two: the TP all-reduces cross the NICs
        ("h100-sxm", 16, {"tensor_parallel": 8, "expert_parallel": 16}, True),  # all-to-alls
        ("h100-sxm", 16, {"tensor_parallel": 8}, False),  # replicas of TP8: none crosses
        ("gb200", 16, {}, False),  # inside one NVL72 NVLink domain
        ("gb200", 128, {"tensor_parallel": 8, "expert_parallel": 128}, True),
    ],
)
def test_a_run_over_more_gpus_than_one_node_joins_warns(gpu, num_gpus, layout, warns):
    """The catalog states how many GPUs one node's fabric joins (8 on an HGX board, 72 in a
    GB200 NVL72 rack); a run whose tensor- or expert-parallel group spans more is priced as if
    one node held them all, and says so in the planned and the run's warnings; data-parallel
    replicas of a group inside one node do not count."""
    from simspec.config.load import scenario_from_dict

    data = {
        "name": "nodes",
        "model": {"target": "qwen3-30b-a3b"},
        "hardware": {"gpu": gpu, "num_gpus": num_gpus, **layout},
        "workload": {"concurrency": 1, "num_requests": 2, "output_tokens": 8},
        "policies": [{"name": "fixed", "draft_tokens": 0}],
    }
    scenario = scenario_from_dict(data, "nodes.toml")
    found = [w for w in guardrails.gpu_warnings(scenario) if w.startswith("multi-node")]
    assert bool(found) is warns
    assert (guardrails.MULTI_NODE in _codes(guardrails.planned_warnings(scenario))) is warns
    if warns:
        node = catalog.get_gpu(gpu).node_gpus
        assert found[0].startswith(f"multi-node: collectives over {num_gpus} {gpu} GPUs span ")
        assert f"more than one node's {node} " in found[0]
        assert "lower bound" in found[0]
        result = run_experiment(scenario)
        assert any(w.startswith("multi-node: ") for w in result.warnings)


def test_a_ttft_objective_warns_that_the_simulated_ttft_is_a_lower_bound(monkeypatch):
    """With ``[slo] ttft_ms`` set and published TTFTs in the accuracy table, the planned and
    the run's warnings say so with the table's numbers; without a TTFT target, or without
    such rows, nothing."""
    table = {
        "engines": {},
        "ttft": {
            "rows": 5,
            "predicted_rows": 5,
            "median_abs_relative_error": 0.7,
            "predicted_below_measured": 5,
        },
    }
    monkeypatch.setattr(catalog, "accuracy", lambda: table)
    scenario = tiny("slo.ttft_ms=200")
    (warning,) = guardrails.ttft_warnings(scenario)
    assert warning.startswith("ttft-lower-bound: slo.ttft_ms = 200 ")
    assert "5 published serving runs it was a median 70% off, 5 of them below" in warning
    assert warning in guardrails.planned_warnings(scenario)
    result = run_experiment(scenario)
    assert warning in result.warnings
    assert guardrails.ttft_warnings(tiny("slo.tpot_ms=50")) == []
    monkeypatch.setattr(catalog, "accuracy", lambda: {"engines": {}})
    assert guardrails.ttft_warnings(scenario) == []


def test_the_shipped_accuracy_table_holds_the_ttft_rows():
    ttft = catalog.accuracy()["ttft"]
    assert ttft["predicted_rows"] >= 50 and 0 < ttft["median_abs_relative_error"] < 1
