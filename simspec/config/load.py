"""The one scenario loader: TOML, ``--set`` overrides, catalog look-ups, the profile, checks.

:func:`load_scenario` reads a scenario file (or the embedded default), applies ``key=value``
overrides to the parsed data, then :func:`scenario_from_dict` validates every table strictly
(:mod:`simspec.schema`), looks the model, drafter and GPU up in the catalogs, loads the
calibration profile and checks what only the whole scenario can tell (weights and KV cache fit,
budgets within the drafter's cap, the profile fits the GPU and model). It returns a fully
resolved :class:`~simspec.config.scenario.Scenario` or raises a
:class:`~simspec.errors.ScenarioError` naming the file, the key path, what was expected and what
was found. :func:`with_overrides` derives a variant of a loaded scenario the same way.

Paths: a relative ``costs.profile`` written in a scenario file is relative to that file's
folder; one given as an override is relative to the working folder. Trace paths
(``routing.trace``, ``acceptance.trace``; :mod:`simspec.config.traces`) use the profile's folder.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.config._acceptance import fit_scenario_acceptance, with_fit
from simspec.config._memory import check_offload, check_weights_fit, kv_capacity_bytes
from simspec.config.aliases import expand_aliases
from simspec.config.checks import check_routing, fill_default_drafter
from simspec.config.custom import resolve_specs, with_custom_names
from simspec.config.engine import EngineConfig
from simspec.config.offload import OffloadConfig
from simspec.config.overrides import (  # noqa: F401 - re-exported: the loader's API
    Overrides,
    apply_overrides,
    override_keys,
    parse_value,
    touches_profile,
)
from simspec.config.profiles import load_scenario_profile
from simspec.config.scenario import (
    CostsConfig,
    HardwareConfig,
    ModelConfig,
    PolicySpec,
    Resolved,
    Scenario,
)
from simspec.config.slo import SloConfig
from simspec.config.speculation import SpeculationConfig
from simspec.config.traces import with_traces
from simspec.errors import ScenarioError, describe
from simspec.inputs import load_toml, read_input_text
from simspec.physics.models import kv_bytes_for_context
from simspec.physics.mtp import mtp_module
from simspec.physics.precision import with_cache_dtypes, with_precision
from simspec.policies.base import POLICIES
from simspec.policies.fixed import BASELINE_LABEL, is_plain_decoding
from simspec.routing.config import RoutingConfig
from simspec.schema import build, to_dict
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.tree import tree_capacity
from simspec.text.workload import WorkloadConfig

DEFAULT_SCENARIO = "default_scenario.toml"

#: Top-level keys of a scenario file. ``sweep`` is read by the sweep runner only.
TOP_KEYS = (
    "name",
    "description",
    "seed",
    "model",
    "hardware",
    "costs",
    "routing",
    "acceptance",
    "workload",
    "engine",
    "speculation",
    "slo",
    "offload",
    "policies",
    "sweep",
)
_TABLES = (
    ("model", ModelConfig),
    ("hardware", HardwareConfig),
    ("costs", CostsConfig),
    ("routing", RoutingConfig),
    ("acceptance", AcceptanceConfig),
    ("workload", WorkloadConfig),
    ("engine", EngineConfig),
    ("speculation", SpeculationConfig),
    ("slo", SloConfig),
    ("offload", OffloadConfig),
)


# -- reading ---------------------------------------------------------------------------------------
def read_scenario_data(path: str | Path | None) -> tuple[dict[str, Any], str]:
    """Parse a scenario file (or the embedded default when ``path`` is None) into plain data."""
    if path is None:
        text = resources.files(__package__).joinpath(DEFAULT_SCENARIO).read_text(encoding="utf-8")
        return _parse_toml(text, "<default scenario>"), "<default scenario>"
    source = str(path)
    text = read_input_text(path, source, "scenario file (TOML)", ScenarioError)
    return _parse_toml(text, source), source


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return dict(load_toml(text, source, "", ScenarioError))
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(source, "", "valid TOML", f"a syntax error ({err})") from None


# -- validation and resolution -----------------------------------------------------------------
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
        if label == BASELINE_LABEL and not is_plain_decoding(policy):
            raise ScenarioError(
                source,
                f"{path}.label",
                f"another label ({BASELINE_LABEL!r} names the k = 0 baseline)",
                f"{label!r} on a policy that drafts",
            )
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


def _resolve(
    model: ModelConfig, hardware: HardwareConfig, costs: CostsConfig, source: str, base: str
) -> Resolved:
    """Catalog or custom specs (config.custom) and the profile: the only I/O of validation."""
    target, drafter, gpu = resolve_specs(model, hardware, source, base)
    target = with_precision(
        target,
        model.precision,
        expert=model.expert_precision,
        shared=model.shared_precision,
        attention=model.attention_precision,
    )
    target = with_cache_dtypes(target, model.kv_cache_dtype, model.ssm_state_dtype)
    draft_model = None
    if drafter.kind == "dense":
        draft_model = catalog.get_model(drafter.model)
    elif drafter.kind == "mtp":  # the target's own module, at the target's precision
        draft_model = mtp_module(target, drafter.mtp_attention, drafter.mtp_ffn)
    return Resolved(
        target=target,
        drafter=drafter,
        draft_model=draft_model,
        gpu=gpu,
        profile=load_scenario_profile(costs, hardware.gpu, model.target, source, base),
        profile_key=costs.profile,
        profile_base=base,
    )


def check_seed(value: Any, source: str, key: str = "seed") -> int:
    """``value`` as a scenario seed: an integer in [0, 2^63) (not a boolean, not a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ScenarioError(source, key, "an integer in [0, 2^63)", describe(value))
    return value


def scenario_from_dict(
    data: Mapping[str, Any], source: str = "<scenario>", *, base_dir: str | Path = ""
) -> Scenario:
    """Validate and resolve parsed scenario ``data`` (see the module docstring).

    ``base_dir`` is the folder a relative ``costs.profile`` is resolved against ("" = the
    working folder).
    """
    if not isinstance(data, Mapping):
        raise ScenarioError(source, "", "a table", describe(data))
    for key in data:
        if key not in TOP_KEYS:
            raise ScenarioError(
                source, key, "one of the keys " + ", ".join(TOP_KEYS), "an unknown key"
            )
    sections: dict[str, Any] = {}
    for key, cls in _TABLES:
        value = with_custom_names(data, key, source)  # a custom model or GPU names itself
        if key == "model":  # a target without a drafter gets its own drafter
            value = fill_default_drafter(value, source)
        if not isinstance(value, Mapping):
            raise ScenarioError(source, key, f"a table [{key}]", describe(value))
        sections[key] = build(cls, value, source=source, path=key)
    for key in ("name", "description"):
        if key in data and not isinstance(data[key], str):
            raise ScenarioError(source, key, "a string", describe(data[key]))
    seed = check_seed(data.get("seed", 0), source)
    policies = _build_policies(data.get("policies", [{"name": "fixed", "draft_tokens": 3}]), source)
    resolved = _resolve(
        sections["model"], sections["hardware"], sections["costs"], source, str(base_dir)
    )
    resolved = with_traces(resolved, sections, seed, source, str(base_dir))  # read once
    acceptance, fit, origin = fit_scenario_acceptance(
        data.get("acceptance"),
        sections["acceptance"],
        sections["speculation"],
        policies,
        resolved,
        source,
    )
    sections["acceptance"] = acceptance
    resolved = with_fit(resolved, fit, origin)
    scenario = Scenario(
        name=data.get("name", Path(source).stem if source else "scenario"),
        description=data.get("description", ""),
        seed=seed,
        policies=policies,
        source=source,
        resolved=resolved,
        **sections,
    )
    _check_parallel(scenario, source)
    _check_context(scenario, source)
    check_offload(scenario, source)
    _check_fits(scenario, source)
    _check_tree(scenario, source)
    _check_ngram_chain(scenario, source)
    check_routing(
        scenario.routing,
        scenario.target.shape,
        scenario.drafter.max_draft_tokens,
        scenario.seed,
        source,
    )
    return scenario


def _check_parallel(s: Scenario, source: str) -> None:
    """The parallel degrees split the target as serving engines can.

    Tensor parallelism shards attention by heads: t must divide the query heads, and the KV
    heads must split evenly (t divides them) or be replicated whole (they divide t), the rule
    vLLM and SGLang apply; an MLA cache is one latent per token, replicated on every rank.
    Expert parallelism places whole experts on ranks: at most one rank per routed expert.
    """
    hw, a = s.hardware, s.target.attention
    t = hw.tensor_parallel or hw.num_gpus
    key = "hardware.tensor_parallel" if hw.tensor_parallel else "hardware.num_gpus"
    shown = f"{t}" if hw.tensor_parallel else f"{t} (tensor parallel = num_gpus)"
    if a.num_heads % t:  # checked first: heads decide before KV heads
        raise ScenarioError(
            source,
            key,
            f"a tensor-parallel degree dividing {s.target.name}'s {a.num_heads} attention heads",
            shown,
        )
    if a.kind != "mla" and a.num_kv_heads % t and t % a.num_kv_heads:
        raise ScenarioError(
            source,
            key,
            f"a tensor-parallel degree that divides {s.target.name}'s {a.num_kv_heads} KV heads "
            "or is a multiple of them (KV heads replicated)",
            shown,
        )
    experts = s.target.moe.num_experts
    if hw.expert_parallel > max(experts, 1):
        raise ScenarioError(
            source,
            "hardware.expert_parallel",
            f"at most {s.target.name}'s {experts} routed experts (whole experts per rank)"
            if experts
            else f"1 ({s.target.name} has no routed experts)",
            str(hw.expert_parallel),
        )


def _check_context(s: Scenario, source: str) -> None:
    """The longest request (prompt + output, lengths jittered up) fits the target's context."""
    limit = s.target.max_context_tokens
    w = s.workload
    longest = math.ceil((w.prompt_tokens + w.output_tokens) * (1 + w.length_jitter))
    if limit and longest > limit:
        raise ScenarioError(
            source,
            "workload.prompt_tokens",
            f"requests within {s.target.name}'s maximum context of {limit:,} tokens "
            "(prompt + output, lengths x (1 + length_jitter))",
            f"{w.prompt_tokens} prompt + {w.output_tokens} output tokens = up to {longest:,}",
        )


def _check_fits(s: Scenario, source: str) -> None:
    """Weights and the longest request's KV cache fit the GPUs; budgets within K_max."""
    check_weights_fit(s, source)
    w = s.workload
    longest = (
        (w.prompt_tokens + w.output_tokens) * (1 + w.length_jitter) + s.drafter.max_draft_tokens + 2
    )
    tensor = s.hardware.tensor_parallel or s.hardware.num_gpus
    kv_need = kv_bytes_for_context(s.target.shape, longest, tensor)
    left = kv_capacity_bytes(s)
    if kv_need > left:
        raise ScenarioError(
            source,
            "workload.prompt_tokens",
            f"requests whose KV cache fits the {max(left, 0) / 1e9:.2f} GB left after "
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


def _check_tree(s: Scenario, source: str) -> None:
    """A tree's ``num_draft_tokens`` is one the deepest tree the policies grow can verify.

    SGLang's ``speculative_num_steps`` is the policies' depth: the steps checked are the most
    any policy asks for (its budget cap within the drafter's ``max_draft_tokens``; a fixed k is
    its k). A tree of those steps has topk + (steps − 1)·topk² nodes, so a larger
    ``num_draft_tokens − 1`` could never be verified by any step of the run: a setting the
    engine cannot run, not a choice. A policy that drafts fewer steps on some step keeps its
    per-request clamp (:func:`simspec.text.tree.verified_drafts`). A run in which nothing drafts
    grows no tree and is not checked.
    """
    spec = s.speculation
    if spec.num_draft_tokens <= 0:
        return
    steps = max((p.policy.budget_cap(s.drafter.max_draft_tokens) for p in s.policies), default=0)
    if steps <= 0:
        return
    most = tree_capacity(steps, spec.topk) + 1
    if spec.num_draft_tokens > most:
        raise ScenarioError(
            source,
            "speculation.num_draft_tokens",
            f"at most {most}: the root and the {most - 1} nodes that topk = {spec.topk} grows "
            f"in {steps} draft step{'s' if steps > 1 else ''} (the deepest the policies draft)",
            str(spec.num_draft_tokens),
        )


def _check_ngram_chain(s: Scenario, source: str) -> None:
    """An n-gram drafter drafts a chain: ``[speculation] topk`` and every tree policy's width 1.

    vLLM and TensorRT-LLM propose one continuation of the matched n-gram; SGLang's ``NGRAM``
    tree is a breadth-first walk of its trie whose shape the text decides (no depth flag), not
    the ranked-sibling tree of ``steps`` x ``topk`` simspec builds (:mod:`simspec.text.tree`),
    so a wider setting would price and accept a tree no engine drafts for n-grams.
    """
    if s.drafter.kind != "ngram":
        return
    why = (
        f"topk = 1 with the n-gram drafter {s.drafter.name!r}: vLLM and TensorRT-LLM draft one "
        "n-gram continuation (a chain), and SGLang's NGRAM trie tree is not simspec's "
        "ranked-sibling tree"
    )
    if s.speculation.topk > 1:
        raise ScenarioError(source, "speculation.topk", why, str(s.speculation.topk))
    for i, p in enumerate(s.policies):
        widest = max((shape.topk for shape in p.policy.tree_family() or ()), default=1)
        if widest > 1:
            key = f"policies[{i}].topks" if hasattr(p.policy, "topks") else f"policies[{i}].topk"
            found = f"a {p.name} policy whose trees are {widest} wide"
            raise ScenarioError(source, key, why, found)


# -- public entry points -------------------------------------------------------------------------
def read_with_overrides(
    path: str | Path | None, overrides: Overrides
) -> tuple[dict[str, Any], str, str]:
    """A scenario file's data with ``overrides`` applied, its source, and the folder a relative
    ``costs.profile`` is resolved against (the working folder when an override sets it)."""
    data, source = read_scenario_data(path)
    base = str(Path(path).parent) if path is not None else ""
    if overrides:
        data = apply_overrides(data, overrides, strict_drafter=path is not None)
        if touches_profile(overrides):
            base = ""
    return data, source, base


def load_scenario(path: str | Path | None = None, overrides: Overrides = ()) -> Scenario:
    """Load and validate a scenario file (None = the embedded default), applying overrides."""
    data, source, base = read_with_overrides(path, overrides)
    if overrides:
        source += " (with --set overrides)"
    return scenario_from_dict(data, source, base_dir=base)


def with_overrides(scenario: Scenario, overrides: Overrides) -> Scenario:
    """A new, re-validated scenario: ``scenario`` with ``overrides`` applied.

    ``overrides`` is a mapping (``{"workload.concurrency": 32}``) or ``key=value`` strings
    (TOML values). Unset efficiencies stay unset, so a new profile supplies them.
    """
    base = scenario.resolved.profile_base if scenario.resolved is not None else ""
    if touches_profile(overrides):
        base = ""
    data = apply_overrides(scenario.to_data(), overrides)
    changed = scenario_from_dict(data, scenario.source or "<scenario>", base_dir=base)
    return _keep_default_acceptance(scenario, changed, overrides)


#: Override sections after which a drafter's default acceptance no longer describes the run.
ACCEPTANCE_INPUTS = ("acceptance", "model", "speculation")


def _keep_default_acceptance(
    scenario: Scenario, changed: Scenario, overrides: Overrides
) -> Scenario:
    """``changed`` still saying its acceptance is the drafter's documented default when
    ``scenario``'s was and ``overrides`` leave the acceptance, drafter and tree alone (the
    scenario's data states the fitted alpha, which would otherwise read as the user's)."""
    old = scenario.resolved.acceptance_fit if scenario.resolved is not None else None
    if old is None or not old.default_of or changed.resolved is None:
        return changed
    keys = [name for key in override_keys(overrides) for name, _ in expand_aliases([(key, 0)])]
    if any(key.split(".")[0].split("[")[0] in ACCEPTANCE_INPUTS for key in keys):
        return changed
    resolved = dataclasses.replace(changed.resolved, acceptance_fit=old, acceptance_origin="")
    return dataclasses.replace(changed, resolved=resolved)
