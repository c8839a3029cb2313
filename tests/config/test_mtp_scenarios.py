"""Scenarios with an MTP drafter and with engine-reported acceptance (issue 28, items 1-2)."""

from __future__ import annotations

import math

import pytest

from simspec import catalog
from simspec.cli import main
from simspec.config.load import scenario_from_dict
from simspec.physics.mtp import mtp_weight_bytes
from simspec.physics.precision import with_precision


def _data(**acceptance) -> dict:
    data = {
        "model": {"target": "deepseek-v3", "drafter": "mtp-deepseek-v3", "precision": "fp8"},
        "hardware": {"gpu": "h200", "num_gpus": 8},
        "workload": {"concurrency": 2, "num_requests": 2, "prompt_tokens": 64, "output_tokens": 8},
        "policies": [{"name": "fixed", "draft_tokens": 3}],
    }
    if acceptance:
        data["acceptance"] = acceptance
    return data


def test_an_unset_acceptance_is_the_drafters_documented_default():
    s = scenario_from_dict(_data())
    d = catalog.get_drafter("mtp-deepseek-v3")
    steps, _, _ = d.default_acceptance_setting
    alpha = s.acceptance.alphas[0]  # a one-step chain: AL = 1 + alpha (then it decays)
    assert steps == 1 and alpha == pytest.approx(d.default_acceptance_length - 1, abs=1e-9)
    assert s.acceptance_fit is not None and "default_acceptance_length" in s.acceptance_note
    assert s.to_dict()["acceptance_fit"]["given_acceptance_length"] == d.default_acceptance_length


def test_a_written_alpha_wins_over_the_default_and_says_so():
    s = scenario_from_dict(_data(alpha=0.6))
    assert s.acceptance.alpha == 0.6 and s.acceptance_fit is None
    assert "as the scenario's [acceptance] table states it" in s.acceptance_note
    assert "acceptance_fit" not in s.to_dict()


def test_an_eagle_head_without_a_default_keeps_the_table_default():
    data = _data()
    data["model"]["drafter"] = "eagle3-deepseek-v3"
    s = scenario_from_dict(data)
    assert s.acceptance.alpha == 0.7 and s.acceptance_fit is None
    assert "states no default_acceptance_length" in s.acceptance_note


def test_the_acceptance_length_is_fitted_at_the_scenarios_own_setting():
    s = scenario_from_dict(_data(acceptance_length=1 + 0.5 + 0.25 + 0.125))  # k = 3, alpha 0.5
    assert s.acceptance.process == "iid" and s.acceptance.alpha == pytest.approx(0.5, abs=1e-9)
    assert s.acceptance_fit.setting == (3, 1, 4)
    again = scenario_from_dict(s.to_data())  # the written scenario refits to the same
    assert again.acceptance == s.acceptance and again.digest() == s.digest()


def test_the_memory_check_counts_the_modules_not_the_shared_head():
    s = scenario_from_dict(_data(alpha=0.6))
    target = with_precision(catalog.get_model("deepseek-v3"), "fp8")
    assert s.weight_bytes == pytest.approx(
        target.shape.total_weight_bytes + mtp_weight_bytes(target, 1)
    )


def test_validate_says_where_the_acceptance_came_from(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text(
        '[model]\ntarget = "deepseek-v3"\ndrafter = "mtp-deepseek-v3"\nprecision = "fp8"\n'
        '[hardware]\ngpu = "h200"\nnum_gpus = 8\n'
        "[acceptance]\nposition_acceptance = [0.8, 0.6, 0.4]\n"
    )
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "acceptance fitted to acceptance.position_acceptance" in out
    assert "alpha 0.8000, 0.7500, 0.6667" in out


def test_every_documented_default_reproduces_its_acceptance_length_at_its_setting():
    """Each catalog drafter with a default_acceptance_length: a scenario that leaves
    [acceptance] unset runs at an acceptance whose closed-form AL at the stated (steps, topk,
    num_draft_tokens) is that length (chains: 1 + a + ... + a^steps)."""
    drafters = [catalog.get_drafter(n) for n in catalog.drafter_names()]
    documented = [d for d in drafters if d.default_acceptance_length]
    assert {"mtp-deepseek-v3", "eagle3-gpt-oss-120b", "eagle3-llama-4-maverick-17b-128e"} <= {
        d.name for d in documented
    }
    for d in documented:
        steps, topk, _ = d.default_acceptance_setting
        assert d.default_acceptance_source, d.name
        if topk != 1:
            continue
        target = d.targets[0]
        data = {
            "model": {"target": target, "drafter": d.name},
            "workload": {"concurrency": 1, "num_requests": 1, "output_tokens": 8},
            "policies": [{"name": "fixed", "draft_tokens": steps}],
        }
        if target in ("deepseek-v3", "llama-4-maverick-17b-128e"):  # fit only on a node
            data["model"]["precision"] = "fp8"
            data["hardware"] = {"gpu": "h200", "num_gpus": 8}
        if target == "gpt-oss-120b":
            data["model"]["expert_precision"] = "mxfp4"
        acceptance = scenario_from_dict(data).acceptance
        per_step = (
            acceptance.alphas if acceptance.process == "per_position" else [acceptance.alpha] * 8
        )
        closed_form = sum(math.prod(per_step[:i]) for i in range(steps + 1))
        assert closed_form == pytest.approx(d.default_acceptance_length, rel=1e-6), d.name
