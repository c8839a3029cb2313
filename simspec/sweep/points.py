"""A sweep folder on disk, and reading it back into result objects.

```
DIR/.simspec-sweep         the marker of a sweep folder, locked while a sweep runs (sweep.lock)
DIR/points/<digest>.json   a finished point: {"case", "values", "replication", "results",
                           "digest"}
DIR/delta/<digest>.npz     with the oracle: its Delta-space points (written before the JSON)
DIR/sweep.json             the sweep's points in table order, sealed (written with the tables)
DIR/results.csv            one row per point x policy   (simspec.sweep.tables)
DIR/summary.csv            means and paired 95 % CIs    (simspec.sweep.tables)
```

``<digest>`` is the digest of the point's resolved scenario (seed included), so a resumed sweep
finds the point again; the file's ``"digest"`` seals its content and name
(:func:`point_digest`), and ``sweep.json``'s ``"digest"`` its list of points
(:func:`manifest_digest`): :func:`read_sweep` (``simspec plot DIR``) refuses a point file or a
manifest whose seal is missing or does not match, a manifest entry that disagrees with its
point file, and a point file the manifest does not list. Tables and figures are views of the
:class:`PointResult` objects :func:`read_sweep` returns, never of the CSV text.
:func:`check_folder` refuses, reading only, a folder that is not a sweep's or whose files are
not regular files; :func:`prepare_folder` (under the lock) refuses points of another sweep
(naming the keys that differ), and removes orphan temporary files and point files that are
unreadable or fail their seal, so that those points run again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simspec._version import __version__
from simspec.analysis.results import RunResult
from simspec.errors import InputError
from simspec.inputs import read_input_text
from simspec.io import results_json, write_atomic
from simspec.sweep.spec import flatten

if TYPE_CHECKING:
    from simspec.analysis.delta import DeltaPoints
    from simspec.sweep.spec import Point

#: The file that lists a finished sweep's points in table order.
MANIFEST = "sweep.json"


#: Sub-folders of a sweep folder.
SUBFOLDERS = ("points", "delta")
#: Files in the sweep folder itself whose orphan temporary files (".NAME.*.tmp*") we remove.
TOP_FILES = (MANIFEST, "results.csv", "summary.csv")


def point_path(out: Path, digest: str) -> Path:
    """Where the point with scenario digest ``digest`` is saved."""
    return out / "points" / f"{digest}.json"


def delta_path(out: Path, digest: str) -> Path:
    """Where that point's oracle Delta-space points are saved."""
    return out / "delta" / f"{digest}.npz"


@dataclass(frozen=True)
class PointResult:
    """A finished point: where it sits in the sweep, and what every policy did there."""

    case: str
    values: Mapping[str, Any]
    replication: int
    result: RunResult
    folder: Path

    @property
    def delta_path(self) -> Path | None:
        """The oracle's Delta-space points of this point, if saved."""
        path = delta_path(self.folder, self.result.scenario_digest)
        return path if path.exists() else None

    def delta_points(self) -> DeltaPoints | None:
        """Load the oracle's Delta-space points (None without the oracle)."""
        import numpy as np

        from simspec.analysis.delta import DeltaPoints

        path = self.delta_path
        if path is None:
            return None
        with np.load(path) as data:
            return DeltaPoints(**{f.name: data[f.name] for f in fields(DeltaPoints)})


def axes(points: Sequence[PointResult]) -> list[str]:
    """The grid keys of the sweep, in grid order (the union over points: cases may differ)."""
    return list(dict.fromkeys(k for p in points for k in p.values))


#: A finished point as files: its JSON text and its Delta-space arrays (None without the oracle).
PointFiles = tuple[str, dict[str, Any] | None]


def point_files(point: Point, result: RunResult) -> PointFiles:
    """What :func:`write_point` saves for ``point``, ready to write (a worker prepares it)."""
    arrays = None
    if result.delta_points is not None:
        arrays = {f.name: getattr(result.delta_points, f.name) for f in fields(result.delta_points)}
    record = {
        "case": point.case,
        "values": point.values,
        "replication": point.replication,
        "results": result.to_dict(),
    }
    record["digest"] = point_digest(result.scenario_digest, record)
    return results_json(record), arrays


