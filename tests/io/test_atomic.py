"""write_atomic: a failed write leaves no trace, neither the file nor the folders it made."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from simspec.io.atomic import write_atomic


def _disk_full(tmp: Path) -> None:
    tmp.write_bytes(b"half a figure")
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_write_removes_the_folders_it_created(tmp_path):
    target = tmp_path / "figs" / "deep" / "policies.png"
    with pytest.raises(OSError):
        write_atomic(target, _disk_full)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_keeps_a_folder_that_existed_and_its_files(tmp_path):
    figs = tmp_path / "figs"
    figs.mkdir()
    (figs / "mine.txt").write_text("kept", encoding="utf-8")
    with pytest.raises(OSError):
        write_atomic(figs / "new" / "policies.png", _disk_full)
    assert sorted(p.name for p in figs.iterdir()) == ["mine.txt"]


def test_a_successful_write_creates_its_folders(tmp_path):
    target = tmp_path / "a" / "b" / "x.txt"
    assert write_atomic(target, "hello") == target
    assert target.read_text(encoding="utf-8") == "hello"


def _figure(tmp: Path) -> None:
    tmp.write_bytes(b"a whole figure")


@pytest.mark.parametrize("content", ["text", _figure], ids=["text", "callback"])
def test_a_signal_raised_as_a_descriptor_closes_stops_the_write_cleanly(
    tmp_path, monkeypatch, content
):
    """A handler that raises (SIGTERM's, Ctrl-C's) runs when os.close returns: the write stops
    with that exception, not with EBADF from closing the descriptor again, leaves no
    temporary file and keeps the old file."""
    import os

    import simspec.io.atomic as atomic

    target = tmp_path / "point.json"
    target.write_text("old", encoding="utf-8")
    real_close = os.close
    closed: list[int] = []

    def close_then_signal(fd: int) -> None:
        real_close(fd)
        closed.append(fd)
        raise KeyboardInterrupt  # what the handler raises once the call has returned

    monkeypatch.setattr(atomic.os, "close", close_then_signal)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, content)
    monkeypatch.undo()
    assert len(closed) == 1  # closed once, never twice
    assert sorted(p.name for p in tmp_path.iterdir()) == ["point.json"]
    assert target.read_text(encoding="utf-8") == "old"
