"""Published GPU measurements (``validation/cases.toml``, and the expert-offloading rows of
``validation/offload.toml``) as one row per measured number.

The file's header documents the format. A ``[[cases]]`` table is one published series; a field
given as a list makes one row per element (all lists of a table have the same length) and a
scalar applies to every row. Each row is read by :func:`simspec.schema.build` into a
:class:`Case`; :func:`load_cases` also checks catalog names, units and the keys a category
needs, and raises :class:`simspec.InputError` naming the file, the key path (e.g.
``cases[3].value[2]``), what was expected and what was found.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simspec import catalog
from simspec.errors import InputError, describe
from simspec.physics.models import ModelSpec
from simspec.physics.precision import (
    KV_CACHE_DTYPES,
    PART_PRECISIONS,
    PRECISIONS,
    with_precision,
)
from simspec.schema import build, param

#: Where the shipped cases live in a checkout of the repository (relative to its root).
CASES_PATH = Path("validation") / "cases.toml"
#: The expert-offloading rows (category "offload"), next to the cases file.
OFFLOAD_CASES_PATH = Path("validation") / "offload.toml"

#: Categories of validation/cases.toml (the GPU-resident report's sections). An "overlap" row
#: is one speculative setting measured twice, with the engine's overlap scheduler for
#: speculative decoding and without it (SGLang's spec v2 against v1): its ratio measures the
#: host time a speculative iteration exposes without the overlap (``verify_overhead_s``).
CATEGORIES = ("kernel", "decode", "speculative", "overlap")
#: Categories whose measurement is the ratio of two runs of one row (``value`` over
#: ``baseline_value``): speculative over plain decoding, overlap scheduling on over off.
RATIO_CATEGORIES = ("speculative", "overlap")
#: Experts offloaded to host memory (validation/offload.toml, :mod:`.offload`).
OFFLOAD = "offload"
#: Where offloaded experts live, the expert cache's policies, prefetch and misses (the keys of
#: a scenario's ``[offload]`` table; "" = not an offload row).
OFFLOAD_EXPERTS = ("", "host_pinned", "host_pageable")
CACHE_POLICIES = ("", "lru", "lfu", "static", "none")
PREFETCH = ("", "none", "next_layer", "draft_guided")
MISS = ("", "copy", "cpu")
#: The keys an offload row must state (the rest default to the GPU's link and the host's).
_OFFLOAD_REQUIRED = ("experts", "cache_policy", "prefetch", "miss")
#: What a row may be used for: "fit" rows may enter the fits of simspec/fit (presets, kernel
#: forms); "test" rows are only predicted. A row found by searching enters as "test" and
#: becomes "fit" only when a second, independent reporter agrees with it (its notes say who).
ROLES = ("fit", "test")
#: A reporter is a lowercase slug: letters, digits, and "-", "_" or "." inside.
_REPORTER = re.compile(r"[a-z0-9]+(?:[-_.][a-z0-9]+)*")
#: Measured quantities, their units and the category that may use them.
QUANTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "moe_layer_us": ("us", ("kernel",)),
    "tpot_ms": ("ms", ("decode", "speculative", "overlap")),
    "tokens_per_s": ("tok/s", ("decode", "speculative", "overlap", OFFLOAD)),
    "tokens_per_s_per_user": ("tok/s", ("decode", "speculative", "overlap")),
    "e2e_latency_s": ("s", ("decode",)),
    "hit_rate": ("fraction", (OFFLOAD,)),
}


@dataclass(frozen=True)
class Case:
    """One measured number and everything needed to predict it (see the file header)."""

    id: str = param(help="unique name")
    category: str = param(help="what was measured", choices=(*CATEGORIES, OFFLOAD))
    model: str = param(help="catalog model")
    gpu: str = param(help="catalog GPU")
    num_gpus: int = param(help="GPUs", ge=1)
    tp: int = param(help="tensor-parallel degree", ge=1)
    ep: int = param(help="expert-parallel degree", ge=1)
    engine: str = param(help="serving engine or benchmark script")
    precision: str = param(help="weight format", choices=PRECISIONS[1:])
    quantity: str = param(help="measured quantity", choices=tuple(QUANTITIES))
    unit: str = param(help="its unit")
    value: float = param(help="the measurement", gt=0)
    source: str = param(help="a key of [sources]")
    reporter: str = param(help="who ran the measurement (a lowercase slug; leave-one-out unit)")
    expert_precision: str = param("", "routed experts' weight format", choices=PART_PRECISIONS)
    kv_cache_dtype: str = param(
        "auto",
        "KV-cache format the run used ([model] kv_cache_dtype: auto = the engine's default)",
        choices=tuple(KV_CACHE_DTYPES),
    )
    batch: int = param(1, "batch size / concurrency", ge=1)
    tokens: int = param(0, "kernel rows' M", ge=0)
    prompt_tokens: int = param(0, "prompt length", ge=0)
    output_tokens: int = param(0, "output length", ge=0)
    method: str = param("", "speculative method")
    steps: int = param(0, "draft steps", ge=0)
    topk: int = param(1, "draft tree width", ge=0)
    draft_tokens: int = param(0, "tokens verified", ge=0)
    acceptance_length: float = param(0.0, "measured AL", gt=0)
    per_position: tuple[float, ...] = param((), "acceptance per draft position", ge=0, le=1)
    baseline_value: float = param(
        0.0,
        "the quantity without speculation (overlap rows: the same speculative run without the "
        "overlap scheduler)",
        gt=0,
    )
    ttft_ms: float = param(
        0.0,
        "a serving-benchmark decode row's median time to first token in the same run, ms "
        "(0 = not published)",
        ge=0,
    )
    num_requests: int = param(0, "the benchmark's finite number of requests", ge=0)
    length_jitter: float = param(0.0, "spread of the output lengths", ge=0, lt=1)
    range_ratio: float = param(
        0.0,
        "a serving benchmark's random dataset (SGLang's and InferenceX's bench_serving "
        "--random-range-ratio): prompt and output lengths uniform in [ratio·L, L] for the "
        "stated L; 0 = the lengths as stated",
        ge=0,
        lt=1,
    )
    notes: str = param("", "notes")
    assumed: str = param("", "what stands in for unstated values")
    assumed_keys: tuple[str, ...] = param(
        (), "the keys whose values are assumptions, not published (ASSUMABLE_KEYS)"
    )
    role: str = param("fit", "fit: the fits may use the row; test: predicted only", choices=ROLES)
    overlap_scheduling: str = param(
        "",
        "whether the run overlapped a speculative iteration's host work with the GPU, as the "
        "source states it (SGLang's SGLANG_ENABLE_SPEC_V2, vLLM's async scheduling): on, off, "
        "or '' = the engine's default design (simspec.fit.presets.DESIGN)",
        choices=("", "on", "off"),
    )
    scheduler_recv_interval: int = param(
        1,
        "decode iterations between the scheduler's polls for new requests, as the run's launch "
        "command sets it (SGLang's --scheduler-recv-interval; [engine] "
        "scheduler_recv_interval); 1 = every iteration, the engines' default",
        ge=1,
        le=10000,
    )
    # -- expert offloading (category "offload"; a scenario's [offload] keys) -------------------
    experts: str = param("", "where the routed experts live", choices=OFFLOAD_EXPERTS)
    cache_experts_per_layer: float = param(
        0.0, "GPU expert cache, experts per MoE layer (0: cache_gb or none)", ge=0
    )
    cache_gb: float = param(0.0, "GPU expert cache in total, GB (0: per layer or none)", ge=0)
    cache_policy: str = param("", "expert cache policy", choices=CACHE_POLICIES)
    prefetch: str = param("", "what starts copies ahead of need", choices=PREFETCH)
    prefetch_accuracy: float = param(
        0.0, "fraction of prefetched experts that are needed (0 = the model's default)", ge=0, le=1
    )
    miss: str = param("", "what a miss does: copy it, or compute it on the CPU", choices=MISS)
    attention_precision: str = param("", "attention weights' format", choices=PART_PRECISIONS)
    pcie_generation: int = param(0, "the machine's PCIe generation (0 = the GPU's)", ge=0, le=6)
    host_link_gb_per_s: float = param(
        0.0, "host-to-device bandwidth the source measured, GB/s (0 = derived)", ge=0
    )
    host_memory_gb_per_s: float = param(
        0.0, "host DRAM bandwidth for CPU-computed experts, GB/s (0 = the default host)", ge=0
    )
    host_memory_channels: int = param(
        0, "populated DRAM channels of the host, all sockets (0 = not stated)", ge=0
    )
    host_memory_mt_per_s: float = param(
        0.0, "the host's DRAM transfer rate, MT/s (0 = not stated)", ge=0
    )
    host_moe_layers: int = param(
        0, "MoE layers whose experts live on the host (llama.cpp --n-cpu-moe; 0 = all)", ge=0
    )
    layer_split_gpus: int = param(
        1,
        "GPUs the layers are split over (llama.cpp --split-mode layer): at batch 1 they run "
        "one after the other, so one GPU with their summed memory stands in",
        ge=1,
    )
    drafter: str = param(
        "",
        "catalog drafter of a speculative or speculative offload row ('' = the model's default "
        "for the row's method)",
    )
    configuration: str = param("", "the system's configuration within its series (a label)")
    framework: str = param(
        "", "the offloading runtime: an offload framework preset ('' = none, physics only)"
    )
    working_set: float = param(
        0.0,
        "the routing's per-request working set ([routing] working_set) for the model's cache "
        "hit rates (0 = none)",
        ge=0,
    )

    @property
    def measured_speedup(self) -> float:
        """Speculative rows: the published speedup over plain decoding (ratio of the two);
        overlap rows: the speedup the overlap scheduler gives the speculative run."""
        if self.quantity == "tpot_ms":
            return self.baseline_value / self.value
        return self.value / self.baseline_value

    @property
    def measured(self) -> float:
        """The number a prediction of the row is compared with: the ratio of a speculative or
        overlap row (:attr:`measured_speedup`), any other row's value."""
        return self.measured_speedup if self.category in RATIO_CATEGORIES else self.value

    @property
    def exposed_host_ms(self) -> float:
        """Overlap rows: the host time per speculative iteration that the overlap scheduler
        hid, ms, from the two published numbers: an iteration commits AL tokens per request,
        so it lasts AL·B / throughput (whole batch), AL / throughput per user, AL · TPOT; the
        difference of the two runs' iterations at the row's AL."""
        if self.category != "overlap":
            raise ValueError(f"{self.id} is not an overlap row")
        al = self.acceptance_length
        if self.quantity == "tpot_ms":
            return al * (self.baseline_value - self.value)
        per_iteration = al * (self.batch if self.quantity == "tokens_per_s" else 1)
        return per_iteration * (1.0 / self.baseline_value - 1.0 / self.value) * 1000.0


