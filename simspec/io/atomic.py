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
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
        ``path``. On any error (including KeyboardInterrupt) the temporary file is removed and
        ``path`` is left as it was.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent
    )
    tmp = Path(name)
    try:
        if callable(content):
            os.close(fd)
            fd = -1
            content(tmp)
            fd = os.open(tmp, os.O_RDONLY)  # to flush what the callback wrote to disk
        else:
            data = content.encode("utf-8") if isinstance(content, str) else content
            with os.fdopen(fd, "wb", closefd=False) as handle:
                handle.write(data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.chmod(tmp, file_mode())
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    return target


def results_json(results: dict[str, Any]) -> str:
    """The results object as JSON text (stable key order, so equal results give equal bytes)."""
    return json.dumps(results, indent=2) + "\n"
