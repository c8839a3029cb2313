"""Strict conversion of TOML tables into frozen config dataclasses.

A config dataclass declares its fields with :func:`param`: a default, a one-line help text
with the unit, and simple bounds or choices. :func:`build` turns a mapping (a TOML table)
into the dataclass, checking, in order: unknown keys (listing the valid ones), types
(``int`` is accepted where a float is expected, never ``bool`` for a number), bounds and
choices, then the dataclass's own cross-field checks (``__post_init__`` raising
:class:`~simspec.errors.FieldError`). Every failure becomes a :class:`ScenarioError` naming
the file and the full key path.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from simspec.errors import FieldError, ScenarioError, describe


def param(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    zero_or_ge: float | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A dataclass field with a help text (unit included) and simple validation rules.

    ``zero_or_ge`` is for a quantity where 0 means "not stated" and any stated value must be
    physical: 0, or at least the bound (a rate of 1e-300 bytes/s would divide into infinity).
    """
    meta = {
        "help": help,
        "ge": ge,
        "gt": gt,
        "le": le,
        "lt": lt,
        "zero_or_ge": zero_or_ge,
        "choices": choices,
    }
    return dataclasses.field(default=default, metadata=meta)


def _bounds_text(meta: Mapping[str, Any]) -> str:
    parts = []
    for key, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        bound = meta.get(key)
        if bound is not None:
            parts.append(f"{sign} {bound:g}" if isinstance(bound, float) else f"{sign} {bound}")
    floor = meta.get("zero_or_ge")
    if floor is not None:
        parts.insert(0, f"0 (not stated) or >= {floor:g}")
    return " and ".join(parts)


def check_number(value: float, meta: Mapping[str, Any]) -> bool:
    """True when ``value`` is finite and inside the bounds declared in ``meta``."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if meta.get("ge") is not None and not value >= meta["ge"]:
        return False
    if meta.get("gt") is not None and not value > meta["gt"]:
        return False
    if meta.get("le") is not None and not value <= meta["le"]:
        return False
    if meta.get("zero_or_ge") is not None and value != 0 and not value >= meta["zero_or_ge"]:
        return False
    return not (meta.get("lt") is not None and not value < meta["lt"])


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if tp is float:
        return "a number"
    if tp is int:
        return "an integer"
    if tp is str:
        return "a string"
    if tp is bool:
        return "a boolean (true/false)"
    if origin is tuple:
        inner = _type_name(typing.get_args(tp)[0]).removeprefix("a ").removeprefix("an ")
        return f"an array of {inner}s"
    if dataclasses.is_dataclass(tp):
        return "a table"
    return str(tp)


def _convert(tp: Any, value: Any, meta: Mapping[str, Any], source: str, path: str) -> Any:
    """Convert one TOML value to the annotated type ``tp`` or raise ScenarioError."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], value, meta, source, path)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ScenarioError(source, path, "a table", describe(value))
        return build(tp, value, source=source, path=path)  # type: ignore[arg-type]
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ScenarioError(source, path, _type_name(tp), describe(value))
        inner = typing.get_args(tp)[0]
        return tuple(
            _convert(inner, item, meta, source, f"{path}[{i}]") for i, item in enumerate(value)
        )
    expected = _type_name(tp)
    if tp is bool:
        if not isinstance(value, bool):
            raise ScenarioError(source, path, expected, describe(value))
        return value
    if tp in (int, float):
        ok_type = isinstance(value, int) if tp is int else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type:
            raise ScenarioError(source, path, expected, describe(value))
        try:
            number = tp(value)
        except OverflowError:
            number = float("inf")
        if not check_number(number, meta):
            bounds = _bounds_text(meta)
            what = f"{expected} {bounds}" if bounds else f"a finite {expected.split()[-1]}"
            raise ScenarioError(source, path, what, describe(value))
        return number
    if tp is str:
        if not isinstance(value, str):
            raise ScenarioError(source, path, expected, describe(value))
        choices = meta.get("choices")
        if choices and value not in choices:
            raise ScenarioError(
                source, path, "one of " + ", ".join(repr(c) for c in choices), describe(value)
            )
        return value
    return value  # pragma: no cover - only the types above are used in configs


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, evaluated once per class (a sweep builds its config
    classes for every point; evaluating the string annotations was a third of that)."""
    return typing.get_type_hints(cls)


def build(cls: type, data: Mapping[str, Any], *, source: str = "", path: str = "") -> Any:
    """Build dataclass ``cls`` from mapping ``data`` strictly (see module docstring).

    Parameters
    ----------
    cls : type
        A dataclass whose fields are declared with :func:`param`.
    data : Mapping
        The table, e.g. parsed TOML.
    source : str
        The file name used in error messages.
    path : str
        The key path of ``data`` inside the file (``"routing"``), used in error messages.
    """
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    prefix = f"{path}." if path else ""
    for key in data:
        if key not in fields:
            raise ScenarioError(
                source,
                f"{prefix}{key}",
                "one of the keys " + ", ".join(fields) if fields else "no keys",
                "an unknown key",
            )
    kwargs = {}
    for name, f in fields.items():
        if data.get(name) is not None:  # None (JSON null) means "unset": TOML has no null
            kwargs[name] = _convert(hints[name], data[name], f.metadata, source, prefix + name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ScenarioError(
                source, prefix + name, f"a value ({f.metadata.get('help', '')})", "nothing"
            )
    try:
        return cls(**kwargs)
    except FieldError as err:
        raise ScenarioError(source, prefix + err.key, err.expected, describe(err.found)) from None


def to_dict(obj: Any) -> Any:
    """A dataclass as plain JSON-ready data (tuples become lists), keeping field order."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def help_of(cls: type) -> dict[str, str]:
    """Field name -> help text, for documentation and ``--help`` output."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}