#: Engine presets (simspec/catalog/engines) by the start of a row's ``engine`` text; rows of
#: other engines (benchmark scripts, "not stated") are predicted with the physics-only "ideal".
ENGINE_PRESETS = (("sglang", "sglang"), ("vllm", "vllm"), ("tensorrt-llm", "trtllm"))


def target_spec(case: Case) -> ModelSpec:
    """The row's target model at the row's weight formats: the bytes its runs price."""
    return with_precision(
        catalog.get_model(case.model), case.precision, expert=case.expert_precision
    )


def engine_preset(case: Case) -> str:
    """The engine preset a row is predicted (and presets are fitted) with.

    Kernel rows time one MoE layer, outside any serving engine: always "ideal".

    >>> engine_preset(Case("x", "decode", "m", "g", 1, 1, 1, "SGLang bench", "bf16", "q", "u",
    ...                    1.0, "s", "r"))
    'sglang'
    """
    if case.category == "kernel":
        return "ideal"
    text = case.engine.lower()
    for prefix, preset in ENGINE_PRESETS:
        if text.startswith(prefix):
            return preset
    return "ideal"


def for_fitting(cases: Iterable[Case]) -> list[Case]:
    """The rows a fit may use: those of role "fit" (:data:`ROLES`), in their order."""
    return [case for case in cases if case.role == "fit"]


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

    def reporters(self) -> dict[str, str]:
        """Who measured each source: its ``reporter``, else the source key itself."""
        return {key: value.get("reporter", key) for key, value in self.sources.items()}


