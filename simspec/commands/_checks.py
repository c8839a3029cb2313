"""Options and checks the commands share: ``--set``, ``--allow-large`` and the work limit, and
early checks that an output file or folder can be written (before a long run, not after it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def add_set_option(parser: argparse.ArgumentParser) -> None:
    """The shared ``--set KEY=VALUE`` option (repeatable scenario overrides)."""
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a scenario key, e.g. --set routing.overlap=0.5 (repeatable)",
    )


def _probe(folder: Path, path: str, flag: str) -> None:
    """Create and remove a file in ``folder``: the one sure test that writing there works."""
    import os
    import tempfile

    from simspec.errors import InputError

    try:
        fd, name = tempfile.mkstemp(prefix=".simspec-probe-", dir=folder)
    except OSError as err:
        raise InputError(
            flag, path, "a path in a writable folder", f"{folder}: {err.strerror or err}"
        ) from None
    os.close(fd)
    os.unlink(name)


def _nearest_folder(start: Path, path: str, flag: str) -> Path:
    """The nearest existing ancestor of ``start`` (itself included), which must be a folder."""
    from simspec.errors import InputError

    folder = start
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(flag, path, "a path whose parents are folders", f"{folder}, a file")
    return folder


#: Simulated tokens (requests x output tokens x runs, summed over points) above which run,
#: compare and sweep refuse without --allow-large: the simulator commits roughly 7000 tokens per
#: second and core, so this is about 25 minutes of one core.
MAX_WORK_TOKENS = 10_000_000


def add_allow_large_option(parser: argparse.ArgumentParser) -> None:
    """The shared ``--allow-large`` flag (run a scenario above the work limit)."""
    parser.add_argument(
        "--allow-large",
        action="store_true",
        help=f"run even above {MAX_WORK_TOKENS:,} simulated tokens (requests x output x runs)",
    )


def check_work(scenarios: Sequence[Any], oracle: bool, allow_large: bool) -> None:
    """Refuse, before simulating, a run whose estimated work is above :data:`MAX_WORK_TOKENS`.

    The estimate is ``num_requests x output_tokens x runs`` per scenario (runs = its policies,
    the k = 0 baseline and, with ``oracle``, the oracle), summed over ``scenarios``.
    """
    from simspec.analysis.experiment import work_tokens
    from simspec.errors import InputError

    def work(s: Any) -> int:
        return work_tokens(s, oracle)

    total = sum(work(s) for s in scenarios)
    if allow_large or total <= MAX_WORK_TOKENS:
        return
    big = max(scenarios, key=work)
    w = big.workload
    runs = len(big.policies) + 1 + int(oracle)
    points = f" x {len(scenarios)} points" if len(scenarios) > 1 else ""
    raise InputError(
        big.source or "<scenario>",
        "workload.num_requests x workload.output_tokens x runs (policies + baseline)",
        f"at most {MAX_WORK_TOKENS:,} simulated tokens",
        f"{w.num_requests} x {w.output_tokens} x {runs}{points} = about {total:,}",
        "Pass --allow-large to run it anyway (progress is shown), or reduce those keys.",
    )


def check_range(flag: str, value: int, low: int, high: int, why: str = "") -> None:
    """Fail when the integer option ``flag`` lies outside [low, high] (``why`` explains a bound)."""
    from simspec.errors import InputError

    if not low <= value <= high:
        expected = f"an integer in [{low}, {high}]" + (f" ({why})" if why else "")
        raise InputError("command line", flag, expected, str(value))


def catalog_entry(kind: str, name: str, flag: str) -> Any:
    """The catalog ``kind`` ("model" or "gpu") named ``name`` by the option ``flag``."""
    from simspec import catalog
    from simspec.errors import InputError

    names = catalog.model_names() if kind == "model" else catalog.gpu_names()
    if name not in names:
        raise InputError("command line", flag, "one of " + ", ".join(names), repr(name))
    return catalog.get_model(name) if kind == "model" else catalog.get_gpu(name)


def check_writable(path: str, flag: str, *, stdout: bool = True) -> None:
    """Fail before a long run, not after it, when the file ``path`` cannot be written.

    ``-`` (standard output, when ``stdout``) and an existing FIFO or device (written in place)
    are fine; a folder, a path under a file, or a folder we cannot create a file in is not.
    """
    import os

    from simspec.errors import InputError
    from simspec.io.atomic import STDOUT, is_special

    if path == STDOUT:
        if stdout:
            return
        raise InputError(flag, path, "a file path", "'-' (standard output is not allowed here)")
    target = Path(path)
    if target.is_dir():
        raise InputError(flag, path, "a file path", "an existing folder")
    if is_special(target):
        if not os.access(target, os.W_OK):
            raise InputError(flag, path, "a writable file", "a special file we cannot write")
        return
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if target.exists() and not os.access(target, os.W_OK):
        raise InputError(flag, path, "a writable file", "a read-only file")
    _probe(_nearest_folder(target.parent, path, flag), path, flag)


def check_folder(path: str, flag: str) -> None:
    """Fail early when the output folder ``path`` is a file or cannot be created or written."""
    from simspec.errors import InputError

    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError(flag, path, "a folder", "an existing file")
    _probe(_nearest_folder(target, path, flag), path, flag)
