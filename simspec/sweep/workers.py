"""Local worker processes of a sweep: how they start, and what they inherit.

On Linux a sweep forks its workers (:func:`worker_context`): a forked child starts with every
module and cache its parent has, where a spawned one would spend seconds importing simspec and
numpy again. :func:`frozen_heap` keeps the inherited memory shared.
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
