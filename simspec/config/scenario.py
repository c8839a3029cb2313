"""Scenarios: one TOML file describes a whole simulation, validated strictly.

A scenario names the target model, the drafter and the GPU from the catalogs, and configures
the cost model, routing, acceptance, workload and the policies to compare. Every table maps to a
frozen dataclass (defaults live there, with units in their help texts), so
``load_scenario(path)`` either returns a complete, valid :class:`Scenario` or raises a
:class:`~simspec.errors.ScenarioError` that names the file, the key path, what was expected and
what was found. ``--set key=value`` overrides are applied to the parsed TOML before validation,
so they are checked the same way. Scenarios never change after loading; derive variants with
:func:`with_overrides` or ``dataclasses.replace``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.config.profiles import fill_from_profile, from_profile, profile_mismatch
from simspec.costs.base import COST_MODELS
from simspec.costs.params import RooflineParams
from simspec.errors import ScenarioError, describe
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec, kv_bytes_for_context
from simspec.policies import POLICIES, BudgetPolicy
from simspec.profile import load_profile
from simspec.routing.samplers import RoutingConfig
from simspec.schema import build, param, to_dict
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.workload import WorkloadConfig

DEFAULT_SCENARIO = "default_scenario.toml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelConfig:
    """Target and drafter (scenario table ``[model]``)."""

    target: str = param("qwen3-30b-a3b", "target model, a name from `simspec models`")
    drafter: str = param("eagle3-qwen3-30b-a3b", "drafter, a name from `simspec models`")


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareConfig:
    """The GPUs (scenario table ``[hardware]``)."""

    gpu: str = param("h100-sxm", "GPU, a name from `simspec gpus`")
    num_gpus: int = param(
        1, "GPUs acting as one device (summed bandwidth, FLOP/s, memory)", ge=1, le=1024
    )
    memory_utilization: float = param(
        0.9, "fraction of GPU memory usable for weights + KV cache", gt=0, le=1
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CostsConfig(RooflineParams):
    """The cost model and its parameters (scenario table ``[costs]``).

    With ``profile``, every roofline key the table leaves unset takes the profile's fitted
    value (keys set in the scenario win); without one, the built-in defaults. The resolved
    values are what ``to_dict`` (and so the results JSON) shows.
    """

    model: str = param(
        "roofline",
        "cost model: roofline, or calibrated (interpolates the profile's measured tables)",
        choices=tuple(COST_MODELS.names()),
    )
    profile: str = param(
        "",
        "calibration profile JSON (path relative to the working folder), e.g. "
        "calibration/h100-sxm-analytic.json; its fitted values are the defaults of the keys below",
    )
    pass_overhead_s: float = from_profile("pass_overhead_s")
    draft_step_overhead_s: float = from_profile("draft_step_overhead_s")
    moe_efficiency_max: float = from_profile("moe_efficiency_max")
    moe_saturation_bytes: float = from_profile("moe_saturation_bytes")
    weight_efficiency: float = from_profile("weight_efficiency")
    kv_efficiency: float = from_profile("kv_efficiency")
    compute_efficiency: float = from_profile("compute_efficiency")
    comm_s_per_layer: float = from_profile("comm_s_per_layer")

    def __post_init__(self) -> None:
        fill_from_profile(self)


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """One policy of a scenario: its registry name, a display label and the built policy."""

    name: str
    label: str
    policy: BudgetPolicy

    def params(self) -> dict[str, Any]:
        """The policy's parameters as plain data."""
        return to_dict(self.policy)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A complete, validated simulation setup."""

    name: str = "scenario"
    description: str = ""
    seed: int = 0
    model: ModelConfig = ModelConfig()
    hardware: HardwareConfig = HardwareConfig()
    costs: CostsConfig = CostsConfig()
    routing: RoutingConfig = RoutingConfig()
    acceptance: AcceptanceConfig = AcceptanceConfig()
    workload: WorkloadConfig = WorkloadConfig()
    policies: tuple[PolicySpec, ...] = field(default_factory=tuple)
    source: str = field(default="", compare=False)

    # -- resolved catalog entries -------------------------------------------------------------
    @property
    def target(self) -> ModelSpec:
        """The target model spec."""
        return catalog.get_model(self.model.target)

    @property
    def drafter(self) -> DrafterSpec:
        """The drafter spec."""
        return catalog.get_drafter(self.model.drafter)

    @property
    def draft_model(self) -> ModelSpec | None:
        """The dense draft model, when the drafter is one."""
        d = self.drafter
        return catalog.get_model(d.model) if d.kind == "dense" else None

    @property
    def gpu(self) -> GpuSpec:
        """The GPU spec."""
        return catalog.get_gpu(self.hardware.gpu)

    def to_dict(self) -> dict[str, Any]:
        """The resolved scenario as plain data (every default filled in)."""
        return {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "model": to_dict(self.model),
            "hardware": to_dict(self.hardware),
            "costs": to_dict(self.costs),
            "routing": to_dict(self.routing),
            "acceptance": to_dict(self.acceptance),
            "workload": to_dict(self.workload),
            "policies": [{"name": p.name, "label": p.label, **p.params()} for p in self.policies],
        }

    def digest(self) -> str:
        """12 hex characters of the sha256 of the resolved scenario (names caches and outputs)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


