"""Calibration profiles: shipped analytic profiles, validation errors, scenario integration."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec import catalog
from simspec.calibrate import analytic_profile
from simspec.cli import main
from simspec.errors import InputError, ScenarioError
from simspec.params import SCENARIO_OWNED_KEYS, RooflineParams
from simspec.profile import (
    GridTable,
    ProfileError,
    StackMeasurement,
    canonical_sha256,
    load_profile,
    parse_profile_text,
    profile_from_dict,
    profile_json,
)
from simspec.schema import to_dict
from tests.helpers import simulate, tiny

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {
    "h100-sxm": ROOT / "calibration" / "h100-sxm-analytic.json",
    "h200": ROOT / "calibration" / "h200-analytic.json",
}
TINY_RUN = ["--set", "workload.num_requests=2", "--set", "workload.output_tokens=8"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    """An analytic H100 profile with synthetic roofline tables for Qwen3-30B-A3B (quick grid)."""
    data = analytic_profile(
        catalog.get_gpu("h100-sxm"), model=catalog.get_model("qwen3-30b-a3b"), quick=True
    )
    path = tmp_path_factory.mktemp("profiles") / "synthetic.json"
    path.write_text(profile_json(data), encoding="utf-8")
    return path


# -- shipped profiles ---------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", sorted(SHIPPED))
def test_shipped_analytic_profiles_reproduce_the_defaults(gpu):
    profile = load_profile(SHIPPED[gpu])
    spec = catalog.get_gpu(gpu)
    assert profile.kind == "analytic"
    assert profile.gpu == gpu
    assert profile.fitted == RooflineParams()
    assert profile.peak_hbm_bytes_per_s == spec.hbm_bytes_per_s
    assert profile.peak_bf16_flops_per_s == spec.bf16_flops_per_s
    assert not profile.has_tables
    data = json.loads(SHIPPED[gpu].read_text(encoding="utf-8"))
    assert data["metadata"]["sources"] and data["metadata"]["notes"]
    # Every parameter but those a scenario sets from its own tables (sampling, graphs, overlap).
    assert set(data["provenance"]) == set(to_dict(RooflineParams())) - set(SCENARIO_OWNED_KEYS)
    assert all(text.startswith("assumed") for text in data["provenance"].values())


@pytest.mark.parametrize("gpu", sorted(SHIPPED))
def test_shipped_profiles_are_what_the_command_writes(gpu):
    shipped = json.loads(SHIPPED[gpu].read_text(encoding="utf-8"))
    fresh = analytic_profile(catalog.get_gpu(gpu), command=shipped["metadata"]["command"])
    for data in (shipped, fresh):
        data["metadata"]["date"] = data["metadata"]["git_sha"] = ""
    assert json.loads(profile_json(fresh)) == shipped


def test_analytic_profile_gives_byte_identical_results():
    base = simulate(tiny())
    with_profile = simulate(tiny(f"costs.profile={SHIPPED['h100-sxm']}"))
    assert with_profile["scenario"]["costs"]["profile"] == str(SHIPPED["h100-sxm"])
    for a, b in zip(base["policies"], with_profile["policies"], strict=True):
        assert a == b
        assert a["cost_fallbacks"] == 0


def test_profile_supplies_defaults_and_scenario_keys_win(tmp_path):
    data = json.loads(SHIPPED["h100-sxm"].read_text(encoding="utf-8"))
    data["fitted"]["pass_overhead_s"] = 4e-4
    data["fitted"]["kv_efficiency"] = 0.35
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    s = tiny(f"costs.profile={path}", "costs.kv_efficiency=0.5")
    assert s.roofline.pass_overhead_s == 4e-4  # from the profile
    assert s.roofline.kv_efficiency == 0.5  # set in the scenario (equal to the default: still wins)
    assert s.roofline.weight_efficiency == 0.7
    assert type(s.roofline.pass_overhead_s) is float
    assert s.to_dict()["costs"]["pass_overhead_s"] == 4e-4  # the results JSON shows the value
    assert tiny().roofline.pass_overhead_s == RooflineParams().pass_overhead_s


def _profile_with_kv(tmp_path, kv_efficiency):
    data = json.loads(SHIPPED["h100-sxm"].read_text(encoding="utf-8"))
    data["fitted"]["kv_efficiency"] = kv_efficiency
    path = tmp_path / f"kv-{kv_efficiency}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_profile_set_later_supplies_unset_values_both_ways(tmp_path):
    """The v0.1 bug: a profile applied with --set gave 0.33, through with_overrides 0.5."""
    from simspec import with_overrides

    path = _profile_with_kv(tmp_path, 0.33)
    through_set = tiny(f"costs.profile={path}")
    through_api = with_overrides(tiny(), [f"costs.profile={path}"])
    through_mapping = with_overrides(tiny(), {"costs.profile": str(path)})
    for s in (through_set, through_api, through_mapping):
        assert s.roofline.kv_efficiency == 0.33
    assert through_api == through_set and through_api.digest() == through_set.digest()
    # Removing the profile again brings the built-in default back.
    assert with_overrides(through_api, {"costs.profile": ""}).roofline.kv_efficiency == 0.5
    # A value the scenario sets still wins over a profile applied later.
    mine = with_overrides(tiny("costs.kv_efficiency=0.4"), [f"costs.profile={path}"])
    assert mine.roofline.kv_efficiency == 0.4


def test_replace_cannot_swap_the_profile_silently(tmp_path):
    import dataclasses

    from simspec.errors import ScenarioError

    s = tiny()
    path = _profile_with_kv(tmp_path, 0.33)
    with pytest.raises(ScenarioError, match=r"costs.profile.*with_overrides"):
        dataclasses.replace(s, costs=dataclasses.replace(s.costs, profile=str(path)))
    # Replacing a plain value re-resolves without I/O.
    faster = dataclasses.replace(s, costs=dataclasses.replace(s.costs, kv_efficiency=0.9))
    assert faster.roofline.kv_efficiency == 0.9


def test_digest_covers_the_profile_contents(tmp_path):
    path = tmp_path / "p.json"
    digests = []
    for kv in (0.33, 0.34):
        data = json.loads(SHIPPED["h100-sxm"].read_text(encoding="utf-8"))
        data["fitted"]["kv_efficiency"] = kv
        data["fitted"]["pass_overhead_s"] = 4e-4
        path.write_text(json.dumps(data), encoding="utf-8")
        # kv_efficiency set in the scenario: the resolved values are equal, the files are not
        digests.append(tiny(f"costs.profile={path}", "costs.kv_efficiency=0.5").digest())
    assert digests[0] != digests[1]


# -- scenario checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["costs.model=calibrated"], ["costs.profile", "model = 'calibrated'"]),
        (["costs.profile=/no/such/profile.json"], ["costs.profile", "/no/such/profile.json"]),
        ([f"costs.profile={SHIPPED['h200']}"], ["costs.profile", "h100-sxm", "'h200'"]),
        (
            ["costs.model=calibrated", f"costs.profile={SHIPPED['h100-sxm']}"],
            ["costs.profile", "measured tables", "analytic"],
        ),
        (["costs.model=tables"], ["costs.model", "'calibrated'"]),
    ],
)
def test_bad_profile_settings_are_scenario_errors(overrides, fragments):
    with pytest.raises(ScenarioError) as err:
        tiny(*overrides)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_calibrated_profile_must_match_the_target_model(synthetic):
    with pytest.raises(ScenarioError, match="measured for 'qwen3-30b-a3b'"):
        tiny(
            "model.target=qwen3-coder-30b-a3b",
            "model.drafter=eagle3-qwen3-coder-30b-a3b",
            "costs.model=calibrated",
            f"costs.profile={synthetic}",
        )
    s = tiny("costs.model=calibrated", f"costs.profile={synthetic}")
    assert s.costs.model == "calibrated"


# -- validation of the file -----------------------------------------------------------------------


def _good() -> dict:
    return json.loads(SHIPPED["h100-sxm"].read_text(encoding="utf-8"))


def _with_tables(synthetic: Path) -> dict:
    return json.loads(synthetic.read_text(encoding="utf-8"))


def _set(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


BAD = [
    ("truncated", None, ("", "complete JSON", "truncated")),
    ("not an object", [1, 2], ("", "simspec calibration profile")),
    ("wrong schema", ("schema", "vidur-profile"), ("schema", "'vidur-profile'")),
    ("wrong version", ("schema_version", 7), ("schema_version", "found 7")),
    (
        "nan efficiency",
        (("fitted", "kv_efficiency"), float("nan")),
        ("fitted.kv_efficiency", "NaN"),
    ),
    ("nan anywhere", (("metadata", "extra"), [1.0, float("inf")]), ("metadata.extra[1]", "NaN")),
    ("efficiency > 1", (("fitted", "kv_efficiency"), 1.5), ("fitted.kv_efficiency", "<= 1")),
    ("missing fitted key", (("fitted",), {"pass_overhead_s": 1e-3}), ("fitted.", "none")),
    ("bad kind", (("metadata", "kind"), "guessed"), ("metadata.kind", "'guessed'")),
    ("bad peak", (("peak", "hbm_bytes_per_s"), -1), ("peak.hbm_bytes_per_s", "> 0")),
]


@pytest.mark.parametrize(("label", "change", "fragments"), BAD, ids=[b[0] for b in BAD])
def test_bad_profile_files_raise_profile_errors(tmp_path, label, change, fragments):
    path = tmp_path / "bad.json"
    if change is None:
        text = SHIPPED["h100-sxm"].read_text(encoding="utf-8")
        path.write_text(text[: len(text) // 2], encoding="utf-8")
    elif isinstance(change, list):
        path.write_text(json.dumps(change), encoding="utf-8")
    else:
        key, value = change
        keys = key if isinstance(key, tuple) else (key,)
        path.write_text(json.dumps(_set(_good(), keys, value)), encoding="utf-8")
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert isinstance(err.value, InputError)
    assert err.value.source == str(path)
    key_path, expected_or_found = fragments[0], fragments[1:]
    assert err.value.key_path.startswith(key_path)
    for fragment in expected_or_found:
        assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("path", "value", "key"),
    [
        (("tables", "moe", "time_s", 0), [1e-4], "tables.moe.time_s[0]"),
        (("tables", "moe", "tokens"), [4, 1, 16, 64, 256], "tables.moe.tokens"),
        (("tables", "attention", "time_s", 0, 0, 0), -1.0, "tables.attention.time_s[0][0][0]"),
        (("tables", "gemm", "lm_head", "time_s"), "fast", "tables.gemm.lm_head.time_s"),
        (("tables", "gemm", "mystery"), {}, "tables.gemm.mystery"),
        (("tables", "stack", 0, "mode"), "jit", "tables.stack[0].mode"),
        (("tables", "moe", "experts_per_token"), 0.5, "tables.moe.experts_per_token"),
    ],
)
def test_bad_tables_name_their_key(synthetic, tmp_path, path, value, key):
    data = _set(_with_tables(synthetic), path, value)
    with pytest.raises(ProfileError) as err:
        profile_from_dict(data, "p.json")
    assert err.value.key_path == key


@pytest.mark.parametrize("defect", ["truncated", "nan", "schema"])
def test_bad_profile_is_exit_2_from_the_cli(tmp_path, capsys, defect):
    path = tmp_path / "bad.json"
    text = SHIPPED["h100-sxm"].read_text(encoding="utf-8")
    if defect == "truncated":
        text = text[:100]
    elif defect == "nan":
        text = text.replace('"kv_efficiency": 0.5', '"kv_efficiency": NaN')
    else:
        text = text.replace("simspec-calibration-profile", "something-else")
    path.write_text(text, encoding="utf-8")
    code = main(["run", *TINY_RUN, "--set", f"costs.profile={path}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"simspec: error: {path}: ")
    assert err.count("\n") == 1 and "Traceback" not in err


# -- content digest ------------------------------------------------------------------------------


def test_profile_sha256_covers_the_files_content(tmp_path):
    text = SHIPPED["h100-sxm"].read_text(encoding="utf-8")
    assert '"kv_efficiency": 0.5' in text
    path = tmp_path / "p.json"
    path.write_text(text, encoding="utf-8")
    first = load_profile(path)
    assert first.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # Same path, same size, rewritten at once (the mtime may not even tick): a new digest.
    path.write_text(text.replace('"kv_efficiency": 0.5', '"kv_efficiency": 0.4'), "utf-8")
    second = load_profile(path)
    assert second.sha256 != first.sha256
    assert second.fitted.kv_efficiency == 0.4
    # Identical contents give the same digest, under this path or another.
    path.write_text(text, encoding="utf-8")
    assert load_profile(path).sha256 == first.sha256
    other = tmp_path / "copy.json"
    other.write_text(text, encoding="utf-8")
    assert load_profile(other).sha256 == first.sha256
    assert load_profile(SHIPPED["h100-sxm"]).sha256 == first.sha256


def test_profile_sha256_without_a_file_is_of_the_canonical_json():
    data = json.loads(SHIPPED["h200"].read_text(encoding="utf-8"))
    profile = profile_from_dict(data, "in memory")
    canonical = json.dumps(data, sort_keys=True).encode("utf-8")
    assert profile.sha256 == hashlib.sha256(canonical).hexdigest() == canonical_sha256(data)
    reordered = dict(reversed(list(data.items())))
    assert profile_from_dict(reordered).sha256 == profile.sha256
    changed = copy.deepcopy(data)
    changed["fitted"]["kv_efficiency"] = 0.4
    assert profile_from_dict(changed).sha256 != profile.sha256
    text = SHIPPED["h200"].read_text(encoding="utf-8")
    parsed = parse_profile_text(text, "text")
    assert parsed.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_stack_measurements_are_the_plans_points(synthetic):
    from simspec.calibrate.plan import StackPlanPoint, bench_model, make_plan

    profile = load_profile(synthetic)
    plan = make_plan(
        bench_model(catalog.get_model("qwen3-30b-a3b"), "full"), quick=True, shapes="full"
    )
    assert all(isinstance(p, StackPlanPoint) for p in plan.stack_points)
    assert all(isinstance(m, StackMeasurement) for m in profile.stack)
    assert [(m.batch, m.tokens_per_request, m.use) for m in profile.stack] == [
        (p.batch, p.tokens_per_request, p.use) for p in plan.stack_points
    ]
    assert all(m.time_s > 0 and m.mode == "graph" for m in profile.stack)


# -- interpolation -------------------------------------------------------------------------------


def test_grid_table_is_exact_at_nodes_and_reports_inside():
    axes = (np.array([1.0, 2.0, 4.0]), np.array([8.0, 16.0]))
    values = np.array([[1.0, 2.0], [2.0, 3.0], [5.0, 9.0]])
    t = GridTable(axes, values)
    pts = np.array([[a, b] for a in axes[0] for b in axes[1]])
    got, inside = t.lookup(pts)
    assert got.tolist() == values.ravel().tolist()
    assert inside.all()
    got, inside = t.lookup(np.array([[3.0, 12.0], [8.0, 12.0], [0.5, 8.0]]))
    assert got[0] == pytest.approx((2.5 + 7.0) / 2)
    assert inside.tolist() == [True, False, False]
    assert got[1] == pytest.approx(7.0)  # clamped to the edge
    assert got[2] == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    dims=st.lists(st.integers(1, 4), min_size=1, max_size=3),
)
def test_grid_interpolation_is_monotone_along_every_axis(data, dims):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axes = tuple(np.cumsum(rng.uniform(0.5, 3.0, size=d)) for d in dims)
    table = GridTable(axes, rng.uniform(0.1, 2.0, size=tuple(dims)))  # noisy, not monotone
    lo = np.array([a[0] for a in axes]) - 1.0
    hi = np.array([a[-1] for a in axes]) + 1.0
    base = rng.uniform(lo, hi, size=(50, len(dims)))
    for d in range(len(dims)):
        step = np.zeros(len(dims))
        step[d] = rng.uniform(0.0, 2.0)
        v0, _ = table.lookup(base)
        v1, _ = table.lookup(base + step)
        assert np.all(v1 >= v0 - 1e-12)
