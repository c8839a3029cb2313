"""Rejected drafts stored at the states a chain within the draft bound can read."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simspec.analysis.oracle import unique_experts_table
from simspec.sim.setup import build_setup, draft_bound
from simspec.text import reference
from simspec.text.reference import ReferenceSet
from simspec.text.rejected_levels import (
    BlockInputs,
    RejectedLevel,
    RejectedStore,
    reachable_states,
)
from tests.helpers import tiny

POLICIES = [{"name": "fixed", "draft_tokens": 0}, {"name": "fixed", "draft_tokens": 2}]


def _pair(*overrides: str, bound: int = 2) -> tuple[ReferenceSet, ReferenceSet]:
    """The same scenario's reference set with every row kept and with the bound's rows only."""
    scenario = tiny(*overrides, policies=POLICIES)
    dense = build_setup(scenario, oracle=True).references
    sparse = build_setup(scenario).references
    assert dense.draft_bound is None and sparse.draft_bound == bound
    return dense, sparse


def test_reachable_states_is_the_chain_condition():
    # Depth r is fed at state i by some k <= bound iff k - min(k, m_i) >= r for some such k.
    rng = np.random.default_rng(3)
    matches = rng.integers(0, 9, size=(3, 12))
    outputs = np.array([12, 7, 1])
    for bound, depth in itertools.product(range(0, 6), range(1, 6)):
        got = reachable_states(matches, outputs, bound, depth)
        for q, i in np.ndindex(matches.shape):
            fed = any(k - min(k, matches[q, i]) >= depth for k in range(bound + 1))
            assert got[q, i] == (fed and i < outputs[q])


def test_level_keeps_the_masked_rows_and_reports_the_others():
    ids = np.arange(2 * 5 * 3 * 2, dtype=np.uint8).reshape(2, 5, 3, 2)
    keep = np.zeros((2, 5), dtype=bool)
    keep[0, [1, 3]] = keep[1, 4] = True
    level = RejectedLevel(ids, keep)
    assert not level.dense and level.ids.shape == (3, 3, 2)
    assert np.array_equal(level.get(0, 3), ids[0, 3])
    assert np.array_equal(level.get(np.array([1, 0]), np.array([4, 1])), ids[[1, 0], [4, 1]])
    assert level.get(0, 2) is None and level.get(np.array([0, 0]), np.array([1, 2])) is None
    rows = level.states(0, 4, needed=np.array([False, True, False, True]))
    assert rows is not None and np.array_equal(rows[[1, 3]], ids[0, [1, 3]])
    assert not rows[[0, 2]].any()  # rows left out read as zeros, never as another state's ids
    assert level.states(0, 4, needed=np.array([True, False, False, False])) is None
    assert RejectedLevel(ids, np.ones((2, 5), dtype=bool)).dense


@pytest.mark.parametrize(
    "overrides",
    [(), ("routing.overlaps=[0.38, 0.3]",), ('routing.popularity="zipf"',)],
    ids=["reuse", "maxent", "zipf"],
)
def test_bounded_reads_give_the_same_ids_with_less_memory(overrides):
    dense, sparse = _pair("workload.output_tokens=40", *overrides)
    for request, k in itertools.product(range(4), range(3)):
        n = dense.sequence(request).output_tokens
        for state in range(n):
            assert np.array_equal(
                sparse.fed_routing(request, state, k), dense.fed_routing(request, state, k)
            )
        assert np.array_equal(sparse.state_routing(request, k), dense.state_routing(request, k))
        (t1, r1, a1), (t2, r2, a2) = sparse.state_tokens(request, k), dense.state_tokens(request, k)
        assert np.array_equal(t1, t2) and np.array_equal(a1, a2) and len(r1) == len(r2)
        for depth, (x, y) in enumerate(zip(r1, r2, strict=True), start=1):
            fed = k - a1 >= depth  # the rows a window union reads
            assert np.array_equal(x[fed], y[fed])
    triples = np.array([[0, 3, 2], [1, 5, 1], [3, 7, 2]])
    assert np.array_equal(sparse.pass_unique_experts(triples), dense.pass_unique_experts(triples))
    stored = [sum(level.nbytes for level in d._rejected.stored(0)) for d in (sparse, dense)]
    assert not sparse._rejected.dense_blocks and stored[0] < stored[1]
    assert len(sparse._rejected.stored(0)) == 2  # drawn to the bound at once


def test_a_read_beyond_the_bound_draws_every_row_again():
    dense, sparse = _pair("acceptance.alpha=0.3", "workload.output_tokens=30")
    sparse.fed_routing(1, 2, 1)  # the bound's depths, rows left out
    assert np.array_equal(sparse.fed_routing(1, 4, 5), dense.fed_routing(1, 4, 5))
    assert sparse._rejected.dense_blocks == {0} and all(
        lv.dense for lv in sparse._rejected.stored(0)
    )
    assert np.array_equal(sparse.state_routing(2, 6), dense.state_routing(2, 6))


def test_a_left_out_row_inside_the_bound_depth_is_drawn_again():
    # A draft tree feeds its off-path nodes as rejected drafts whatever m_i is: a read of a row
    # the chain condition left out makes the block keep every row.
    dense, sparse = _pair("acceptance.alpha=0.9", "workload.output_tokens=30")
    seq = sparse.sequence(0)
    state = int(np.argmax(seq.match_lengths[1:] >= 2)) + 1  # m_i >= 2: depth 1 left out
    assert seq.match_lengths[state] >= 2
    got = sparse.fed_routing(0, state, 2, accepted=0)
    assert np.array_equal(got, dense.fed_routing(0, state, 2, accepted=0))
    assert sparse._rejected.dense_blocks == {0}


@pytest.mark.parametrize("kmax", [2, 4])
def test_oracle_tables_agree_with_a_bounded_reference_set(kmax):
    scenario = tiny("workload.output_tokens=20", policies=POLICIES)
    dense, sparse = build_setup(scenario, oracle=True), build_setup(scenario)
    for request in range(3):
        table = unique_experts_table(sparse, request, kmax)
        assert np.array_equal(table, unique_experts_table(dense, request, kmax))
    assert bool(sparse.references._rejected.dense_blocks) == (kmax > 2)


def test_blocks_decide_on_their_own(monkeypatch):
    monkeypatch.setattr(reference, "BLOCK_REQUESTS", 2)
    dense, sparse = _pair("workload.output_tokens=20")
    sparse.fed_routing(3, 2, 6)  # beyond the bound in block 1 only
    sparse.fed_routing(0, 2, 2)
    assert sparse._rejected.dense_blocks == {1} and not sparse._rejected.stored(0)[0].dense
    assert np.array_equal(sparse.fed_routing(0, 5, 2), dense.fed_routing(0, 5, 2))


def test_draft_bound_of_a_scenario():
    assert draft_bound(tiny(policies=POLICIES)) == 2
    assert draft_bound(tiny(policies=POLICIES), oracle=True) is None
    capped = [{"name": "threshold", "tau": 0.5, "max_tokens": 8}]
    assert draft_bound(tiny(policies=capped)) == tiny().drafter.max_draft_tokens
    tree = tiny("speculation.topk=2", "speculation.num_draft_tokens=6")
    assert draft_bound(tree) is None
    # A bound at K_max leaves nothing out: the set keeps every row.
    assert build_setup(tiny(policies=capped)).references.draft_bound is None


def test_store_draws_each_depth_once_and_lets_old_rows_go():
    matches = np.array([[0, 1, 2, 3, 0], [3, 3, 1, 0, 0]])
    inputs = BlockInputs(np.zeros((2, 5, 1, 1)), matches, np.array([5, 4]), matches)
    calls = []

    def draw(block, level, given, shallower, keep):
        calls.append((block, level, [len(s) for s in shallower]))
        ids = np.arange(10, dtype=np.int64).reshape(2, 5, 1, 1)
        return ids + 100 * (level + 1)  # depth r holds 100 r + 5 q + i

    store = RejectedStore(lambda block: inputs, draw, bound=3, memory=lambda: 1)
    assert np.array_equal(store.ids(0, 1, 0, 2), [[102]])  # m = 2 <= 3 - 1: stored
    # Depths 1..3 drawn at once; a draw sees the depth before it whole, older ones let go.
    assert calls == [(0, 0, []), (0, 1, [2]), (0, 2, [0, 2])]
    assert [int(np.count_nonzero(lv.rows >= 0)) for lv in store.stored(0)] == [6, 5, 3]
    assert np.array_equal(store.ids(0, 2, np.array([1, 0]), np.array([2, 1])), [[[207]], [[201]]])
    assert not store.dense_blocks
    assert np.array_equal(store.ids(0, 3, 1, 0), [[305]])  # m = 3 > 3 - 3: left out, drawn again
    assert store.dense_blocks == {0} and all(lv.dense for lv in store.stored(0))
    assert calls[3:] == [(0, 0, []), (0, 1, [2]), (0, 2, [2, 2])]  # every row kept this time


@pytest.mark.parametrize("routing", [(), ("routing.overlaps=[0.38, 0.3]",)])
def test_without_a_bound_depths_are_computed_at_k_max_reachable_states_only(routing):
    """No bound (the oracle reads every k <= K_max): depth r is computed at m_i <= K_max − r;
    a read elsewhere (a tree's off-path node) draws the block again with every state, and every
    state it had computed keeps its ids."""
    scenario = tiny("acceptance.alpha=0.9", "workload.output_tokens=30", *routing)
    capped = build_setup(scenario, oracle=True).references
    whole = build_setup(scenario, oracle=True).references
    whole._rejected.cap = None  # every state, from the start
    kmax = capped.max_draft_tokens
    first = capped.state_routing(0, kmax)  # every chain read: inside the cap
    assert not capped._rejected.dense_blocks
    assert np.array_equal(first, whole.state_routing(0, kmax))
    seq = capped.sequence(0)
    state = int(np.argmax(seq.match_lengths[1:] >= 2)) + 1  # m_i >= 2: depth K_max − 1 left out
    got = capped.fed_routing(0, state, kmax, accepted=0)
    assert capped._rejected.dense_blocks == {0}
    assert np.array_equal(got, whole.fed_routing(0, state, kmax, accepted=0))
    assert np.array_equal(capped.state_routing(0, kmax), first)
