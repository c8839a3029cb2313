"""Draft trees no step can grow are refused (issue 28): ``speculation.num_draft_tokens`` beyond
the root plus the topk + (steps − 1)·topk² nodes of the deepest tree the policies draft exits 2
naming the key; a policy drafting fewer steps on some step keeps its per-request clamp.
"""

from __future__ import annotations

import json

import pytest

from simspec.cli import main
from simspec.text.tree import tree_capacity

from .rejects import assert_rejected, scenario, write_scenario

#: id -> (scenario edits, --set overrides, the largest num_draft_tokens allowed)
TOO_LARGE = {
    "chain of 2 steps verifying 8": ({"speculation.num_draft_tokens": 8}, [], 3),
    "topk 4, 2 steps, 40 tokens": (
        {"speculation.topk": 4, "speculation.num_draft_tokens": 40},
        [],
        tree_capacity(2, 4) + 1,
    ),
    "SGLang flags (3, 2, 12)": (
        {},
        [
            "--set",
            "speculative_num_steps=3",
            "--set",
            "speculative_eagle_topk=2",
            "--set",
            "speculative_num_draft_tokens=12",
        ],
        tree_capacity(3, 2) + 1,
    ),
    "an adaptive policy at the drafter's 8 steps, chain of 10": (
        {
            "speculation.num_draft_tokens": 10,
            "policies": [{"name": "fixed", "draft_tokens": 0}, {"name": "threshold"}],
        },
        [],
        9,
    ),
}


@pytest.mark.parametrize("command", ["run", "validate"])
@pytest.mark.parametrize("case", sorted(TOO_LARGE), ids=sorted(TOO_LARGE))
def test_num_draft_tokens_beyond_the_deepest_tree_is_refused(tmp_path, capsys, case, command):
    edits, overrides, most = TOO_LARGE[case]
    path = write_scenario(tmp_path, scenario(edits))
    found = edits.get("speculation.num_draft_tokens") or int(overrides[-1].split("=")[1])
    assert found > most
    assert_rejected(
        capsys,
        [command, str(path), *overrides],
        tmp_path,
        [str(path), "speculation.num_draft_tokens", f"at most {most}", f"found {found}"],
    )


def test_the_largest_tree_is_accepted_and_shallower_steps_are_clamped(tmp_path, capsys):
    """At the limit the run goes through; fixed k = 1 verifies the topk nodes its depth grows."""
    topk, deepest = 2, 4
    most = tree_capacity(deepest, topk) + 1
    policies = [{"name": "fixed", "draft_tokens": k} for k in (0, 1, deepest)]
    edits = {"speculation.topk": topk, "speculation.num_draft_tokens": most, "policies": policies}
    path = write_scenario(tmp_path, scenario(edits))
    out = tmp_path / "out.json"
    assert main(["run", str(path), "--json", str(out)]) == 0
    rows = {row["label"]: row for row in json.loads(out.read_text())["policies"]}
    assert rows["fixed-1"]["mean_k"] == pytest.approx(tree_capacity(1, topk))
    assert rows[f"fixed-{deepest}"]["mean_k"] == pytest.approx(most - 1)
