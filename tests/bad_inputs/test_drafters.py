"""Drafters (issue 13, 8): a drafter must serve the target; a target alone gets its own.

Compatibility is the catalog's ``targets`` list (an EAGLE-3 head serves the target it was
trained on; a dense draft model lists the targets sharing its tokenizer).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import simspec.config
from simspec import catalog, load_scenario, with_overrides
from simspec.cli import main
from simspec.sweep.spec import load_sweep

from .rejects import assert_rejected, scenario, write_scenario

MISMATCHED = {
    "olmoe with a qwen3-235b head": ("olmoe-1b-7b-0924", "eagle3-qwen3-235b-a22b"),
    "mixtral with a qwen3 dense draft": ("mixtral-8x7b", "qwen3-0.6b-draft"),
    "qwen3-30b with a qwen2 dense draft": ("qwen3-30b-a3b", "qwen2-0.5b-draft"),
    "qwen3-8b with the qwen3-30b head": ("qwen3-8b", "eagle3-qwen3-30b-a3b"),
}


def _serving(target: str) -> list[str]:
    return [n for n in catalog.drafter_names() if target in catalog.get_drafter(n).targets]


@pytest.mark.parametrize("case", sorted(MISMATCHED), ids=sorted(MISMATCHED))
def test_drafter_for_another_target_is_rejected(tmp_path, capsys, case):
    target, drafter = MISMATCHED[case]
    edits = {"model.target": target, "model.drafter": drafter, "hardware.num_gpus": 8}
    path = write_scenario(tmp_path, scenario(edits))
    message = assert_rejected(
        capsys,
        ["run", str(path), "--json", str(tmp_path / "o.json")],
        tmp_path,
        [str(path), "model.drafter: expected", f"built for target {target!r}", repr(drafter)],
    )
    for name in _serving(target):  # the message lists every drafter that fits
        assert name in message


def test_drafter_set_on_the_command_line_for_another_target_is_rejected(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario())
    argv = ["run", str(path), "--set", 'model.drafter="eagle3-qwen3-235b-a22b"']
    assert_rejected(capsys, argv, tmp_path, [str(path), "model.drafter", "eagle3-qwen3-30b-a3b"])


def test_target_without_any_drafter_is_rejected(tmp_path, capsys):
    path = write_scenario(tmp_path, scenario({"model.target": "llama-3.1-8b"}, ["model.drafter"]))
    assert_rejected(
        capsys,
        ["validate", str(path)],
        tmp_path,
        [str(path), "model.drafter: expected", "'llama-3.1-8b'", "found nothing"],
    )


@pytest.mark.parametrize("target", ["qwen3-8b", "olmoe-1b-7b-0924", "qwen3-235b-a22b"])
def test_a_target_without_a_drafter_gets_its_own(tmp_path, target):
    edits = {"model.target": target, "hardware.num_gpus": 8}
    s = load_scenario(write_scenario(tmp_path, scenario(edits, ["model.drafter"])))
    assert s.model.drafter == f"eagle3-{target}"
    assert target in s.drafter.targets


def test_readme_example_changing_only_the_target_switches_the_drafter(capsys):
    default = Path(simspec.config.__file__).parent / "default_scenario.toml"
    assert main(["validate", str(default), "--set", 'model.target="qwen3-8b"']) == 0
    assert "qwen3-8b + eagle3-qwen3-8b" in capsys.readouterr().out
    s = load_scenario(None, ['model.target="qwen3-8b"'])
    assert s.model.drafter == "eagle3-qwen3-8b"
    assert with_overrides(load_scenario(), {"model.target": "qwen3-8b"}).drafter == s.drafter


def test_changing_the_target_keeps_a_drafter_that_still_serves_it(tmp_path):
    data = scenario({"model.target": "qwen3-30b-a3b", "model.drafter": "qwen3-0.6b-draft"})
    s = load_scenario(write_scenario(tmp_path, data), ['model.target="qwen3-8b"'])
    assert s.model.drafter == "qwen3-0.6b-draft"


def test_sweep_case_changing_only_the_target_gets_its_drafter(tmp_path):
    data = scenario()
    data["sweep"] = {
        "cases": [
            {"label": "30b", "model.target": "qwen3-30b-a3b"},
            {"label": "8b", "model.target": "qwen3-8b"},
        ]
    }
    _, points = load_sweep(write_scenario(tmp_path, data))
    assert [p.scenario.model.drafter for p in points] == ["eagle3-qwen3-30b-a3b", "eagle3-qwen3-8b"]


def test_set_target_with_an_incompatible_drafter_named_in_the_file_is_an_error(tmp_path, capsys):
    data = scenario({"model.target": "qwen3-30b-a3b", "model.drafter": "eagle3-qwen3-30b-a3b"})
    path = write_scenario(tmp_path, data)
    assert main(["validate", str(path), "--set", 'model.target="qwen3-8b"']) == 2
    err = capsys.readouterr().err
    assert "model.drafter" in err and "eagle3-qwen3-30b-a3b" in err
    assert "--set model.drafter=" in err and "Traceback" not in err
    fixed = ["--set", 'model.target="qwen3-8b"', "--set", 'model.drafter="eagle3-qwen3-8b"']
    assert main(["validate", str(path), *fixed]) == 0


NGRAM_TREES = {
    "a tree speculation table": (
        {"model.drafter": "ngram", "speculation.topk": 2},
        ["speculation.topk: expected", "topk = 1 with the n-gram drafter 'ngram'", "found 2"],
    ),
    "a fixed tree policy": (
        {"model.drafter": "ngram", "policies": [{"name": "fixed_tree", "preset": "sglang_eagle"}]},
        ["policies[0].topk: expected", "n-gram drafter", "4 wide"],
    ),
    "a tree cost-aware policy": (
        {"model.drafter": "ngram", "policies": [{"name": "tree_cost_aware"}]},
        ["policies[0].topks: expected", "n-gram drafter", "4 wide"],
    ),
}


@pytest.mark.parametrize("case", sorted(NGRAM_TREES), ids=sorted(NGRAM_TREES))
def test_an_ngram_drafter_drafts_chains_only(tmp_path, capsys, case):
    edits, fragments = NGRAM_TREES[case]
    path = write_scenario(tmp_path, scenario(edits))
    for argv in (["validate", str(path)], ["run", str(path)]):
        assert_rejected(capsys, argv, tmp_path, [str(path), *fragments])


def test_an_ngram_drafter_serves_a_target_no_other_drafter_lists(tmp_path):
    path = write_scenario(
        tmp_path, scenario({"model.target": "llama-3.1-8b", "model.drafter": "ngram"})
    )
    s = load_scenario(path)
    assert s.drafter.kind == "ngram" and "llama-3.1-8b" not in s.drafter.targets


@pytest.mark.parametrize("flag", ["--topk", "--num-draft-tokens"])
def test_recommend_takes_no_tree_flags_for_an_ngram_drafter(tmp_path, capsys, flag):
    path = write_scenario(tmp_path, scenario({"model.drafter": "ngram"}))
    argv = ["recommend", str(path), "--engine-flags", "sglang", flag, "4"]
    assert_rejected(capsys, argv, tmp_path, [flag, "n-gram drafter", "'ngram'"])
