"""Scenarios as plain frozen data: what one simulation is, fully resolved, with no I/O.

A scenario names the target model, the drafter and the GPU, and configures the cost model,
routing, acceptance, workload and the policies to compare. Every table maps to a frozen
dataclass whose fields carry their defaults, units and bounds (:func:`simspec.schema.param`).
:mod:`simspec.config.load` is the one place that reads files: it parses the TOML, applies
``--set`` overrides, looks the names up in the catalogs, loads the calibration profile and
returns a :class:`Scenario` whose :class:`Resolved` part holds those specs. Nothing here reads a
file or changes after construction; derive variants with :func:`simspec.with_overrides`.

A ``[costs]`` efficiency left unset is ``None`` here and resolves (:attr:`Scenario.roofline`)
to the profile's fitted value, else the built-in default, so changing the profile through
``with_overrides`` changes every value the scenario did not set itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from simspec import catalog
from simspec.config._memory import offload_weight_bytes
from simspec.config.engine import EngineConfig
from simspec.config.offload import OffloadConfig
from simspec.config.slo import SloConfig
from simspec.config.speculation import SpeculationConfig
from simspec.costs.base import COST_MODELS
from simspec.errors import FieldError, ScenarioError
from simspec.params import SCENARIO_OWNED_KEYS, RooflineParams
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec, HostSpec
from simspec.physics.models import ModelSpec
from simspec.physics.mtp import drafter_weight_bytes
from simspec.physics.precision import (
    KV_CACHE_DTYPES,
    PART_PRECISIONS,
    PRECISIONS,
    SSM_STATE_DTYPES,
)
from simspec.policies.base import BudgetPolicy
from simspec.profile import CalibrationProfile
from simspec.routing.config import RoutingConfig
from simspec.routing.replay import TraceFile
from simspec.routing.trace import RoutingTrace
from simspec.schema import param, to_dict
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.engine_acceptance import AcceptanceFit
from simspec.text.workload import WorkloadConfig

#: The efficiencies and overheads of ``[costs]`` (fields of RooflineParams).
ROOFLINE_KEYS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(RooflineParams) if f.name not in SCENARIO_OWNED_KEYS
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Target and drafter (scenario table ``[model]``)."""

    target: str = param("qwen3-30b-a3b", "target model, a name from `simspec models`")
    drafter: str = param(
        "eagle3-qwen3-30b-a3b",
        "drafter, a name from `simspec models` whose targets include the target; unset in a "
        "file: the target's own (simspec.config.checks)",
    )
    precision: str = param(
        "catalog",
        "weight format of routed experts, shared experts/dense FFNs and attention: catalog "
        "(the catalog's bytes per parameter), bf16, fp8, mxfp4 or nvfp4",
        choices=PRECISIONS,
    )
    expert_precision: str = param(
        "", "routed-expert weight format ('' = precision)", choices=PART_PRECISIONS
    )
    shared_precision: str = param(
        "", "shared-expert and dense-FFN weight format ('' = precision)", choices=PART_PRECISIONS
    )
    attention_precision: str = param(
        "", "attention-projection weight format ('' = precision)", choices=PART_PRECISIONS
    )
    kv_cache_dtype: str = param(
        "auto",
        "KV-cache format, as the engines' --kv-cache-dtype: auto (the model's weight_bytes, the "
        "engines' default), bf16 / fp16, or fp8 (fp8_e4m3, fp8_e5m2): half the KV bytes read "
        "per context token and twice the tokens a GPU holds",
        choices=tuple(KV_CACHE_DTYPES),
    )
    ssm_state_dtype: str = param(
        "float32",
        "format of a linear-attention layer's recurrent state (SGLang's --mamba-ssm-dtype, "
        "vLLM's --mamba-ssm-cache-dtype): float32 or bfloat16 / float16",
        choices=tuple(SSM_STATE_DTYPES),
    )
    config: str = param(
        "",
        "Hugging Face config.json of a target outside the catalog (relative to the scenario "
        "file's folder); target is then its name (simspec.config.custom)",
    )
    custom: ModelSpec | None = param(
        None, "a target outside the catalog, inline with a catalog model file's keys"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareConfig:
    """The GPUs (scenario table ``[hardware]``)."""

    gpu: str = param("h100-sxm", "GPU, a name from `simspec gpus`")
    custom: GpuSpec | None = param(
        None, "a GPU outside the catalog, inline with a catalog GPU file's keys (gpu names it)"
    )
    host: HostSpec | None = param(
        None,
        "the host offloaded experts live on: DRAM bandwidth, CPU FLOP/s, RAM (unset: a "
        "desktop with dual-channel DDR5, simspec.physics.hardware.HostSpec)",
    )
    num_gpus: int = param(
        1,
        "GPUs serving the model (tensor / expert parallel, simspec.costs.parallel; memory summed)",
        ge=1,
        le=1024,
    )
    memory_utilization: float = param(
        0.9, "fraction of GPU memory usable for weights + KV cache", ge=0.05, le=1
    )
    tensor_parallel: int = param(
        0,
        "tensor-parallel degree of attention and dense weights, dividing num_gpus "
        "(0 = num_gpus); each GPU reads 1/t of them, two all-reduces per layer",
        ge=0,
        le=1024,
    )
    expert_parallel: int = param(
        1,
        "expert-parallel degree of the MoE layers, dividing num_gpus (1 = no expert "
        "parallelism): whole experts per rank, the busiest rank sets the time; the MoE "
        "output is summed by the tensor-parallel all-reduce, or dispatched and combined by "
        "all-to-alls when expert_parallel exceeds tensor_parallel (data-parallel attention: "
        "num_gpus / tensor_parallel attention groups, each running its own requests)",
        ge=1,
        le=1024,
    )

    def __post_init__(self) -> None:
        for key in ("tensor_parallel", "expert_parallel"):
            degree = getattr(self, key)
            if degree and self.num_gpus % degree:
                raise FieldError(key, f"a divisor of num_gpus = {self.num_gpus}", degree)


def _hardware_data(hardware: HardwareConfig) -> dict[str, Any]:
    """``[hardware]`` as plain data; an unset ``host`` is left out, so a scenario without
    ``[hardware.host]`` keeps the digest and results JSON it had before the key existed."""
    data = to_dict(hardware)
    if hardware.host is None:
        del data["host"]
    return data


def _routing_data(routing: RoutingConfig) -> dict[str, Any]:
    """``[routing]`` as plain data; an unset ``working_set`` is left out, so a scenario without
    it keeps the digest and results JSON it had before the key existed."""
    data = to_dict(routing)
    if routing.working_set is None:
        del data["working_set"]
    return data


@dataclass(frozen=True, slots=True, kw_only=True)
class _CostsChoice:
    """The keys of ``[costs]`` that choose the cost model; :data:`CostsConfig` adds the rest."""

    model: str = param(
        "roofline",
        "cost model, a registered name: roofline, or calibrated (interpolates the profile's "
        "measured tables)",
    )
    profile: str = param(
        "",
        "calibration profile JSON, e.g. calibration/h100-sxm-analytic.json (relative to the "
        "scenario file's folder when written in a file, to the working folder when set with "
        "--set); its fitted values are the defaults of the keys below",
    )
    allow_foreign_profile: bool = param(
        False,
        "use a profile measured on another device than hardware.gpu (another catalog GPU, or "
        "a device outside the catalog such as a CPU test run); refused otherwise",
    )

    def __post_init__(self) -> None:
        valid = COST_MODELS.names()
        if self.model not in valid:
            raise FieldError("model", "one of " + ", ".join(map(repr, valid)), self.model)

    def explicit(self) -> dict[str, Any]:
        """The efficiencies the scenario sets itself (names of forms and modes stay strings)."""
        values = {key: getattr(self, key) for key in ROOFLINE_KEYS}
        return {
            key: v if isinstance(v, str) else float(v) for key, v in values.items() if v is not None
        }

    def resolve(self, fitted: RooflineParams | None) -> RooflineParams:
        """The cost model's parameters: the scenario's values over ``fitted`` (or defaults)."""
        return dataclasses.replace(fitted or RooflineParams(), **self.explicit())


def _costs_config() -> type[_CostsChoice]:
    """The ``[costs]`` table: the cost model's choice plus every field of RooflineParams.

    Each RooflineParams field appears as an optional key with the same help text and bounds;
    unset (None) means "the profile's fitted value, else the built-in default"
    (:meth:`_CostsChoice.resolve`). Generating the keys keeps the table and the cost model's
    parameters one list.
    """
    optional = [
        (f.name, f"{f.type} | None", field(default=None, metadata=f.metadata))
        for f in dataclasses.fields(RooflineParams)
        if f.name in ROOFLINE_KEYS
    ]
    cls = dataclasses.make_dataclass(
        "CostsConfig",
        optional,
        bases=(_CostsChoice,),
        frozen=True,
        slots=True,
        kw_only=True,
        namespace={"__doc__": "The cost model and its parameters (scenario table ``[costs]``)."},
    )
    cls.__module__ = __name__  # where pickle and the type hints look it up
    return cls


if TYPE_CHECKING:
    CostsConfig = _CostsChoice
else:
    CostsConfig = _costs_config()


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """One policy of a scenario: its registry name, a display label and the built policy."""

    name: str
    label: str
    policy: BudgetPolicy

    def params(self) -> dict[str, Any]:
        """The policy's parameters as plain data."""
        return to_dict(self.policy)


@dataclass(frozen=True, slots=True)
class Resolved:
    """What the loader looked up for a scenario: catalog specs and the calibration profile."""

    target: ModelSpec
    drafter: DrafterSpec
    draft_model: ModelSpec | None  # the dense draft model or the target's MTP module
    gpu: GpuSpec
    profile: CalibrationProfile | None = None
    profile_key: str = ""  # ``costs.profile`` as written
    profile_base: str = ""  # folder a relative ``costs.profile`` was resolved against ("" = cwd)
    routing_trace: TraceFile | None = None  # replayed by routing.mode = "trace"
    acceptance_trace: TraceFile | None = None  # replayed by acceptance.process = "trace"
    #: The fit of the acceptance process to engine-reported numbers (simspec.config._acceptance),
    #: or None, and then where the acceptance came from, in words.
    acceptance_fit: AcceptanceFit | None = None
    acceptance_origin: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A complete, validated simulation setup (see the module docstring)."""

    name: str = "scenario"
    description: str = ""
    seed: int = 0
    model: ModelConfig = ModelConfig()
    hardware: HardwareConfig = HardwareConfig()
    costs: CostsConfig = CostsConfig()
    routing: RoutingConfig = RoutingConfig()
    acceptance: AcceptanceConfig = AcceptanceConfig()
    workload: WorkloadConfig = WorkloadConfig()
    engine: EngineConfig = EngineConfig()
    speculation: SpeculationConfig = SpeculationConfig()
    slo: SloConfig = SloConfig()
    offload: OffloadConfig = OffloadConfig()
    policies: tuple[PolicySpec, ...] = field(default_factory=tuple)
    source: str = field(default="", compare=False)
    resolved: Resolved | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        r = self.resolved
        if r is None:
            return
        stale = [
            (key, want, have)
            for key, want, have in (
                ("model.target", self.model.target, r.target.name),
                ("model.drafter", self.model.drafter, r.drafter.name),
                ("hardware.gpu", self.hardware.gpu, r.gpu.name),
                ("costs.profile", self.costs.profile, r.profile_key),
            )
            if want != have
        ]
        if stale:
            key, want, have = stale[0]
            raise ScenarioError(
                self.source or "<scenario>",
                key,
                f"a value the loader resolved (change names and files with "
                f"simspec.with_overrides, which looks them up; the scenario holds {have!r})",
                f"{want!r} set by dataclasses.replace",
            )

    # -- what the loader resolved ---------------------------------------------------------------
    def _resolved(self) -> Resolved:
        if self.resolved is None:
            raise ValueError(
                "this Scenario was built directly and is not resolved: create scenarios with "
                "simspec.load_scenario or simspec.config.load.scenario_from_dict"
            )
        return self.resolved

    @property
    def target(self) -> ModelSpec:
        """The target model spec."""
        return self._resolved().target

    @property
    def drafter(self) -> DrafterSpec:
        """The drafter spec."""
        return self._resolved().drafter

    @property
    def draft_model(self) -> ModelSpec | None:
        """The dense draft model, when the drafter is one."""
        return self._resolved().draft_model

    @property
    def acceptance_fit(self) -> AcceptanceFit | None:
        """The fit of the acceptance process to an engine's numbers, if the scenario gave any
        (or its drafter has a documented default)."""
        return self._resolved().acceptance_fit

    @property
    def acceptance_note(self) -> str:
        """One line: the acceptance the runs use and where it came from."""
        from simspec.config._acceptance import acceptance_note

        r = self._resolved()
        return acceptance_note(self.acceptance, r.acceptance_fit, r.acceptance_origin)

    @property
    def gpu(self) -> GpuSpec:
        """The GPU spec."""
        return self._resolved().gpu

    @property
    def profile(self) -> CalibrationProfile | None:
        """The calibration profile, when ``costs.profile`` names one."""
        return self._resolved().profile

    def replay_traces(self) -> tuple[RoutingTrace | None, RoutingTrace | None]:
        """Contents of the (routing, acceptance) traces the scenario replays (None: no trace)."""
        r = self._resolved()
        return (
            r.routing_trace.trace if r.routing_trace else None,
            r.acceptance_trace.trace if r.acceptance_trace else None,
        )

    @property
    def roofline(self) -> RooflineParams:
        """The cost model's parameters, each from the first of these that sets it:

        1. the scenario's ``[costs]`` (a key written there, or by ``--set costs.KEY=...``);
        2. a fitted profile's parameters that ``simspec fit`` fitted to serving measurements
           (:attr:`~simspec.profile.CalibrationProfile.serving_fit`): they were fitted end to
           end with the engine preset already applied, so a profile fitted under a preset
           reproduces its fitted predictions when run under that preset;
        3. the engine preset (any key it sets): its overheads were fitted on a serving engine's
           end-to-end rows, while a measured profile times kernels one by one on one GPU (its
           overheads are a microbenchmark's);
        4. the profile's other values (efficiencies, MoE constants);
        5. the built-in defaults.
        """
        profile = self.profile
        fitted = profile.fitted if profile is not None else RooflineParams()
        engine = catalog.get_engine(self.engine.preset)
        preset: dict[str, Any] = engine.overrides()
        own = profile.serving_fit if profile is not None else ()
        preset = {key: value for key, value in preset.items() if key not in own}
        params = self.costs.resolve(dataclasses.replace(fitted, **preset))
        overlap = self.engine.overlap_scheduling
        if overlap is None:
            overlap = bool(engine.overlap_scheduling)
        return dataclasses.replace(
            params,
            cuda_graphs=self.engine.cuda_graphs,
            overlap_scheduling=overlap,
            temperature=self.workload.temperature,
            top_p=self.workload.top_p,
        )

    @property
    def host(self) -> HostSpec:
        """The host of offloaded experts: ``[hardware.host]``, else the default desktop."""
        return self.hardware.host or HostSpec()

    @property
    def usable_memory_bytes(self) -> float:
        """GPU memory for weights and KV cache: all GPUs × memory_utilization."""
        return self.gpu.memory_bytes * self.hardware.num_gpus * self.hardware.memory_utilization

    @property
    def weight_bytes(self) -> float:
        """Weights held in GPU memory: the target's and the drafter's (experts offloaded: the
        resident ones and the cache, :func:`~simspec.config._memory.offload_weight_bytes`)."""
        if self.offload.enabled:
            return offload_weight_bytes(self)
        return self.target.shape.total_weight_bytes + drafter_weight_bytes(
            self.target, self.drafter, self.draft_model
        )

    # -- views -------------------------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        """The scenario as written (unset efficiencies are None): input to the loader."""
        return {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "model": to_dict(self.model),
            "hardware": _hardware_data(self.hardware),
            "costs": to_dict(self.costs),
            "routing": _routing_data(self.routing),
            "acceptance": to_dict(self.acceptance),
            "workload": to_dict(self.workload),
            "engine": to_dict(self.engine),
            "speculation": to_dict(self.speculation),
            "slo": to_dict(self.slo),
            **({"offload": to_dict(self.offload)} if self.offload != OffloadConfig() else {}),
            "policies": [{"name": p.name, "label": p.label, **p.params()} for p in self.policies],
        }

    def to_dict(self) -> dict[str, Any]:
        """The resolved scenario as plain data (every default filled in, results JSON); with
        ``acceptance_fit`` when the acceptance was fitted to an engine's numbers."""
        data = self.to_data()
        roofline = to_dict(self.roofline)
        data["costs"] = {key: roofline.get(key, value) for key, value in data["costs"].items()}
        fit = self.acceptance_fit
        if fit is not None:
            data["acceptance_fit"] = fit.to_data()
        return data

    def digest(self) -> str:
        """12 hex characters of the sha256 of the resolved scenario and the profile's contents."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        profile = self.profile
        if profile is not None:
            text += profile.sha256
        for trace in (self._resolved().routing_trace, self._resolved().acceptance_trace):
            text += trace.sha256 if trace is not None else ""
        return hashlib.sha256(text.encode()).hexdigest()[:12]