_SPECULATIVE = ("method", "steps", "draft_tokens", "acceptance_length", "baseline_value")
#: ``method`` values that draft with the target's own MTP (NextN) module, as SGLang
#: (``NEXTN``) and vLLM (``mtp``, ``deepseek_mtp``, ``qwen3_next_mtp``) name it: such a row
#: runs the catalog's MTP drafter of its model (:func:`mtp_drafters`), an :data:`NGRAM_METHODS`
#: row the n-gram drafter, any other method the model's default drafter.
MTP_METHODS = ("mtp", "nextn", "deepseek_mtp", "qwen3_next_mtp")
#: ``method`` values that draft by prompt lookup (vLLM ``ngram``, SGLang ``NGRAM``,
#: TensorRT-LLM NGram): such a row runs the catalog's ``ngram`` drafter.
NGRAM_METHODS = ("ngram",)


def mtp_drafters(model: str) -> list[str]:
    """Catalog MTP drafters of ``model`` (its own modules)."""
    names = [n for n in catalog.drafter_names() if model in catalog.get_drafter(n).targets]
    return [n for n in names if catalog.get_drafter(n).kind == "mtp"]


#: What a serving-benchmark row (``range_ratio`` set) may publish: the per-request median
#: TPOT (and its inverse per user), which :mod:`simspec.validation.predictions` reads off
#: the whole benchmark's run.
SERVING_QUANTITIES = ("tpot_ms", "tokens_per_s_per_user")
#: Keys a row may list in ``assumed_keys``: the protocol (lengths, output spread, number of
#: requests; ``quantity``: how the published number is read, e.g. tokens/s per user as 1 /
#: TPOT, a speedup as a throughput ratio) and the setup a source leaves unstated.
ASSUMABLE_KEYS = (
    *("prompt_tokens", "output_tokens", "length_jitter", "range_ratio", "num_requests"),
    "quantity",
    *("gpu", "model", "precision", "tp", "ep", "batch"),
)
#: List-valued keys that hold one list for every row of a table (not one element per row).
_WHOLE_LIST_KEYS = ("per_position", "assumed_keys")


