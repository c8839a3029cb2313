"""The scheduler loop on its own, under toy drivers that count passes instead of seconds."""

from __future__ import annotations

import numpy as np

from simspec.policies import FixedPolicy
from simspec.sim.records import RequestRecord
from simspec.sim.schedule import Arrivals, Prefill, schedule
from simspec.sim.setup import build_setup
from simspec.sim.step import EngineState, StepOutcome
from tests.helpers import tiny


def _drive(setup, arrive):
    """Run the loop to its end: the clock is the pass count; ``arrive(request)`` answers each
    :class:`Arrivals`. Returns the requests in order (with the batch size of each step) and the
    finished records."""
    policy = FixedPolicy(draft_tokens=2)
    state = EngineState.start(setup, policy)
    finished: list[RequestRecord] = []
    loop = schedule(setup, policy, state, finished)
    seen: list[tuple[object, int]] = []
    clock = 0.0
    reply = None
    while True:
        try:
            request = loop.send(reply)
        except StopIteration:
            return seen, finished
        seen.append((request, len(state.active)))
        if isinstance(request, Arrivals):
            reply = arrive(request)
        else:
            clock += 1.0
            reply = clock


def test_closed_loop_fills_the_batch_and_replaces_each_finished_request():
    setup = build_setup(tiny("workload.concurrency=3", "workload.num_requests=7"))
    seen, finished = _drive(setup, arrive=None)
    assert not any(isinstance(r, Arrivals) for r, _ in seen)  # a closed loop waits for nobody
    first = seen[0][0]
    assert isinstance(first, Prefill) and first.requests == 3
    assert sum(r.requests for r, _ in seen if isinstance(r, Prefill)) == 7
    batches = [b for r, b in seen if isinstance(r, StepOutcome)]
    assert max(batches) == 3 and min(batches) >= 1
    assert sorted(r.request_id for r in finished) == list(range(7))
    for record in finished:  # replacements arrive when the pass that freed their place ends
        assert record.arrival_s <= record.first_token_s < record.finish_s
        assert record.committed == record.output_tokens
    assert [r.arrival_s for r in finished if r.request_id < 3] == [0.0] * 3


def test_closed_loop_clients_beyond_max_batch_size_wait_in_line():
    # 5 clients, an engine that decodes at most 2 (vLLM's max_num_seqs)
    setup = build_setup(
        tiny("workload.concurrency=5", "workload.num_requests=7", "workload.max_batch_size=2")
    )
    seen, finished = _drive(setup, arrive=None)
    batches = [b for r, b in seen if isinstance(r, StepOutcome)]
    assert max(batches) == 2
    assert sorted(r.request_id for r in finished) == list(range(7))
    waited = [r for r in finished if r.request_id in (2, 3, 4)]  # clients there from the start
    assert all(r.arrival_s == 0.0 < r.first_token_s for r in waited)
    assert max(r.first_token_s for r in waited) > min(r.first_token_s for r in finished)


def test_open_loop_blocks_only_when_the_gpu_is_idle():
    setup = build_setup(tiny('workload.loop="open"', "workload.num_requests=5"))
    ids = iter(range(5))

    def one_at_a_time(request: Arrivals) -> list[int]:
        return [next(ids)] if request.block else []

    seen, finished = _drive(setup, one_at_a_time)
    blocks = [b for r, b in seen if isinstance(r, Arrivals) and r.block]
    assert len(blocks) == 5 and blocks == [0] * 5  # idle each time, once per request
    steps = np.array([b for r, b in seen if isinstance(r, StepOutcome)])
    assert (steps == 1).all()
    assert [r.request_id for r in finished] == list(range(5))
