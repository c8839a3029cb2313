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
        return int(work_tokens(s, oracle) * tree_factor(s))

    total = sum(work(s) for s in scenarios)
    if allow_large or total <= MAX_WORK_TOKENS:
        return
    big = max(scenarios, key=work)
    w = big.workload
    runs = len(big.policies) + 1 + int(oracle)
    factor = tree_factor(big)
    tree = f" x {factor:,.0f} (tree nodes per chain token)" if factor > 1 else ""
    found = f"{w.num_requests} x {w.output_tokens} x {runs}{tree}"
    if len(scenarios) > 1:
        # Points differ (a batch sweep raises num_requests to each batch size), so the largest
        # point's factors and the sum over all points are stated apart.
        found = f"the largest of {len(scenarios)} points {found} = about {work(big):,}; all "
        found += f"{len(scenarios)} together about {total:,}"
    else:
        found += f" = about {total:,}"
    keys = "workload.num_requests x workload.output_tokens x runs (policies + baseline)"
    raise InputError(
        big.source or "<scenario>",
        keys + (" x speculation.topk tree" if factor > 1 else ""),
        f"at most {MAX_WORK_TOKENS:,} simulated tokens",
        found,
        "Pass --allow-large to run it anyway (progress is shown), or reduce those keys.",
    )


def tree_factor(scenario: Any) -> float:
    """How much more a tree step costs to simulate than the chain of the same depth: the nodes
    it verifies (``topk + (k - 1) topk^2`` at the drafter's deepest k, or
    ``speculation.num_draft_tokens``), root included, over the chain's k + 1; 1 for a chain."""
    spec = scenario.speculation
    if not spec.is_tree:
        return 1.0
    k = max(1, scenario.drafter.max_draft_tokens)
    nodes = spec.topk + (k - 1) * spec.topk**2
    if spec.num_draft_tokens:
        nodes = min(nodes, spec.num_draft_tokens - 1)
    return max(1.0, (nodes + 1) / (k + 1))


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
    from simspec.errors import InputError
    from simspec.io.atomic import STDOUT

    if path == STDOUT:
        if stdout:
            return
        raise InputError(flag, path, "a file path", "'-' (standard output is not allowed here)")
    if path == "":
        raise InputError(flag, "''", "a file path", "an empty string")
    try:
        _check_file(path, flag)
    except OSError as err:  # a name too long, a symlink loop on the way
        raise InputError(flag, path, "a writable file path", err.strerror or str(err)) from None


def _check_file(path: str, flag: str) -> None:
    import os

    from simspec.errors import InputError
    from simspec.io.atomic import is_special

    target = Path(path)
    _identity(path, flag)  # a symlink loop is refused, not replaced by a file
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

    if path == "":
        raise InputError(flag, "''", "a folder path", "an empty string")
    target = Path(path)
    try:
        if target.exists() and not target.is_dir():
            raise InputError(flag, path, "a folder", "an existing file")
        _probe(_nearest_folder(target, path, flag), path, flag)
    except OSError as err:
        raise InputError(flag, path, "a writable folder path", err.strerror or str(err)) from None


#: An output of a command: (its flag, its path); a None path is an output not asked for.
Output = tuple[str, str | None]


def _identity(path: str, flag: str) -> tuple[object, ...]:
    """What makes two paths the same file: (device, inode) when it exists, else its absolute
    real path. A symlink loop or a name the system refuses (too long) is an InputError."""
    import errno
    import os

    from simspec.errors import InputError

    try:
        info = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as err:
        if err.errno == errno.ENOTDIR:
            info = None
        else:
            why = "a symlink loop" if err.errno == errno.ELOOP else (err.strerror or str(err))
            raise InputError(flag, path, "a path simspec can write", why) from None
    if info is not None:
        return ("inode", info.st_dev, info.st_ino)
    try:
        return ("path", os.path.realpath(os.path.abspath(path)))
    except (OSError, ValueError) as err:
        raise InputError(flag, path, "a path simspec can write", str(err)) from None


def _stream_identities() -> dict[tuple[object, ...], str]:
    """(device, inode) of what standard output and standard error are open on."""
    import os

    found: dict[tuple[object, ...], str] = {}
    for fd, name in ((2, "standard error"), (1, "standard output")):
        try:
            info = os.fstat(fd)
        except (OSError, ValueError):
            continue
        found[("inode", info.st_dev, info.st_ino)] = name
    return found


def _stream_of(key: tuple[object, ...]) -> str | None:
    """ "standard output" or "standard error" when the output ``key`` is what that stream is
    open on (``/dev/stdout``, ``/proc/self/fd/1`` or the file the shell redirected it to)."""
    return _stream_identities().get(key)


