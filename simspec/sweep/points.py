"""A sweep folder on disk, and reading it back into result objects.

```
DIR/points/<digest>.json   a finished point: {"case", "values", "replication", "results"}
DIR/delta/<digest>.npz     with the oracle: its Delta-space points (written before the JSON)
DIR/sweep.json             the sweep's points in table order (written with the tables)
DIR/results.csv            one row per point x policy   (simspec.sweep.tables)
DIR/summary.csv            means and paired 95 % CIs    (simspec.sweep.tables)
```

``<digest>`` is the digest of the point's resolved scenario (seed included), so a point's file
name says exactly what was simulated and a resumed sweep finds it again. ``"results"`` is the
point's results JSON (design §4), read back with :meth:`RunResult.from_dict`: the tables and
every figure of a sweep are views of the :class:`PointResult` objects :func:`read_sweep` returns,
never of the CSV text. ``sweep.json`` fixes their order (cases × grid × replications, as in
the tables); the point files alone do not, since they are written in completion order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simspec._version import __version__
from simspec.analysis.results import RunResult
from simspec.errors import InputError
from simspec.io import results_json, write_atomic

if TYPE_CHECKING:
    from simspec.analysis.delta import DeltaPoints
    from simspec.sweep.spec import Point

#: The file that lists a finished sweep's points in table order.
MANIFEST = "sweep.json"


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


def write_point(out: Path, point: Point, result: RunResult) -> None:
    """Save a finished point: its Delta-space points first, then its JSON (which marks it done)."""
    if result.delta_points is not None:
        import numpy as np

        arrays = {f.name: getattr(result.delta_points, f.name) for f in fields(result.delta_points)}
        write_atomic(
            delta_path(out, point.digest),
            lambda tmp: np.savez_compressed(tmp, **arrays),  # type: ignore[arg-type]
        )
    record = {
        "case": point.case,
        "values": point.values,
        "replication": point.replication,
        "results": result.to_dict(),
    }
    write_atomic(point_path(out, point.digest), results_json(record))


def _read_results(path: Path) -> RunResult:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return RunResult.from_dict(record["results"])
    except FileNotFoundError:
        raise InputError(
            str(path.parent.parent), f"points/{path.name}", "a finished point", "no such file"
        ) from None
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(str(path), "results", "a sweep point file", repr(err)) from None


def read_points(out: Path, points: Sequence[Point]) -> list[PointResult]:
    """The results of ``points`` (all finished) from the folder ``out``, in their order."""
    return [
        PointResult(p.case, p.values, p.replication, _read_results(point_path(out, p.digest)), out)
        for p in points
    ]


def write_manifest(out: Path, points: Sequence[Point]) -> Path:
    """Write ``sweep.json``: the sweep's points in table order."""
    listed = [
        {"digest": p.digest, "case": p.case, "values": p.values, "replication": p.replication}
        for p in points
    ]
    manifest = {"simspec_version": __version__, "points": listed}
    return write_atomic(out / MANIFEST, results_json(manifest))


def read_sweep(folder: str | Path) -> list[PointResult]:
    """Every point of a finished sweep folder, in table order.

    Raises
    ------
    InputError
        When ``folder`` holds no finished sweep (no ``sweep.json``, or a point file missing).
    """
    out = Path(folder)
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        listed = manifest["points"]
    except FileNotFoundError:
        raise InputError(
            str(out),
            MANIFEST,
            "a finished sweep folder",
            f"no {MANIFEST}",
            "A sweep writes it with results.csv; resuming an interrupted sweep finishes it.",
        ) from None
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(str(out / MANIFEST), "points", "a sweep manifest", repr(err)) from None
    return [
        PointResult(
            entry["case"],
            entry["values"],
            entry["replication"],
            _read_results(point_path(out, entry["digest"])),
            out,
        )
        for entry in listed
    ]
