"""The SimPy engine: closed forms, invariants, exact traces, reproducibility."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from simspec.analysis.metrics import plain_decode_s, summarize
from simspec.policies import POLICIES, FixedPolicy
from simspec.routing.sets import union_sizes
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from tests.helpers import simulate, tiny

DENSE = ('model.target="qwen3-8b"', 'model.drafter="eagle3-qwen3-8b"')


@pytest.mark.parametrize(("alpha", "k"), [(0.5, 1), (0.6, 3), (0.8, 4), (0.9, 6)])
def test_tokens_per_verify_match_leviathan(alpha, k):
    """Mean committed tokens per verify = (1 - a^(k+1)) / (1 - a), within 3 standard errors."""
    s = tiny(
        *DENSE,
        f"acceptance.alpha={alpha}",
        "workload.concurrency=1",
        "workload.num_requests=3",
        "workload.output_tokens=2500",
    )
    log = run_policy(build_setup(s), FixedPolicy(draft_tokens=k))
    per_step = np.array([st.accepted + 1 for st in log.steps], dtype=float)  # B = 1
    expected = (1 - alpha ** (k + 1)) / (1 - alpha)
    se = per_step.std(ddof=1) / np.sqrt(len(per_step))
    assert abs(per_step.mean() - expected) < 3 * se + 1e-3


@pytest.mark.parametrize("loop", ["closed", "open"])
def test_invariants(loop):
    s = tiny(
        f'workload.loop="{loop}"',
        "workload.num_requests=10",
        "workload.arrival_rate_per_s=50.0",
        "workload.length_jitter=0.5",
        "workload.max_batch_size=4",
    )
    setup = build_setup(s)
    for k in (0, 2, 5):
        log = run_policy(setup, FixedPolicy(draft_tokens=k))
        assert sorted(r.request_id for r in log.requests) == list(range(10))
        for r in log.requests:
            assert (
                r.committed
                == r.output_tokens
                == setup.references.sequence(r.request_id).output_tokens
            )
            assert r.arrival_s <= r.first_token_s <= r.finish_s
            assert 0 <= r.accepted <= r.drafted <= k * r.steps
        starts = [st.start_s for st in log.steps]
        assert starts == sorted(starts)
        assert all(st.drafted <= k * st.batch_size for st in log.steps)
        assert max(st.batch_size for st in log.steps) <= (2 if loop == "closed" else 4)


def test_exact_trace_of_a_tiny_run():
    """One request, alpha = 1, k = 2, 7 output tokens: prefill + two verify passes, by hand."""
    s = tiny(
        "acceptance.alpha=1.0",
        "workload.concurrency=1",
        "workload.num_requests=1",
        "workload.output_tokens=7",
        "workload.prompt_tokens=10",
    )
    setup = build_setup(s)
    log = run_policy(setup, FixedPolicy(draft_tokens=2))
    costs, refs = setup.cost_model, setup.references
    prefill = costs.prefill(np.array([10])).total_s
    t = prefill
    expected, plain = [], []
    for position in (1, 4):  # commits 3 tokens each time: 1 -> 4 -> 7
        ctx = 10 + position
        draft = costs.draft_step(np.array([ctx])) + costs.draft_step(np.array([ctx + 1]))
        unique = union_sizes(refs.fed_routing(0, position, 2), 128)
        verify = costs.verify_pass(np.array([3]), np.array([ctx]), unique).total_s
        expected.append((t, 3, 2))
        extra = costs.speculation_overhead_s(np.array([3]), np.array([ctx]))  # bookkeeping
        t += draft + verify + extra
        # The k = 0 pass at the same state (priced by the analysis, to the same number).
        one = union_sizes(refs.fed_routing(0, position, 0), 128)
        plain.append(costs.verify_pass(np.array([1]), np.array([ctx]), one).total_s)
    assert [(st.fed_tokens, st.accepted) for st in log.steps] == [e[1:] for e in expected]
    assert plain_decode_s(log, setup) == sum(plain)
    assert [st.start_s for st in log.steps] == pytest.approx([e[0] for e in expected], rel=1e-12)
    (req,) = log.requests
    assert (req.first_token_s, req.finish_s, req.steps) == pytest.approx((prefill, t, 2))


def test_same_seed_same_results_different_seed_different():
    a = json.dumps(simulate(tiny()))
    b = json.dumps(simulate(tiny()))
    c = json.dumps(simulate(tiny("seed=2")))
    assert a == b
    assert a != c


def test_runs_in_one_process_do_not_interfere():
    alone = simulate(tiny("seed=5"))
    simulate(tiny("seed=6", "routing.overlap=0.9"))
    again = simulate(tiny("seed=5"))
    assert alone == again


def test_routing_overlap_lowers_unique_experts_in_the_engine():
    rows = {}
    for name, override in (
        ("indep", 'routing.popularity="uniform"'),
        ("overlap", "routing.overlap=0.6"),
    ):
        extra = () if name == "overlap" else ("routing.overlap=0.0",)
        s = tiny(
            override,
            *extra,
            "workload.concurrency=1",
            "workload.num_requests=2",
            "workload.output_tokens=200",
            policies=[{"name": "fixed", "draft_tokens": 4}],
        )
        rows[name] = simulate(s)["policies"][1]
    # overlap=0.0 is below chance (k/N = 0.0625), so it is a conservative independent stand-in.
    assert (
        rows["overlap"]["unique_experts_per_layer"]
        < 0.8 * rows["indep"]["unique_experts_per_layer"]
    )
    assert rows["overlap"]["verify_over_decode"] < rows["indep"]["verify_over_decode"]


def test_moe_speedup_at_batch_one_is_below_dense_speedup():
    common = (
        "acceptance.alpha=0.7",
        "workload.concurrency=1",
        "workload.num_requests=2",
        "workload.output_tokens=300",
    )
    pol = [{"name": "fixed", "draft_tokens": 3}]
    moe = simulate(tiny(*common, policies=pol))["policies"][1]
    dense = simulate(tiny(*common, *DENSE, policies=pol))["policies"][1]
    assert dense["verify_over_decode"] == pytest.approx(1.0, abs=0.1)
    assert moe["verify_over_decode"] > 1.3
    assert moe["speedup_vs_no_spec"] < dense["speedup_vs_no_spec"]
    assert moe["acceptance_length"] == pytest.approx(dense["acceptance_length"], rel=0.1)


def test_open_loop_respects_kv_capacity():
    s = tiny(
        'workload.loop="open"',
        "workload.arrival_rate_per_s=1000.0",
        "workload.num_requests=12",
        "workload.max_batch_size=64",
        "workload.prompt_tokens=4000",
        "workload.output_tokens=50",
    )
    setup = build_setup(s)
    from simspec.physics.models import kv_bytes_for_context

    per_request = kv_bytes_for_context(setup.references.shape, 4000 + 50 + setup.max_draft_tokens)
    fits = int(setup.kv_capacity_bytes // per_request)
    log = run_policy(setup, FixedPolicy(draft_tokens=2))
    assert max(st.batch_size for st in log.steps) <= fits
    assert len(log.requests) == 12
    # Squeeze the memory so fewer fit: the batch shrinks accordingly.
    tight = tiny(
        'workload.loop="open"',
        "workload.arrival_rate_per_s=1000.0",
        "workload.num_requests=12",
        "workload.max_batch_size=64",
        "workload.prompt_tokens=4000",
        "workload.output_tokens=50",
        "hardware.memory_utilization=0.8",
    )
    setup_t = build_setup(tight)
    fits_t = int(setup_t.kv_capacity_bytes // per_request)
    log_t = run_policy(setup_t, FixedPolicy(draft_tokens=2))
    assert 1 <= fits_t < fits
    assert max(st.batch_size for st in log_t.steps) == min(fits_t, 12)


def test_open_loop_ttft_includes_queueing():
    """With one request at a time, a request's first token waits for the previous request."""
    common = ('workload.loop="open"', "workload.num_requests=5", "workload.max_batch_size=1")
    burst = tiny(*common, "workload.arrival_rate_per_s=1000.0")
    log = run_policy(build_setup(burst), FixedPolicy(draft_tokens=0))
    done = sorted(log.requests, key=lambda r: r.arrival_s)
    for prev, cur in itertools.pairwise(done):
        assert cur.first_token_s >= prev.finish_s  # queued behind the previous request
    ttft = [r.first_token_s - r.arrival_s for r in done]
    assert ttft[-1] > 3 * (done[0].finish_s - done[0].first_token_s)  # four requests ahead
    result = summarize(log, log.mean_tpot_s(), name="fixed", label="fixed-0", params={})
    assert result.ttft_ms == pytest.approx(1e3 * sum(ttft) / len(ttft))
    # Arrivals far apart: nobody queues, TTFT is the prefill alone and far smaller.
    sparse = tiny(*common, "workload.arrival_rate_per_s=0.01")
    calm = run_policy(build_setup(sparse), FixedPolicy(draft_tokens=0))
    assert max(r.first_token_s - r.arrival_s for r in calm.requests) < min(ttft[1:])