def _is_null_device(path: str, mode: int) -> bool:
    """True for a character device that is not a terminal (``/dev/null``): any number of
    outputs, standard output included, may write there."""
    import os
    import stat

    if not stat.S_ISCHR(mode):
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return not os.isatty(fd)
    finally:
        os.close(fd)


def _check_not_nested(flag: str, path: str, placed: list[tuple[str, Path]]) -> None:
    """Refuse an output file that would sit inside another output file, or hold one (``--json
    figs`` with ``--plot figs``): one of the two cannot be written once the other is. Adds
    ``path`` to ``placed``."""
    import os

    from simspec.errors import InputError

    here = Path(os.path.realpath(os.path.abspath(path)))
    for other_flag, other in placed:
        if other != here and (other in here.parents or here in other.parents):
            inner, outer = (flag, other_flag) if other in here.parents else (other_flag, flag)
            raise InputError(
                flag,
                path,
                "a path that is neither inside nor around another output of the command",
                f"{inner} inside the file {outer} writes",
                "One of the two could not be written; give each output its own place.",
            )
    placed.append((flag, here))


def check_outputs(outputs: Sequence[Output], inputs: Sequence[tuple[str, Path]] = ()) -> None:
    """Refuse, before any work, outputs that would destroy an input or each other.

    ``outputs`` are (flag, path) pairs (``-`` = standard output, listed only when it carries
    data); ``inputs`` are (what, path) pairs of the files the command reads. An empty path, a
    symlink loop, an output that is an input, or two outputs on one file (or both on standard
    output) exit 2. Several outputs may share a character device (``/dev/null``).
    """
    import os
    import stat

    from simspec.errors import InputError
    from simspec.io.atomic import STDOUT

    seen: dict[tuple[object, ...], str] = {}
    placed: list[tuple[str, Path]] = []
    read: dict[tuple[object, ...], tuple[str, Path]] = {}
    for what, source in inputs:
        try:
            info = os.stat(source)
        except (OSError, ValueError):
            continue
        read[("inode", info.st_dev, info.st_ino)] = (what, source)
    for flag, path in outputs:
        if path is None:
            continue
        if path == "":
            raise InputError(flag, "''", "a file path ('-' = standard output)", "an empty string")
        if path == STDOUT:
            key: tuple[object, ...] = ("stdout",)
        else:
            key = _identity(path, flag)
            if key in read:
                what, read_from = read[key]
                raise InputError(
                    flag,
                    path,
                    "an output path that is no input of the command",
                    f"the {what} {read_from}, which the command reads",
                    "Writing there would replace it; choose another path.",
                )
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = 0
            stream = _stream_of(key)
            if stream is not None and not _is_null_device(path, mode):
                raise InputError(
                    flag,
                    path,
                    "'-' for standard output, or a path that is not where simspec's standard "
                    "output or error goes",
                    f"{path}, which is what {stream} is open on",
                    "Writing there would replace or interleave with what simspec prints on "
                    f"{stream}; "
                    + (
                        "pass '-' (notes then go to standard error) or another path."
                        if stream == "standard output"
                        else "choose another path."
                    ),
                )
            if stat.S_ISCHR(mode):
                continue  # /dev/null and the like take any number of writers
        if path != STDOUT:
            _check_not_nested(flag, path, placed)
        if key in seen:
            where = "standard output" if path == STDOUT else "the same file"
            raise InputError(
                flag,
                path,
                "a path no other output of the command uses",
                f"{where} as {seen[key]}",
                "One of the two would be lost; give each output its own path.",
            )
        seen[key] = flag


def scenario_inputs(path: str | None, scenario: Any) -> list[tuple[str, Path]]:
    """The files a loaded scenario was read from: the scenario file, its profile, its traces
    and its model config.json (each as the loader resolved it)."""
    from simspec.config.profiles import profile_path

    found: list[tuple[str, Path]] = []
    if path:
        found.append(("scenario", Path(path)))
    resolved = getattr(scenario, "resolved", None)
    if resolved is None:
        return found
    base = resolved.profile_base
    named = [
        ("costs.profile", scenario.costs.profile),
        ("routing.trace", getattr(scenario.routing, "trace", "")),
        ("acceptance.trace", getattr(scenario.acceptance, "trace", "")),
        ("model.config", scenario.model.config),
    ]
    for key, value in named:
        if isinstance(value, str) and value:
            found.append((f"scenario's {key}", profile_path(value, base)))
    return found
