"""Bad tree-aware policies: a budget the tree cannot fill, an unknown preset (exit 2)."""

from __future__ import annotations

import pytest

from .rejects import BASE, assert_rejected, scenario, write_scenario

CASES = [
    (
        {"name": "fixed_tree", "steps": 3, "topk": 2, "num_draft_tokens": 12},
        ["policies[1].num_draft_tokens", "at most 11", "12"],
    ),
    (
        {"name": "fixed_tree", "steps": 2, "topk": 1, "num_draft_tokens": 1},
        ["policies[1].num_draft_tokens", "at least 2"],
    ),
    (
        {"name": "fixed_tree", "preset": "sglang_eagle2"},
        ["policies[1].preset", "sglang_eagle"],
    ),
]


@pytest.mark.parametrize(("policy", "fragments"), CASES)
def test_a_tree_the_engine_cannot_run_is_refused(tmp_path, capsys, policy, fragments):
    data = scenario({"policies": [BASE["policies"][0], policy]})
    path = write_scenario(tmp_path, data)
    assert_rejected(capsys, ["run", str(path)], tmp_path, [str(path), *fragments])