def point_digest(scenario_digest: str, record: Mapping[str, Any]) -> str:
    """The seal of a point file: the SHA-256 of the point's scenario digest (its inputs, which
    also name the file) and of the file's content without the seal.

    A point file edited by hand, truncated into other valid JSON, or moved to another point's
    name no longer matches its seal, and :func:`prepare_folder` has it simulated again.
    """
    import hashlib

    body = results_json({k: v for k, v in record.items() if k != "digest"})
    return hashlib.sha256(f"{scenario_digest}\n{body}".encode()).hexdigest()


def write_point(out: Path, point: Point, result: RunResult | PointFiles) -> None:
    """Save a finished point: its Delta-space points first, then its JSON (which marks it done).

    ``result`` is the point's results, or :func:`point_files` of them.
    """
    text, arrays = point_files(point, result) if isinstance(result, RunResult) else result
    if arrays is not None:
        import numpy as np

        write_atomic(
            delta_path(out, point.digest),
            lambda tmp: np.savez_compressed(tmp, **arrays),  # type: ignore[arg-type]
        )
    write_atomic(point_path(out, point.digest), text)


def unfinished(out: Path, points: Sequence[Point]) -> list[Point]:
    """The points of ``points`` whose file is not in the folder ``out`` (after
    :func:`check_folder`).

    A folder without point files needs no digest: a new sweep hashes no scenario before its
    points start, and takes each point's digest from its result (:func:`adopt_digest`).
    """
    folder = out / "points"
    if not folder.is_dir() or not any(folder.glob("*.json")):
        return list(points)
    return [p for p in points if not point_path(out, p.digest).exists()]


def adopt_digest(point: Point, result: RunResult) -> None:
    """Give ``point`` the digest its result carries, unless it has one.

    The result's ``scenario_digest`` is the digest of the point's scenario (a worker computed
    it, from the same scenario, to write the results): hashing the scenario again here would
    keep the parent busy per point while the workers run.
    """
    point.__dict__.setdefault("digest", result.scenario_digest)  # what the cached property stores


def _why(err: BaseException) -> str:
    """A short account of why a sweep file could not be read (no raw bytes)."""
    if isinstance(err, UnicodeDecodeError):
        return "binary (non-UTF-8) bytes"
    if isinstance(err, json.JSONDecodeError):
        return f"invalid JSON at line {err.lineno} column {err.colno} ({err.msg}; truncated?)"
    if isinstance(err, KeyError):
        return f"no key {err.args[0]!r}" if err.args else "a missing key"
    if isinstance(err, RecursionError):
        return "JSON nested too deep"
    text = str(err)
    return f"{type(err).__name__} ({text[:120]})" if text else type(err).__name__


def _load_json(path: Path) -> Any:
    return json.loads(read_input_text(path, str(path), "sweep file (JSON)"))


def _read_results(path: Path, listed: Mapping[str, Any] | None = None) -> RunResult:
    """The results of the point file ``path``, which must carry a seal that matches its content
    and name (:func:`point_digest`) and, when ``listed`` (its manifest entry) is given, the
    case, values and replication the manifest lists for it."""
    if not path.exists():
        raise InputError(
            str(path.parent.parent), f"points/{path.name}", "a finished point", "no such file"
        )
    try:
        record = _load_json(path)
        seal = record.get("digest")
        if seal is None or seal != point_digest(path.stem, record):
            raise InputError(
                str(path),
                "digest",
                "a sweep point file as the sweep wrote it (its digest matches its content and "
                "name)",
                "no digest (an older simspec wrote it, or it was removed)"
                if seal is None
                else "an edited or moved file",
                "Run the sweep again with --resume: it simulates that point again.",
            )
        if listed is not None:
            for key in ("case", "values", "replication"):
                if record.get(key) != listed.get(key):
                    raise InputError(
                        str(path.parent.parent / MANIFEST),
                        f"points[digest = {path.stem}].{key}",
                        f"the {key} its point file {path.name} holds ({record.get(key)!r})",
                        repr(listed.get(key)),
                        "Run the sweep again with --resume: it rewrites the manifest.",
                    )
        return RunResult.from_dict(record["results"])
    except InputError:
        raise
    except Exception as err:  # anything unreadable, NaN included, is a bad file
        raise InputError(str(path), "results", "a sweep point file", _why(err)) from None


