"""The in-memory form of a calibration profile: interpolated grids, tables, the profile.

:class:`GridTable` interpolates a measured grid multilinearly over its *monotone envelope*
(the running maximum along every axis, so a noisy measurement can never make more work
cheaper; multilinear interpolation of a grid that is monotone along every axis is monotone
along every axis). The calibrated cost model asks it millions of times, hence the plain-Python
one-point path :meth:`GridTable.value_at` next to the vectorised :meth:`GridTable.lookup`.
The format's constants (schema name and version, the allowed kinds, shapes, GEMM tables and
stack modes) live here too, beside the types they describe.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simspec.params import RooflineParams
from simspec.physics.hardware import GpuSpec
from simspec.schema import param

SCHEMA = "simspec-calibration-profile"
SCHEMA_VERSION = 1
#: "fitted": the parameters were fitted to serving benchmarks (simspec.fit.profiles).
KINDS = ("measured", "analytic", "fitted")
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


# -- the tables and the profile ----------------------------------------------------------------


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
class StackMeasurement:
    """A whole layer stack (a target pass without sampling) measured at one point.

    ``use`` is "fit" (the point sets the fixed per-pass overhead) or "validation" (kept out
    of the fit, to report the calibrated model's error on it).
    """

    batch: int = param(help="requests", ge=0)
    tokens_per_request: int = param(help="tokens per request in the pass", ge=0)
    context_tokens: int = param(help="keys per request", ge=0)
    unique_experts: float = param(help="distinct experts per MoE layer", ge=0)
    mode: str = param(help="eager, or CUDA-graph replay", choices=STACK_MODES)
    use: str = param(help="fit, or validation (kept out of the fit)", choices=STACK_USES)
    time_s: float = param(help="median time of the stack", gt=0)


@dataclass(frozen=True, eq=False)
class CalibrationProfile:
    """A validated profile (see :mod:`simspec.profile`); build it with ``load_profile``.

    ``sha256`` is the hex SHA-256 of the profile's content: of the file's bytes for a loaded
    file, else of its canonical JSON (``json.dumps(data, sort_keys=True)``), so a digest of a
    scenario that names the profile can cover what the profile says, not only its path.
    """

    source: str
    kind: str
    gpu: str
    model: str
    shapes: str
    peak_hbm_bytes_per_s: float
    peak_bf16_flops_per_s: float
    fitted: RooflineParams
    sha256: str
    moe: MoeTable | None = None
    attention: AttentionTable | None = None
    gemm: Mapping[str, GemmTable] = field(default_factory=dict)
    stack: tuple[StackMeasurement, ...] = ()
    #: Graph launch latency an isolated table cell carries (``parse._cell_latency``): taken off
    #: each table value a pass uses, since a whole pass is one graph.
    cell_latency_s: float = 0.0
    data: Mapping[str, Any] = field(default_factory=dict)

    @property
    def serving_fit(self) -> tuple[str, ...]:
        """The cost parameters ``simspec fit`` fitted to serving measurements (kind "fitted").

        These outrank an engine preset's values when a scenario uses the profile
        (:attr:`simspec.config.scenario.Scenario.roofline`): they were fitted end to end on the
        user's own engine, with the preset already applied.
        """
        if self.kind != "fitted":
            return ()
        params = self.data.get("fit_details", {}).get("params", {})
        return tuple(str(name) for name in params)

    @property
    def engine_preset(self) -> str | None:
        """The engine preset of the scenario a fitted profile was fitted with (None: unknown)."""
        scenario = self.data.get("metadata", {}).get("scenario", {})
        preset = scenario.get("engine_preset") if isinstance(scenario, Mapping) else None
        return str(preset) if preset is not None else None

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
