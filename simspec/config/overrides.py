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

from simspec.config.aliases import canonical, expand_aliases
from simspec.config.checks import drop_stale_drafter
from simspec.errors import ScenarioError, describe
from simspec.inputs import load_toml

_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")

Overrides = Mapping[str, Any] | Iterable[str]

#: Digits of the longest array index a key path may hold (no scenario array comes near).
MAX_INDEX_DIGITS = 9


def parse_value(text: str) -> Any:
    """A ``--set``/``--grid`` value in TOML syntax; a bare word is taken as a string.

    Cached by text (a sweep applies the same few overrides to every point); each call returns
    its own copy, as parsing again would.
    """
    return copy_data(_parsed_value(text))


@functools.lru_cache(maxsize=1024)
def _parsed_value(text: str) -> Any:
    try:
        data = load_toml(f"v = {text}", "--set", text[:40], ScenarioError)
    except tomllib.TOMLDecodeError:
        if "\n" in text or "\r" in text:
            raise ScenarioError(
                "--set", repr(text[:40]), "one value on one line", "a line break"
            ) from None
        return text
    if list(data) != ["v"]:  # "0.3\nseed=5" would set seed silently: refused
        raise ScenarioError(
            "--set",
            repr(text[:40]),
            "one value on one line",
            "more lines (each --set sets one key)",
        )
    return data["v"]


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
        for ix in re.findall(r"\[(\d+)\]", m.group(2)):
            if len(ix) > MAX_INDEX_DIGITS:  # int() of 4,300+ digits raises; no array is that long
                raise ScenarioError(
                    where,
                    key[:80],
                    "an index of an existing array",
                    f"an index of {len(ix)} digits",
                )
            parts.append(int(ix))
    return parts


def _pairs(overrides: Overrides, where: str) -> list[tuple[str, Any]]:
    if isinstance(overrides, Mapping):
        return expand_aliases([(str(k), v) for k, v in overrides.items()])
    if isinstance(overrides, str):
        overrides = [overrides]
    return expand_aliases([split_override(item, where) for item in overrides])


def _covers(outer: list[str | int], inner: list[str | int]) -> bool:
    """True when setting the key ``outer`` replaces whatever the key ``inner`` set (``outer``
    is ``inner`` or one of the tables or arrays holding it)."""
    return inner[: len(outer)] == outer


def check_no_replaced_override(overrides: Overrides, where: str = "--set") -> None:
    """Refuse overrides where a later one silently replaces an earlier one: the same key twice
    with different values (``--set seed=1 --set seed=2``), or a table or array after a key
    inside it (``--set routing.overlap=0.3 --set 'routing={...}'``); each alias counts as
    the keys it sets. A key inside a table set before it refines that table and is fine.

    The command line checks what a user typed; :func:`apply_overrides` itself keeps the last
    value, so code may layer its own overrides under a user's."""
    if isinstance(overrides, Mapping):
        typed = [(str(k), v) for k, v in overrides.items()]
    else:
        items = [overrides] if isinstance(overrides, str) else overrides
        typed = [split_override(item, where) for item in items]
    earlier: list[tuple[list[str | int], str, Any]] = []
    for written, given in typed:
        alias = canonical(written) is not None
        for key, value in expand_aliases([(written, given)]):
            parts = _key_parts(key, where)
            shown = f"{written} ({key})" if alias else written
            for parts_before, shown_before, value_before in earlier:
                if _covers(parts, parts_before) and (
                    parts != parts_before or value != value_before
                ):
                    raise ScenarioError(
                        where,
                        shown,
                        "each scenario key set once (a later override replaces an earlier one)",
                        f"{shown} = {describe(value)} after {shown_before} = "
                        f"{describe(value_before)}",
                        "Drop one of the two.",
                    )
            earlier.append((parts, shown, value))


def check_disjoint(
    fixed: Iterable[str], varied: Iterable[str], where: str = "--set", what: str = "the sweep"
) -> None:
    """Refuse a ``fixed`` override key (``--set``) that ``varied`` keys (a sweep's grid axes or
    cases, applied after it) would replace or reach into for every point: the value given
    would be silently dropped. Aliases count as the keys they set."""
    varied_parts = [
        (key, _key_parts(name, what)) for key in varied for name, _ in expand_aliases([(key, 0)])
    ]
    for key in fixed:
        for name, _ in expand_aliases([(key, 0)]):
            parts = _key_parts(name, where)
            for axis, axis_parts in varied_parts:
                if _covers(axis_parts, parts) or _covers(parts, axis_parts):
                    raise ScenarioError(
                        where,
                        key,
                        f"keys {what} does not vary (it sets them for every point)",
                        f"{key}, which {what}'s axis or case key {axis} replaces at every point",
                        f"Drop --set {key}, or give its values to {axis}.",
                    )


def override_keys(overrides: Overrides, where: str = "--set") -> list[str]:
    """The keys ``overrides`` set (aliases as written, not expanded)."""
    if isinstance(overrides, Mapping):
        return [str(k) for k in overrides]
    items = [overrides] if isinstance(overrides, str) else list(overrides)
    return [split_override(item, where)[0] for item in items]


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
