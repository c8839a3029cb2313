"""Scenario loading and validation: the embedded default, strict errors, overrides, digests."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simspec.config.load import apply_overrides, load_scenario, scenario_from_dict, with_overrides
from simspec.config.scenario import CostsConfig, HardwareConfig, ModelConfig, Scenario
from simspec.errors import ScenarioError
from simspec.params import SCENARIO_OWNED_KEYS, RooflineParams
from simspec.policies import FixedPolicy
from simspec.routing.config import RoutingConfig
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.workload import WorkloadConfig

# A small valid scenario; bad ones below are this text plus or minus a few lines.
HEAD = """\
name = "small"
seed = 7

[model]
target = "qwen3-30b-a3b"
drafter = "eagle3-qwen3-30b-a3b"

[hardware]
gpu = "h100-sxm"

[routing]
overlap = 0.4

[acceptance]
alpha = 0.6

[workload]
concurrency = 2
num_requests = 4
output_tokens = 16
"""
POLICIES = """
[[policies]]
name = "fixed"
draft_tokens = 0

[[policies]]
name = "fixed"
draft_tokens = 2
"""
BASE = HEAD + POLICIES


def write(tmp_path: Path, text: str, name: str = "scenario.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def replace_line(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def load_error(path: Path, overrides: tuple[str, ...] = ()) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path, overrides)
    err = info.value
    message = str(err)
    # One paragraph naming the file, the key path, what was expected and what was found.
    assert "\n" not in message
    assert err.source.startswith(str(path))  # "(with --set overrides)" may follow
    assert path.name in message
    assert err.expected and err.found
    assert f"expected {err.expected}" in message
    assert f"found {err.found}" in message
    if err.key_path:
        assert f": {err.key_path}: " in message
    return err


# -- the embedded default ----------------------------------------------------------------------


def test_default_scenario_loads_with_fixed_k_0_to_the_drafters_maximum():
    s = load_scenario()
    assert isinstance(s, Scenario)
    assert s.name == "default"
    assert s.seed == 0
    assert s.model == ModelConfig(target="qwen3-30b-a3b", drafter="eagle3-qwen3-30b-a3b")
    assert s.hardware.gpu == "h100-sxm"
    assert s.routing.overlap == pytest.approx(0.38)
    assert s.acceptance.alpha == pytest.approx(0.7)
    assert s.workload.concurrency == 8
    top = s.drafter.max_draft_tokens  # every draft length the drafter runs
    assert top == 8
    assert [p.name for p in s.policies] == ["fixed"] * (top + 1)
    assert [p.label for p in s.policies] == [f"fixed-{k}" for k in range(top + 1)]
    assert [p.policy for p in s.policies] == [FixedPolicy(draft_tokens=k) for k in range(top + 1)]
    assert [p.params() for p in s.policies] == [{"draft_tokens": k} for k in range(top + 1)]
    assert s.target.name == "qwen3-30b-a3b"
    assert s.drafter.max_draft_tokens == 8
    assert s.draft_model is None
    assert s.gpu.name == "h100-sxm"


def _defaults(cls: type) -> dict:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def test_to_dict_fills_every_default(tmp_path):
    s = load_scenario(write(tmp_path, '[[policies]]\nname = "fixed"\n', "bare.toml"))
    d = s.to_dict()
    assert list(d) == [
        "name",
        "description",
        "seed",
        "model",
        "hardware",
        "costs",
        "routing",
        "acceptance",
        "workload",
        "engine",
        "speculation",
        "slo",
        "policies",
    ]
    assert d["name"] == "bare"  # the file's stem when the file names none
    assert d["description"] == ""
    assert d["seed"] == 0
    assert d["model"] == _defaults(ModelConfig)
    # An unset [hardware.host] is left out (the digest stays the one from before the key).
    assert d["hardware"] == {k: v for k, v in _defaults(HardwareConfig).items() if k != "host"}
    owned = set(SCENARIO_OWNED_KEYS)  # [engine] and [workload] keys, not [costs] ones
    roofline = {k: v for k, v in _defaults(RooflineParams).items() if k not in owned}
    assert d["costs"] == {**_defaults(CostsConfig), **roofline}
    assert s.to_data()["costs"] == _defaults(CostsConfig)  # unset efficiencies are None
    # An unset working set is left out too.
    assert d["routing"] == {k: v for k, v in _defaults(RoutingConfig).items() if k != "working_set"}
    assert d["routing"]["overlap"] is None
    tuples = ("alphas", "acceptance_setting", "position_acceptance")
    assert d["acceptance"] == {**_defaults(AcceptanceConfig), **{key: [] for key in tuples}}
    assert d["workload"] == _defaults(WorkloadConfig)
    assert d["workload"]["num_requests"] == 32
    assert d["policies"] == [{"name": "fixed", "label": "fixed-3", "draft_tokens": 3}]
    json.dumps(d, allow_nan=False)  # plain data


def test_to_dict_round_trips(tmp_path):
    s = load_scenario(write(tmp_path, BASE))
    again = scenario_from_dict(s.to_data(), str(tmp_path / "scenario.toml"))
    assert again == s
    assert again.digest() == s.digest()
    # The resolved form (results JSON) sets every efficiency: same values, same digest.
    resolved = scenario_from_dict(s.to_dict(), str(tmp_path / "scenario.toml"))
    assert resolved.roofline == s.roofline and resolved.digest() == s.digest()


def test_digest_is_stable_for_equal_scenarios(tmp_path):
    a = load_scenario(write(tmp_path, BASE, "a.toml"))
    b = load_scenario(write(tmp_path, BASE, "b.toml"))
    assert re.fullmatch(r"[0-9a-f]{12}", a.digest())
    assert a == b
    assert a.digest() == b.digest()
    assert load_scenario().digest() == load_scenario().digest()


@pytest.mark.parametrize(
    "override",
    [
        "seed=8",
        "name=other",
        'description="x"',
        "routing.overlap=0.41",
        "routing.popularity=zipf",
        "acceptance.alpha=0.61",
        "workload.concurrency=3",
        "workload.output_tokens=17",
        "hardware.memory_utilization=0.85",
        "hardware.gpu=h200",
        "hardware.host.memory_bytes_per_s=1.5e11",
        "costs.pass_overhead_s=0.001",
        "policies[1].draft_tokens=3",
        'policies[1].label="two"',
    ],
)
def test_digest_changes_when_any_value_changes(tmp_path, override):
    path = write(tmp_path, BASE)
    base = load_scenario(path)
    changed = load_scenario(path, [override])
    assert changed != base
    assert re.fullmatch(r"[0-9a-f]{12}", changed.digest())
    assert changed.digest() != base.digest()


def test_with_overrides_derives_a_variant():
    s = load_scenario()
    v = with_overrides(s, ["seed=5", "routing.overlap=0.5"])
    assert (v.seed, v.routing.overlap) == (5, 0.5)
    assert (s.seed, s.routing.overlap) == (0, 0.38)
    assert v.policies == s.policies


def test_good_scenario_values(tmp_path):
    s = load_scenario(write(tmp_path, BASE))
    assert s.name == "small"
    assert s.seed == 7
    assert s.source == str(tmp_path / "scenario.toml")
    assert s.routing.overlap == 0.4
    assert s.routing.rejected_overlap == 0.4
    assert s.workload.num_requests == 4
    assert [p.label for p in s.policies] == ["fixed-0", "fixed-2"]


def test_int_is_accepted_for_a_float(tmp_path):
    s = load_scenario(write(tmp_path, replace_line(BASE, "overlap = 0.4", "overlap = 1")))
    assert s.routing.overlap == 1.0
    assert isinstance(s.routing.overlap, float)


def test_per_position_with_alphas_loads(tmp_path):
    text = replace_line(BASE, "alpha = 0.6", 'process = "per_position"\nalphas = [0.8, 0.6, 0.4]')
    s = load_scenario(write(tmp_path, text))
    assert s.acceptance.alphas == (0.8, 0.6, 0.4)


def test_drafter_budget_at_its_cap_loads(tmp_path):
    s = load_scenario(write(tmp_path, replace_line(BASE, "draft_tokens = 2", "draft_tokens = 8")))
    assert s.policies[1].policy == FixedPolicy(draft_tokens=8)


# -- bad scenarios ------------------------------------------------------------------------------
# name -> (edits of BASE, exact key path, a fragment of the message). An edit is (old, new): the
# first `old` in the text becomes `new`; old = "" puts `new` at the top of the file.

NO_POLICIES = (POLICIES, "")

BAD = {
    "unknown top-level key": ([("", "bogus = 1\n")], "bogus", "unknown key"),
    "unknown key in a table": (
        [("overlap = 0.4", "overlapp = 0.4")],
        "routing.overlapp",
        "one of the keys mode, popularity",
    ),
    "string for a number": (
        [("overlap = 0.4", 'overlap = "0.4"')],
        "routing.overlap",
        "found '0.4' (string)",
    ),
    "bool for an integer": (
        [("concurrency = 2", "concurrency = true")],
        "workload.concurrency",
        "found True (boolean)",
    ),
    "bool for a float": (
        [("alpha = 0.6", "alpha = false")],
        "acceptance.alpha",
        "found False (boolean)",
    ),
    "float for an integer": (
        [("num_requests = 4", "num_requests = 4.0")],
        "workload.num_requests",
        "expected an integer",
    ),
    "overlap above 1": (
        [("overlap = 0.4", "overlap = 1.5")],
        "routing.overlap",
        "expected a number >= 0 and <= 1, found 1.5",
    ),
    "alpha below 0": ([("alpha = 0.6", "alpha = -0.1")], "acceptance.alpha", "found -0.1"),
    "concurrency 0": (
        [("concurrency = 2", "concurrency = 0")],
        "workload.concurrency",
        "expected an integer >= 1",
    ),
    "memory_utilization 0": (
        [('gpu = "h100-sxm"', 'gpu = "h100-sxm"\nmemory_utilization = 0')],
        "hardware.memory_utilization",
        "expected a number >= 0.05 and <= 1",
    ),
    "nan": ([("overlap = 0.4", "overlap = nan")], "routing.overlap", "found nan (float)"),
    "inf": ([("alpha = 0.6", "alpha = inf")], "acceptance.alpha", "found inf (float)"),
    "inf with only a lower bound": (
        [("[acceptance]", "[costs]\nmoe_saturation_bytes = inf\n\n[acceptance]")],
        "costs.moe_saturation_bytes",
        "found inf (float)",
    ),
    "-inf": ([("overlap = 0.4", "overlap = -inf")], "routing.overlap", "found -inf (float)"),
    "invalid popularity": (
        [("overlap = 0.4", 'overlap = 0.4\npopularity = "pareto"')],
        "routing.popularity",
        "one of 'dirichlet', 'uniform', 'zipf'",
    ),
    "invalid loop": (
        [("concurrency = 2", 'concurrency = 2\nloop = "half-open"')],
        "workload.loop",
        "one of 'closed', 'open', found 'half-open'",
    ),
    "unknown target": (
        [('target = "qwen3-30b-a3b"', 'target = "gpt-5"')],
        "model.target",
        "found 'gpt-5'",
    ),
    "unknown drafter": (
        [('drafter = "eagle3-qwen3-30b-a3b"', 'drafter = "medusa"')],
        "model.drafter",
        "found 'medusa'",
    ),
    "unknown gpu": ([('gpu = "h100-sxm"', 'gpu = "b400"')], "hardware.gpu", "h200"),
    "unknown policy": (
        [('name = "fixed"\ndraft_tokens = 2', 'name = "magic"')],
        "policies[1].name",
        "expected one of adaptive_ema, batch_table, cost_aware, fixed, fixed_tree, threshold, "
        "tree_cost_aware",
    ),
    "policy name not a string": (
        [('name = "fixed"\ndraft_tokens = 2', "name = 3")],
        "policies[1].name",
        "found 3 (integer)",
    ),
    "unknown policy parameter": (
        [('name = "fixed"\ndraft_tokens = 0', 'name = "fixed"\ntau = 0.5')],
        "policies[0].tau",
        "one of the keys draft_tokens",
    ),
    "bool policy parameter": (
        [("draft_tokens = 2", "draft_tokens = true")],
        "policies[1].draft_tokens",
        "found True (boolean)",
    ),
    "policy parameter out of range": (
        [("draft_tokens = 2", "draft_tokens = -1")],
        "policies[1].draft_tokens",
        "found -1",
    ),
    "budget above max_draft_tokens": (
        [("draft_tokens = 2", "draft_tokens = 9")],
        "policies[1].draft_tokens",
        "max_draft_tokens = 8",
    ),
    "table as a scalar": (
        [("[routing]\noverlap = 0.4\n", ""), ("", "routing = 3\n")],
        "routing",
        "expected a table [routing], found 3 (integer)",
    ),
    "policies not an array": (
        [NO_POLICIES, ("", 'policies = "fixed"\n')],
        "policies",
        "an array of tables",
    ),
    "policy not a table": (
        [NO_POLICIES, ("", "policies = [1, 2]\n")],
        "policies[0]",
        "found 1 (integer)",
    ),
    "duplicate labels": (
        [("draft_tokens = 2", "draft_tokens = 0")],
        "policies[1].label",
        "found 'fixed-0'",
    ),
    "per_position without alphas": (
        [("alpha = 0.6", 'process = "per_position"')],
        "acceptance.alphas",
        "per_position",
    ),
    "alphas entry out of range": (
        [("alpha = 0.6", 'process = "per_position"\nalphas = [0.5, 2.0]')],
        "acceptance.alphas[1]",
        "found 2.0 (float)",
    ),
    "draft_overlap without overlap": (
        [("overlap = 0.4", "draft_overlap = 0.4")],
        "routing.draft_overlap",
        "only together with overlap",
    ),
    "weights do not fit": (
        [
            ('target = "qwen3-30b-a3b"', 'target = "deepseek-v3"'),
            ('drafter = "eagle3-qwen3-30b-a3b"', 'drafter = "eagle3-deepseek-v3"'),
        ],
        "hardware.num_gpus",
        "found 1 x 80 GB x 0.9 usable",
    ),
    "seed negative": ([("seed = 7", "seed = -1")], "seed", "found -1 (integer)"),
    "seed float": ([("seed = 7", "seed = 7.5")], "seed", "found 7.5 (float)"),
    "seed bool": ([("seed = 7", "seed = true")], "seed", "found True (boolean)"),
    "seed too large": ([("seed = 7", f"seed = {2**63}")], "seed", "in [0, 2^63)"),
    "name not a string": ([('name = "small"', "name = 3")], "name", "expected a string"),
}


def edit(text: str, edits: list[tuple[str, str]]) -> str:
    for old, new in edits:
        text = new + text if old == "" else replace_line(text, old, new)
    return text


@pytest.mark.parametrize("case", sorted(BAD), ids=sorted(BAD))
def test_bad_scenario(tmp_path, case):
    edits, key_path, fragment = BAD[case]
    path = write(tmp_path, edit(BASE, edits), "bad-case.toml")
    err = load_error(path)
    assert err.key_path == key_path
    assert fragment in str(err)


def test_weights_error_names_the_gpus_needed(tmp_path):
    text = replace_line(BASE, 'target = "qwen3-30b-a3b"', 'target = "deepseek-v3"')
    text = replace_line(text, 'drafter = "eagle3-qwen3-30b-a3b"', 'drafter = "eagle3-deepseek-v3"')
    err = load_error(write(tmp_path, text))
    assert err.key_path == "hardware.num_gpus"
    need = int(re.search(r"at least (\d+)", err.expected).group(1))
    assert need > 1
    path = write(tmp_path, text, "deepseek.toml")
    assert load_scenario(path, [f"hardware.num_gpus={need}"]).hardware.num_gpus == need
    assert load_error(path, (f"hardware.num_gpus={need - 1}",)).key_path == "hardware.num_gpus"


def test_toml_syntax_error(tmp_path):
    path = write(tmp_path, BASE + "\nrouting = = 3\n", "syntax.toml")
    err = load_error(path)
    assert err.key_path == ""
    assert err.expected == "valid TOML"
    assert "line" in err.found


def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.toml"
    err = load_error(path)
    assert err.key_path == ""
    assert err.found == "no such file"


def test_directory_instead_of_file(tmp_path):
    err = load_error(tmp_path)
    assert err.key_path == ""
    assert "folder" in err.found


def test_not_a_table_from_dict():
    with pytest.raises(ScenarioError) as info:
        scenario_from_dict([1, 2], "list.json")  # type: ignore[arg-type]
    assert info.value.key_path == ""
    assert info.value.source == "list.json"


def test_override_errors_are_checked_like_the_file(tmp_path):
    path = write(tmp_path, BASE)
    err = load_error(path, ("routing.overlap=2",))
    assert err.key_path == "routing.overlap"
    assert err.found == "2 (integer)"


# -- apply_overrides -----------------------------------------------------------------------------


def test_apply_overrides_dotted_keys_and_toml_values():
    data = {"routing": {"overlap": 0.1}, "policies": [{"name": "fixed"}]}
    out = apply_overrides(
        data,
        [
            "routing.overlap=0.5",
            "routing.popularity=zipf",  # bare word -> string
            'name="x"',
            "seed=3",
            "workload.output_tokens=16",  # creates the table
            "acceptance.alphas=[0.9, 0.8]",
            "acceptance.enabled=true",
            "description=a=b",  # only the first '=' splits
        ],
    )
    assert out["routing"] == {"overlap": 0.5, "popularity": "zipf"}
    assert isinstance(out["routing"]["overlap"], float)
    assert out["name"] == "x"
    assert out["seed"] == 3 and isinstance(out["seed"], int)
    assert out["workload"] == {"output_tokens": 16}
    assert out["acceptance"] == {"alphas": [0.9, 0.8], "enabled": True}
    assert out["description"] == "a=b"
    assert out["policies"] == [{"name": "fixed"}]


def test_apply_overrides_indexes_arrays_and_does_not_mutate():
    data = {
        "policies": [{"name": "fixed", "draft_tokens": 1}, {"name": "fixed", "draft_tokens": 2}]
    }
    before = copy.deepcopy(data)
    out = apply_overrides(data, ["policies[1].draft_tokens=4"])
    assert out["policies"] == [
        {"name": "fixed", "draft_tokens": 1},
        {"name": "fixed", "draft_tokens": 4},
    ]
    assert data == before
    out = apply_overrides(data, ['policies[0]={name="fixed", draft_tokens=6}'])
    assert out["policies"][0] == {"name": "fixed", "draft_tokens": 6}
    assert data == before


@pytest.mark.parametrize(
    ("override", "key_path"),
    [
        ("policies[5].draft_tokens=4", "policies[5].draft_tokens"),
        ("policies[2]=1", "policies[2]"),
        ("routing[0]=1", "routing[0]"),
        ("policies.draft_tokens=1", "policies.draft_tokens"),
        ("routing..overlap=1", "routing..overlap"),
        ("routing.over-lap=1", "routing.over-lap"),
        ("routing.overlap", "routing.overlap"),
    ],
)
def test_apply_overrides_bad_keys(override, key_path):
    data = {"routing": {}, "policies": [{"name": "fixed"}, {"name": "fixed"}]}
    with pytest.raises(ScenarioError) as info:
        apply_overrides(data, [override])
    assert info.value.source == "--set"
    assert info.value.key_path == key_path
    assert "\n" not in str(info.value)


def test_override_changes_a_policy_of_the_default():
    s = load_scenario(None, ["policies[1].draft_tokens=7", "policies[7].draft_tokens=1"])
    ks = [0, 7, 2, 3, 4, 5, 6, 1, 8]  # k = 1 and 7 swapped
    assert [p.label for p in s.policies] == [f"fixed-{k}" for k in ks]
    # fixed-4 twice: the labels clash.
    with pytest.raises(ScenarioError) as info:
        load_scenario(None, ["policies[1].draft_tokens=4"])
    assert info.value.key_path == "policies[4].label"


# Former bugs: each test states the contract.


@pytest.mark.parametrize("override", ["seed.a.b=1", "name.a.b=1", "policies.x.y=1"])
def test_override_through_a_scalar_is_a_scenario_error(override):
    data = {"seed": 0, "name": "default", "policies": [{"name": "fixed"}]}
    with pytest.raises(ScenarioError) as info:
        apply_overrides(data, [override])
    assert info.value.source == "--set"


def test_file_with_a_date_is_a_clean_error(tmp_path):
    path = write(tmp_path, 'name = 1979-05-27\n[[policies]]\nname = "fixed"\n', "date.toml")
    assert load_error(path).key_path == "name"


def test_override_on_a_file_with_a_date(tmp_path):
    path = write(tmp_path, 'name = 1979-05-27\n[[policies]]\nname = "fixed"\n', "date.toml")
    assert load_error(path, ("seed=1",)).key_path == "name"


def test_huge_integer_for_a_float(tmp_path):
    path = write(tmp_path, "[costs]\npass_overhead_s = 1" + "0" * 400 + "\n", "huge.toml")
    assert load_error(path).key_path == "costs.pass_overhead_s"


# -- property: routing.overlap is accepted exactly on [0, 1] ---------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_overlap_accepted_exactly_inside_unit_interval(x):
    override = f"routing.overlap={x!r}"  # repr is TOML: 0.5, 1e-300, nan, inf, -inf
    if 0.0 <= x <= 1.0:
        s = load_scenario(None, [override])
        assert s.routing.overlap == x
        assert s.to_dict()["routing"]["overlap"] == x
    else:
        with pytest.raises(ScenarioError) as info:
            load_scenario(None, [override])
        err = info.value
        assert err.key_path == "routing.overlap"
        assert err.found.endswith("(float)")  # parsed as a TOML float, not as a bare word
        assert err.expected == "a number >= 0 and <= 1"
