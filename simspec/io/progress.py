"""Progress on stderr for anything that lasts more than a couple of seconds.

On a terminal a tqdm bar (shown only after ``delay_s``, so quick runs stay silent); elsewhere
(logs, CI, pipes) a plain line at most every ``interval_s`` seconds, also only after
``delay_s``. Call the reporter as ``progress(done, total)``; :meth:`Progress.close` ends it.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class Progress:
    """A ``progress(done, total)`` callable writing to ``stream`` (default: stderr)."""

    def __init__(
        self,
        description: str,
        *,
        stream: TextIO | None = None,
        delay_s: float = 2.0,
        interval_s: float = 10.0,
        clock: Any = time.monotonic,
    ) -> None:
        self.description = description
        self.stream = stream if stream is not None else sys.stderr
        self.delay_s = delay_s
        self.interval_s = interval_s
        self.clock = clock
        self.start = clock()
        self.last_line = -float("inf")
        self._bar: Any = None
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __call__(self, done: int, total: int) -> None:
        if self.tty:
            if self._bar is None:
                from tqdm import tqdm

                self._bar = tqdm(
                    total=total, desc=self.description, file=self.stream, delay=self.delay_s
                )
            self._bar.total = total
            # update(), not refresh(): it honours the delay and records what it drew, so close()
            # ends a drawn bar with its newline (else the next line starts on the bar's line)
            self._bar.update(done - self._bar.n)
            return
        now = self.clock()
        elapsed = now - self.start
        if elapsed < self.delay_s:
            return
        if done < total and now - self.last_line < self.interval_s:
            return
        self.last_line = now
        self.stream.write(f"{self.description}: {done}/{total} after {elapsed:.0f} s\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar (a no-op for plain lines)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