@pytest.mark.parametrize("name", POLICIES.names())
def test_every_policy_stays_within_its_cap(name):
    policy = POLICIES.create(name)
    setup = build_setup(tiny("workload.num_requests=3"))
    cap = min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens)
    log = run_policy(setup, policy)
    family = policy.tree_family()  # a tree-aware policy's cap is on depth: its nodes may be more
    nodes = cap if family is None else max(s.verified_drafts for s in family if s.steps <= cap)
    assert all(0 <= st.drafted <= nodes * st.batch_size for st in log.steps)
    assert sum(r.committed for r in log.requests) == sum(r.output_tokens for r in log.requests)


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
def test_plain_decode_is_each_steps_k0_pass_at_its_batch_and_contexts(mode):
    """verify_over_decode's denominator: a step in which nobody drafted is its own verify
    pass; any other is priced as every request of its batch feeding one true token."""
    s = tiny(f'routing.mode="{mode}"', "workload.concurrency=3", "workload.num_requests=5")
    setup = build_setup(s)
    log = run_policy(setup, FixedPolicy(draft_tokens=2))
    run_zero = run_policy(setup, FixedPolicy(draft_tokens=0))
    costs, refs = setup.cost_model, setup.references
    offset, ids, positions = log.steps.members()
    want = 0.0
    for s_, step in enumerate(log.steps):
        rid, pos = ids[offset[s_] : offset[s_ + 1]], positions[offset[s_] : offset[s_ + 1]]
        assert step.drafted == 2 * len(rid)
        ones, zeros = np.ones(len(rid), dtype=np.int64), np.zeros(len(rid), dtype=np.int64)
        if mode == "analytic":
            unique = refs.expected_unique(ones, ones)
        else:
            unique = refs.pass_unique_experts(np.array([rid, pos, zeros]).T, zeros)
        contexts = np.array([refs.sequence(r).prompt_tokens for r in rid]) + pos
        want += costs.verify_pass(ones, contexts, unique).total_s
    assert plain_decode_s(log, setup) == pytest.approx(want, rel=1e-12)
    verify_zero = sum(st.verify.total_s for st in run_zero.steps)
    assert plain_decode_s(run_zero, setup) == pytest.approx(verify_zero, rel=1e-12)