_TOP_KEYS = (
    "name",
    "description",
    "seed",
    "model",
    "hardware",
    "costs",
    "routing",
    "acceptance",
    "workload",
    "policies",
    "sweep",  # read by `simspec sweep` (simspec.sweep.run), ignored by everything else
)


def _label(name: str, policy: Any) -> str:
    """A short display label: the name and the parameters that differ from their defaults."""
    params = to_dict(policy)
    if name == "fixed":
        return f"fixed-{params['draft_tokens']}"
    defaults = to_dict(type(policy)())
    changed = {k: v for k, v in params.items() if defaults.get(k) != v}
    inner = ",".join(f"{k}={v}" for k, v in changed.items())
    return f"{name}({inner})" if inner else name


def _build_policies(raw: Any, source: str) -> tuple[PolicySpec, ...]:
    if not isinstance(raw, list):
        raise ScenarioError(source, "policies", "an array of tables ([[policies]])", describe(raw))
    specs = []
    for i, entry in enumerate(raw):
        path = f"policies[{i}]"
        if not isinstance(entry, Mapping):
            raise ScenarioError(source, path, "a table with a `name` key", describe(entry))
        name = entry.get("name")
        if not isinstance(name, str):
            raise ScenarioError(source, f"{path}.name", "a policy name (string)", describe(name))
        if name not in POLICIES.names():
            raise ScenarioError(
                source, f"{path}.name", "one of " + ", ".join(POLICIES.names()), describe(name)
            )
        label = entry.get("label", None)
        if label is not None and not isinstance(label, str):
            raise ScenarioError(source, f"{path}.label", "a string", describe(label))
        params = {k: v for k, v in entry.items() if k not in ("name", "label")}
        policy = build(POLICIES.get(name), params, source=source, path=path)
        specs.append(PolicySpec(name, label or _label(name, policy), policy))
    if not specs:
        raise ScenarioError(source, "policies", "at least one policy", "an empty array")
    labels = [s.label for s in specs]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise ScenarioError(
                source, f"policies[{i}].label", "a label unique in the scenario", describe(label)
            )
    return tuple(specs)


