"""Recording a trace: a MoE target decodes prompts greedily; a drafter proposes at every token.

For each prompt the target decodes ``new_tokens`` tokens greedily with its KV cache, and the
router hooks (:class:`~simspec.record.hooks.RouterRecorder`) keep the routing of every fed
token: row 0 is the prompt's last token x_0 (the token the first decode step feeds), rows
1..n the generated x_1..x_n, which is the row convention of a replayed request (state i feeds
token i; :mod:`simspec.routing.replay`).

With a drafter (a small causal LM over the same vocabulary), at every row t the drafter drafts
K tokens greedily from the prefix ending at x_t, and reports the probability of each draft as
its confidence. Because the target decodes greedily, it would accept draft d_j exactly when
d_1..d_j equal x_{t+1}..x_{t+j} (speculative decoding with greedy verification reproduces the
target's greedy text; Leviathan et al. 2023, arXiv 2211.17192), so ``draft_accepted[t, j-1]``
is ``d_j == x_{t+j}`` (false past the end of the text). With ``rejected_drafts`` the target
also runs the verify pass x_t, d_1..d_K (one full forward, no cache) and the hooks give the
routing of the rejected drafts d_{m_t+1}..d_K (format: :mod:`simspec.routing.trace_drafts`).

Cost: n cached decode steps, plus per row K drafter forwards and one target forward over the
prefix (no KV-cache reuse, kept simple): fine for hundreds of tokens on a GPU, for tens on a CPU.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.routing.trace import RoutingTrace
from simspec.routing.trace_drafts import DraftSections

from .hooks import RouterRecorder, num_routed_experts


@dataclass(frozen=True, slots=True)
class SequenceRecord:
    """One recorded sequence (rows x_0..x_n, module docstring)."""

    tokens: np.ndarray  # (n + 1,) token ids x_0..x_n
    expert_ids: np.ndarray  # (n + 1, layers, k_e)
    accepted: np.ndarray | None = None  # (n + 1, K)
    confidences: np.ndarray | None = None  # (n + 1, K)
    rejected_ids: np.ndarray | None = None  # (n + 1, K, layers, k_e), −1 = none


def _ids(model: Any, tokens: Sequence[int]) -> Any:
    """``tokens`` as a (1, T) tensor on the model's device."""
    import torch

    return torch.tensor([list(tokens)], device=next(model.parameters()).device)


def _greedy(model: Any, tokens: Sequence[int]) -> tuple[int, float]:
    """The model's greedy next token after ``tokens`` and its probability."""
    import torch

    logits = model(input_ids=_ids(model, tokens)).logits[0, -1].float()
    probs = torch.softmax(logits, dim=-1)
    token = int(torch.argmax(probs))
    return token, float(probs[token])


def decode(
    target: Any, recorder: RouterRecorder, prompt: Sequence[int], new_tokens: int
) -> tuple[list[int], np.ndarray]:
    """Greedy decoding with the KV cache: tokens x_0..x_n and their routing (n + 1, L, k_e)."""
    import torch

    # transformers 5 names the KV cache ``cache``; 4.x named it ``past_key_values``
    key = "cache" if "cache" in inspect.signature(target.forward).parameters else "past_key_values"
    out = target(input_ids=_ids(target, prompt), use_cache=True)
    rows = [recorder.take()[-1]]  # the prompt's last token, x_0
    tokens = [int(prompt[-1])]
    for _ in range(new_tokens):
        token = int(torch.argmax(out.logits[0, -1]))
        tokens.append(token)
        cache = getattr(out, key, None)
        out = target(input_ids=_ids(target, [token]), use_cache=True, **{key: cache})
        rows.append(recorder.take()[-1])
    return tokens, np.stack(rows)


def record_sequence(
    target: Any,
    recorder: RouterRecorder,
    prompt: Sequence[int],
    new_tokens: int,
    *,
    drafter: Any = None,
    draft_tokens: int = 4,
    rejected_drafts: bool = True,
) -> SequenceRecord:
    """Record one prompt (module docstring)."""
    import torch

    with torch.no_grad():
        tokens, expert_ids = decode(target, recorder, prompt, new_tokens)
        if drafter is None:
            return SequenceRecord(np.array(tokens), expert_ids)
        n, k = len(tokens) - 1, draft_tokens
        text = list(prompt) + tokens[1:]  # prompt, x_1..x_n
        accepted = np.zeros((n + 1, k), dtype=bool)
        confidences = np.zeros((n + 1, k))
        rejected = np.full((n + 1, k, *expert_ids.shape[1:]), -1, dtype=np.int64)
        for t in range(n + 1):
            prefix = text[: len(prompt) + t]
            drafts: list[int] = []
            for j in range(k):
                token, confidences[t, j] = _greedy(drafter, prefix + drafts)
                drafts.append(token)
                accepted[t, j] = t + j + 1 <= n and token == tokens[t + j + 1]
            matched = int(np.argmin(accepted[t])) if not accepted[t].all() else k
            if rejected_drafts and matched < k:
                target(input_ids=_ids(target, prefix + drafts))
                fed = recorder.take()[-k:]  # routing of d_1..d_K in the verify pass
                rejected[t, : k - matched] = fed[matched:]
    return SequenceRecord(
        np.array(tokens),
        expert_ids,
        accepted,
        confidences,
        rejected if rejected_drafts else None,
    )


def record_trace(
    target: Any,
    prompts: Sequence[Sequence[int]],
    new_tokens: int,
    *,
    drafter: Any = None,
    draft_tokens: int = 4,
    rejected_drafts: bool = True,
    grouped: bool = False,
    model: str = "",
    source: str = "",
    progress: Callable[[int], None] | None = None,
) -> RoutingTrace:
    """Record every prompt into one trace, one sequence per prompt (format of item
    :mod:`simspec.routing.trace` with the draft sections when there is a drafter)."""
    records = []
    with RouterRecorder(target, grouped=grouped) as recorder:
        for i, prompt in enumerate(prompts):
            if not len(prompt):
                raise ValueError(f"prompt {i} is empty")
            records.append(
                record_sequence(
                    target,
                    recorder,
                    prompt,
                    new_tokens,
                    drafter=drafter,
                    draft_tokens=draft_tokens,
                    rejected_drafts=rejected_drafts,
                )
            )
            if progress is not None:
                progress(i + 1)
        layers = recorder.layers
    lengths = [len(r.tokens) for r in records]
    drafts = DraftSections()
    if drafter is not None:
        drafts = DraftSections(
            np.concatenate([r.accepted for r in records]),  # type: ignore[misc]
            np.concatenate([r.confidences for r in records]),  # type: ignore[misc]
            np.concatenate([r.rejected_ids for r in records]) if rejected_drafts else None,  # type: ignore[misc]
        )
    return RoutingTrace(
        np.concatenate([r.expert_ids for r in records]),
        num_routed_experts(target),
        np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64),
        model=model,
        source=source,
        layers=layers,
        drafts=drafts,
    )
