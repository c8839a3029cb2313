"""Calibration profiles: what one GPU measured (or what is assumed), in one validated JSON file.

A profile is written by ``simspec calibrate`` (``kind = "measured"``: torch microbenchmarks on a
device) or describes spec-sheet numbers with assumed efficiencies (``kind = "analytic"``). It has:

``metadata``
    device, catalog GPU name (``gpu``, empty when the device is not in the catalog), model,
    shapes (``full``, or ``tiny`` for the CPU test runs), torch/CUDA versions, date, command,
    git sha, and where the numbers come from (``notes``, ``sources``).
``peak``
    the bandwidth and bf16 FLOP/s every efficiency is a fraction of: the catalog's spec sheet
    for a catalog GPU, the measured copy bandwidth and matmul throughput otherwise.
``fitted``
    every :class:`~simspec.costs.params.RooflineParams` field; ``provenance`` says, per field,
    whether
    it was fitted to the tables, measured, or assumed (and why).
``tables``
    the measured medians on grids: MoE layer time over (tokens in the pass, unique experts),
    decode attention over (batch, keys per request, query tokens per request), dense GEMMs over
    tokens, and whole layer stacks at a few (batch, tokens per request) points.

The calibrated cost model reads the tables through :class:`GridTable`: multilinear
interpolation of the tables' *monotone envelope* (the running maximum along every axis, so a
noisy measurement can never make more work cheaper; multilinear interpolation of a grid that is
monotone along every axis is monotone along every axis). Points outside a grid report
``inside = False``; the cost model then falls back to the fitted roofline (never below the
grid's edge) and counts the fallback. This is LLMServingSim's (tokens, distinct experts) MoE
table with 2-D interpolation and Vidur's "profile once on the GPU, look up on CPUs" design.

Loading validates everything (types, shapes, finiteness, bounds) and raises
:class:`ProfileError` (an :class:`~simspec.errors.InputError`: exit code 2) naming the file,
the key path inside it, what was expected and what was found.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simspec.costs.params import RooflineParams
from simspec.errors import InputError, describe
from simspec.physics.hardware import GpuSpec
from simspec.schema import build

SCHEMA = "simspec-calibration-profile"
SCHEMA_VERSION = 1
KINDS = ("measured", "analytic")
SHAPES = ("full", "tiny", "")
#: Dense GEMM tables a profile may hold (weights read per pass; see simspec.calibrate.plan).
GEMM_NAMES = (
    "attention_projections",
    "linear_attention_projections",
    "shared_expert",
    "dense_ffn",
    "lm_head",
)
STACK_MODES = ("eager", "graph")
STACK_USES = ("fit", "validation")


class ProfileError(InputError):
    """A calibration profile is unreadable, truncated, of another schema, or has a bad value."""


# -- interpolation --------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GridTable:
    """Values on a rectangular grid, interpolated multilinearly over their monotone envelope.

    Parameters
    ----------
    axes : tuple of 1-D float arrays
        Strictly increasing grid coordinates, one array per dimension.
    values : ndarray
        Shape ``tuple(len(a) for a in axes)``: the measured medians. They are replaced by their
        running maximum along every axis (see the module docstring).

    Examples
    --------
    >>> t = GridTable((np.array([1.0, 3.0]),), np.array([2.0, 1.0]))  # noisy: 3 tokens cheaper
    >>> t.values.tolist()  # the envelope
    [2.0, 2.0]
    >>> t = GridTable((np.array([1.0, 3.0]),), np.array([1.0, 3.0]))
    >>> value, inside = t.lookup(np.array([[2.0], [5.0]]))
    >>> value.tolist(), inside.tolist()
    ([2.0, 3.0], [True, False])
    """

    axes: tuple[np.ndarray, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        envelope = np.asarray(self.values, dtype=float)
        for axis in range(envelope.ndim):
            envelope = np.maximum.accumulate(envelope, axis=axis)
        object.__setattr__(self, "axes", tuple(np.asarray(a, dtype=float) for a in self.axes))
        object.__setattr__(self, "values", envelope)
        # Plain-Python copies for the one-point path (a cost model asks millions of times).
        object.__setattr__(self, "_lists", tuple(a.tolist() for a in self.axes))
        object.__setattr__(self, "_lower", np.array([a[0] for a in self.axes]))
        object.__setattr__(self, "_upper", np.array([a[-1] for a in self.axes]))

    @property
    def lower(self) -> np.ndarray:
        """Smallest coordinate per axis."""
        return self._lower  # type: ignore[attr-defined, no-any-return]

    @property
    def upper(self) -> np.ndarray:
        """Largest coordinate per axis."""
        return self._upper  # type: ignore[attr-defined, no-any-return]

    def value_at(self, *point: float) -> tuple[float, bool]:
        """:meth:`lookup` of one point: (interpolated value, inside)."""
        inside = True
        cells: list[tuple[int, int, float]] = []  # (low index, step to the upper, weight)
        for x, axis in zip(point, self._lists, strict=True):  # type: ignore[attr-defined]
            if x < axis[0]:
                x, inside = axis[0], False
            elif x > axis[-1]:
                x, inside = axis[-1], False
            if len(axis) == 1:
                cells.append((0, 0, 0.0))
                continue
            i = min(max(bisect.bisect_right(axis, x) - 1, 0), len(axis) - 2)
            cells.append((i, 1, (x - axis[i]) / (axis[i + 1] - axis[i])))
        total = 0.0
        for corner in itertools.product((0, 1), repeat=len(cells)):
            w = 1.0
            index = []
            for (i, step, t), upper in zip(cells, corner, strict=True):
                w *= t if upper else 1.0 - t
                index.append(i + step * upper)
            if w:
                total += w * float(self.values[tuple(index)])
        return total, inside

    def lookup(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Interpolated values at ``points`` (shape (m, d)), clamped to the grid, and ``inside``.

        Returns
        -------
        values : ndarray, shape (m,)
            Multilinear interpolation at the point clamped into the grid (so a point beyond
            the grid gets the value at the grid's edge, never less).
        inside : ndarray of bool, shape (m,)
            True where the point lies inside the grid on every axis.
        """
        pts = np.atleast_2d(np.asarray(points, dtype=float))
        inside = np.all((pts >= self.lower) & (pts <= self.upper), axis=1)
        low_index, weight = [], []
        for d, axis in enumerate(self.axes):
            x = np.minimum(np.maximum(pts[:, d], axis[0]), axis[-1])
            if len(axis) == 1:
                low_index.append(np.zeros(len(x), dtype=np.intp))
                weight.append(np.zeros(len(x)))
                continue
            i = np.minimum(np.searchsorted(axis, x, side="right") - 1, len(axis) - 2)
            i = np.maximum(i, 0)
            low_index.append(i)
            weight.append((x - axis[i]) / (axis[i + 1] - axis[i]))
        result = np.zeros(len(pts))
        for corner in itertools.product((0, 1), repeat=len(self.axes)):
            w: Any = 1.0
            index = []
            for d, axis in enumerate(self.axes):
                upper = corner[d]
                index.append(low_index[d] + (upper if len(axis) > 1 else 0))
                w = w * (weight[d] if upper else 1.0 - weight[d])
            result += w * self.values[tuple(index)]
        return result, inside