def manifest_digest(listed: Sequence[Mapping[str, Any]]) -> str:
    """The seal of ``sweep.json``: the SHA-256 of its list of points, so that a row dropped,
    repeated or relabelled by hand is noticed by :func:`read_sweep`."""
    import hashlib

    text = json.dumps(list(listed), indent=2)
    return hashlib.sha256(text.encode()).hexdigest()


def parse_point(text: str) -> RunResult:
    """The results in a point file's text: what reading the file back gives."""
    return RunResult.from_dict(json.loads(text)["results"])


def read_points(
    out: Path, points: Sequence[Point], parsed: Mapping[str, RunResult] | None = None
) -> list[PointResult]:
    """The results of ``points`` (all finished) from the folder ``out``, in their order.

    ``parsed`` maps digests to results already parsed from the text written to their files
    (:func:`parse_point`; a sweep parses each point as it finishes, while the workers run); the
    other points are read from their files.
    """
    parsed = parsed or {}
    return [
        PointResult(
            p.case,
            p.values,
            p.replication,
            parsed[p.digest] if p.digest in parsed else _read_results(point_path(out, p.digest)),
            out,
        )
        for p in points
    ]


def write_manifest(out: Path, points: Sequence[Point]) -> Path:
    """Write ``sweep.json``: the sweep's points in table order."""
    listed = [
        {"digest": p.digest, "case": p.case, "values": p.values, "replication": p.replication}
        for p in points
    ]
    manifest = {"simspec_version": __version__, "points": listed, "digest": manifest_digest(listed)}
    return write_atomic(out / MANIFEST, results_json(manifest))


def read_sweep(folder: str | Path) -> list[PointResult]:
    """Every point of a finished sweep folder, in table order.

    Raises
    ------
    InputError
        When ``folder`` holds no finished sweep (no ``sweep.json``, or a point file missing).
    """
    out = Path(folder)
    if not (out / MANIFEST).exists():
        raise InputError(
            str(out),
            MANIFEST,
            "a finished sweep folder",
            f"no {MANIFEST}",
            "A sweep writes it with results.csv; resuming an interrupted sweep finishes it.",
        )
    try:
        manifest = _load_json(out / MANIFEST)
        listed = manifest["points"]
        entries = [(e["case"], e["values"], e["replication"], str(e["digest"])) for e in listed]
        seal = manifest.get("digest")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise InputError(str(out / MANIFEST), "points", "a sweep manifest", _why(err)) from None
    if seal is None or seal != manifest_digest(listed):
        raise InputError(
            str(out / MANIFEST),
            "digest",
            "a manifest as the sweep wrote it (its digest matches its list of points)",
            "no digest (an older simspec wrote it)" if seal is None else "an edited file",
            "Run the sweep again with --resume: it rewrites the manifest.",
        )
    digests = [digest for *_, digest in entries]
    for digest in digests:
        if not _HEX.fullmatch(digest):  # two points may share one (the same scenario)
            raise InputError(
                str(out / MANIFEST),
                "points.digest",
                "a point's scenario digest (hexadecimal: the name of its point file)",
                repr(digest[:80]),
            )
    unlisted = sorted(p.name for p in _existing_points(out) if p.stem not in set(digests))
    if unlisted:
        shown = ", ".join(unlisted[:3]) + (
            f" and {len(unlisted) - 3} more" if len(unlisted) > 3 else ""
        )
        raise InputError(
            str(out / MANIFEST),
            "points",
            "every point file of the folder listed (a finished sweep)",
            f"{len(unlisted)} point files it does not list ({shown})",
            "Run the sweep again with --resume: it finishes the sweep and rewrites the manifest.",
        )
    return [
        PointResult(case, values, replication, _read_results(point_path(out, digest), e), out)
        for (case, values, replication, digest), e in zip(entries, listed, strict=True)
    ]


#: What a scenario digest (a point file's name) looks like.
_HEX = re.compile(r"[0-9a-f]{8,64}")


def _orphans(out: Path) -> list[Path]:
    """Temporary files :func:`simspec.io.write_atomic` leaves when killed mid-write."""
    found = [
        p
        for name in SUBFOLDERS
        if (out / name).is_dir()
        for p in (out / name).glob(".*.tmp*")
        if p.is_file()
    ]
    return found + [p for name in TOP_FILES for p in out.glob(f".{name}.*.tmp*") if p.is_file()]


