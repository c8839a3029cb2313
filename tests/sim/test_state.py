"""The engine's struct-of-arrays request state against direct computations per request."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.physics.models import kv_bytes_for_context
from simspec.policies import FixedPolicy, ThresholdPolicy
from simspec.sim.engine import run_policy
from simspec.sim.setup import build_setup
from simspec.sim.state import ActiveBatch, RequestTable
from tests.helpers import tiny

JITTER = ("workload.length_jitter=0.5", "workload.num_requests=7", "workload.output_tokens=30")


def test_request_table_gathers_what_each_sequence_holds():
    setup = build_setup(tiny(*JITTER))
    refs = setup.references
    table = RequestTable(refs, 7, setup.max_draft_tokens)
    rng = np.random.default_rng(0)
    for r in range(7):
        seq = refs.sequence(r)
        assert table.prompt[r] == seq.prompt_tokens and table.output[r] == seq.output_tokens
        need = seq.prompt_tokens + seq.output_tokens + setup.max_draft_tokens
        assert table.kv_bytes[r] == kv_bytes_for_context(refs.shape, need)
        states = rng.integers(0, seq.output_tokens, 5)
        np.testing.assert_array_equal(
            table.match[table.offset[r] + states], seq.match_lengths[states]
        )
        np.testing.assert_array_equal(
            table.confidences[table.offset[r] + states], seq.confidences[states]
        )


def test_active_batch_matches_a_list_of_requests():
    """Admit, advance and drop requests at random; every field as per-request bookkeeping."""
    setup = build_setup(tiny(*JITTER))
    table = RequestTable(setup.references, 7, setup.max_draft_tokens)
    batch = ActiveBatch()
    plain: list[dict] = []  # the straightforward bookkeeping
    rng = np.random.default_rng(1)
    arrival = rng.random(7)
    waiting = list(range(7))
    now = 0.0
    while waiting or plain:
        if waiting and rng.random() < 0.5:
            ids = waiting[: int(rng.integers(1, 3))]
            waiting = waiting[len(ids) :]
            batch.admit(table, ids, arrival, now)
            for r in ids:
                seq = setup.references.sequence(r)
                plain.append(
                    {"id": r, "pos": 1, "prompt": seq.prompt_tokens, "out": seq.output_tokens,
                     "steps": 0, "drafted": 0, "accepted": 0, "arrival": arrival[r], "first": now,
                     "acc_h": [], "drf_h": []}
                )  # fmt: skip
        if not plain:
            continue
        now += 1.0
        m = np.array([setup.references.sequence(p["id"]).match_lengths[p["pos"]] for p in plain])
        np.testing.assert_array_equal(batch.match_lengths(table), m)
        ks = rng.integers(0, 5, len(plain))
        acc = np.minimum(ks, m)
        batch.advance(acc + 1, acc, ks)
        for p, a, k in zip(plain, acc.tolist(), ks.tolist(), strict=True):
            p.update(pos=p["pos"] + a + 1, steps=p["steps"] + 1, drafted=p["drafted"] + k)
            p.update(accepted=p["accepted"] + a)
            p["acc_h"].append(a)
            p["drf_h"].append(k)
        keep = np.array([p["pos"] < p["out"] for p in plain])
        batch.keep(keep)
        plain = [p for p, k in zip(plain, keep, strict=True) if k]
        assert batch.request_id.tolist() == [p["id"] for p in plain]
        assert batch.position.tolist() == [p["pos"] for p in plain]
        assert batch.contexts().tolist() == [p["prompt"] + p["pos"] for p in plain]
        assert batch.steps.tolist() == [p["steps"] for p in plain]
        assert batch.drafted.tolist() == [p["drafted"] for p in plain]
        assert batch.accepted.tolist() == [p["accepted"] for p in plain]
        assert batch.arrival_s.tolist() == [p["arrival"] for p in plain]
        assert batch.first_token_s.tolist() == [p["first"] for p in plain]


def _walk(seq, decide) -> tuple[int, int, int, int]:
    """One request alone: (steps, drafted, accepted, probes) when ``decide(state)`` gives its
    draft length and whether it probed. A chain request's path does not depend on the batch
    when its policy decides from its own text."""
    position, steps, drafted, accepted, probes = 1, 0, 0, 0, 0
    while position < seq.output_tokens:
        k, probe = decide(seq, position)
        a = min(k, int(seq.match_lengths[position]))
        position, steps = position + a + 1, steps + 1
        drafted, accepted, probes = drafted + k, accepted + a, probes + probe
    return steps, drafted, accepted, probes


@pytest.mark.parametrize("loop", ["closed", "open"])
@pytest.mark.parametrize(
    "policy", [FixedPolicy(draft_tokens=3), ThresholdPolicy(tau=0.6, max_tokens=5)], ids=repr
)
def test_each_request_follows_its_own_walk(loop, policy):
    setup = build_setup(
        tiny(*JITTER, f'workload.loop="{loop}"', "workload.max_batch_size=3",
             "workload.concurrency=3", "workload.arrival_rate_per_s=200.0")
    )  # fmt: skip
    cap = min(policy.budget_cap(setup.max_draft_tokens), setup.max_draft_tokens)

    def decide(seq, position):
        if isinstance(policy, FixedPolicy):
            return cap, 0
        conf = seq.confidences[position]
        k = next((j for j in range(cap) if conf[j] < policy.tau), cap)
        return k, int(k < cap)  # declined after reading the next confidence: a probe

    log = run_policy(setup, policy)
    assert sorted(r.request_id for r in log.requests) == list(range(7))
    probes = 0
    for r in log.requests:
        steps, drafted, accepted, probe = _walk(setup.references.sequence(r.request_id), decide)
        assert (r.steps, r.drafted, r.accepted) == (steps, drafted, accepted)
        assert r.committed == r.output_tokens
        probes += probe
    assert sum(s.probes for s in log.steps) == probes
    assert sum(s.accepted for s in log.steps) == sum(r.accepted for r in log.requests)
    assert sum(s.fed_tokens for s in log.steps) == sum(r.drafted + r.steps for r in log.requests)