def scenario_from_dict(data: Mapping[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate parsed TOML ``data`` into a :class:`Scenario` (see module docstring)."""
    if not isinstance(data, Mapping):
        raise ScenarioError(source, "", "a table", describe(data))
    for key in data:
        if key not in _TOP_KEYS:
            raise ScenarioError(
                source, key, "one of the keys " + ", ".join(_TOP_KEYS), "an unknown key"
            )
    sections: dict[str, Any] = {}
    for key, cls in (
        ("model", ModelConfig),
        ("hardware", HardwareConfig),
        ("costs", CostsConfig),
        ("routing", RoutingConfig),
        ("acceptance", AcceptanceConfig),
        ("workload", WorkloadConfig),
    ):
        value = data.get(key, {})
        if not isinstance(value, Mapping):
            raise ScenarioError(source, key, f"a table [{key}]", describe(value))
        sections[key] = build(cls, value, source=source, path=key)
    for key, kind in (("name", str), ("description", str)):
        if key in data and not isinstance(data[key], kind):
            raise ScenarioError(source, key, "a string", describe(data[key]))
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ScenarioError(source, "seed", "an integer in [0, 2^63)", describe(seed))
    policies = _build_policies(data.get("policies", [{"name": "fixed", "draft_tokens": 3}]), source)
    scenario = Scenario(
        name=data.get("name", Path(source).stem if source else "scenario"),
        description=data.get("description", ""),
        seed=seed,
        policies=policies,
        source=source,
        **sections,
    )
    _check_catalog(scenario, source)
    return scenario


def _check_catalog(s: Scenario, source: str) -> None:
    """Cross-checks against the catalogs: names exist, weights fit, budgets within K_max."""
    for path, value, names in (
        ("model.target", s.model.target, catalog.model_names()),
        ("model.drafter", s.model.drafter, catalog.drafter_names()),
        ("hardware.gpu", s.hardware.gpu, catalog.gpu_names()),
    ):
        if value not in names:
            raise ScenarioError(
                source,
                path,
                "one of " + ", ".join(names),
                describe(value),
                "Run `simspec models` or `simspec gpus` to list them.",
            )
    if s.costs.profile:
        problem = profile_mismatch(
            load_profile(s.costs.profile), s.costs.model, s.hardware.gpu, s.model.target
        )
        if problem:
            raise ScenarioError(source, "costs.profile", *problem)
    usable = s.gpu.memory_bytes * s.hardware.num_gpus * s.hardware.memory_utilization
    weights = s.target.shape.total_weight_bytes
    if s.draft_model is not None:
        weights += s.draft_model.shape.total_weight_bytes
    else:
        weights += s.drafter.head_weight_bytes()
    if weights >= usable:
        need = int(-(-weights // (s.gpu.memory_bytes * s.hardware.memory_utilization)))
        raise ScenarioError(
            source,
            "hardware.num_gpus",
            f"enough GPUs to hold {weights / 1e9:.1f} GB of weights (at least {need})",
            f"{s.hardware.num_gpus} x {s.gpu.memory_bytes / 1e9:.0f} GB x "
            f"{s.hardware.memory_utilization} usable",
        )
    w = s.workload
    longest = (
        (w.prompt_tokens + w.output_tokens) * (1 + w.length_jitter) + s.drafter.max_draft_tokens + 2
    )
    kv_need = kv_bytes_for_context(s.target.shape, longest)
    if kv_need > usable - weights:
        raise ScenarioError(
            source,
            "workload.prompt_tokens",
            f"requests whose KV cache fits the {max(usable - weights, 0) / 1e9:.2f} GB left after "
            "the weights (fewer prompt/output tokens, more GPUs or a higher memory_utilization)",
            f"{w.prompt_tokens} prompt + {w.output_tokens} output tokens "
            f"needing {kv_need / 1e9:.2f} GB",
        )
    cap = s.drafter.max_draft_tokens
    for i, p in enumerate(s.policies):
        want = p.policy.budget_cap(10**6)
        if want > cap:
            key = f"policies[{i}].draft_tokens" if p.name == "fixed" else f"policies[{i}]"
            raise ScenarioError(
                source,
                key,
                f"a budget within the drafter's max_draft_tokens = {cap}",
                f"a policy that asks for {want}",
            )


_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_overrides(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``key.path=value`` overrides (values in TOML syntax) to parsed scenario data.

    ``policies[1].draft_tokens=4`` indexes arrays; a bare word is taken as a string.
    Returns a new dict; ``data`` is not modified.
    """
    result = copy.deepcopy(dict(data))
    for item in overrides:
        if "=" not in item:
            raise ScenarioError("--set", item, "key=value", describe(item))
        key, _, text = item.partition("=")
        key = key.strip()
        parts: list[str | int] = []
        for piece in key.split("."):
            m = _PATH_PART.fullmatch(piece)
            if not m:
                raise ScenarioError(
                    "--set", key, "a dotted key such as routing.overlap", describe(key)
                )
            parts.append(m.group(1))
            parts.extend(int(ix) for ix in re.findall(r"\[(\d+)\]", m.group(2)))
        node: Any = result
        for depth, part in enumerate(parts):
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    raise ScenarioError(
                        "--set", key, "an index of an existing array", describe(part)
                    )
            elif not isinstance(node, dict):
                raise ScenarioError(
                    "--set",
                    key,
                    f"{part!r} to be a key inside a table",
                    f"it inside {describe(node)}",
                )
            if depth == len(parts) - 1:
                node[part] = _parse_value(text)
            else:
                if isinstance(part, str) and part not in node:
                    node[part] = [] if isinstance(parts[depth + 1], int) else {}
                node = node[part]
    return result


def read_scenario_data(path: str | Path | None) -> tuple[dict[str, Any], str]:
    """Parse a scenario file (or the embedded default when ``path`` is None) into plain data."""
    if path is None:
        text = (
            resources.files("simspec.config").joinpath(DEFAULT_SCENARIO).read_text(encoding="utf-8")
        )
        source = "<default scenario>"
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ScenarioError(source, "", "an existing scenario file", "no such file") from None
        except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
            raise ScenarioError(
                source, "", "a readable UTF-8 TOML file", type(err).__name__
            ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "", "valid TOML", f"a syntax error ({err})") from None
    return data, source


def load_scenario(path: str | Path | None = None, overrides: Iterable[str] = ()) -> Scenario:
    """Load and validate a scenario file (None = the embedded default), applying overrides."""
    data, source = read_scenario_data(path)
    overrides = list(overrides)
    if overrides:
        data = apply_overrides(data, overrides)
        source += " (with --set overrides)"
    return scenario_from_dict(data, source)


def with_overrides(scenario: Scenario, overrides: Iterable[str]) -> Scenario:
    """A new scenario with ``key=value`` overrides applied to ``scenario``."""
    data = scenario.to_dict()
    return scenario_from_dict(apply_overrides(data, overrides), scenario.source or "<scenario>")
