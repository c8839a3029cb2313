"""Flat records the engine appends while it runs; the analysis summarises them."""

from __future__ import annotations

from dataclasses import dataclass

from simspec.params import PassCost


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One decode iteration: the draft phase and its verify pass."""

    start_s: float
    batch_size: int
    fed_tokens: int  # Σ_b (k_b + 1)
    drafted: int  # Σ_b k_b
    accepted: int  # Σ_b min(k_b, m_b)
    draft_s: float
    verify: PassCost
    decode_s: float  # the k = 0 pass of the same requests at the same contexts
    unique_experts: float  # mean over MoE layers of distinct routed experts in the pass
    probes: int = 0  # draft steps run only to read a confidence the policy declined on
    speculation_overhead_s: float = 0.0  # verify bookkeeping + drafter extend (engine presets)


@dataclass(frozen=True, slots=True)
class PrefillRecord:
    """One prefill pass over newly admitted prompts."""

    start_s: float
    requests: int
    prompt_tokens: int
    cost: PassCost


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request."""

    request_id: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    committed: int  # output tokens committed (must equal output_tokens)
    steps: int  # verify passes it took part in
    drafted: int
    accepted: int
