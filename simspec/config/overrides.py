"""Overrides: ``key.path=value`` changes applied to parsed scenario data.

``--set``, ``--grid`` and a sweep's cases all change a scenario the same way: a dotted key
(``routing.overlap``, ``policies[1].draft_tokens``) and a TOML value (a bare word is a string).
:func:`apply_overrides` returns new data and leaves its input alone; :mod:`simspec.config.load`
then validates the result like any scenario file.
"""

from __future__ import annotations

import copy
import datetime
import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from simspec.config.aliases import expand_aliases
from simspec.config.checks import drop_stale_drafter
from simspec.errors import ScenarioError, describe
from simspec.inputs import load_toml

_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")

Overrides = Mapping[str, Any] | Iterable[str]


def parse_value(text: str) -> Any:
    """A ``--set``/``--grid`` value in TOML syntax; a bare word is taken as a string.

    Cached by text (a sweep applies the same few overrides to every point); each call returns
    its own copy, as parsing again would.
    """
    return copy_data(_parsed_value(text))


@functools.lru_cache(maxsize=1024)
def _parsed_value(text: str) -> Any:
    try:
        return load_toml(f"v = {text}", "--set", text[:40], ScenarioError)["v"]
    except tomllib.TOMLDecodeError:
        return text


#: Values of parsed TOML (and of JSON) that are immutable: a copy may share them.
_LEAVES = (str, int, float, bool, type(None), datetime.date, datetime.time)


def copy_data(value: Any) -> Any:
    """A copy of parsed scenario data that shares nothing mutable with ``value``: its dicts and
    lists copied all the way down, its leaves (strings, numbers, booleans, dates) shared, and
    anything else deep-copied. ``copy.deepcopy`` gives the same, slower (its memo and type
    dispatch), and a sweep copies its base data twice per point."""
    kind = type(value)
    if kind is dict:
        return {key: copy_data(item) for key, item in value.items()}
    if kind is list:
        return [copy_data(item) for item in value]
    if isinstance(value, _LEAVES):
        return value
    return copy.deepcopy(value)


def split_override(item: str, where: str = "--set") -> tuple[str, Any]:
    """``"key.path=value"`` -> (key, parsed value)."""
    if "=" not in item:
        raise ScenarioError(where, item, "key=value", describe(item))
    key, _, text = item.partition("=")
    return key.strip(), parse_value(text)


def _key_parts(key: str, where: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in key.split("."):
        m = _PATH_PART.fullmatch(piece)
        if not m:
            raise ScenarioError(where, key, "a dotted key such as routing.overlap", describe(key))
        parts.append(m.group(1))
        parts.extend(int(ix) for ix in re.findall(r"\[(\d+)\]", m.group(2)))
    return parts


def _pairs(overrides: Overrides, where: str) -> list[tuple[str, Any]]:
    if isinstance(overrides, Mapping):
        return expand_aliases([(str(k), v) for k, v in overrides.items()])
    if isinstance(overrides, str):
        overrides = [overrides]
    return expand_aliases([split_override(item, where) for item in overrides])


def apply_overrides(
    data: Mapping[str, Any],
    overrides: Overrides,
    where: str = "--set",
    *,
    strict_drafter: bool = False,
) -> dict[str, Any]:
    """Apply overrides to parsed scenario data; returns a new dict (``data`` is unchanged).

    A target override leaves a drafter named by ``data`` that cannot serve it dropped (the new
    target's own is then loaded), or with ``strict_drafter`` refused
    (:func:`~simspec.config.checks.drop_stale_drafter`).

    ``overrides`` is a mapping ``{"routing.overlap": 0.5}`` or ``key=value`` strings whose
    values are TOML (``policies[1].draft_tokens=4`` indexes arrays).
    """
    result = copy_data(dict(data))
    pairs = _pairs(overrides, where)
    for key, value in pairs:
        parts = _key_parts(key, where)
        node: Any = result
        for depth, part in enumerate(parts):
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    raise ScenarioError(where, key, "an index of an existing array", describe(part))
            elif not isinstance(node, dict):
                raise ScenarioError(
                    where,
                    key,
                    f"{part!r} to be a key inside a table",
                    f"it inside {describe(node)}",
                )
            if depth == len(parts) - 1:
                node[part] = copy_data(value)
            else:
                if isinstance(part, str) and part not in node:
                    node[part] = [] if isinstance(parts[depth + 1], int) else {}
                node = node[part]
    drop_stale_drafter(result, [key for key, _ in pairs], strict=strict_drafter)
    return result


def touches_profile(overrides: Overrides) -> bool:
    """True when ``overrides`` set ``costs.profile`` (its path is then relative to the cwd)."""
    keys = (
        list(overrides)
        if isinstance(overrides, Mapping)
        else [
            str(item).partition("=")[0].strip()
            for item in ([overrides] if isinstance(overrides, str) else overrides)
        ]
    )
    return any(k in ("costs", "costs.profile") for k in keys)
