"""Reading a calibration profile: parse, validate every value, build the tables.

Loading checks everything (types, shapes, finiteness, bounds) and raises :class:`ProfileError`
(an :class:`~simspec.errors.InputError`: exit code 2) naming the file, the key path inside it,
what was expected and what was found. Every profile records the SHA-256 of its content (the
file's bytes, or the canonical JSON of data that never was a file), and :func:`load_profile`
caches the parsed profile by path *and* that digest, so a file rewritten in place (even within
one tick of the file-system clock, with the same size) is read again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simspec.errors import InputError, describe
from simspec.inputs import load_json, read_input_bytes
from simspec.params import PROFILE_OPTIONAL_KEYS, RooflineParams
from simspec.schema import build

from .tables import (
    GEMM_NAMES,
    KINDS,
    SCHEMA,
    SCHEMA_VERSION,
    SHAPES,
    AttentionTable,
    CalibrationProfile,
    GemmTable,
    GridTable,
    MoeTable,
    StackMeasurement,
)

#: Parsed profiles kept by :func:`load_profile`, keyed by (path, sha256 of the file's bytes).
_CACHE_SIZE = 16
_cache: OrderedDict[tuple[str, str], CalibrationProfile] = OrderedDict()


#: The top-level keys of a profile (``simspec calibrate`` writes them all).
TOP_KEYS = (
    "schema",
    "schema_version",
    "metadata",
    "peak",
    "ceilings",
    "fitted",
    "provenance",
    "fit_details",
    "validation",
    "tables",
)
#: Plausible peaks: from a slow CPU to well beyond any accelerator, (bytes/s, FLOP/s).
PEAK_RANGES = {"hbm_bytes_per_s": (1e6, 1e15), "bf16_flops_per_s": (1e6, 1e18)}
#: Longest time a measured table cell may hold, s: one kernel or layer-stack pass, far beyond
#: any measured on a GPU (a cell of 1e300 s would run as a plausible-looking profile).
MAX_CELL_S = 10.0


class ProfileError(InputError):
    """A calibration profile is unreadable, truncated, of another schema, or has a bad value."""


class _Reader:
    """Typed access to nested JSON data; every failure names the profile and the key path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, found: object) -> ProfileError:
        return ProfileError(self.source, path, expected, describe(found))

    def table(self, data: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(data, Mapping):
            what = "a JSON object" if path else "a JSON object (a simspec calibration profile)"
            raise self.fail(path, what, data)
        return data

    def get(self, data: Mapping[str, Any], key: str, path: str) -> Any:
        if key not in data:
            where = f"{path}.{key}" if path else key
            raise ProfileError(self.source, where, "this key (see calibration/README.md)", "none")
        return data[key]

    def string(
        self,
        data: Mapping[str, Any],
        key: str,
        path: str,
        choices: Sequence[str] | None = None,
    ) -> str:
        value = self.get(data, key, path)
        where = f"{path}.{key}" if path else key
        if not isinstance(value, str):
            raise self.fail(where, "a string", value)
        if choices is not None and value not in choices:
            raise self.fail(where, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    def number(self, value: Any, path: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, "a number", value)
        if not math.isfinite(value) or not value > 0:
            raise self.fail(path, "a finite number > 0", value)
        return float(value)

    def integer(self, data: Mapping[str, Any], key: str, path: str, minimum: int) -> int:
        value = self.get(data, key, path)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(f"{path}.{key}", f"an integer >= {minimum}", value)
        return value

    def axis(self, data: Mapping[str, Any], key: str, path: str) -> np.ndarray:
        raw = self.get(data, key, path)
        where = f"{path}.{key}"
        if not isinstance(raw, list) or not raw:
            raise self.fail(where, "a non-empty array of numbers", raw)
        values = np.array([self.number(v, f"{where}[{i}]") for i, v in enumerate(raw)])
        if np.any(np.diff(values) <= 0):
            raise self.fail(where, "strictly increasing numbers", raw)
        return values

    def grid_values(
        self, raw: Any, shape: tuple[int, ...], path: str, maximum: float = MAX_CELL_S
    ) -> np.ndarray:
        """A nested array of positive finite numbers of exactly ``shape``, each at most
        ``maximum`` (times, s)."""
        if not shape:
            value = self.number(raw, path)
            if value > maximum:
                raise self.fail(path, f"a time of at most {maximum:g} s (one measured cell)", raw)
            return np.array(value)
        if not isinstance(raw, list) or len(raw) != shape[0]:
            size = len(raw) if isinstance(raw, list) else "not an array"
            raise ProfileError(
                self.source,
                path,
                f"an array of {shape[0]} entries (one per grid point)",
                f"{size}" + (" entries" if isinstance(raw, list) else ""),
            )
        return np.stack(
            [self.grid_values(v, shape[1:], f"{path}[{i}]", maximum) for i, v in enumerate(raw)]
        )

    def grid(self, data: Mapping[str, Any], path: str, axes: Sequence[str]) -> GridTable:
        arrays = tuple(self.axis(data, a, path) for a in axes)
        shape = tuple(len(a) for a in arrays)
        values = self.grid_values(self.get(data, "time_s", path), shape, f"{path}.time_s")
        return GridTable(arrays, values)


def _find_non_finite(data: Any, path: str) -> str | None:
    """Key path of the first NaN or infinity anywhere in ``data``."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    if isinstance(data, Mapping):
        for key, value in data.items():
            found = _find_non_finite(value, f"{path}.{key}" if path else str(key))
            if found:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = _find_non_finite(value, f"{path}[{i}]")
            if found:
                return found
    return None


def _peak(r: _Reader, peak: Mapping[str, Any], key: str) -> float:
    value = r.number(r.get(peak, key, "peak"), f"peak.{key}")
    low, high = PEAK_RANGES[key]
    if not low <= value <= high:
        raise r.fail(f"peak.{key}", f"a number in [{low:g}, {high:g}]", peak[key])
    return value


def _built(cls: type, data: Any, source: str, path: str) -> Any:
    """:func:`simspec.schema.build` of a table, its errors re-branded as profile errors."""
    try:
        return build(cls, data, source=source, path=path)
    except InputError as err:
        raise ProfileError(err.source, err.key_path, err.expected, err.found) from None


def _fitted(r: _Reader, top: Mapping[str, Any]) -> RooflineParams:
    fitted_raw = r.table(r.get(top, "fitted", ""), "fitted")
    for f in dataclasses.fields(RooflineParams):
        if f.name not in PROFILE_OPTIONAL_KEYS:  # newer keys: a missing one takes its default
            r.get(fitted_raw, f.name, "fitted")
    params: RooflineParams = _built(RooflineParams, fitted_raw, r.source, "fitted")
    return params


def _moe(r: _Reader, raw: Any) -> MoeTable:
    path = "tables.moe"
    t = r.table(raw, path)
    grid = r.grid(t, path, ("tokens", "unique_experts"))
    per_token = r.integer(t, "experts_per_token", path, 1)
    expert_bytes = r.number(r.get(t, "expert_bytes", path), f"{path}.expert_bytes")
    return MoeTable(grid, expert_bytes, per_token, r.string(t, "kernel", path))


def _attention(r: _Reader, raw: Any) -> AttentionTable:
    path = "tables.attention"
    t = r.table(raw, path)
    grid = r.grid(t, path, ("batch", "kv_tokens", "query_tokens"))
    kv = r.number(r.get(t, "kv_bytes_per_token", path), f"{path}.kv_bytes_per_token")
    return AttentionTable(grid, kv)


def _gemm(r: _Reader, raw: Any) -> dict[str, GemmTable]:
    gemm: dict[str, GemmTable] = {}
    for name, table in r.table(raw, "tables.gemm").items():
        path = f"tables.gemm.{name}"
        if name not in GEMM_NAMES:
            raise r.fail(path, "a GEMM table named " + ", ".join(GEMM_NAMES), name)
        t = r.table(table, path)
        gemm[name] = GemmTable(
            r.grid(t, path, ("tokens",)),
            r.number(r.get(t, "weight_bytes", path), f"{path}.weight_bytes"),
        )
    return gemm


def _stack(r: _Reader, raw: Any) -> tuple[StackMeasurement, ...]:
    if not isinstance(raw, list):
        raise r.fail("tables.stack", "an array of objects", raw)
    paths = [f"tables.stack[{i}]" for i in range(len(raw))]
    return tuple(
        _built(StackMeasurement, r.table(row, path), r.source, path)
        for row, path in zip(raw, paths, strict=True)
    )


def _cell_latency(r: _Reader, raw: Any) -> float:
    """What an isolated table cell carries beyond its kernels inside a whole pass's graph.

    Each cell is timed as its own CUDA-graph replay between two events, so it includes one graph
    launch that a whole-pass graph pays once: the shortest isolated kernel of the size sweep
    minus the per-kernel floor of a back-to-back chain (``tables.floors``,
    :mod:`simspec.calibrate.floors`). 0 without a floors table or a graph measurement.
    """
    if raw is None:
        return 0.0
    path = "tables.floors"
    floors = r.table(raw, path)
    chain = r.table(r.get(floors, "kernel_floor_s", path), f"{path}.kernel_floor_s")
    if "graph" not in chain:
        return 0.0
    graph = r.number(chain["graph"], f"{path}.kernel_floor_s.graph")
    sweep = r.table(r.get(floors, "sweep", path), f"{path}.sweep")
    stream = r.axis(sweep, "bytes", f"{path}.sweep")  # checks the sizes; times follow
    times = r.get(sweep, "stream_s", f"{path}.sweep")
    values = r.grid_values(times, (len(stream),), f"{path}.sweep.stream_s")
    return max(0.0, float(values.min()) - graph)


def canonical_sha256(data: Any) -> str:
    """Hex SHA-256 of ``json.dumps(data, sort_keys=True)``: the digest of data without a file.

    >>> canonical_sha256({"b": 1, "a": [2.5]}) == canonical_sha256({"a": [2.5], "b": 1})
    True
    """
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()


def profile_from_dict(
    data: Any, source: str = "<profile>", *, sha256: str | None = None
) -> CalibrationProfile:
    """Validate parsed profile JSON into a :class:`CalibrationProfile` (or raise ProfileError).

    Parameters
    ----------
    data : Any
        The parsed JSON document.
    source : str
        The file (or a description) named in error messages and kept as ``profile.source``.
    sha256 : str, optional
        The digest of the bytes ``data`` was parsed from; by default that of the canonical
        JSON of ``data`` (:func:`canonical_sha256`).
    """
    r = _Reader(source)
    top = r.table(data, "")
    schema = top.get("schema")
    if schema != SCHEMA:
        raise r.fail("schema", f"{SCHEMA!r} (a simspec calibration profile)", schema)
    version = top.get("schema_version")
    if version != SCHEMA_VERSION:
        raise r.fail("schema_version", f"{SCHEMA_VERSION}", version)
    for key in top:
        if key not in TOP_KEYS:
            raise r.fail(str(key), "one of the keys " + ", ".join(TOP_KEYS), "an unknown key")
    bad = _find_non_finite(top, "")
    if bad:
        raise ProfileError(source, bad, "a finite number", "NaN or infinity")
    meta = r.table(r.get(top, "metadata", ""), "metadata")
    kind = r.string(meta, "kind", "metadata", KINDS)
    for key in ("device", "gpu", "model", "date", "command"):
        r.string(meta, key, "metadata")
    shapes = r.string(meta, "shapes", "metadata", SHAPES)
    peak = r.table(r.get(top, "peak", ""), "peak")
    peak_bw, peak_flops = (_peak(r, peak, key) for key in PEAK_RANGES)
    fitted = _fitted(r, top)
    tables = r.table(top.get("tables", {}), "tables")
    moe = _moe(r, tables["moe"]) if tables.get("moe") is not None else None
    attention = None
    if tables.get("attention") is not None:
        attention = _attention(r, tables["attention"])
    gemm = _gemm(r, tables.get("gemm", {}))
    stack = _stack(r, tables.get("stack", []))
    cell_latency = _cell_latency(r, tables.get("floors"))
    if kind == "measured" and moe is None and attention is None and not gemm:
        raise r.fail("tables", "measured tables (moe, attention, gemm) in a measured profile", {})
    if sha256 is None:
        try:
            sha256 = canonical_sha256(top)
        except (TypeError, ValueError) as err:  # a value JSON cannot hold (data built in code)
            raise ProfileError(source, "", "JSON data", str(err)) from None
    return CalibrationProfile(
        source=source,
        kind=kind,
        gpu=str(meta["gpu"]),
        model=str(meta["model"]),
        shapes=shapes,
        peak_hbm_bytes_per_s=peak_bw,
        peak_bf16_flops_per_s=peak_flops,
        fitted=fitted,
        sha256=sha256,
        moe=moe,
        attention=attention,
        gemm=gemm,
        stack=stack,
        cell_latency_s=cell_latency,
        data=top,
    )


def parse_profile_text(text: str, source: str, *, sha256: str | None = None) -> CalibrationProfile:
    """Parse and validate profile JSON text.

    ``sha256`` defaults to the digest of ``text`` encoded as UTF-8 (the file it would be).
    """
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    try:
        data = load_json(text, source, "", ProfileError)
    except json.JSONDecodeError as err:
        raise ProfileError(
            source,
            "",
            "a complete JSON document (a simspec calibration profile)",
            f"invalid JSON at line {err.lineno} column {err.colno} ({err.msg}; truncated?)",
        ) from None
    return profile_from_dict(data, source, sha256=sha256)


def load_profile(path: str | Path) -> CalibrationProfile:
    """Load and validate the profile at ``path`` (cached while the file's content is unchanged).

    The file is read on every call; only parsing is cached, by path and SHA-256 of the bytes.

    Raises
    ------
    ProfileError
        When the file is missing, unreadable, truncated, of another schema, or holds a bad or
        non-finite value; the message names the file and the key path.
    """
    source = str(path)
    raw = read_input_bytes(path, source, "calibration profile (JSON)", ProfileError)
    try:
        # Universal newlines, as Path.read_text would give (error columns stay the same).
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as err:
        raise ProfileError(source, "", "a readable UTF-8 JSON file", type(err).__name__) from None
    key = (source, hashlib.sha256(raw).hexdigest())
    profile = _cache.get(key)
    if profile is None:
        profile = parse_profile_text(text, source, sha256=key[1])
        _cache[key] = profile
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return profile
