"""The decode-attention microbenchmark (imports torch), over batch B x keys S x queries q.

``scaled_dot_product_attention`` of B·q queries against a contiguous KV cache of S keys per
request, causal among the q new tokens (lower-right aligned), GQA via ``enable_gqa``. MLA: one
latent KV head of kv_lora + rope dimensions (values: kv_lora) read by all query heads; K and V
are separate tensors, so the kernel reads the latent about twice (absorbed MLA kernels such as
FlashMLA read it once): an upper bound. Paged KV layouts are not used. The largest cells are
dropped when their KV would not fit the memory budget (:func:`fit_grid`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from simspec.physics.models import ModelSpec

from .common import Progress, RandomTensors, RawRows, Timer
from .plan import CalibrationPlan, attention_layer
from .timing import median


def attention_dims(spec: ModelSpec) -> tuple[int, int, int, int]:
    """(query heads, KV heads, key dim, value dim) of the benchmarked attention kernel."""
    a = spec.attention
    if a.kind == "mla":
        return a.num_heads, 1, a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
    return a.num_heads, a.num_kv_heads, a.head_dim, a.v_head_dim or a.head_dim


def causal_mask(q: int, keys: int, device: torch.device, bias: bool) -> torch.Tensor | None:
    """Causal mask of q new tokens over ``keys`` keys, aligned to the last key (lower right).

    With ``bias``, torch's ``causal_lower_right`` (SDPA can then use its flash kernel; used on
    a GPU when :func:`lower_right_bias_works`); otherwise an explicit boolean mask, which on a
    CPU also avoids importing torch._dynamo (seconds) for tests. None for one query token.
    """
    if q <= 1:
        return None
    if bias:
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(q, keys)
    rows = torch.arange(q, device=device)[:, None]
    cols = torch.arange(keys, device=device)[None, :]
    return cols <= rows + (keys - q)


def attention_call(
    q_t: torch.Tensor,
    k_t: torch.Tensor,
    v_t: torch.Tensor,
    mask: torch.Tensor | None,
    gqa: bool,
) -> Callable[[], torch.Tensor]:
    """One decode-attention call (GQA through ``enable_gqa``)."""

    def run() -> torch.Tensor:
        return F.scaled_dot_product_attention(q_t, k_t, v_t, attn_mask=mask, enable_gqa=gqa)

    return run


def lower_right_bias_works(spec: ModelSpec, device: torch.device) -> bool:
    """Whether SDPA accepts the lower-right causal bias with this model's heads here."""
    if device.type != "cuda":
        return False
    hq, hkv, dk, dv = attention_dims(spec)
    rand = RandomTensors(device)
    q_t, k_t, v_t = rand(1, hq, 2, dk), rand(1, hkv, 16, dk), rand(1, hkv, 16, dv)
    try:
        out = attention_call(q_t, k_t, v_t, causal_mask(2, 16, device, True), hq != hkv)()
        ref = attention_call(q_t, k_t, v_t, causal_mask(2, 16, device, False), hq != hkv)()
    except Exception:  # any failure: the explicit mask is the safe choice
        return False
    return bool(torch.allclose(out.float(), ref.float(), rtol=5e-2, atol=5e-2))


def fit_grid(
    batch: Sequence[int], kv_tokens: Sequence[int], bytes_per_key: float, budget_bytes: float
) -> tuple[list[int], list[int]]:
    """Drop the largest contexts (then batches) until the largest cell's KV fits the budget.

    >>> fit_grid((1, 8), (128, 256, 512), bytes_per_key=1000.0, budget_bytes=2.5e6)
    ([1, 8], [128, 256])
    """
    batch, kv_tokens = list(batch), list(kv_tokens)
    while batch[-1] * kv_tokens[-1] * bytes_per_key > budget_bytes:
        if len(kv_tokens) > 2:
            kv_tokens.pop()
        elif len(batch) > 1:
            batch.pop()
        else:
            break
    return batch, kv_tokens


#: The largest head dimension torch's fused SDPA kernels take; above it SDPA runs its math path.
FUSED_MAX_HEAD_DIM = 256


def memory_per_key(hq: int, hkv: int, dk: int, dv: int, queries: int) -> float:
    """Device bytes one key of one request costs in a benchmarked attention call.

    The KV cache itself; above ``FUSED_MAX_HEAD_DIM`` (MLA's 576-wide latent key) SDPA's math
    path also expands K and V to every query head and materialises fp32 scores and
    probabilities for every query token.

    >>> memory_per_key(32, 4, 128, 128, 9)
    2048.0
    >>> memory_per_key(16, 1, 576, 512, 9)  # 1 latent head expanded to 16, 16 x 9 x 2 fp32
    38144.0
    """
    kv = hkv * (dk + dv) * 2.0
    if dk <= FUSED_MAX_HEAD_DIM:
        return kv
    return kv + hq * (dk + dv) * 2.0 + 2 * hq * queries * 4.0


def bench_attention(
    spec: ModelSpec,
    plan: CalibrationPlan,
    timer: Timer,
    rand: RandomTensors,
    budget_bytes: float,
    bias: bool,
    progress: Progress,
) -> tuple[dict[str, Any] | None, RawRows, str]:
    """The decode-attention table (batch x keys per request x query tokens), raw rows, a note.

    None (and no rows) for a model without full-attention layers.
    """
    group = attention_layer(spec)
    if group is None:
        return None, [], ""
    hq, hkv, dk, dv = attention_dims(spec)
    bytes_per_key = hkv * (dk + dv) * 2.0
    batch, kv_tokens = fit_grid(
        plan.attention_batch,
        plan.attention_kv_tokens,
        memory_per_key(hq, hkv, dk, dv, max(plan.attention_query_tokens)),
        budget_bytes,
    )
    note = ""
    if (batch, kv_tokens) != (list(plan.attention_batch), list(plan.attention_kv_tokens)):
        note = f"attention grid shrunk to fit {budget_bytes / 1e9:.1f} GB of KV"
    times: list[list[list[float]]] = []
    raw: RawRows = []
    for b in batch:
        per_b: list[list[float]] = []
        for s in kv_tokens:
            k_t, v_t = rand(b, hkv, s, dk, scale=1.0), rand(b, hkv, s, dv, scale=1.0)
            per_s: list[float] = []
            for q in plan.attention_query_tokens:
                q_t = rand(b, hq, q, dk, scale=1.0)
                mask = causal_mask(q, s, rand.device, bias)
                fn = attention_call(q_t, k_t, v_t, mask, hq != hkv)
                samples = timer.measure(fn, replay=True)
                per_s.append(median(samples))
                raw += [
                    {"batch": b, "kv_tokens": s, "query_tokens": q, "rep": r, "time_s": t}
                    for r, t in enumerate(samples)
                ]
            per_b.append(per_s)
            del k_t, v_t
        times.append(per_b)
        progress(f"attention: batch {b} done")
    table = {
        "batch": batch,
        "kv_tokens": kv_tokens,
        "query_tokens": list(plan.attention_query_tokens),
        "time_s": times,
        "kv_bytes_per_token": bytes_per_key,
        "flops_per_pair": group.attention_flops_per_pair,
        "kernel": "torch.nn.functional.scaled_dot_product_attention",
        "kv_layout": "mla latent (K and V separate)" if spec.attention.kind == "mla" else "gqa",
    }
    return table, raw, note
