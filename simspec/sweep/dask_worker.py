"""Preloaded by every worker of the local dask cluster a sweep starts: workers ignore SIGINT.

Ctrl-C in a terminal reaches every process of the foreground group. Workers that took it would
each print a KeyboardInterrupt traceback (about a hundred lines); ignoring it there lets the
parent alone stop, say ``simspec: interrupted`` and shut the cluster down.
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    """The preload hook; the work is done on import, where the main thread runs it."""


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
