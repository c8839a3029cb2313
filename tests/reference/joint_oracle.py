"""The exact batched oracle for tiny closed batches: dynamic programming over joint states.

With B > 1 requests sharing every pass, the best draft lengths of one request depend on the
others' (the pass's fixed overhead, its expert union and its draft steps are shared), so the
per-request DP of :mod:`simspec.analysis.oracle` is only an approximation there. For a closed
batch that starts together and is never refilled (``concurrency = num_requests = B``), the
exact optimum is still a shortest path, over joint states s = (i_1, ..., i_B) of committed
positions: every step chooses k = (k_1, ..., k_B) for the active requests, costs

    c(s, k) = draft phase(k) + verify(Σ (k_b + 1) tokens, the union of their experts)

seconds, and moves each active request to i_b + min(k_b, m_b(i_b)) + 1. The quantity the engine
reports, mean TPOT = (1/B) Σ_b (finish_b − first_b) / (L_b − 1), is additive over steps: a step
adds its seconds to the finish time of every request still active, so with weights
w_b = 1 / (B·(L_b − 1)),

    V(s) = min_k [ c(s, k) · Σ_{b active} w_b + V(next(s, k)) ],   V(all finished) = 0,

and V(first state) is the least mean TPOT any plan can reach (all requests get their first
token from the same prefill). The state space is Π_b L_b and each state tries (K + 1)^B
choices, so this is for tiny instances (2-3 requests, tens of tokens): it measures how far the
approximate batched oracle is from the optimum, which is why it is a reference in the tests
(and `python -m studies.oracle_gap`), not part of the package.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from simspec.costs.batch import draft_phase_s
from simspec.sim.engine import EngineSetup

#: Joint states the exact solver accepts before refusing (time and memory grow with them).
MAX_JOINT_STATES = 200_000


@dataclass(frozen=True)
class JointOptimum:
    """The exact optimum of a tiny closed batch."""

    mean_tpot_s: float  # least mean TPOT any plan reaches
    plan: dict[tuple[int, int], int]  # (request id, position) -> draft tokens, along the path
    states: int  # joint states evaluated


def exact_joint_plan(setup: EngineSetup, max_draft_tokens: int | None = None) -> JointOptimum:
    """Solve the joint DP of the module docstring for ``setup``'s requests.

    Parameters
    ----------
    setup : EngineSetup
        A closed-loop setup whose concurrency equals its number of requests.
    max_draft_tokens : int, optional
        Largest k per request (default: the drafter's cap).

    Raises
    ------
    ValueError
        The workload is not one closed batch, or the joint state space is too large.
    """
    w = setup.workload
    if w.loop != "closed" or w.concurrency < w.num_requests:
        raise ValueError("the exact joint oracle needs one closed batch (concurrency >= requests)")
    refs, costs = setup.references, setup.cost_model
    kmax = setup.max_draft_tokens if max_draft_tokens is None else max_draft_tokens
    seqs = [refs.sequence(r) for r in range(w.num_requests)]
    lengths = [s.output_tokens for s in seqs]
    if int(np.prod(lengths)) > MAX_JOINT_STATES:
        raise ValueError(f"{int(np.prod(lengths))} joint states: too many for the exact oracle")
    weights = [1.0 / (len(seqs) * (length - 1)) for length in lengths]

    @functools.cache
    def step_cost(state: tuple[int, ...], ks: tuple[int, ...]) -> float:
        active = [b for b, i in enumerate(state) if i < lengths[b]]
        contexts = np.array([seqs[b].prompt_tokens + state[b] for b in active], dtype=np.int64)
        drafts = np.array([ks[b] for b in active], dtype=np.int64)
        unique = refs.pass_unique_experts([(b, state[b], ks[b]) for b in active])
        verify = costs.verify_pass(drafts + 1, contexts, unique)
        total = draft_phase_s(costs, contexts, drafts) + verify.total_s
        if drafts.sum():  # the engine's speculation overhead (bookkeeping, extend)
            matches = np.array([int(seqs[b].match_lengths[state[b]]) for b in active])
            committed = np.minimum(drafts, matches) + 1
            total += costs.speculation_overhead_s(committed, contexts)
        return total

    @functools.cache
    def value(state: tuple[int, ...]) -> tuple[float, tuple[int, ...]]:
        active = [b for b, i in enumerate(state) if i < lengths[b]]
        if not active:
            return 0.0, ()
        weight = sum(weights[b] for b in active)
        best: tuple[float, tuple[int, ...]] = (float("inf"), ())
        for choice in itertools.product(range(kmax + 1), repeat=len(active)):
            ks = [0] * len(state)
            nxt = list(state)
            for b, k in zip(active, choice, strict=True):
                ks[b] = k
                nxt[b] = state[b] + min(k, int(seqs[b].match_lengths[state[b]])) + 1
            total = step_cost(state, tuple(ks)) * weight + value(tuple(nxt))[0]
            if total < best[0]:
                best = (total, tuple(ks))
        return best

    start = tuple(1 for _ in seqs)  # the prefill commits every request's first token
    plan: dict[tuple[int, int], int] = {}
    state = start
    while any(i < length for i, length in zip(state, lengths, strict=True)):
        _, ks = value(state)
        nxt = list(state)
        for b, i in enumerate(state):
            if i < lengths[b]:
                plan[(b, i)] = ks[b]
                nxt[b] = i + min(ks[b], int(seqs[b].match_lengths[i])) + 1
        state = tuple(nxt)
    return JointOptimum(value(start)[0], plan, value.cache_info().currsize)