# -- the profile ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MoeTable:
    """One MoE layer (router + top-k + grouped SwiGLU experts) over (tokens, unique experts)."""

    grid: GridTable
    expert_bytes: float
    experts_per_token: int
    kernel: str


@dataclass(frozen=True, eq=False)
class AttentionTable:
    """Decode attention of one layer over (batch, keys per request, query tokens per request)."""

    grid: GridTable
    kv_bytes_per_token: float


@dataclass(frozen=True, eq=False)
class GemmTable:
    """Dense GEMMs reading ``weight_bytes`` of weights, over tokens in the pass."""

    grid: GridTable
    weight_bytes: float


@dataclass(frozen=True, slots=True)
class StackPoint:
    """A whole layer stack (a target pass without sampling) measured at one point."""

    batch: int
    tokens_per_request: int
    context_tokens: int
    unique_experts: float
    mode: str
    use: str
    time_s: float


@dataclass(frozen=True, eq=False)
class CalibrationProfile:
    """A validated profile (see the module docstring); build it with :func:`load_profile`."""

    source: str
    kind: str
    gpu: str
    model: str
    shapes: str
    peak_hbm_bytes_per_s: float
    peak_bf16_flops_per_s: float
    fitted: RooflineParams
    moe: MoeTable | None = None
    attention: AttentionTable | None = None
    gemm: Mapping[str, GemmTable] = field(default_factory=dict)
    stack: tuple[StackPoint, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def has_tables(self) -> bool:
        """True when the profile holds measured (or synthetic) tables."""
        return self.moe is not None or self.attention is not None or bool(self.gemm)

    def peak_gpu(self, base: GpuSpec) -> GpuSpec:
        """``base`` with the peaks the profile's efficiencies are fractions of.

        For a catalog GPU (checked against the scenario's) that is ``base`` itself; for a device
        outside the catalog (a CPU test run), its measured ceilings.
        """
        if self.gpu and self.gpu == base.name:
            return base
        return dataclasses.replace(
            base,
            hbm_bytes_per_s=self.peak_hbm_bytes_per_s,
            bf16_flops_per_s=self.peak_bf16_flops_per_s,
        )


# -- validation -----------------------------------------------------------------------------------


class _Reader:
    """Typed access to nested JSON data; every failure names the profile and the key path."""

    def __init__(self, source: str):
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

    def string(self, data: Mapping[str, Any], key: str, path: str, choices=None) -> str:
        value = self.get(data, key, path)
        where = f"{path}.{key}" if path else key
        if not isinstance(value, str):
            raise self.fail(where, "a string", value)
        if choices is not None and value not in choices:
            raise self.fail(where, "one of " + ", ".join(repr(c) for c in choices), value)
        return value

    def number(self, value: Any, path: str, *, positive: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(path, "a number", value)
        if not math.isfinite(value) or (positive and not value > 0):
            raise self.fail(path, "a finite number > 0" if positive else "a finite number", value)
        return float(value)

    def axis(self, data: Mapping[str, Any], key: str, path: str) -> np.ndarray:
        raw = self.get(data, key, path)
        where = f"{path}.{key}"
        if not isinstance(raw, list) or not raw:
            raise self.fail(where, "a non-empty array of numbers", raw)
        values = np.array([self.number(v, f"{where}[{i}]") for i, v in enumerate(raw)])
        if np.any(np.diff(values) <= 0):
            raise self.fail(where, "strictly increasing numbers", raw)
        return values

    def grid_values(self, raw: Any, shape: tuple[int, ...], path: str) -> np.ndarray:
        """A nested array of positive finite numbers of exactly ``shape``."""
        if not shape:
            return np.array(self.number(raw, path))
        if not isinstance(raw, list) or len(raw) != shape[0]:
            size = len(raw) if isinstance(raw, list) else "not an array"
            raise ProfileError(
                self.source,
                path,
                f"an array of {shape[0]} entries (one per grid point)",
                f"{size}" + (" entries" if isinstance(raw, list) else ""),
            )
        return np.stack([self.grid_values(v, shape[1:], f"{path}[{i}]") for i, v in enumerate(raw)])


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


def _grid(r: _Reader, data: Mapping[str, Any], path: str, axes: Sequence[str]) -> GridTable:
    arrays = tuple(r.axis(data, a, path) for a in axes)
    shape = tuple(len(a) for a in arrays)
    values = r.grid_values(r.get(data, "time_s", path), shape, f"{path}.time_s")
    return GridTable(arrays, values)


def profile_from_dict(data: Any, source: str = "<profile>") -> CalibrationProfile:
    """Validate parsed profile JSON into a :class:`CalibrationProfile` (or raise ProfileError)."""
    r = _Reader(source)
    top = r.table(data, "")
    schema = top.get("schema")
    if schema != SCHEMA:
        raise r.fail("schema", f"{SCHEMA!r} (a simspec calibration profile)", schema)
    version = top.get("schema_version")
    if version != SCHEMA_VERSION:
        raise r.fail("schema_version", f"{SCHEMA_VERSION}", version)
    bad = _find_non_finite(top, "")
    if bad:
        raise ProfileError(source, bad, "a finite number", "NaN or infinity")
    meta = r.table(r.get(top, "metadata", ""), "metadata")
    kind = r.string(meta, "kind", "metadata", KINDS)
    for key in ("device", "gpu", "model", "date", "command"):
        r.string(meta, key, "metadata")
    shapes = r.string(meta, "shapes", "metadata", SHAPES)
    peak = r.table(r.get(top, "peak", ""), "peak")
    peak_bw = r.number(r.get(peak, "hbm_bytes_per_s", "peak"), "peak.hbm_bytes_per_s")
    peak_flops = r.number(r.get(peak, "bf16_flops_per_s", "peak"), "peak.bf16_flops_per_s")
    fitted_raw = r.table(r.get(top, "fitted", ""), "fitted")
    names = [f.name for f in dataclasses.fields(RooflineParams)]
    for name in names:
        r.get(fitted_raw, name, "fitted")
    try:
        fitted = build(RooflineParams, fitted_raw, source=source, path="fitted")
    except InputError as err:  # a ScenarioError from schema.build: re-brand it as a profile error
        raise ProfileError(err.source, err.key_path, err.expected, err.found) from None
    tables = r.table(top.get("tables", {}), "tables")
    moe = attention = None
    gemm: dict[str, GemmTable] = {}
    if tables.get("moe") is not None:
        t = r.table(tables["moe"], "tables.moe")
        grid = _grid(r, t, "tables.moe", ("tokens", "unique_experts"))
        per_token = r.get(t, "experts_per_token", "tables.moe")
        if isinstance(per_token, bool) or not isinstance(per_token, int) or per_token < 1:
            raise r.fail("tables.moe.experts_per_token", "an integer >= 1", per_token)
        moe = MoeTable(
            grid,
            r.number(r.get(t, "expert_bytes", "tables.moe"), "tables.moe.expert_bytes"),
            per_token,
            r.string(t, "kernel", "tables.moe"),
        )
    if tables.get("attention") is not None:
        t = r.table(tables["attention"], "tables.attention")
        grid = _grid(r, t, "tables.attention", ("batch", "kv_tokens", "query_tokens"))
        kv_path = "tables.attention.kv_bytes_per_token"
        kv = r.number(r.get(t, "kv_bytes_per_token", "tables.attention"), kv_path)
        attention = AttentionTable(grid, kv)
    raw_gemm = r.table(tables.get("gemm", {}), "tables.gemm")
    for name, raw in raw_gemm.items():
        path = f"tables.gemm.{name}"
        if name not in GEMM_NAMES:
            raise r.fail(path, "a GEMM table named " + ", ".join(GEMM_NAMES), name)
        t = r.table(raw, path)
        gemm[name] = GemmTable(
            _grid(r, t, path, ("tokens",)),
            r.number(r.get(t, "weight_bytes", path), f"{path}.weight_bytes"),
        )
    stack = []
    raw_stack = tables.get("stack", [])
    if not isinstance(raw_stack, list):
        raise r.fail("tables.stack", "an array of objects", raw_stack)
    for i, raw in enumerate(raw_stack):
        path = f"tables.stack[{i}]"
        t = r.table(raw, path)
        ints = {}
        for key in ("batch", "tokens_per_request", "context_tokens"):
            value = r.get(t, key, path)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise r.fail(f"{path}.{key}", "an integer >= 0", value)
            ints[key] = value
        stack.append(
            StackPoint(
                batch=ints["batch"],
                tokens_per_request=ints["tokens_per_request"],
                context_tokens=ints["context_tokens"],
                unique_experts=r.number(
                    r.get(t, "unique_experts", path), f"{path}.unique_experts", positive=False
                ),
                mode=r.string(t, "mode", path, STACK_MODES),
                use=r.string(t, "use", path, STACK_USES),
                time_s=r.number(r.get(t, "time_s", path), f"{path}.time_s"),
            )
        )
    if kind == "measured" and moe is None and attention is None and not gemm:
        raise r.fail("tables", "measured tables (moe, attention, gemm) in a measured profile", {})
    return CalibrationProfile(
        source=source,
        kind=kind,
        gpu=str(meta["gpu"]),
        model=str(meta["model"]),
        shapes=shapes,
        peak_hbm_bytes_per_s=peak_bw,
        peak_bf16_flops_per_s=peak_flops,
        fitted=fitted,
        moe=moe,
        attention=attention,
        gemm=gemm,
        stack=tuple(stack),
        data=top,
    )


def parse_profile_text(text: str, source: str) -> CalibrationProfile:
    """Parse and validate profile JSON text."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ProfileError(
            source,
            "",
            "a complete JSON document (a simspec calibration profile)",
            f"invalid JSON at line {err.lineno} column {err.colno} ({err.msg}; truncated?)",
        ) from None
    return profile_from_dict(data, source)


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> CalibrationProfile:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ProfileError(path, "", "a readable UTF-8 JSON file", type(err).__name__) from None
    return parse_profile_text(text, path)


def load_profile(path: str | Path) -> CalibrationProfile:
    """Load and validate the profile at ``path`` (cached while the file is unchanged).

    Raises
    ------
    ProfileError
        When the file is missing, unreadable, truncated, of another schema, or holds a bad or
        non-finite value; the message names the file and the key path.
    """
    source = str(path)
    try:
        stat = Path(path).stat()
    except OSError:
        raise ProfileError(
            source, "", "an existing calibration profile (JSON)", "no such file"
        ) from None
    if not Path(path).is_file():
        raise ProfileError(source, "", "a calibration profile file", "a folder")
    return _load_cached(source, stat.st_mtime_ns, stat.st_size)


def profile_json(data: Mapping[str, Any]) -> str:
    """Profile data as JSON text (NaN is refused: a profile never holds one)."""
    return json.dumps(data, indent=1, allow_nan=False) + "\n"


__all__ = [
    "GEMM_NAMES",
    "KINDS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "AttentionTable",
    "CalibrationProfile",
    "GemmTable",
    "GridTable",
    "MoeTable",
    "ProfileError",
    "StackPoint",
    "load_profile",
    "parse_profile_text",
    "profile_from_dict",
    "profile_json",
]
