"""Where a scenario's target, drafter and GPU come from: the catalogs, or the scenario itself.

Names in ``[model]`` and ``[hardware]`` are looked up in the catalogs (``simspec models``,
``simspec gpus``). A model or GPU outside them is described in the scenario, three ways:

* ``[model] config = "path/config.json"``: the target is read from a Hugging Face config.json
  (:mod:`simspec.physics.hf_config`; a relative path is relative to the scenario file's folder,
  or to the working folder when set as an override, like ``costs.profile``);
* ``[model.custom]``: the target written inline, with the keys of a catalog model file
  (``simspec/catalog/models/*.toml``: ``num_layers``, ``hidden_size``, ``[model.custom.moe]``...);
* ``[hardware.custom]``: the GPU written inline, with the keys of a catalog GPU file
  (``memory_bytes``, ``hbm_bytes_per_s``, ``bf16_flops_per_s``, ...).

Either way ``model.target`` / ``hardware.gpu`` is the custom spec's name (default: the
config.json's folder name, or ``custom-model`` / ``custom-gpu``); the inline table's ``name``
may be left out. A custom target's drafter defaults to :data:`AUTO_DRAFTER`, an EAGLE-3 head
shaped after the target (:func:`auto_drafter`); any catalog drafter may be named instead (it is
not checked against the target: the scenario vouches for the pairing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.config.checks import check_drafter, check_mtp
from simspec.config.profiles import profile_path
from simspec.config.scenario import HardwareConfig, ModelConfig
from simspec.errors import InputError, ScenarioError, describe
from simspec.inputs import load_json, read_input_text
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec

#: The drafter a custom target gets unless ``model.drafter`` names one.
AUTO_DRAFTER = "eagle3-auto"
#: Draft vocabulary of the synthesized head (SpecForge's EAGLE-3 configs use 32000).
AUTO_DRAFT_VOCAB = 32000
#: MLP width over hidden size of a synthesized head for a MoE target: the median over the MoE
#: heads SpecForge publishes configs for (configs/*-eagle3.json: Qwen3-30B-A3B, Qwen3-235B-A22B,
#: Qwen3-Coder-30B-A3B and gpt-oss 6, DeepSeek-V3 5.7, Llama-4-Scout 6.4, Qwen3-Next and
#: Qwen3.5-35B-A3B 8, DeepSeek-V2-Lite 5.3, Qwen3-Coder-Next 4, Ling-flash-2.0 3.5,
#: Qwen3-Coder-480B 2.7, LongCat-Flash 2); NVIDIA's gpt-oss-120b head also has 6.
MOE_HEAD_MLP_PER_HIDDEN = 6


def _named(table: dict[str, Any], section: str, name_key: str, fallback: str, source: str) -> None:
    """Give ``table["custom"]`` (an inline spec) the name ``table[name_key]``, filling either."""
    key = "custom"
    custom = table.get(key)
    inline = custom.get("name") if isinstance(custom, Mapping) else None
    name = table.get(name_key) or inline or fallback
    if inline is not None and inline != name:
        raise ScenarioError(
            source,
            f"{section}.{key}.name",
            f"the same name as {section}.{name_key} ({name!r}), or no name",
            describe(inline),
        )
    table[name_key] = name
    if isinstance(custom, Mapping):
        table[key] = {**custom, "name": name}


def with_custom_names(data: Mapping[str, Any], key: str, source: str) -> Any:
    """The raw table ``data[key]`` with the names a custom model or GPU implies (module doc).

    Tables without ``config`` or ``custom`` come back unchanged.
    """
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        return value
    table = dict(value)
    if key == "model" and (table.get("config") or table.get("custom") is not None):
        if table.get("config") and table.get("custom") is not None:
            raise ScenarioError(
                source,
                "model.custom",
                "either model.config or [model.custom], not both",
                "both",
            )
        config = table.get("config")
        fallback = Path(config).parent.name.lower() if isinstance(config, str) else ""
        _named(table, "model", "target", fallback or "custom-model", source)
        table.setdefault("drafter", AUTO_DRAFTER)
        return table
    if key == "hardware" and table.get("custom") is not None:
        _named(table, "hardware", "gpu", "custom-gpu", source)
        return table
    return value


def auto_drafter(target: ModelSpec) -> DrafterSpec:
    """An EAGLE-3 head shaped after ``target`` by the convention of SpecForge's published heads.

    One decoder layer at the target's hidden size with its attention heads; an MLA target's
    head uses 128-dim GQA heads (hidden / 128 query heads, 8 KV heads), as SpecForge's
    DeepSeek-V3 head does. MLP width: a dense target's own FFN width (config.json's
    ``intermediate_size``), as SpecForge's heads for dense models have it; for a MoE target
    :data:`MOE_HEAD_MLP_PER_HIDDEN` × hidden, the median over SpecForge's published MoE heads.
    """
    a, h = target.attention, target.hidden_size
    mla = a.kind == "mla"
    return DrafterSpec(
        name=AUTO_DRAFTER,
        display_name=f"EAGLE-3 head shaped for {target.name}",
        kind="eagle3",
        targets=(target.name,),
        source="simspec.config.custom.auto_drafter",
        notes="synthesized: 1 layer at the target's hidden size with its attention heads; MLP "
        f"{MOE_HEAD_MLP_PER_HIDDEN} x hidden for a MoE target, its own FFN width for a dense one",
        num_layers=1,
        hidden_size=h,
        intermediate_size=(
            MOE_HEAD_MLP_PER_HIDDEN * h if target.is_moe else target.ffn.dense_intermediate_size
        )
        or 3 * h,
        num_heads=max(h // 128, 1) if mla else a.num_heads,
        num_kv_heads=8 if mla else a.num_kv_heads,
        head_dim=128 if mla else a.head_dim,
        draft_vocab_size=min(AUTO_DRAFT_VOCAB, target.vocab_size),
    )


def _catalog_name(path: str, value: str, names: list[str], source: str) -> None:
    if value not in names:
        raise ScenarioError(
            source,
            path,
            "one of " + ", ".join(names),
            describe(value),
            "Run `simspec models` or `simspec gpus` to list them, or describe it in the "
            "scenario ([model] config, [model.custom], [hardware.custom]).",
        )


def _read_config(path: str, source: str, base: str) -> dict[str, Any]:
    full = profile_path(path, base)
    text = read_input_text(full, str(full), "Hugging Face config.json", ScenarioError)
    try:
        data = load_json(text, str(full), "", ScenarioError)
    except json.JSONDecodeError as err:
        raise ScenarioError(str(full), "", "valid JSON", f"a syntax error ({err})") from None
    if not isinstance(data, dict):
        raise ScenarioError(str(full), "", "a JSON object", describe(data))
    return data


def _target(model: ModelConfig, source: str, base: str) -> ModelSpec:
    if model.custom is not None:
        return model.custom
    if model.config:
        from simspec.physics.hf_config import model_spec_from_hf  # only `model.config` needs it

        data = _read_config(model.config, source, base)
        where = str(profile_path(model.config, base))
        try:
            return model_spec_from_hf(data, model.target, where)
        except InputError as err:
            if isinstance(err, ScenarioError):
                raise
            raise ScenarioError(err.source, err.key_path, err.expected, err.found) from None
    _catalog_name("model.target", model.target, catalog.model_names(), source)
    return catalog.get_model(model.target)


def resolve_specs(
    model: ModelConfig, hardware: HardwareConfig, source: str, base: str
) -> tuple[ModelSpec, DrafterSpec, GpuSpec]:
    """The target (before ``[model] precision``), the drafter and the GPU of a scenario."""
    target = _target(model, source, base)
    custom_target = model.custom is not None or bool(model.config)
    if model.drafter == AUTO_DRAFTER:
        drafter = auto_drafter(target)
    else:
        _catalog_name("model.drafter", model.drafter, catalog.drafter_names(), source)
        drafter = catalog.get_drafter(model.drafter)
        if not custom_target:
            check_drafter(model.target, drafter, source)
    check_mtp(target, drafter, source)
    if hardware.custom is not None:
        return target, drafter, hardware.custom
    _catalog_name("hardware.gpu", hardware.gpu, catalog.gpu_names(), source)
    return target, drafter, catalog.get_gpu(hardware.gpu)
