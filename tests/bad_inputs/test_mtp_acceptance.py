"""Bad MTP drafters and impossible engine acceptance numbers (issue 28): exit 2, one line
naming the key."""

from __future__ import annotations

import copy

import pytest

from simspec import catalog
from simspec.schema import to_dict

from .rejects import assert_rejected, scenario, write_scenario


def _custom_moe_without_mtp() -> dict:
    model = copy.deepcopy(to_dict(catalog.get_model("qwen3-30b-a3b")))
    del model["name"]
    assert model["mtp_layers"] == 0
    return model


@pytest.mark.parametrize(
    ("mtp_layers", "drafter", "fragment"),
    [
        (0, "mtp-deepseek-v3", "'my-moe' has 0 (mtp_layers"),
        # MiMo-V2-Flash's modules borrow the target's sliding-window layer: a full-attention
        # target with three MTP layers still cannot run them.
        (3, "mtp-mimo-v2-flash", "no sliding-window layers"),
    ],
)
def test_mtp_drafter_on_a_model_that_lacks_its_modules(
    tmp_path, capsys, mtp_layers, drafter, fragment
):
    model = _custom_moe_without_mtp()
    model["mtp_layers"] = mtp_layers
    edits = {"model.target": "my-moe", "model.custom": model, "model.drafter": drafter}
    path = write_scenario(tmp_path, scenario(edits))
    assert_rejected(
        capsys,
        ["validate", str(path)],
        tmp_path,
        [str(path), "model.drafter: expected", fragment, drafter],
    )


@pytest.mark.parametrize(
    ("edits", "fragments"),
    [
        (  # the base's deepest chain is k = 2: at most 3 tokens per verify
            {"acceptance.acceptance_length": 3.5},
            ["acceptance.acceptance_length: expected", "[1, 3]", "3.5"],
        ),
        (
            {"acceptance.acceptance_length": 0.9},
            ["acceptance.acceptance_length: expected", "0.9"],
        ),
        (
            {"acceptance.acceptance_length": 4.5, "acceptance.acceptance_setting": [3, 1, 4]},
            ["acceptance.acceptance_length: expected", "(steps 3, topk 1, num_draft_tokens 4)"],
        ),
        (
            {"acceptance.acceptance_length": 2.0, "acceptance.acceptance_setting": [3, 1]},
            ["acceptance.acceptance_setting: expected", "[3, 1]"],
        ),
        (
            {"acceptance.position_acceptance": [0.5, 0.7]},
            ["acceptance.position_acceptance: expected", "non-increasing", "0.7"],
        ),
        (
            {"acceptance.position_acceptance": [0.5, 1.5]},
            ["acceptance.position_acceptance", "1.5"],
        ),
    ],
)
def test_impossible_acceptance_numbers(tmp_path, capsys, edits, fragments):
    path = write_scenario(tmp_path, scenario(edits))
    assert_rejected(capsys, ["validate", str(path)], tmp_path, [str(path), *fragments])
