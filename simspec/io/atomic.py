"""The one atomic writer: a file simspec writes is either absent, the old one, or complete.

A sweep killed mid-point, a figure interrupted by Ctrl-C or a full disk must never leave a
half-written file under the final name, because a half-written point file would be taken for a
finished point when the sweep resumes. So every file is written to a temporary file in the *same*
folder (a rename across file systems is not atomic), flushed to disk, given the permissions a
new file gets under the process umask (``mkstemp`` creates it 0600), and renamed over the
target with :func:`os.replace`, which POSIX and Windows make atomic.

:func:`write_atomic` takes text, bytes, or a ``writer(path)`` callback for libraries that want a
file name of their own (``numpy.savez_compressed``, matplotlib's ``savefig``; both infer the
format from the suffix, so the temporary file keeps the target's suffix).

Special targets are never renamed over: ``-`` means standard output, and a path that exists and
is not a regular file (a FIFO, ``/dev/stdout``, ``/dev/null``, a device node, or a symlink to
one) is written in place, since replacing it with a regular file would break whatever it was.
A symlink to a regular file is followed: the file it points to is replaced, the link stays.

Signals: SIGTERM and Ctrl-C raise from their handlers, which Python runs when a system call such
as ``os.close`` returns. The writer therefore forgets a descriptor's number *before* closing
it: a cleanup that still held the number would close it a second time (EBADF, an error that
hides the signal's own exception and turns a clean stop into a crash) or close whatever the
number was reused for. A signal in between leaks one descriptor of a process that is stopping.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The path that means standard output.
STDOUT = "-"

#: What :func:`write_atomic` writes: text (UTF-8), bytes, or a callback writing a file at a path.
Content = str | bytes | Callable[[Path], object]


def file_mode() -> int:
    """Permissions of a new file under the process umask (temporary files start at 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | Path, content: Content) -> Path:
    """Write ``content`` to ``path`` via a temporary file in the same folder and a rename.

    Parameters
    ----------
    path : str or Path
        The file to write; missing parent folders are created.
    content : str, bytes or callable
        Text (written as UTF-8), bytes, or ``writer(tmp)`` that writes the whole file at
        ``tmp``, a path in the same folder whose suffix is ``path``'s.

    Returns
    -------
    Path
        ``path`` (``-`` writes to standard output; an existing FIFO, device or other
        non-regular file is written in place, never replaced). On any error (including
        KeyboardInterrupt) the temporary file is removed, ``path`` is left as it was and the
        parent folders this call created are removed again.
    """
    if str(path) == STDOUT:
        _write_stream(_content_bytes(content, Path("stdout")), content)
        return Path(STDOUT)
    target = Path(path)
    if is_special(target):
        _write_in_place(target, content)
        return target
    if target.is_symlink():  # replace the file the link points to, keep the link
        try:
            target = Path(os.path.realpath(target, strict=True))
        except FileNotFoundError:  # a dangling link: create the file it names
            target = Path(os.path.realpath(target))
        # a symlink loop raises OSError (ELOOP): never replaced by a regular file
    created = _missing_folders(target.parent)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent
        )
    except BaseException:
        _remove_empty(created)
        raise
    tmp = Path(name)
    try:
        if callable(content):
            closing, fd = fd, -1  # forget the number before closing it (module docstring)
            os.close(closing)
            content(tmp)
            fd = os.open(tmp, os.O_RDONLY)  # to flush what the callback wrote to disk
        else:
            data = content.encode("utf-8") if isinstance(content, str) else content
            with os.fdopen(fd, "wb", closefd=False) as handle:
                handle.write(data)
        os.fsync(fd)
        closing, fd = fd, -1
        os.close(closing)
        os.chmod(tmp, file_mode())
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        _remove_empty(created)
        raise
    return target


def _missing_folders(folder: Path) -> list[Path]:
    """The folders from ``folder`` up to its first existing ancestor that do not exist yet,
    deepest first (what ``mkdir(parents=True)`` would create)."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed write created, deepest first, as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def is_special(path: Path) -> bool:
    """True when ``path`` (followed through symlinks) exists and is not a regular file or folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _content_bytes(content: Content, name: Path) -> bytes:
    """The bytes ``content`` stands for (a callback writes to a private temporary folder)."""
    if isinstance(content, str):
        return content.encode("utf-8")
    if isinstance(content, bytes):
        return content
    with tempfile.TemporaryDirectory(prefix="simspec-") as folder:
        tmp = Path(folder) / f"out{name.suffix}"
        content(tmp)
        return tmp.read_bytes()


def _write_stream(data: bytes, content: Content) -> None:
    """Write to standard output (text through ``sys.stdout``, so captured output sees it)."""
    sys.stdout.flush()
    if isinstance(content, str):
        sys.stdout.write(content)
    else:
        sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _write_in_place(target: Path, content: Content) -> None:
    """Write into an existing non-regular file (FIFO, device): open, write, close; no rename."""
    data = _content_bytes(content, target)
    with open(target, "wb", buffering=0) as handle:
        view = memoryview(data)
        while view:
            view = view[handle.write(view) or 0 :]


def results_json(results: dict[str, Any]) -> str:
    """The results object as JSON text (stable key order, so equal results give equal bytes)."""
    return json.dumps(results, indent=2) + "\n"
