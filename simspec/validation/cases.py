"""Published GPU measurements (``validation/cases.toml``) as one row per measured number.

The file's header documents the format. A ``[[cases]]`` table is one published series; a field
given as a list makes one row per element (all lists of a table have the same length) and a
scalar applies to every row. :func:`load_cases` checks every key, type, category, catalog name
and length and raises :class:`simspec.InputError` naming the file, the key path (e.g.
``cases[3].value``), what was expected and what was found.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.errors import InputError, describe
from simspec.physics.precision import PART_PRECISIONS, PRECISIONS

#: Where the shipped cases live in a checkout of the repository (relative to its root).
CASES_PATH = Path("validation") / "cases.toml"

CATEGORIES = ("kernel", "decode", "speculative")
#: Measured quantities, their units and the category that may use them.
QUANTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "moe_layer_us": ("us", ("kernel",)),
    "tpot_ms": ("ms", ("decode", "speculative")),
    "tokens_per_s": ("tok/s", ("decode", "speculative")),
    "tokens_per_s_per_user": ("tok/s", ("decode", "speculative")),
    "e2e_latency_s": ("s", ("decode",)),
}


@dataclass(frozen=True)
class Case:
    """One measured number and everything needed to predict it (see the file header)."""

    id: str
    category: str
    model: str
    gpu: str
    num_gpus: int
    tp: int
    ep: int
    engine: str
    precision: str
    quantity: str
    unit: str
    value: float
    source: str
    expert_precision: str = ""
    batch: int = 1
    tokens: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    method: str = ""
    steps: int = 0
    topk: int = 1
    draft_tokens: int = 0
    acceptance_length: float = 0.0
    per_position: tuple[float, ...] = ()
    baseline_value: float = 0.0
    num_requests: int = 0
    length_jitter: float = 0.0
    notes: str = ""
    assumed: str = ""

    @property
    def measured_speedup(self) -> float:
        """Speculative rows: the published speedup over plain decoding (ratio of the two)."""
        if self.quantity == "tpot_ms":
            return self.baseline_value / self.value
        return self.value / self.baseline_value


#: Engine presets (simspec/catalog/engines) by the start of a row's ``engine`` text; rows of
#: other engines (benchmark scripts, "not stated") are predicted with the physics-only "ideal".
ENGINE_PRESETS = (("sglang", "sglang"), ("vllm", "vllm"), ("tensorrt-llm", "trtllm"))


def engine_preset(case: Case) -> str:
    """The engine preset a row is predicted (and presets are fitted) with.

    Kernel rows time one MoE layer, outside any serving engine: always "ideal".

    >>> engine_preset(Case("x", "decode", "m", "g", 1, 1, 1, "SGLang bench", "bf16", "q", "u",
    ...                    1.0, "s"))
    'sglang'
    """
    if case.category == "kernel":
        return "ideal"
    text = case.engine.lower()
    for prefix, preset in ENGINE_PRESETS:
        if text.startswith(prefix):
            return preset
    return "ideal"


@dataclass(frozen=True)
class Unexpressed:
    """A row of measurements.md no case can express yet."""

    row: str
    reason: str


@dataclass(frozen=True)
class CaseFile:
    """The parsed file: sources (key -> url, title), cases (expanded) and unexpressed rows."""

    sources: dict[str, dict[str, str]]
    cases: list[Case]
    unexpressed: list[Unexpressed] = field(default_factory=list)


_INT: tuple[str, ...] = ("num_gpus", "tp", "ep", "batch", "tokens", "prompt_tokens")
_INT += ("output_tokens", "steps", "topk", "draft_tokens", "num_requests")
_FLOAT = ("value", "acceptance_length", "baseline_value")
#: Fractions in [0, 1): the spread of the output lengths (``[workload] length_jitter``).
_FRACTION = ("length_jitter",)
_STR: tuple[str, ...] = (
    "id",
    "category",
    "model",
    "gpu",
    "engine",
    "precision",
    "expert_precision",
    "quantity",
)
_STR += ("unit", "source", "notes", "assumed", "method")
_REQUIRED: tuple[str, ...] = (
    "id",
    "category",
    "model",
    "gpu",
    "num_gpus",
    "tp",
    "ep",
    "engine",
    "precision",
)
_REQUIRED += ("quantity", "unit", "value", "source")
_SPECULATIVE = ("method", "steps", "draft_tokens", "acceptance_length", "baseline_value")


def _check_scalar(value: Any, key: str, where: str, source: str) -> Any:
    if key in _INT:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(source, where, "a non-negative integer", describe(value))
    elif key in _FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InputError(source, where, "a positive number", describe(value))
        value = float(value)
    elif key in _FRACTION:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
            raise InputError(source, where, "a number in [0, 1)", describe(value))
        value = float(value)
    elif key in _STR and not isinstance(value, str):
        raise InputError(source, where, "a string", describe(value))
    return value


def _expand(table: Any, index: int, source: str) -> list[dict[str, Any]]:
    path = f"cases[{index}]"
    if not isinstance(table, dict):
        raise InputError(source, path, "a table", describe(table))
    known = set(_INT + _FLOAT + _FRACTION + _STR + ("per_position",))
    lengths: dict[str, int] = {}
    for key, value in table.items():
        if key not in known:
            raise InputError(source, f"{path}.{key}", "one of " + ", ".join(sorted(known)), key)
        if isinstance(value, list) and key != "per_position":
            if not value:
                raise InputError(source, f"{path}.{key}", "a non-empty list", "[]")
            lengths[key] = len(value)
    for key in _REQUIRED:
        if key not in table:
            raise InputError(source, f"{path}.{key}", "a value (required key)", "nothing")
    sizes = set(lengths.values())
    if len(sizes) > 1:
        text = ", ".join(f"{k} has {n}" for k, n in sorted(lengths.items()))
        raise InputError(source, path, "lists of one length", text)
    count = sizes.pop() if sizes else 1
    rows = []
    for i in range(count):
        row: dict[str, Any] = {}
        for key, value in table.items():
            item = value[i] if key in lengths else value
            where = f"{path}.{key}" + (f"[{i}]" if key in lengths else "")
            if key == "per_position":
                if not isinstance(item, list) or not all(
                    isinstance(x, int | float) and 0 <= x <= 1 for x in item
                ):
                    raise InputError(source, where, "a list of probabilities", describe(item))
                item = tuple(float(x) for x in item)
            else:
                item = _check_scalar(item, key, where, source)
            row[key] = item
        if count > 1:
            row["id"] = f"{row['id']}[{i}]"
        rows.append(row)
    return rows


def _check_case(row: dict[str, Any], path: str, source: str, sources: dict[str, Any]) -> Case:
    checks = (
        ("category", row["category"] in CATEGORIES, "one of " + ", ".join(CATEGORIES)),
        ("model", row["model"] in catalog.model_names(), "a model from `simspec models`"),
        ("gpu", row["gpu"] in catalog.gpu_names(), "a GPU from `simspec gpus`"),
        ("precision", row["precision"] in PRECISIONS[1:], "one of bf16, fp8, mxfp4, nvfp4"),
        ("source", row["source"] in sources, "a key of [sources]"),
        ("quantity", row["quantity"] in QUANTITIES, "one of " + ", ".join(QUANTITIES)),
    )
    for key, ok, expected in checks:
        if not ok:
            raise InputError(source, f"{path}.{key}", expected, describe(row[key]))
    if row.get("expert_precision", "") not in PART_PRECISIONS:
        raise InputError(
            source, f"{path}.expert_precision", "bf16, fp8, mxfp4 or nvfp4", row["expert_precision"]
        )
    unit, categories = QUANTITIES[row["quantity"]]
    if row["category"] not in categories:
        raise InputError(
            source, f"{path}.quantity", f"a quantity of a {row['category']} row", row["quantity"]
        )
    if row["unit"] != unit:
        raise InputError(source, f"{path}.unit", repr(unit), describe(row["unit"]))
    for key in ("num_gpus", "tp", "ep", "batch"):
        if key in row and row[key] < 1:
            raise InputError(source, f"{path}.{key}", "an integer >= 1", describe(row[key]))
    if row["tp"] > row["num_gpus"] or row["ep"] > row["num_gpus"]:
        raise InputError(source, f"{path}.tp", "tp and ep at most num_gpus", f"{row}")
    if row["category"] == "kernel" and row.get("tokens", 0) < 1:
        raise InputError(source, f"{path}.tokens", "the kernel's M >= 1", "nothing")
    if row["category"] != "kernel" and row.get("output_tokens", 0) < 2:
        raise InputError(source, f"{path}.output_tokens", "an integer >= 2", "less or nothing")
    if row["category"] == "speculative":
        for key in _SPECULATIVE:
            if key not in row:
                raise InputError(source, f"{path}.{key}", "a value (speculative row)", "nothing")
        if row["steps"] < 1 or not 1 <= row["acceptance_length"] <= row["steps"] + 1:
            raise InputError(
                source,
                f"{path}.acceptance_length",
                "1 <= acceptance_length <= steps + 1",
                f"{row['acceptance_length']} with steps = {row['steps']}",
            )
    return Case(**row)


def load_cases(path: str | Path) -> CaseFile:
    """Parse and check a cases file (module docstring); rows in file order."""
    source = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InputError(source, "", "a readable TOML file", str(exc)) from None
    for key in data:
        if key not in ("sources", "cases", "unexpressed"):
            raise InputError(source, key, "sources, cases or unexpressed", "an unknown key")
    sources = data.get("sources", {})
    for key, value in sources.items():
        if not isinstance(value, dict) or not isinstance(value.get("url"), str):
            raise InputError(source, f"sources.{key}.url", "a URL string", describe(value))
    cases: list[Case] = []
    seen: set[str] = set()
    for index, table in enumerate(data.get("cases", [])):
        for row in _expand(table, index, source):
            case = _check_case(row, f"cases[{index}]", source, sources)
            if case.id in seen:
                raise InputError(source, f"cases[{index}].id", "a unique id", repr(case.id))
            seen.add(case.id)
            cases.append(case)
    unexpressed = []
    for index, item in enumerate(data.get("unexpressed", [])):
        if not isinstance(item, dict) or set(item) != {"row", "reason"}:
            raise InputError(source, f"unexpressed[{index}]", "a table of row, reason", str(item))
        unexpressed.append(Unexpressed(str(item["row"]), str(item["reason"])))
    return CaseFile(sources=sources, cases=cases, unexpressed=unexpressed)