def _expand(table: Any, index: int, source: str) -> list[Case]:
    """The rows of one ``[[cases]]`` table: one per element of its list-valued keys."""
    path = f"cases[{index}]"
    if not isinstance(table, dict):
        raise InputError(source, path, "a table", describe(table))
    lengths: dict[str, int] = {}
    for key, value in table.items():
        if isinstance(value, list) and key not in _WHOLE_LIST_KEYS:
            if not value:
                raise InputError(source, f"{path}.{key}", "a non-empty list", "[]")
            lengths[key] = len(value)
    sizes = set(lengths.values())
    if len(sizes) > 1:
        text = ", ".join(f"{k} has {n}" for k, n in sorted(lengths.items()))
        raise InputError(source, path, "lists of one length", text)
    count = sizes.pop() if sizes else 1
    rows = []
    for i in range(count):
        row = {key: value[i] if key in lengths else value for key, value in table.items()}
        try:
            case = build(Case, row, source=source, path=path)
        except InputError as err:  # name the list element
            key = err.key_path.removeprefix(f"{path}.")
            if key in lengths:
                err = InputError(source, f"{path}.{key}[{i}]", err.expected, err.found)
            raise err from None
        _check_case(case, set(table), path, source)
        rows.append(dataclasses.replace(case, id=f"{case.id}[{i}]") if count > 1 else case)
    return rows


