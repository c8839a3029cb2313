"""Who owns a sweep folder: a marker file simspec writes, locked while a sweep runs in it.

A sweep rewrites ``results.csv``, ``summary.csv`` and ``sweep.json`` in its ``--out`` folder and
removes orphan temporary files there, so it must never run in a folder of the user's (think
``--out .``): :func:`check_owner` accepts a missing or empty folder, a folder holding the marker
:data:`MARKER`, or a sweep folder written before the marker existed (a ``points/`` folder and
nothing but sweep files), and refuses any other, naming files it holds.

Two sweeps writing into one folder would mix their points and tables, so a running sweep holds an
exclusive ``flock`` on the marker (:class:`FolderLock`); a second sweep started meanwhile exits 2
naming the first's process. The kernel drops the lock when the process dies (even ``kill -9``),
so a crashed sweep never leaves a stale lock behind; the marker file itself stays.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path

from simspec.errors import InputError

#: The marker (and lock) file of a sweep folder; its content never changes.
MARKER = ".simspec-sweep"
#: Names the process holding the lock, for the message a second sweep prints (removed on release).
HOLDER = ".simspec-sweep.holder"
#: What the marker says to a person who opens it.
MARKER_TEXT = "This folder is a simspec sweep folder (simspec sweep --out); do not add files.\n"

#: Names a sweep folder holds (besides the marker and orphan temporary files ``.NAME.*``).
SWEEP_NAMES = frozenset({"points", "delta", "sweep.json", "results.csv", "summary.csv"})


def _ours(name: str) -> bool:
    """True for a name a sweep writes, its marker, or a temporary file of one of them."""
    if name in SWEEP_NAMES or name in (MARKER, HOLDER):
        return True
    return name.startswith(".") and any(name[1:].startswith(f"{n}.") for n in SWEEP_NAMES)


def check_owner(out: Path) -> None:
    """Refuse a folder ``out`` that holds files no sweep wrote (module docstring)."""
    if not out.is_dir():
        return
    try:
        names = sorted(p.name for p in out.iterdir())
    except OSError as err:
        raise InputError("", "sweep.out", "a readable folder", f"{out}: {err.strerror}") from None
    if not names or MARKER in names:
        return
    foreign = [n for n in names if not _ours(n)]
    if not foreign and (out / "points").is_dir():
        return  # a sweep folder from before the marker
    shown = ", ".join(foreign[:3] or names[:3])
    more = len(foreign or names) - 3
    raise InputError(
        "",
        "sweep.out",
        f"a new or empty folder, or a sweep folder simspec wrote (it holds {MARKER})",
        f"{out}, holding files simspec did not write ({shown}{_more(more)})",
        "A sweep rewrites results.csv and summary.csv there; choose a new folder for --out.",
    )


def _more(count: int) -> str:
    return f" and {count} more" if count > 0 else ""


class FolderLock:
    """The exclusive lock of a running sweep on its folder (the module docstring).

    :meth:`acquire` creates the folder and its marker when missing and locks the marker; the
    lock lasts until :meth:`release` or the end of the process.
    """

    def __init__(self, out: Path, fd: int, created: list[Path], marked: bool) -> None:
        self.out = out
        self._fd = fd
        self.created = created  # the folders (``out`` and parents) this lock made, deepest first
        self.marked = marked  # the marker did not exist before

    @classmethod
    def acquire(cls, out: Path) -> FolderLock:
        """Lock ``out`` for this process; InputError when another sweep holds it."""
        import fcntl

        from simspec.io.atomic import file_mode

        created = [f for f in (out, *out.parents) if not f.exists()]  # deepest first
        marker = out / MARKER
        try:
            out.mkdir(parents=True, exist_ok=True)
            marked = not marker.exists()
            fd = os.open(marker, os.O_RDWR | os.O_CREAT, file_mode())
            if marked:
                os.write(fd, MARKER_TEXT.encode())
        except OSError as err:
            for folder in created:  # leave no folder behind (deepest first)
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise InputError(
                "", "sweep.out", "a folder simspec can write", f"{out}: {err.strerror or err}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            try:
                holder = (out / HOLDER).read_text("utf-8", "replace")[:200].strip()
            except OSError:
                holder = ""
            holder = holder or "another process"
            raise InputError(
                "",
                "sweep.out",
                "a folder no other running sweep writes into",
                f"{out}, in use by the sweep of {holder}",
                "Wait for that sweep to end, or give this one another --out.",
            ) from None
        started = datetime.now(UTC).isoformat(timespec="seconds")
        with contextlib.suppress(OSError):  # the note is for people; the lock is what counts
            (out / HOLDER).write_text(f"process {os.getpid()}, started {started}\n", "utf-8")
        return cls(out, fd, created, marked)

    def release(self, *, undo: bool = False) -> None:
        """Unlock; with ``undo``, also remove the marker and folder this lock created when
        nothing else was written there (a sweep that failed before its first point)."""
        if self._fd < 0:
            return
        with contextlib.suppress(OSError):
            (self.out / HOLDER).unlink(missing_ok=True)
        if undo and self.marked:
            others = [p for p in self.out.iterdir() if p.name != MARKER]
            if not others:
                (self.out / MARKER).unlink(missing_ok=True)
                for folder in self.created:
                    with contextlib.suppress(OSError):  # not empty after all: keep it
                        folder.rmdir()
        # Forget the descriptor before closing it: a signal raised as the close returns
        # must not leave a number a later release would close a second time.
        fd, self._fd = self._fd, -1
        os.close(fd)
