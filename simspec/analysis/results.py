"""Typed results: one :class:`PolicyResult` per simulated policy, one :class:`RunResult` per run.

Every view of a run (the results JSON, the CLI's table, a sweep's CSV rows, a figure) is made
from these objects, and a sweep reads its point files back into them, so a metric has one name
from the engine's records to the figure. The scalar metrics are the fields marked ``metric``
(:data:`METRICS`; each field's help says what it measures, README "Results JSON" gives the
serving definitions); ``tpot_pXX_ms`` / ``ttft_pXX_ms`` are percentiles over requests, and with
an ``[slo]`` table :data:`SLO_METRICS` score each request against its targets.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simspec.analysis.delta import DeltaPoints
    from simspec.sim.engine import RunLog


class NonFiniteResult(ArithmeticError):
    """Internal error: a simulation produced NaN or infinity (inputs in range never should).

    Every scenario value has a bounded range (:func:`simspec.schema.param`), so a non-finite
    metric is a bug, reported as such (exit code 1), never written as invalid JSON.
    """


def _require_finite(what: str, value: Any) -> None:
    if isinstance(value, int | float) and not math.isfinite(value):
        raise NonFiniteResult(f"internal error: {what} is {value!r}, not a finite number")


def _metric(help: str) -> dict[str, Any]:
    """Field metadata of a scalar metric (listed in METRICS)."""
    return {"metric": True, "help": help}


@functools.cache
def step_parts() -> tuple[tuple[str, str], ...]:
    """(part, cost component) of every time component of a decode step, in results-JSON order.

    A cost component is a field of :class:`~simspec.costs.batch.StepCosts` whose name ends in
    ``_s`` (seconds): the draft phase, each of :class:`~simspec.params.PassCost`'s components of
    the verify pass (part ``verify_<name>``), the speculation overheads. A component added to
    the cost model is a part of :class:`GpuTime` without an edit here.
    """
    from simspec.costs.batch import StepCosts
    from simspec.params import PassCost

    verify = {f.name for f in dataclasses.fields(PassCost)}
    return tuple(
        (("verify_" if name in verify else "") + name.removesuffix("_s"), name)
        for name in StepCosts._fields
        if name.endswith("_s")
    )


def gpu_time_parts() -> tuple[str, ...]:
    """The parts of :class:`GpuTime`, in results-JSON order: :func:`step_parts`, then
    ``prefill`` (the prefill passes)."""
    return (*(part for part, _ in step_parts()), "prefill")


@dataclass(frozen=True, slots=True)
class GpuTime:
    """Simulated GPU time of a run by part, s (:func:`gpu_time_parts`): the parts sum to the
    run's whole GPU time, every decode step's draft phase, verify pass and speculation
    overhead plus the prefill passes."""

    parts: Mapping[str, float]

    def __post_init__(self) -> None:
        expected = gpu_time_parts()
        if tuple(self.parts) != expected:  # a results file of another version: no defaults
            missing = [p for p in expected if p not in self.parts]
            if missing:
                raise KeyError(f"gpu_time_s.{missing[0]}")
            extra = [p for p in self.parts if p not in expected]
            if extra:
                raise ValueError(f"gpu_time_s has an unknown part {extra[0]!r}")
            object.__setattr__(self, "parts", {p: self.parts[p] for p in expected})

    def __getitem__(self, name: str) -> float:
        return self.parts[name]

    @property
    def total(self) -> float:
        """All parts together, s."""
        return math.fsum(self.parts.values())

    def to_dict(self) -> dict[str, float]:
        """The results-JSON object (parts in :func:`gpu_time_parts`'s order)."""
        return dict(self.parts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuTime:
        """Inverse of :meth:`to_dict`: exactly the current parts (KeyError otherwise)."""
        return cls(dict(data))


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """What one policy did on a scenario's reference sequences."""

    name: str  # registry name ("fixed", "threshold", ..., "oracle")
    label: str  # display label, unique within a run
    params: Mapping[str, Any]
    tokens_per_s: float = field(
        metadata=_metric("committed output tokens per second of simulated time")
    )
    tpot_ms: float = field(metadata=_metric("mean time per output token after the first, ms"))
    ttft_ms: float = field(metadata=_metric("mean time to first token, ms"))
    acceptance_length: float = field(
        metadata=_metric("mean tokens committed per request per verify pass")
    )
    acceptance_rate: float = field(metadata=_metric("accepted drafts / drafted tokens"))
    mean_k: float = field(metadata=_metric("mean draft tokens per request per step"))
    verify_over_decode: float = field(
        metadata=_metric("verify time / the same passes' time with k = 0")
    )
    unique_experts_per_layer: float = field(
        metadata=_metric("mean distinct routed experts per MoE layer")
    )
    speedup_vs_no_spec: float = field(
        metadata=_metric("TPOT of the k = 0 baseline / TPOT of this policy")
    )
    gpu_time_s: GpuTime
    requests: int
    tokens: int
    cost_fallbacks: int = field(
        metadata=_metric("passes with a cost term outside the calibrated tables")
    )
    gap_to_oracle_pct: float | None = None  # set when the run has an oracle
    is_baseline: bool = False  # the k = 0 run every speedup is measured against
    is_oracle: bool = False  # the hindsight oracle
    # Per-request latency percentiles (numpy's linear interpolation between order statistics).
    tpot_p50_ms: float = field(kw_only=True, metadata=_metric("median per-request TPOT, ms"))
    tpot_p90_ms: float = field(kw_only=True, metadata=_metric("90th percentile of TPOT, ms"))
    tpot_p99_ms: float = field(kw_only=True, metadata=_metric("99th percentile of TPOT, ms"))
    ttft_p50_ms: float = field(kw_only=True, metadata=_metric("median per-request TTFT, ms"))
    ttft_p90_ms: float = field(kw_only=True, metadata=_metric("90th percentile of TTFT, ms"))
    ttft_p99_ms: float = field(kw_only=True, metadata=_metric("99th percentile of TTFT, ms"))
    # Set when the scenario has an [slo] target (see SLO_METRICS).
    slo_attainment: float | None = None
    goodput_requests_per_s: float | None = None
    goodput_tokens_per_s: float | None = None
    # Set when experts are offloaded ([offload]; see OFFLOAD_METRICS).
    expert_hit_rate: float | None = None
    link_gb: float | None = None
    link_busy_s: float | None = None
    link_busy_fraction: float | None = None
    exposed_copy_s: float | None = None

    def __post_init__(self) -> None:
        for name in (*METRICS, "gap_to_oracle_pct", *SLO_METRICS, *OFFLOAD_METRICS):
            _require_finite(f"{self.label}: {name}", getattr(self, name))
        for part, seconds in self.gpu_time_s.parts.items():
            _require_finite(f"{self.label}: gpu_time_s.{part}", seconds)

    def to_dict(self) -> dict[str, Any]:
        """The results-JSON row (``gap_to_oracle_pct`` only when there is an oracle)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["params"] = dict(self.params)
        data["gpu_time_s"] = self.gpu_time_s.to_dict()
        for optional in ("gap_to_oracle_pct", *SLO_METRICS, *OFFLOAD_METRICS):
            if data[optional] is None:
                del data[optional]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicyResult:
        """Inverse of :meth:`to_dict`."""
        values = dict(data)
        values["gpu_time_s"] = GpuTime.from_dict(values["gpu_time_s"])
        return cls(**values)

    def scalars(self) -> dict[str, float]:
        """The scalar metrics (:data:`METRICS`) by name."""
        return {name: getattr(self, name) for name in METRICS}


#: The scalar metrics of a :class:`PolicyResult`, in results-JSON order.
METRICS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(PolicyResult) if f.metadata.get("metric")
)
#: Metrics against the scenario's ``[slo]`` targets, present only when it sets one: the fraction
#: of requests that meet every target, and those requests (and their output tokens) per second of
#: makespan. Counting only requests within their SLOs is the serving notion of goodput (DistServe,
#: Zhong et al., OSDI 2024, go further and maximise the arrival rate at a target attainment).
SLO_METRICS: tuple[str, ...] = (
    "slo_attainment",
    "goodput_requests_per_s",
    "goodput_tokens_per_s",
)
#: Metrics of the host link, present only when ``[offload]`` puts experts in host memory: the
#: fraction of the experts the decode steps' verify passes needed that were resident, the GB and
#: seconds the link spent copying (prefills included), that time over the makespan, and the
#: time passes waited on their loads beyond their compute.
OFFLOAD_METRICS: tuple[str, ...] = (
    "expert_hit_rate",
    "link_gb",
    "link_busy_s",
    "link_busy_fraction",
    "exposed_copy_s",
)


@dataclass(frozen=True, slots=True)
class OracleSummary:
    """How the oracle was found, and the Delta-space summary of its decisions."""

    exact: bool
    method: str
    delta: Mapping[str, Any]


@dataclass(frozen=True)
class RunResult:
    """Every policy of one scenario (and seed) on the same reference sequences.

    ``policies`` lists the k = 0 baseline first when the scenario does not declare it, then the
    scenario's policies in their order, then the oracle when there is one. Exactly one row has
    ``is_baseline``; a declared ``fixed`` policy with ``draft_tokens = 0`` *is* the baseline
    (simulated once).
    """

    scenario: Mapping[str, Any]  # the resolved scenario as plain data
    scenario_digest: str
    simspec_version: str
    seed: int
    policies: tuple[PolicyResult, ...]
    oracle: OracleSummary | None = None
    #: Guardrail warnings, ``"<code>: <text>"`` each (:mod:`simspec.analysis.guardrails`).
    warnings: tuple[str, ...] = ()
    #: The oracle's Delta-space points (for figures; not part of the JSON).
    delta_points: DeltaPoints | None = field(default=None, compare=False, repr=False)
    #: Each row's engine records by label, kept on request (``keep_logs``; not in the JSON).
    logs: Mapping[str, RunLog] | None = field(default=None, compare=False, repr=False)

    @property
    def baseline(self) -> PolicyResult:
        """The k = 0 run."""
        return next(p for p in self.policies if p.is_baseline)

    @property
    def oracle_result(self) -> PolicyResult | None:
        """The oracle's row, when the run has one."""
        return next((p for p in self.policies if p.is_oracle), None)

    def get(self, label: str) -> PolicyResult:
        """The row labelled ``label``; KeyError lists the labels."""
        for p in self.policies:
            if p.label == label:
                return p
        raise KeyError(f"no policy labelled {label!r}; labels: {[p.label for p in self.policies]}")

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per row (what :meth:`to_dataframe` tabulates): the label, the scalar
        metrics, the optional ones that are set, GPU time by component (``gpu_<part>_s``),
        the policy's parameters (``param_<name>``) and the baseline/oracle flags."""
        rows = []
        for p in self.policies:
            data = p.to_dict()
            row: dict[str, Any] = {"policy": p.label, "name": p.name}
            row.update({k: v for k, v in data.items() if isinstance(v, int | float)})
            row.update({f"gpu_{k}_s": v for k, v in data["gpu_time_s"].items()})
            row.update({f"param_{k}": v for k, v in data["params"].items()})
            rows.append(row)
        return rows

    def to_dataframe(self) -> Any:
        """:meth:`records` as a pandas DataFrame: the same keys as columns, ``policy`` (the
        label) among them, one row per policy in order; ``.set_index("policy")`` indexes it by
        label. pandas is optional: imported here."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "RunResult.to_dataframe needs pandas, which simspec does not install: "
                "`pip install pandas` (or use RunResult.records(), plain dicts)"
            ) from None
        return pandas.DataFrame.from_records(self.records())

    def to_dict(self) -> dict[str, Any]:
        """The results-JSON object (design §4)."""
        data: dict[str, Any] = {
            "scenario": self.scenario,
            "scenario_digest": self.scenario_digest,
            "simspec_version": self.simspec_version,
            "seed": self.seed,
            "policies": [p.to_dict() for p in self.policies],
            "warnings": list(self.warnings),
        }
        if self.oracle is not None:
            data["oracle"] = {
                "exact": self.oracle.exact,
                "method": self.oracle.method,
                # an undefined summary statistic (no informative points) is null, not NaN
                "delta": {
                    key: None if isinstance(v, float) and not math.isfinite(v) else v
                    for key, v in self.oracle.delta.items()
                },
            }
        return data

    def to_json(self) -> str:
        """The results JSON text (stable key order: equal results give equal bytes)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """Inverse of :meth:`to_dict` (the Delta-space points are not in the JSON)."""
        oracle = data.get("oracle")
        warnings = data["warnings"]
        if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
            raise TypeError(f"warnings: expected a list of strings, found {warnings!r:.60}")
        return cls(
            scenario=data["scenario"],
            scenario_digest=data["scenario_digest"],
            simspec_version=data["simspec_version"],
            seed=data["seed"],
            policies=tuple(PolicyResult.from_dict(p) for p in data["policies"]),
            warnings=tuple(warnings),
            oracle=OracleSummary(oracle["exact"], oracle["method"], oracle["delta"])
            if oracle is not None
            else None,
        )
