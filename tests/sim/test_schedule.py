"""The scheduler loop on its own, under toy drivers that count passes instead of seconds."""

from __future__ import annotations

import numpy as np
import pytest

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


def _closed(interval: int, *extra: str):
    return build_setup(
        tiny(
            "workload.concurrency=4",
            "workload.num_requests=24",
            "workload.length_jitter=0.5",
            f"engine.scheduler_recv_interval={interval}",
            *extra,
        )
    )


@pytest.mark.parametrize("interval", [1, 4])
def test_a_replacement_waits_for_the_schedulers_next_poll(interval):
    """A request that arrives while others decode is taken in at the next poll, at most
    ``interval`` decode steps later (SGLang's --scheduler-recv-interval): with one pass per
    clock tick, its first token comes 1 (its own prefill) to ``interval`` passes after it
    arrived, and with 1 (the default) right after its prefill."""
    setup = _closed(interval)
    seen, finished = _drive(setup, arrive=None)
    waits = [r.first_token_s - r.arrival_s for r in finished if r.request_id >= 4]
    assert len(waits) == 20
    assert min(waits) >= 1 and max(waits) <= interval
    if interval == 1:
        assert set(waits) == {1.0}
    else:
        assert max(waits) > 1  # some replacement waited for the poll
        # after a prefill the scheduler polls at once: a request freed then waits no step
        prefills = [i for i, (r, _) in enumerate(seen) if isinstance(r, Prefill)]
        assert len(prefills) < 21  # replacements arriving between polls share a prefill


def test_a_large_recv_interval_admits_in_waves():
    """With an interval no batch reaches, the scheduler polls only after a prefill and when
    the batch has emptied: every prefill after the first starts with no request decoding,
    unless a request finished in the step right after the last prefill."""
    seen, finished = _drive(_closed(10_000), arrive=None)
    assert sorted(r.request_id for r in finished) == list(range(24))
    later = [i for i, (r, _) in enumerate(seen) if isinstance(r, Prefill)][1:]
    assert later
    for i in later:
        assert seen[i][1] == 0 or isinstance(seen[i - 2][0], Prefill)
    assert sum(seen[i][1] == 0 for i in later) > len(later) / 2


def test_the_wait_for_a_poll_is_priced_into_the_time_to_first_token():
    """On the SimPy clock the same replacements reach their first token later when the
    scheduler polls every 8 decode steps: by at most 8 steps' time each."""
    from simspec.sim.engine import run_policy

    policy = FixedPolicy(draft_tokens=2)
    logs = {n: run_policy(_closed(n), policy, timed=True) for n in (1, 8)}
    ttft = {
        n: {r.request_id: r.first_token_s - r.arrival_s for r in log.requests}
        for n, log in logs.items()
    }
    longest_step = max(s.end_s - s.start_s for s in logs[8].steps)
    prefill = max(p.cost.total_s for p in logs[8].prefills)
    assert np.mean(list(ttft[8].values())) > np.mean(list(ttft[1].values()))
    assert max(ttft[8].values()) <= 8 * longest_step + prefill + 1e-12