def _check_case(case: Case, given: set[str], path: str, source: str) -> None:
    """What no single key can say: catalog names, the quantity's category and unit, the
    parallel degrees, and the keys a kernel or speculative row needs."""
    checks = (
        ("model", case.model in catalog.model_names(), "a model from `simspec models`"),
        ("gpu", case.gpu in catalog.gpu_names(), "a GPU from `simspec gpus`"),
    )
    if not _REPORTER.fullmatch(case.reporter):
        expected = "a reporter slug (lowercase letters, digits, - _ . inside), e.g. 'zzsf11'"
        raise InputError(source, f"{path}.reporter", expected, describe(case.reporter))
    for key, ok, expected in checks:
        if not ok:
            raise InputError(source, f"{path}.{key}", expected, describe(getattr(case, key)))
    unit, categories = QUANTITIES[case.quantity]
    if case.category not in categories:
        raise InputError(
            source, f"{path}.quantity", f"a quantity of a {case.category} row", case.quantity
        )
    if case.unit != unit:
        raise InputError(source, f"{path}.unit", repr(unit), describe(case.unit))
    if case.tp > case.num_gpus or case.ep > case.num_gpus:
        raise InputError(source, f"{path}.tp", "tp and ep at most num_gpus", f"{case}")
    if case.category == "kernel" and case.tokens < 1:
        raise InputError(source, f"{path}.tokens", "the kernel's M >= 1", "nothing")
    if case.category == OFFLOAD:
        _check_offload(case, given, path, source)
    elif given & _OFFLOAD_KEYS:
        key = sorted(given & _OFFLOAD_KEYS)[0]
        raise InputError(source, f"{path}.{key}", "no offload key on a non-offload row", key)
    if case.range_ratio and not (case.num_requests and case.quantity in SERVING_QUANTITIES):
        expected = (
            f"num_requests and a quantity of {', '.join(SERVING_QUANTITIES)} with range_ratio "
            "(the serving benchmark is run whole)"
        )
        found = f"num_requests = {case.num_requests}, quantity = {case.quantity}"
        raise InputError(source, f"{path}.range_ratio", expected, found)
    if case.ttft_ms and not (case.range_ratio and case.category == "decode"):
        expected = "ttft_ms on a decode row with range_ratio (a serving benchmark run whole)"
        found = f"a {case.category} row, range_ratio = {case.range_ratio}"
        raise InputError(source, f"{path}.ttft_ms", expected, found)
    if case.range_ratio and case.length_jitter:
        expected = "length_jitter or range_ratio, not both (the ratio sets the spread)"
        raise InputError(source, f"{path}.length_jitter", expected, str(case.length_jitter))
    if case.category != "kernel" and case.output_tokens < 2:
        raise InputError(source, f"{path}.output_tokens", "an integer >= 2", "less or nothing")
    for i, key in enumerate(case.assumed_keys):
        if key not in ASSUMABLE_KEYS:
            expected = f"one of {', '.join(ASSUMABLE_KEYS)}"
            raise InputError(source, f"{path}.assumed_keys[{i}]", expected, describe(key))
    if case.assumed_keys and not case.assumed:
        raise InputError(
            source,
            f"{path}.assumed",
            "a text saying what stands in (assumed_keys given)",
            "nothing",
        )
    if case.category == "overlap" and "overlap_scheduling" in given:
        expected = "no overlap_scheduling on an overlap row (it runs both settings)"
        raise InputError(source, f"{path}.overlap_scheduling", expected, case.overlap_scheduling)
    if case.category in RATIO_CATEGORIES:
        for key in _SPECULATIVE:
            if key not in given:
                expected = f"a value ({case.category} row)"
                raise InputError(source, f"{path}.{key}", expected, "nothing")
        if case.method in MTP_METHODS and not mtp_drafters(case.model):
            raise InputError(
                source,
                f"{path}.method",
                f"a method whose drafter the catalog has: no MTP drafter serves {case.model!r}",
                describe(case.method),
            )
        if case.steps < 1 or not 1 <= case.acceptance_length <= case.steps + 1:
            raise InputError(
                source,
                f"{path}.acceptance_length",
                "1 <= acceptance_length <= steps + 1",
                f"{case.acceptance_length} with steps = {case.steps}",
            )
        if case.drafter:
            _check_drafter(case, path, source)
            # An MTP or n-gram method runs its own kind of drafter, and such a drafter no other.
            kind = catalog.get_drafter(case.drafter).kind
            wanted = ""
            if case.method in MTP_METHODS:
                wanted = "mtp"
            elif case.method in NGRAM_METHODS:
                wanted = "ngram"
            if (wanted or kind in ("mtp", "ngram")) and kind != wanted:
                expected = f"a drafter of the row's method {case.method!r}"
                raise InputError(source, f"{path}.drafter", expected, f"{case.drafter} ({kind})")
    elif case.category != OFFLOAD and "drafter" in given:
        expected = "no drafter on a kernel or decode row (it runs no speculation)"
        raise InputError(source, f"{path}.drafter", expected, repr(case.drafter))


