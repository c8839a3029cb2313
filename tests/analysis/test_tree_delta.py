"""Delta space over a node ladder of tree shapes."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.analysis.tree_delta import analyse_ladder, ladder_points, node_ladder
from simspec.analysis.tree_oracle import shape_tables, shape_trees
from simspec.sim.setup import build_setup
from simspec.text.shapes import TreeShape, chain, family, validate
from tests.helpers import tiny


@pytest.fixture(scope="module")
def setup():
    return build_setup(
        tiny(
            "workload.concurrency=1",
            "workload.num_requests=2",
            "workload.output_tokens=60",
            'acceptance.process="bursty"',
        ),
        oracle=True,
    )


def test_node_ladder_stops_where_the_tree_is_full():
    ladder = node_ladder(2, 2, 20)
    assert ladder[0].steps == 0 and ladder[-1] == TreeShape(2, 2, 7)  # 2 + 4 nodes and the root
    assert all(validate(s) is None for s in ladder)


def test_each_rung_adds_one_node_and_its_decisions_are_the_dp_s(setup):
    ladder = node_ladder(3, 2, 8)
    tables = shape_tables(setup, ladder, range(2))
    points, summary = analyse_ladder(tables, shape_trees(setup, ladder), ladder)
    assert set(np.unique(points.delta_a)) <= {0.0, 1.0}  # one node: at most one more accepted
    assert ((points.delta_a_expected > 0) & (points.delta_a_expected <= 1)).all()
    # On the binding pair the local condition is the DP's own argmin.
    assert summary["dp_consistency_violations"] == 0
    assert summary["binding_decisions"] > 0


def test_a_width_one_ladder_prices_progress_as_the_chain_does(setup):
    """Width 1: the rung adding draft j expects c_1·…·c_j, the chain's ΔE[a]."""
    ladder = node_ladder(4, 1, 5)
    tables = shape_tables(setup, ladder, range(2))
    points = ladder_points(tables, shape_trees(setup, ladder), ladder)
    for rid, t in tables.items():
        rows = points.request_id == rid
        chain_progress = np.cumprod(t.confidences[points.state[rows], :4], axis=1)
        expected = chain_progress[np.arange(rows.sum()), points.k[rows]]
        assert points.delta_a_expected[rows] == pytest.approx(expected, rel=1e-12)


def test_a_family_that_is_no_ladder_is_refused(setup):
    shapes = family([chain(1), TreeShape(2, 2, 4)])  # the second adds two nodes
    tables = shape_tables(setup, shapes, range(1))
    with pytest.raises(ValueError, match="does not add one node"):
        ladder_points(tables, shape_trees(setup, shapes), shapes)
