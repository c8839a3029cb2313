"""The catalogs: target models, drafters, GPUs and engine presets, one TOML file per entry.

The files are data transcribed from public config.json files and data sheets (each cites its
source). They are loaded strictly, like scenario files, so a malformed entry names its key.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any

from simspec.costs.presets import EnginePreset
from simspec.errors import InputError
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec
from simspec.schema import build

_KINDS: dict[str, type] = {
    "models": ModelSpec,
    "drafters": DrafterSpec,
    "gpus": GpuSpec,
    "engines": EnginePreset,
}


@functools.cache
def _load(kind: str) -> dict[str, Any]:
    entries: dict[str, Any] = {}
    folder = resources.files("simspec.catalog").joinpath(kind)
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".toml"):
            continue
        source = f"catalog/{kind}/{item.name}"
        data = tomllib.loads(item.read_text(encoding="utf-8"))
        spec = build(_KINDS[kind], data, source=source)
        if spec.name != item.name.removesuffix(".toml"):
            raise InputError(
                source, "name", f"{item.name.removesuffix('.toml')!r}", repr(spec.name)
            )
        entries[spec.name] = spec
    return entries


def model_names() -> list[str]:
    """Names of the catalog's target (and dense draft) models."""
    return sorted(_load("models"))


def drafter_names() -> list[str]:
    """Names of the catalog's drafters."""
    return sorted(_load("drafters"))


def gpu_names() -> list[str]:
    """Names of the catalog's GPUs."""
    return sorted(_load("gpus"))


def engine_names() -> list[str]:
    """Names of the catalog's engine presets (``[engine] preset``)."""
    return sorted(_load("engines"))


def get_engine(name: str) -> EnginePreset:
    """The catalog engine preset ``name``; KeyError lists valid names."""
    return _get("engines", name)


def get_model(name: str) -> ModelSpec:
    """The catalog model ``name``; KeyError lists valid names."""
    return _get("models", name)


def get_drafter(name: str) -> DrafterSpec:
    """The catalog drafter ``name``; KeyError lists valid names."""
    return _get("drafters", name)


def get_gpu(name: str) -> GpuSpec:
    """The catalog GPU ``name``; KeyError lists valid names."""
    return _get("gpus", name)


def _get(kind: str, name: str) -> Any:
    entries = _load(kind)
    if name not in entries:
        raise KeyError(name)
    return entries[name]