#: The keys only an offload row may set.
_OFFLOAD_KEYS = frozenset(
    {"experts", "cache_experts_per_layer", "cache_gb", "cache_policy", "prefetch", "miss"}
    | {"prefetch_accuracy", "attention_precision", "pcie_generation", "host_link_gb_per_s"}
    | {"host_memory_gb_per_s", "configuration", "framework", "working_set"}
)


def _check_offload(case: Case, given: set[str], path: str, source: str) -> None:
    """An offload row states where its experts live, its cache, prefetch and misses; a cache
    is sized one way (neither: what GPU memory is left after the other weights and the KV
    cache); a drafter comes from the catalog, serves the model, and comes with its steps and
    measured acceptance length."""
    for key in _OFFLOAD_REQUIRED:
        if key not in given or not getattr(case, key):
            raise InputError(source, f"{path}.{key}", "a value (offload row)", "nothing")
    if case.cache_experts_per_layer and case.cache_gb:
        raise InputError(
            source, f"{path}.cache_gb", "cache_experts_per_layer or cache_gb, not both", "both"
        )
    if case.cache_policy == "none" and (case.cache_experts_per_layer or case.cache_gb):
        expected = "no cache size with cache_policy 'none'"
        raise InputError(source, f"{path}.cache_policy", expected, case.cache_policy)
    if case.drafter and (case.steps < 1 or not 1 <= case.acceptance_length <= case.steps + 1):
        raise InputError(
            source,
            f"{path}.acceptance_length",
            "steps >= 1 and 1 <= acceptance_length <= steps + 1 (a row with a drafter)",
            f"{case.acceptance_length} with steps = {case.steps}",
        )
    if case.framework and case.framework not in catalog.offload_framework_names():
        expected = "an offload framework of simspec/catalog/offload_frameworks"
        raise InputError(source, f"{path}.framework", expected, repr(case.framework))
    if case.drafter:
        _check_drafter(case, path, source)


def _check_drafter(case: Case, path: str, source: str) -> None:
    """A row's ``drafter`` comes from the catalog and serves the row's model."""
    if case.drafter not in catalog.drafter_names():
        raise InputError(
            source, f"{path}.drafter", "a drafter from `simspec models`", repr(case.drafter)
        )
    if not catalog.get_drafter(case.drafter).serves(case.model):
        expected = f"a drafter whose targets include {case.model}"
        raise InputError(source, f"{path}.drafter", expected, repr(case.drafter))


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
        if not isinstance(value.get("reporter", ""), str):
            where = f"sources.{key}.reporter"
            raise InputError(source, where, "a string (who measured)", describe(value["reporter"]))
    cases: list[Case] = []
    seen: set[str] = set()
    for index, table in enumerate(data.get("cases", [])):
        for case in _expand(table, index, source):
            if case.source not in sources:
                where = f"cases[{index}].source"
                raise InputError(source, where, "a key of [sources]", describe(case.source))
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
