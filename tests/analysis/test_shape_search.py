"""The flags search: the pruned search finds the brute-force grid's best; edges are warned."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import simspec.analysis.shape_search as search_module
from simspec.analysis.guardrails import K_AT_EDGE
from simspec.analysis.recommend import batch_scenario
from simspec.analysis.shape_search import ShapeGrid, _speedups, screen_scenario, search
from simspec.analysis.shapes import DraftShape, parse_sglang
from tests.helpers import tiny

SMALL_GRID = ShapeGrid("sglang", 4, (1, 2, 4), (3, 4, 6, 8, 12))


@pytest.mark.parametrize(
    ("batch", "alpha", "requests", "mode"),
    [
        (1, 0.7, 8, "analytic"),
        (2, 0.5, 16, "analytic"),
        (2, 0.85, 16, "analytic"),
        (2, 0.7, 16, "monte_carlo"),
    ],
    ids=["b1-a0.7", "b2-a0.5", "b2-a0.85", "b2-a0.7-sampled"],
)
def test_the_pruned_search_keeps_the_brute_force_best(batch, alpha, requests, mode):
    """Every grid shape under every replication (brute force) against the search: same best
    shape, and the finalists' numbers are the brute force's own (the finals are full runs).
    The screen runs one batch of the requests (1/8 of the tokens, as in a full-size search);
    with sampled routing it ranks on the analytic union, and the finals sample."""
    scenario = tiny(
        f"routing.mode='{mode}'",
        f"acceptance.alpha={alpha}",
        f"workload.num_requests={requests}",
        "workload.output_tokens=32",
    )
    replications = 2
    rec = search(scenario, batch, replications, SMALL_GRID)
    assert rec.shapes_screened > search_module.SCREEN_ABOVE  # the screen did run
    screen = search_module.screen_scenario(batch_scenario(scenario, batch, 0, [])).workload
    assert screen.num_requests * screen.output_tokens * 8 == requests * 32
    brute, _ = _speedups(
        batch_scenario(scenario, batch, 0, []), SMALL_GRID.shapes(scenario), replications
    )
    means = {s: float(v.mean()) for s, v in brute.items()}
    best = max(means.values())
    assert means[rec.best.shape] == pytest.approx(best, abs=1e-12)
    for f in rec.finalists:
        assert f.candidate.speedup.mean == pytest.approx(means[f.shape], abs=1e-12)
    assert parse_sglang(rec.best.flags) == rec.best.shape


def test_shapes_sharing_one_reference_set_get_the_speedups_of_separate_runs():
    """The search's groups share one reference set per replication (Monte-Carlo routing): each
    shape's speedups equal those of its group run alone, on a set of its own."""
    from simspec.analysis.replications import replicate

    scenario = batch_scenario(
        tiny('routing.mode="monte_carlo"', "workload.num_requests=4", "workload.output_tokens=32"),
        2,
        0,
        [],
    )
    shapes = [DraftShape(2, 1, 3), DraftShape(3, 4, 8), DraftShape(4, 2, 12)]
    shared, _ = _speedups(scenario, shapes, 2)
    for shape in shapes:
        alone = replicate(search_module._group_scenario(scenario, [shape]), 2)
        assert shared[shape].tolist() == alone.values(f"fixed-{shape.steps}").tolist()


def test_a_reference_set_of_another_text_is_refused():
    from simspec.sim.setup import build_setup, reference_set

    s = tiny("workload.output_tokens=32")
    references = reference_set(tiny("workload.output_tokens=40"))
    with pytest.raises(ValueError, match="another text"):
        build_setup(s, references=references)
    chains_only = reference_set(s)
    with pytest.raises(ValueError, match="another text"):  # drawn without trees' depths
        build_setup(tiny("workload.output_tokens=32", "speculation.topk=2"), references=chains_only)
    assert build_setup(s, references=reference_set(s)).references.workload == s.workload


