"""Progress reporting: silent for short work, plain lines off a terminal, tqdm on one."""

from __future__ import annotations

import io

from simspec.io.progress import Progress


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_short_work_prints_nothing():
    stream, clock = io.StringIO(), _Clock()
    progress = Progress("run", stream=stream, clock=clock)
    for done in range(1, 6):
        clock.now = 0.3 * done  # 1.5 s in all: below the 2 s delay
        progress(done, 5)
    progress.close()
    assert stream.getvalue() == ""


def test_plain_lines_are_periodic_and_the_last_one_always_shows():
    stream, clock = io.StringIO(), _Clock()
    progress = Progress("sweep", stream=stream, clock=clock, delay_s=2.0, interval_s=10.0)
    for done in range(1, 31):
        clock.now = float(done)  # one item per second, 30 s
        progress(done, 30)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sweep: 2/30 after 2 s"  # first line once the delay has passed
    assert lines[-1] == "sweep: 30/30 after 30 s"  # completion is always reported
    assert lines == ["sweep: 2/30 after 2 s", "sweep: 12/30 after 12 s", "sweep: 22/30 after 22 s",
                     "sweep: 30/30 after 30 s"]  # fmt: skip


def test_a_terminal_gets_a_tqdm_bar():
    stream = _Terminal()
    progress = Progress("compare", stream=stream, delay_s=0.0)
    for done in range(1, 4):
        progress(done, 3)
    progress.close()
    text = stream.getvalue()
    assert "compare" in text and "3/3" in text