def _difference(record: Any, points: Sequence[Point]) -> str:
    """The scenario keys where a foreign point file differs from this sweep's closest point."""
    try:
        theirs = dict(flatten(record["results"]["scenario"]))
        same = [p for p in points if p.values == record.get("values")] or list(points)
    except (KeyError, TypeError, AttributeError):
        return "a point file of another kind"
    ours = dict(flatten(same[0].scenario.to_dict()))
    keys = [k for k in dict.fromkeys([*ours, *theirs]) if ours.get(k) != theirs.get(k)]
    keys = [k for k in keys if k != "seed"] or keys  # replications differ in seed alone
    shown = ", ".join(f"{k} = {theirs.get(k)!r} there, {ours.get(k)!r} here" for k in keys[:3])
    more = f" and {len(keys) - 3} more keys" if len(keys) > 3 else ""
    return (shown + more) if keys else "another profile"


def _problem(path: Path) -> str | None:
    """Why the point file ``path`` cannot be trusted (None: readable and its seal matches)."""
    try:
        record = _load_json(path)
        seal = record.get("digest")
        if seal is None:
            return "no digest (written by an older simspec)"
        if seal != point_digest(path.stem, record):
            return "its digest does not match its content and name (edited, or moved)"
        RunResult.from_dict(record["results"])
    except Exception as err:  # anything unreadable is simulated again
        return f"unreadable ({_why(err)})"
    return None


def _existing_points(out: Path) -> list[Path]:
    return sorted((out / "points").glob("*.json")) if (out / "points").is_dir() else []


def check_folder(out: Path, points: Sequence[Point], resume: bool) -> None:
    """Check a sweep folder before anything runs, reading only; see the module docstring.

    Raises
    ------
    InputError
        ``out``, one of its sub-folders or a point file is not what a sweep writes there;
        ``out`` holds files no sweep wrote (:func:`simspec.sweep.lock.check_owner`); or it
        holds finished points and ``resume`` is false.
    """
    import stat

    from simspec.sweep.lock import check_owner

    if out.exists() and not out.is_dir():
        raise InputError("", "sweep.out", "a folder", f"{out}, an existing file")
    for name in SUBFOLDERS:
        if (out / name).exists() and not (out / name).is_dir():
            raise InputError(
                "", "sweep.out", f"a sweep folder ({name}/ a folder)", f"{out / name}, a file"
            )
    check_owner(out)
    for name in TOP_FILES:
        target = out / name
        if target.is_symlink() or (target.exists() and not stat.S_ISREG(target.stat().st_mode)):
            raise InputError(
                "",
                "sweep.out",
                f"a sweep folder whose {name} is a regular file (the sweep rewrites it)",
                f"{target}, a folder, link or special file",
            )
    existing = _existing_points(out)
    for path in existing:
        if path.is_symlink() or not path.is_file():
            raise InputError(
                "",
                "sweep.out",
                "a sweep folder whose point files are regular files",
                f"{path}, a folder, link or special file",
                "Remove it, or give the sweep another --out.",
            )
    if existing and not resume:
        raise InputError(
            "",
            "sweep.out",
            "an empty folder, or resuming the sweep saved there",
            f"{out} with {len(existing)} finished points",
        )


def prepare_folder(out: Path, points: Sequence[Point]) -> list[str]:
    """Clean a locked sweep folder before resuming (after :func:`check_folder`).

    Orphan temporary files go; a point file that is unreadable or whose digest does not match
    (:func:`point_digest`) goes too, so that its point is simulated again. Returns one line per
    point file removed, saying why.

    Raises
    ------
    InputError
        A trusted point file belongs to another sweep (naming the keys that differ).
    """
    for orphan in _orphans(out):
        orphan.unlink(missing_ok=True)
    existing = _existing_points(out)
    ours = {p.digest for p in points} if existing else set()  # a new folder hashes nothing
    removed = []
    for path in existing:
        problem = _problem(path)
        if problem is not None:  # simulate the point again
            path.unlink(missing_ok=True)
            removed.append(f"{path}: {problem}")
            continue
        if path.stem not in ours:
            raise InputError(
                "--resume",
                str(out),
                "a folder holding points of this sweep only (same scenario, --set and seed)",
                f"{path.name}, a point of another sweep: {_difference(_load_json(path), points)}",
                "Resume with the scenario and options that started the sweep, or use a new --out.",
            )
    return removed
