"""Progress reporting: silent for short work, plain lines off a terminal, tqdm on one."""

from __future__ import annotations

import io
import time

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


def test_a_drawn_bar_ends_with_a_newline_so_the_next_line_is_whole():
    stream = _Terminal()
    with Progress("sweep", stream=stream, delay_s=0.05) as progress:
        progress(0, 3)
        time.sleep(0.1)  # past the delay: the bar is drawn
        for done in range(1, 4):
            progress(done, 3)
    text = stream.getvalue()
    assert "3/3" in text and text.endswith("\n"), repr(text)


def test_a_terminal_bar_waits_for_the_delay():
    stream = _Terminal()
    with Progress("run", stream=stream, delay_s=60.0) as progress:
        for done in range(0, 4):
            progress(done, 3)
    assert stream.getvalue() == ""