def test_the_screen_is_a_shorter_workload_of_the_same_batch():
    s = batch_scenario(tiny("workload.num_requests=64", "workload.output_tokens=256"), 2, 0, [])
    screen = screen_scenario(s)
    w = screen.workload
    assert w.concurrency == 2 and w.num_requests == 8 and w.output_tokens == 256
    assert s.routing.mode == "monte_carlo" and screen.routing.mode == "analytic"
    assert dataclasses.replace(screen.routing, mode="monte_carlo") == s.routing  # else the same
    analytic = batch_scenario(tiny("routing.mode='analytic'"), 2, 0, [])
    assert screen_scenario(analytic).routing == analytic.routing
    big = screen_scenario(batch_scenario(s, 64, 0, []))
    assert big.workload.num_requests == 64 and big.workload.output_tokens == 64


def _synthetic(optimum: DraftShape):
    """Speedups peaking at ``optimum`` (a paired offset per replication), no simulation."""

    def speedups(scenario, shapes, replications):
        offsets = np.array([0.0, 0.01, -0.01, 0.02][:replications])
        out = {}
        for s in shapes:
            distance = (
                abs(s.steps - optimum.steps)
                + abs(np.log2(s.topk) - np.log2(optimum.topk))
                + abs(np.log2(s.num_draft_tokens) - np.log2(optimum.num_draft_tokens))
            )
            out[s] = 2.0 - 0.1 * distance + offsets
        return out, ()

    return speedups


@pytest.mark.parametrize(
    ("optimum", "edge"),
    [
        (DraftShape(2, 2, 6), False),
        (DraftShape(3, 2, 8), False),
        (DraftShape(4, 2, 8), True),  # steps = the largest searched
        (DraftShape(2, 4, 8), True),  # topk = the largest searched
        (DraftShape(3, 2, 10), True),  # num_draft_tokens = the largest size
        (DraftShape(2, 1, 3), False),
    ],
    ids=lambda v: v.text if isinstance(v, DraftShape) else str(v),
)
def test_the_edge_warning_fires_when_the_optimum_is_on_the_grids_edge(monkeypatch, optimum, edge):
    monkeypatch.setattr(search_module, "_speedups", _synthetic(optimum))
    scenario = tiny()
    rec = search(scenario, 1, 3, ShapeGrid("sglang", 4, (1, 2, 4), (3, 4, 6, 8, 10)))
    assert rec.best.shape == optimum
    assert rec.runners_up == ()  # a 0.1 step is far outside the paired noise (none)
    fired = [w for w in rec.warnings if w.startswith(K_AT_EDGE)]
    assert bool(fired) == edge, fired
    data = rec.to_dict()
    assert data["warnings"] == list(rec.warnings)
    assert (data["steps"], data["topk"], data["num_draft_tokens"]) == (
        optimum.steps,
        optimum.topk,
        optimum.num_draft_tokens,
    )


def test_the_runs_in_the_scenarios_own_routing_leave_out_the_screen():
    """planned_runs counts the screen's runs (about 1/8 of a full run per shape and per group
    baseline) for the work guard; without them it counts what the scenario's own routing
    prices: each finalist and its baseline under every replication."""
    import math

    from simspec.analysis.shape_search import MAX_FINALISTS, SCREEN_FRACTION, planned_runs

    scenario = batch_scenario(tiny(), 2, 0, [])
    grid = ShapeGrid("sglang", 8, (1, 2, 4, 8), (3, 4, 6, 8, 12, 16, 24, 32, 48, 64))
    kept = search_module.prune(grid.shapes(scenario), search_module._tree_of(scenario))
    groups = len(search_module._groups(kept))
    assert len(kept) > search_module.SCREEN_ABOVE
    finals = 2 * (MAX_FINALISTS + 1) * 3
    assert planned_runs(scenario, grid, 3, screen=False) == finals
    screen = math.ceil((len(kept) + groups) / SCREEN_FRACTION)
    assert planned_runs(scenario, grid, 3) == finals + screen
    small = ShapeGrid("sglang", 2, (1,), (3,))  # too few shapes to screen: every run counts
    assert planned_runs(scenario, small, 3, screen=False) == planned_runs(scenario, small, 3)
