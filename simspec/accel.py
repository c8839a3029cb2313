"""Optional compiled inner loops (numba), with the numpy code as the always-present reference.

Monte-Carlo routing spends its time in per-chain work that numpy can only write as whole-array
passes: the max-entropy sampler's k_e smallest Pareto keys out of N per chain, the reuse
sampler's successive sampling of a round of draws. A loop over one chain does that work in one
pass over its N keys or its few draws. With numba installed (``pip install "simspec[fast]"``)
such loops, written here and there as plain Python functions marked :func:`kernel`, are compiled
on first use (and cached on disk); without numba, or with ``SIMSPEC_JIT=0`` in the
environment, or inside :func:`disabled`, callers run their numpy code instead.

The two paths give bit-identical results, which is what lets a kernel exist at all (same
scenario + same seed = same bytes, with or without numba): every random draw is still made by
numpy, in the same calls and the same order, before the kernel reads it; the kernel's float32
arithmetic is the numpy code's, operation for operation (no fused multiply-add, no
reassociation: numba's default, not ``fastmath``); where numpy's result depends on an algorithm's
internals (which of two tied keys ``argpartition`` keeps), the kernel flags the case and the
caller answers it with the numpy call. Tests compare the two paths, and run each kernel's
Python source uncompiled, so the kernels are checked even where numba is absent.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: Values of ``SIMSPEC_JIT`` that turn the compiled kernels off.
_OFF = {"0", "false", "no", "off"}

_disabled_depth = 0  # > 0 inside :func:`disabled`
_broken = False  # numba is installed but failed to import


@functools.cache
def available() -> bool:
    """Whether numba is installed (looked up once, without importing it)."""
    return importlib.util.find_spec("numba") is not None


def enabled() -> bool:
    """Whether callers should use the compiled kernels now: numba is installed, ``SIMSPEC_JIT``
    does not turn them off, and no :func:`disabled` block is active."""
    if _disabled_depth:
        return False
    if os.environ.get("SIMSPEC_JIT", "1").strip().lower() in _OFF:
        return False
    return available()


def describe() -> str:
    """One line for benchmark headers: whether the kernels run, and why not."""
    if not available():
        return "compiled kernels: off (numba not installed)"
    if not enabled():
        return "compiled kernels: off (SIMSPEC_JIT or accel.disabled())"
    from importlib.metadata import version

    return f"compiled kernels: on (numba {version('numba')})"


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Run the numpy code paths inside this block (tests compare them with the kernels)."""
    global _disabled_depth
    _disabled_depth += 1
    try:
        yield
    finally:
        _disabled_depth -= 1


class Kernel:
    """A loop written in numba's subset of Python, compiled on first use.

    ``python`` is the uncompiled function (tests run it on small inputs to check the loop's
    logic against the numpy path where numba is absent). ``warmup`` is how much work (in the
    caller's units, e.g. table entries) the numpy path does before the kernel is loaded, unless
    another kernel has loaded numba already: loading numba costs ~0.5 CPU s per process (and
    ~110 MB of memory), more than a small run spends in the loop, and as the two paths give
    identical results a process may switch at any call.
    """

    def __init__(self, python: Callable[..., Any], warmup: int = 0):
        self.python = python
        self.warmup = warmup
        self.__doc__ = python.__doc__
        self._compiled: Callable[..., Any] | None = None
        self._work = 0  # work done on the numpy path so far

    def compiled(self, work: int | None = None) -> Callable[..., Any] | None:
        """The compiled function when :func:`enabled` and past the warm-up, else None (use the
        numpy path). ``work`` is the size of the call about to run (None: compile now). A
        numba that is installed but cannot be imported counts as absent."""
        global _broken
        if not enabled() or _broken:
            return None
        if self._compiled is None:
            loaded = "numba" in sys.modules  # then only this kernel's cache load is left
            if work is not None and not loaded and self._work + work <= self.warmup:
                self._work += work
                return None
            try:
                import numba  # optional dependency, imported on first use
            except ImportError:
                _broken = True
                return None
            self._compiled = numba.njit(cache=True, nogil=True)(self.python)
        return self._compiled


def kernel(python: Callable[..., Any]) -> Kernel:
    """Decorator: mark a module-level loop function as an optional compiled :class:`Kernel`."""
    return Kernel(python)
