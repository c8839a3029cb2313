"""The catalogs: target models, drafters, GPUs, engine presets and offload frameworks, one TOML
file per entry; and how accurate each engine preset's predictions are (``accuracy.json``).

The files are data transcribed from public config.json files and data sheets (each cites its
source). They are loaded strictly, like scenario files, so a malformed entry names its key.
``accuracy.json`` is written by ``python bench/fidelity.py`` (the validation's out-of-sample
errors per engine preset: :mod:`simspec.validation.accuracy`).
"""

from __future__ import annotations

import functools
import json
import tomllib
from importlib import resources
from typing import Any

from simspec.errors import InputError
from simspec.params.offload_framework import OffloadFramework
from simspec.params.presets import EnginePreset
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec
from simspec.schema import build

_KINDS: dict[str, type] = {
    "models": ModelSpec,
    "drafters": DrafterSpec,
    "gpus": GpuSpec,
    "engines": EnginePreset,
    "offload_frameworks": OffloadFramework,
}


@functools.cache
def _files(kind: str) -> dict[str, Any]:
    """The entry files of catalog ``kind``, by name (the file name less ``.toml``, which each
    entry's own ``name`` must repeat), sorted."""
    folder = resources.files("simspec.catalog").joinpath(kind)
    files = {p.name.removesuffix(".toml"): p for p in folder.iterdir() if p.name.endswith(".toml")}
    return {name: files[name] for name in sorted(files)}


@functools.cache
def _entry(kind: str, name: str) -> Any:
    """Entry ``name`` of ``kind``, parsed and checked on first use: a scenario reads the few
    entries it names, not the whole catalog (which every command's start-up would
    otherwise parse)."""
    item = _files(kind)[name]
    source = f"catalog/{kind}/{item.name}"
    data = tomllib.loads(item.read_text(encoding="utf-8"))
    spec = build(_KINDS[kind], data, source=source)
    if spec.name != name:
        raise InputError(source, "name", f"{name!r}", repr(spec.name))
    return spec


def forget_parsed() -> None:
    """Drop the parsed entries, so the next use reads the files again: for a command that has
    just rewritten catalog files (``simspec fidelity --fit-presets --catalog``) and goes on
    using them in the same process."""
    _entry.cache_clear()


def model_names() -> list[str]:
    """Names of the catalog's target (and dense draft) models."""
    return list(_files("models"))


def drafter_names() -> list[str]:
    """Names of the catalog's drafters."""
    return list(_files("drafters"))


def gpu_names() -> list[str]:
    """Names of the catalog's GPUs."""
    return list(_files("gpus"))


def engine_names() -> list[str]:
    """Names of the catalog's engine presets (``[engine] preset``)."""
    return list(_files("engines"))


def get_engine(name: str) -> EnginePreset:
    """The catalog engine preset ``name``; KeyError lists valid names."""
    return _get("engines", name)


def offload_framework_names() -> list[str]:
    """Names of the catalog's offload frameworks (``[offload] framework``)."""
    return list(_files("offload_frameworks"))


def get_offload_framework(name: str) -> OffloadFramework:
    """The catalog offload framework ``name``; KeyError lists valid names."""
    return _get("offload_frameworks", name)


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
    if name not in _files(kind):
        raise KeyError(name)
    return _entry(kind, name)


@functools.cache
def accuracy() -> dict[str, Any]:
    """Each engine preset's errors on published rows it was not fitted on, by category
    (``{"engines": {preset: {category: {"rows", "reporters", "median_abs_relative_error",
    "wrong_signs", "signs_checked"}}}}``: :mod:`simspec.validation.accuracy`); an empty
    ``engines`` table when the file is absent."""
    item = resources.files("simspec.catalog").joinpath("accuracy.json")
    if not item.is_file():
        return {"engines": {}}
    data: dict[str, Any] = json.loads(item.read_text(encoding="utf-8"))
    return data
