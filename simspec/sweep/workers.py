"""Local worker processes of a sweep: how they start, and what they inherit.

On Linux a sweep forks its workers (:func:`worker_context`): a forked child starts with every
module and cache its parent has, where a spawned one would spend seconds importing simspec and
numpy again. :func:`frozen_heap` keeps the inherited memory shared. Each worker starts with
:func:`worker_start`: the default SIGTERM and SIGHUP (the parent's handlers would raise in a
worker) and a death signal tied to the parent, so that workers never outlive a parent killed by
SIGTERM or ``kill -9`` (reparented, they would hold its standard output open for good).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any


def worker_context() -> Any:
    """``fork`` on Linux while this process runs a single thread (forking a threaded process can
    leave a child blocked on a lock), ``spawn`` otherwise (macOS frameworks are not fork-safe).
    Buffered output is flushed first, so that no forked child writes it again."""
    import multiprocessing
    import sys
    import threading

    sys.stdout.flush()
    sys.stderr.flush()
    fork = sys.platform.startswith("linux") and threading.active_count() == 1
    return multiprocessing.get_context("fork" if fork else "spawn")


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Fork workers inside: ``gc.freeze`` keeps a worker's collections from walking (and so
    copying) every page of the heap it inherited, as Python's documentation advises for fork
    without exec."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


#: ``prctl`` option that sends the calling process a signal when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def worker_start(parent: int) -> None:
    """Initializer of a local worker of the process ``parent`` (module docstring)."""
    import os
    import signal
    import sys

    for name in ("SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the check below still runs
            pass
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)
