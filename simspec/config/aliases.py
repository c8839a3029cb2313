"""The serving engines' names for scenario keys, accepted as overrides.

Users of vLLM and SGLang know their engines' flags; simspec accepts those names wherever it
accepts overrides (``--set``, ``--grid``, :func:`simspec.with_overrides`, ``simspec.run(...,
overrides=...)``) and rewrites each into simspec's own keys before they are applied. Scenario
*files* keep simspec's keys only, so one file has one spelling (an alias there is an unknown
key). Dashes and underscores are interchangeable in an alias
(``num-speculative-tokens`` = ``num_speculative_tokens``).

The aliases are :data:`ALIASES` (README, "Command line", lists them); sources: vLLM engine
arguments (docs.vllm.ai/en/latest/configuration/engine_args.html) and SGLang server arguments
(docs.sglang.ai/advanced_features/server_arguments.html).

Two mappings are choices worth knowing. An engine runs one speculation length, so
``num_speculative_tokens`` / ``speculative_num_steps`` replace the scenario's policies with the
one fixed-k policy (the k = 0 baseline is always simulated too). ``max_num_seqs`` caps the batch
the scheduler forms, which is ``workload.max_batch_size``; in a closed loop the number of
clients is ``workload.concurrency``, and those beyond the cap wait in line as in the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: Alias -> function from its value to (scenario key, value) pairs.
_Expand = Callable[[Any], list[tuple[str, Any]]]


def _fixed_policy(value: Any) -> list[tuple[str, Any]]:
    return [("policies", [{"name": "fixed", "draft_tokens": value}])]


def _key(*keys: str) -> _Expand:
    return lambda value: [(key, value) for key in keys]


#: Every alias, its engine, and what it becomes.
ALIASES: dict[str, tuple[str, str, _Expand]] = {
    "num_speculative_tokens": ("vLLM", "policies = [fixed, draft_tokens = k]", _fixed_policy),
    "speculative_num_steps": ("SGLang", "policies = [fixed, draft_tokens = k]", _fixed_policy),
    "speculative_eagle_topk": ("SGLang", "speculation.topk", _key("speculation.topk")),
    "speculative_num_draft_tokens": (
        "SGLang",
        "speculation.num_draft_tokens",
        _key("speculation.num_draft_tokens"),
    ),
    "max_num_seqs": ("vLLM", "workload.max_batch_size", _key("workload.max_batch_size")),
    "gpu_memory_utilization": (
        "vLLM",
        "hardware.memory_utilization",
        _key("hardware.memory_utilization"),
    ),
    "tensor_parallel_size": (
        "vLLM",
        "hardware.num_gpus + hardware.tensor_parallel",
        _key("hardware.num_gpus", "hardware.tensor_parallel"),
    ),
    "kv_cache_dtype": ("vLLM, SGLang", "model.kv_cache_dtype", _key("model.kv_cache_dtype")),
    "mamba_ssm_dtype": ("SGLang", "model.ssm_state_dtype", _key("model.ssm_state_dtype")),
    "mamba_ssm_cache_dtype": ("vLLM", "model.ssm_state_dtype", _key("model.ssm_state_dtype")),
}


def canonical(key: str) -> str | None:
    """The alias ``key`` spells (dashes or underscores), or None when it is no alias."""
    name = key.strip().replace("-", "_")
    return name if name in ALIASES else None


def expand_aliases(pairs: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``(key, value)`` overrides with every alias rewritten into simspec's keys, in order."""
    out: list[tuple[str, Any]] = []
    for key, value in pairs:
        alias = canonical(key)
        out.extend(ALIASES[alias][2](value) if alias else [(key, value)])
    return out
