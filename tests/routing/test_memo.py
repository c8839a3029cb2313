"""Fit memos: answers remembered per arguments, exported and absorbed across processes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from simspec.routing.memo import FIT_MEMOS, FitMemo, absorb_fits, fit_marks, fits_since


def _counting(fn):
    calls = []

    def wrapped(*args):
        calls.append(args)
        return fn(*args)

    return wrapped, calls


def test_an_answer_is_computed_once_and_the_oldest_is_forgotten_when_full():
    fn, calls = _counting(lambda x: np.arange(x, dtype=float))
    memo = FitMemo("t", fn, maxsize=2, register=False)
    first = memo(3)
    assert memo(3) is first and calls == [(3,)]
    assert not first.flags.writeable
    memo(4), memo(5)  # 3 is the oldest: forgotten
    assert len(memo) == 2
    memo(3)
    assert calls == [(3,), (4,), (5,), (3,)]


def test_an_exception_is_not_remembered():
    fn, calls = _counting(lambda x: 1 / x)
    memo = FitMemo("t", fn, maxsize=4, register=False)
    for _ in range(2):
        with pytest.raises(ZeroDivisionError):
            memo(0)
    assert len(calls) == 2 and len(memo) == 0


def test_only_computed_answers_are_exported_and_absorbed_ones_come_back_read_only():
    here = FitMemo("t", lambda x: np.full(2, float(x)), maxsize=8, register=False)
    there = FitMemo("t", lambda x: np.full(2, -1.0), maxsize=8, register=False)
    here(1)
    mark = here.computed
    here(2), here(3)
    shipped = pickle.loads(pickle.dumps(here.computed_since(mark)))  # as a worker returns it
    assert sorted(shipped) == [(2,), (3,)]
    there.absorb(shipped)
    assert there(2).tolist() == [2.0, 2.0] and not there(2).flags.writeable
    assert there.computed == 0 and there.computed_since(0) == {}  # absorbed: not re-exported
    there(1)  # missing: computed by its own function
    assert there(1).tolist() == [-1.0, -1.0] and list(there.computed_since(0)) == [(1,)]


def test_the_registry_exports_and_absorbs_by_memo_name():
    name = "test.registry.memo"
    memo = FitMemo(name, lambda x: x + 1, maxsize=4)
    try:
        with pytest.raises(ValueError, match="exists"):
            FitMemo(name, lambda x: x, maxsize=4)
        marks = fit_marks()
        memo(1)
        fits = fits_since(marks)
        assert fits == {name: {(1,): 2}}
        memo.cache_clear()
        absorb_fits(fits)
        assert memo(1) == 2 and memo.computed == 1  # absorbed: not computed again
    finally:
        del FIT_MEMOS[name]


def test_the_routing_fits_are_registered():
    import simspec.routing.predictor  # noqa: F401

    assert "routing.predictor.node_log_silent" in FIT_MEMOS
