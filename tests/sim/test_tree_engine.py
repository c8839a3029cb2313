"""Draft trees in the engine: fed tokens, commits, draft rows, the chain limit, the CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from simspec.cli import main
from simspec.costs.batch import draft_phase_s, tree_draft_phase_s
from simspec.errors import ScenarioError
from simspec.policies import FixedPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from simspec.sim.tree import TreeSpeculation
from simspec.text.tree import expected_acceptance_length
from tests.helpers import tiny

TREE = ("speculation.topk=4", "speculation.num_draft_tokens=8")


@pytest.mark.parametrize("mode", ["monte_carlo", "analytic"])
def test_every_request_at_full_depth_feeds_num_draft_tokens(mode):
    """Tokens fed = B · num_draft_tokens (root included); commits ≤ depth + 1 per request."""
    s = tiny(*TREE, f'routing.mode="{mode}"', "workload.output_tokens=40")
    setup = build_setup(s)
    k = 3
    log = run_policy(setup, FixedPolicy(draft_tokens=k))
    assert log.steps
    for step in log.steps:
        assert step.fed_tokens == step.batch_size * 8
        assert step.drafted == step.batch_size * 7
        assert 0 <= step.accepted <= step.batch_size * k
    for r in log.requests:
        assert r.committed == r.output_tokens
        assert r.accepted <= k * r.steps
        assert r.drafted == 7 * r.steps


@pytest.mark.parametrize("mode", ["monte_carlo", "analytic"])
def test_a_tree_of_topk_one_is_the_chain_bit_for_bit(mode):
    s = tiny(f'routing.mode="{mode}"', "workload.output_tokens=40")
    chain = build_setup(s)
    assert chain.tree is None  # the default [speculation] is a chain
    tree = dataclasses.replace(
        chain,
        tree=TreeSpeculation.from_config(
            dataclasses.replace(s.speculation, topk=1, num_draft_tokens=0),
            s.acceptance,
            chain.max_draft_tokens,
            s.seed,
        ),
    )
    for k in (0, 2, 4):
        a = run_policy(chain, FixedPolicy(draft_tokens=k))
        b = run_policy(tree, FixedPolicy(draft_tokens=k))
        assert a.steps == b.steps
        assert a.requests == b.requests


def test_trees_commit_more_per_step_than_chains_on_the_same_text():
    """Common random numbers: the tree contains the chain, so it never accepts less."""
    chain = tiny("workload.output_tokens=60")
    tree = tiny(*TREE, "workload.output_tokens=60")
    a = run_policy(build_setup(chain), FixedPolicy(draft_tokens=3))
    b = run_policy(build_setup(tree), FixedPolicy(draft_tokens=3))
    per_step = [sum(st.accepted for st in log.steps) / len(log.steps) for log in (a, b)]
    assert per_step[1] > per_step[0]


def test_committed_tokens_match_the_closed_form():
    """B = 1, long output: mean tokens per verify → 1 + Σ_v Π q (within 4 standard errors)."""
    alpha, rho = 0.6, 0.65
    s = tiny(
        "speculation.topk=3",
        "speculation.num_draft_tokens=8",
        f"speculation.rank_decay={rho}",
        f"acceptance.alpha={alpha}",
        'routing.mode="analytic"',
        "workload.concurrency=1",
        "workload.num_requests=2",
        "workload.output_tokens=1500",
    )
    log = run_policy(build_setup(s), FixedPolicy(draft_tokens=3))
    per_step = np.array([st.accepted + 1 for st in log.steps], dtype=float)
    expected = expected_acceptance_length(alpha, 3, 3, 8, rho)
    se = per_step.std(ddof=1) / np.sqrt(len(per_step))
    assert abs(per_step.mean() - expected) < 4 * se + 1e-3


class RowCounter:
    """A cost model whose draft step costs one second per row."""

    def draft_step(self, context_tokens):
        return float(len(context_tokens))


def test_draft_phase_forwards_one_row_then_topk_rows_per_request():
    contexts, depths = np.array([100, 200, 300]), np.array([3, 1, 0])
    # Step 1: two requests, one row each; steps 2, 3: one request, 4 rows each.
    assert tree_draft_phase_s(RowCounter(), contexts, depths, 4) == 2 + 4 + 4
    assert tree_draft_phase_s(RowCounter(), contexts, depths, 1) == draft_phase_s(
        RowCounter(), contexts, depths
    )


def test_num_draft_tokens_one_is_rejected():
    with pytest.raises(ScenarioError, match=r"speculation\.num_draft_tokens"):
        tiny("speculation.num_draft_tokens=1")


def test_tree_scenario_runs_end_to_end_through_the_cli(tmp_path, capsys):
    scenario = tmp_path / "tree.toml"
    scenario.write_text(
        "\n".join(
            [
                'name = "tree"',
                "[speculation]",
                "topk = 4",
                "num_draft_tokens = 8",
                "[workload]",
                "num_requests = 4",
                "concurrency = 2",
                "output_tokens = 24",
                "[[policies]]",
                'name = "fixed"',
                "draft_tokens = 3",
            ]
        )
    )
    out = tmp_path / "out.json"
    assert main(["run", str(scenario), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["policies"]
    tree_row = next(r for r in rows if r["label"] == "fixed-3")
    assert tree_row["mean_k"] == pytest.approx(7.0)  # verified draft nodes per request and step
    assert 1.0 < tree_row["acceptance_length"] <= 4.0


def test_analytic_trees_load_fewer_experts_as_siblings_route_alike():
    """routing.sibling_overlap reaches the engine: more sibling overlap, fewer experts per
    verify pass of the same trees (same commits: the text does not depend on routing)."""
    runs = []
    for sibling in (0.2, 0.38, 0.9):
        s = tiny(
            *TREE,
            'routing.mode="analytic"',
            f"routing.sibling_overlap={sibling}",
            "workload.output_tokens=40",
        )
        log = run_policy(build_setup(s), FixedPolicy(draft_tokens=3))
        runs.append(log)
    committed = [[r.committed for r in log.requests] for log in runs]
    assert committed[0] == committed[1] == committed[2]
    unique = [np.mean([step.unique_experts for step in log.steps]) for log in runs]
    assert unique[0] > unique[1] > unique[2]


def test_a_tree_run_draws_each_rejected_depth_of_a_block_once(monkeypatch):
    """A tree feeds rejected depths beyond K_max at any state: the reference set keeps every
    row of them, so no read finds a row left out and makes its block draw its depths again
    (a chain's K_max cap would leave those rows out)."""
    from simspec.text.reference import ReferenceSet

    drawn: list[tuple[int, int]] = []
    draw = ReferenceSet._draw_rejected

    def counted(self, block, level, *args):
        drawn.append((block, level))
        return draw(self, block, level, *args)

    monkeypatch.setattr(ReferenceSet, "_draw_rejected", counted)
    s = tiny("speculation.topk=4", "speculation.num_draft_tokens=16", "workload.output_tokens=40")
    setup = build_setup(s)
    assert s.drafter.max_draft_tokens < 15  # the tree reads depths a chain never reads
    run_policy(setup, FixedPolicy(draft_tokens=3))
    assert drawn and max(level for _, level in drawn) >= s.drafter.max_draft_tokens
    assert len(drawn) == len(set(drawn))
