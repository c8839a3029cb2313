"""StepLog: typed columns that read back as the records that were appended."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.params import PassCost
from simspec.sim.records import StepLog, StepRecord


def _fill(log: StepLog, steps: int, seed: int) -> list[tuple[StepRecord, list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    appended = []
    for s in range(steps):
        batch = int(rng.integers(1, 5))
        ids = rng.integers(0, 100, batch)
        pos = rng.integers(1, 500, batch)
        verify = PassCost(*rng.random(4).tolist(), fallback_terms=int(rng.integers(0, 3)))
        drafted = int(rng.integers(0, 4 * batch + 1))
        record = StepRecord(
            start_s=float(s),
            batch_size=batch,
            fed_tokens=drafted + batch,
            drafted=drafted,
            accepted=int(rng.integers(0, drafted + 1)),
            draft_s=float(rng.random()),
            verify=verify,
            unique_experts=float(rng.random() * 128),
            probes=int(rng.integers(0, batch + 1)),
            speculation_overhead_s=float(rng.random()),
        )
        log.append(
            record.start_s,
            record.fed_tokens,
            record.drafted,
            record.accepted,
            record.draft_s,
            record.verify,
            record.unique_experts,
            record.probes,
            record.speculation_overhead_s,
            ids,
            pos,
        )
        appended.append((record, ids.tolist(), pos.tolist()))
    return appended


@pytest.mark.parametrize("steps", [0, 1, 7, 10])
def test_rows_columns_and_members_read_back_what_was_appended(monkeypatch, steps):
    monkeypatch.setattr(StepLog, "PENDING", 3)  # columns filled mid-way, and a remainder
    log = StepLog()
    appended = _fill(log, steps, seed=steps)
    records = [a[0] for a in appended]
    assert len(log) == steps
    assert list(log) == records
    if steps:
        assert log[-1] == records[-1] and log[1:3] == records[1:3]
    assert log.column("draft_s").tolist() == [r.draft_s for r in records]
    assert log.column("moe_s").tolist() == [r.verify.moe_s for r in records]
    assert log.column("fallback_terms").tolist() == [r.verify.fallback_terms for r in records]
    assert log.column("unique_experts").tolist() == [r.unique_experts for r in records]
    offset, ids, pos = log.members()
    for s, (_, want_ids, want_pos) in enumerate(appended):
        assert ids[offset[s] : offset[s + 1]].tolist() == want_ids
        assert pos[offset[s] : offset[s + 1]].tolist() == want_pos
    with pytest.raises(IndexError):
        log[steps]
    with pytest.raises(KeyError):
        log.column("no_such_field")


def test_logs_are_equal_when_their_steps_are():
    a, b, c = StepLog(), StepLog(), StepLog()
    _fill(a, 5, seed=1)
    _fill(b, 5, seed=1)
    _fill(c, 5, seed=2)
    assert a == b and a != c
