"""Memos of the routing fits that a sweep's processes can hand to each other.

Fitting a model's routing statistics (the max-entropy tables of P(silent) per token count) can
cost more than simulating a small sweep point, and every point of a sweep with that model and
seed asks for the same fit. :class:`FitMemo` remembers each answer by its arguments, like
``functools.lru_cache``, and also lets a process export the answers it computed itself and
another absorb them: a sweep checks its points in forked workers, one model each, and the parent
takes their fits back before it forks the workers that run the points
(:func:`simspec.sweep.spec.expand`).

The memoised functions are pure and their answers read-only arrays, so an answer is the same
whichever process computed it: absorbing one changes no result, only who pays for it.

>>> square = FitMemo("square", lambda x: x * x, maxsize=2, register=False)
>>> square(3), square(3), square.computed_since(0)
(9, 9, {(3,): 9})
>>> elsewhere = FitMemo("square", lambda x: -1, maxsize=2, register=False)
>>> elsewhere.absorb(square.computed_since(0)); elsewhere(3)
9
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

#: Every memo by name: what :func:`fits_since` exports and :func:`absorb_fits` fills.
FIT_MEMOS: dict[str, FitMemo] = {}


class FitMemo:
    """A bounded memo of ``fn`` (positional, hashable arguments), registered as ``name``
    (``register=False``: a private one, which the functions below do not see).

    When full it forgets its oldest answer. An exception is not remembered. Answers that are
    numpy arrays are kept read-only (an absorbed array comes writeable out of pickle).
    """

    def __init__(self, name: str, fn: Callable[..., Any], maxsize: int, register: bool = True):
        if register and name in FIT_MEMOS:
            raise ValueError(f"a fit memo named {name!r} exists")
        self.name = name
        self._fn = fn
        self._maxsize = maxsize
        self._answers: dict[tuple[Hashable, ...], Any] = {}
        #: How many answers this process has computed, and the number of each one it still
        #: remembers (absorbed answers have none: they are not exported again).
        self.computed = 0
        #: Seconds this process spent computing answers.
        self.seconds = 0.0
        self._numbers: dict[tuple[Hashable, ...], int] = {}
        if register:
            FIT_MEMOS[name] = self

    def __call__(self, *key: Hashable) -> Any:
        try:
            return self._answers[key]
        except KeyError:
            pass
        start = time.perf_counter()
        answer = self._fn(*key)
        self.seconds += time.perf_counter() - start
        self._store(key, answer)
        self._numbers[key] = self.computed
        self.computed += 1
        return answer

    def __len__(self) -> int:
        return len(self._answers)

    def _store(self, key: tuple[Hashable, ...], answer: Any) -> None:
        if isinstance(answer, np.ndarray):
            answer.setflags(write=False)
        if len(self._answers) >= self._maxsize:
            oldest = next(iter(self._answers))
            del self._answers[oldest]
            self._numbers.pop(oldest, None)
        self._answers[key] = answer

    def computed_since(self, mark: int) -> dict[tuple[Hashable, ...], Any]:
        """The answers this process computed after its first ``mark`` (those still remembered)."""
        return {k: self._answers[k] for k, n in self._numbers.items() if n >= mark}

    def absorb(self, answers: Mapping[tuple[Hashable, ...], Any]) -> None:
        """Remember ``answers`` (from another process) that this memo lacks."""
        for key, answer in answers.items():
            if key not in self._answers:
                self._store(key, answer)

    def cache_clear(self) -> None:
        """Forget every answer."""
        self._answers.clear()
        self._numbers.clear()


def fit_marks() -> dict[str, int]:
    """How many answers each memo has computed so far (for :func:`fits_since`)."""
    return {name: memo.computed for name, memo in FIT_MEMOS.items()}


def fit_seconds() -> float:
    """Seconds this process has spent computing the answers of every memo."""
    return sum(memo.seconds for memo in FIT_MEMOS.values())


def fits_since(marks: Mapping[str, int]) -> dict[str, dict[tuple[Hashable, ...], Any]]:
    """The answers each memo computed since ``marks`` (a :func:`fit_marks`), by memo name."""
    out = {name: memo.computed_since(marks.get(name, 0)) for name, memo in FIT_MEMOS.items()}
    return {name: answers for name, answers in out.items() if answers}


def absorb_fits(fits: Mapping[str, Mapping[tuple[Hashable, ...], Any]]) -> None:
    """Remember the answers of :func:`fits_since` from another process."""
    for name, answers in fits.items():
        FIT_MEMOS[name].absorb(answers)
