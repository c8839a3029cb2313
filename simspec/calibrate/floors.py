"""Kernel floors and the draft step (imports torch): what small kernels cost on this device.

At small batch a decode pass is hundreds of kernels that each move little data, so their cost is
a floor per kernel rather than bytes over bandwidth; the floor differs between a CUDA-graph
replay (the GPU's back-to-back kernel floor) and eager launches (the CPU's launch path through
torch's dispatcher). Three measurements:

- ``chain``: ``CHAIN`` in-place adds on one hidden vector back to back. Replayed as one CUDA
  graph, the time per add is the device's kernel floor; launched eagerly, it is the launch
  floor (the events then also record the GPU idling between launches).
- ``ops``: the small operations of one decode layer at the model's shapes and n tokens (RMSNorm,
  rotary embedding of q and k, router softmax + top-k, SwiGLU activation, residual add, the
  gather of token rows for the experts), each repeated ``CHAIN`` times, graph and eager, with the
  number of kernels one call launches as torch's profiler counts them (GPU only).
- ``sweep``: one matrix-vector product (one token through a (K, M) bf16 weight) and one
  streaming elementwise kernel, over sizes from 64 KB to 512 MB, each with L2 flushed before
  every repetition: where the floor ends and bytes over bandwidth begins (the form
  ``floor + bytes / (η·BW)`` of a small kernel).
- ``draft``: one step of the model's EAGLE-3 head (the catalog drafter's shapes, bf16): token
  embedding + previous hidden state through one decoder layer (q/k/v from the 2h concat, decode
  attention over the context, o projection, SwiGLU MLP, two RMSNorms), the final norm, the
  draft-vocabulary LM head and a top-k, at a few batch sizes, graph and eager.

On a CPU the same code runs at the tiny shapes to test the pipeline; its numbers mean nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from simspec.physics.drafters import DrafterSpec
from simspec.physics.models import ModelSpec

from .attention import attention_call
from .common import DTYPE, Progress, RandomTensors, RawRows, Timer, first_line
from .stack import capture_graph
from .timing import median

#: Repetitions of one operation inside one timed call (graph or eager).
CHAIN = 100
#: Token counts of the per-layer operations.
OPS_TOKENS = (1, 8, 64)
#: Bytes of the weight (matrix-vector) and of the buffer (streaming) in the size sweep.
SWEEP_BYTES = tuple(1 << p for p in range(16, 30))
#: The same on a CPU (tiny shapes: the pipeline only).
CPU_SWEEP_BYTES = tuple(1 << p for p in range(12, 20, 2))
#: Rows of the swept matrix (its input width).
SWEEP_ROWS = 2048
#: Batch sizes of the draft step (one new token per request).
DRAFT_BATCH = (1, 8, 32)
#: Context length (keys per request) of the draft step's attention.
DRAFT_CONTEXT = 512


def _repeat(fn: Callable[[], Any], times: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(times):
            fn()

    return run


def _kernels_per_call(fn: Callable[[], Any], device: torch.device) -> float | None:
    """Kernels one call of ``fn`` launches, counted by torch's profiler (None off a GPU)."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(kernels) / 10.0


def _time_modes(
    fn: Callable[[], Any], timer: Timer, device: torch.device, notes: list[str], label: str
) -> dict[str, list[float]]:
    """Per-call samples of ``fn`` repeated ``CHAIN`` times: eager, and graph on a GPU."""
    chained = _repeat(fn, CHAIN)
    out = {"eager": [s / CHAIN for s in timer.measure(chained, flush=False)]}
    if device.type == "cuda":
        try:
            replay = capture_graph(chained)
            out["graph"] = [s / CHAIN for s in timer.measure(replay, flush=False)]
        except Exception as err:  # a capture failure leaves the eager measurement
            notes.append(f"{label}: CUDA graph capture failed ({first_line(err)})")
    return out


def layer_ops(spec: ModelSpec, tokens: int, rand: RandomTensors) -> dict[str, Callable[[], Any]]:
    """The small per-layer operations of ``spec`` at ``tokens`` tokens (module docstring)."""
    h, a, m = spec.hidden_size, spec.attention, spec.moe
    hq, hkv, d = max(a.num_heads, 1), max(a.num_kv_heads, 1), max(a.head_dim, 2)
    x = rand(tokens, h, scale=1.0)
    weight = torch.ones(h, dtype=DTYPE, device=rand.device)
    q, k = rand(tokens, hq, d, scale=1.0), rand(tokens, hkv, d, scale=1.0)
    cos, sin = rand(tokens, 1, d, scale=1.0), rand(tokens, 1, d, scale=1.0)

    def rope() -> tuple[torch.Tensor, torch.Tensor]:
        def rotate(t: torch.Tensor) -> torch.Tensor:
            first, second = t.chunk(2, dim=-1)
            return t * cos + torch.cat((-second, first), dim=-1) * sin

        return rotate(q), rotate(k)

    ops: dict[str, Callable[[], Any]] = {
        "residual_add": lambda: x.add_(x, alpha=0.0),
        "rms_norm": lambda: F.rms_norm(x, (h,), weight),
        "rope": rope,
    }
    if m.num_experts:
        logits = rand(tokens, m.num_experts, scale=1.0, dtype=torch.float32)
        width = max(m.expert_intermediate_size, 1)
        gate_up = rand(tokens * m.experts_per_token, 2 * width, scale=1.0)
        index = torch.arange(tokens * m.experts_per_token, device=rand.device) % tokens
        ops["router_topk"] = lambda: torch.topk(
            torch.softmax(logits, dim=-1), m.experts_per_token, dim=-1
        )
        ops["swiglu"] = lambda: F.silu(gate_up[:, :width]) * gate_up[:, width:]
        ops["gather_rows"] = lambda: x.index_select(0, index)
    return ops


def _sweep_calls(rand: RandomTensors, elements: int) -> dict[str, Callable[[], Any]]:
    """One token through a (``SWEEP_ROWS``, elements / rows) weight; a buffer scaled in place."""
    weight = rand(SWEEP_ROWS, max(elements // SWEEP_ROWS, 1))
    x = rand(1, SWEEP_ROWS, scale=1.0)
    buffer = rand(elements, scale=1.0)
    return {"gemv": lambda: x @ weight, "stream": lambda: buffer.mul_(1.0)}


def size_sweep(
    timer: Timer, rand: RandomTensors, sizes: tuple[int, ...]
) -> tuple[dict[str, Any], RawRows]:
    """Matrix-vector and streaming kernels over ``sizes`` bytes, L2 flushed (module docstring)."""
    gemv: list[float] = []
    stream: list[float] = []
    raw: RawRows = []
    for size in sizes:
        elements = size // 2  # bf16
        calls = _sweep_calls(rand, elements)
        for name, out in (("gemv", gemv), ("stream", stream)):
            samples = timer.measure(calls[name], replay=True)
            out.append(median(samples))
            raw.extend(
                {
                    "kind": "sweep",
                    "name": name,
                    "size": size,
                    "mode": "eager",
                    "rep": r,
                    "time_s": t,
                }
                for r, t in enumerate(samples)
            )
        del calls
    table = {
        "bytes": list(sizes),
        "gemv_rows": SWEEP_ROWS,
        "gemv_s": gemv,
        "stream_s": stream,
        "stream_bytes_moved": [2 * size for size in sizes],
    }
    return table, raw


def tiny_drafter(drafter: DrafterSpec) -> DrafterSpec:
    """``drafter`` at CPU-test size (hidden 64, like :func:`.plan.tiny_model`)."""
    return dataclasses.replace(
        drafter,
        hidden_size=64,
        intermediate_size=128,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        draft_vocab_size=512,
    )


def draft_step(
    drafter: DrafterSpec, batch: int, context: int, rand: RandomTensors
) -> Callable[[], Any]:
    """One EAGLE-3 draft step of ``batch`` requests (module docstring)."""
    h, f = drafter.hidden_size, drafter.intermediate_size
    hq, hkv, d = drafter.num_heads, drafter.num_kv_heads, drafter.head_dim
    vocab = drafter.draft_vocab_size
    w_qkv = rand(2 * h, (hq + 2 * hkv) * d)
    w_o, w_up, w_down = rand(hq * d, h), rand(h, 2 * f), rand(f, h)
    lm_head = rand(h, vocab)
    norm = torch.ones(h, dtype=DTYPE, device=rand.device)
    norm2 = torch.ones(2 * h, dtype=DTYPE, device=rand.device)
    embed, hidden = rand(batch, h, scale=1.0), rand(batch, h, scale=1.0)
    k_cache = rand(batch, hkv, context, d, scale=1.0)
    v_cache = rand(batch, hkv, context, d, scale=1.0)

    def run() -> torch.Tensor:
        y = F.rms_norm(torch.cat((embed, hidden), dim=-1), (2 * h,), norm2)
        qkv = y @ w_qkv
        q = qkv[:, : hq * d].view(batch, hq, 1, d)
        attn = attention_call(q, k_cache, v_cache, None, hq != hkv)()
        out = hidden + attn.reshape(batch, hq * d) @ w_o
        gate, up = (F.rms_norm(out, (h,), norm) @ w_up).chunk(2, dim=-1)
        out = out + (F.silu(gate) * up) @ w_down
        logits = F.rms_norm(out, (h,), norm) @ lm_head
        return torch.topk(torch.softmax(logits.float(), dim=-1), 8, dim=-1).values

    return run


def bench_floors(
    spec: ModelSpec,
    drafter: DrafterSpec | None,
    timer: Timer,
    rand: RandomTensors,
    progress: Progress,
) -> tuple[dict[str, Any], RawRows, str]:
    """The ``floors`` table (chain, ops, sweep, draft), its raw rows and notes."""
    device = rand.device
    notes: list[str] = []
    raw: RawRows = []

    def record(
        kind: str, name: str, size: int, samples: dict[str, list[float]]
    ) -> dict[str, float]:
        for mode, values in samples.items():
            raw.extend(
                {"kind": kind, "name": name, "size": size, "mode": mode, "rep": r, "time_s": t}
                for r, t in enumerate(values)
            )
        return {mode: median(values) for mode, values in samples.items()}

    vector = rand(spec.hidden_size, scale=1.0)
    adds = _time_modes(lambda: vector.add_(1.0), timer, device, notes, "chain")
    chain = record("chain", "add", 1, adds)
    progress("floors: kernel chain done")
    ops: list[dict[str, Any]] = []
    for tokens in OPS_TOKENS:
        for name, fn in layer_ops(spec, tokens, rand).items():
            row: dict[str, Any] = {"op": name, "tokens": tokens}
            row.update(record("op", name, tokens, _time_modes(fn, timer, device, notes, name)))
            try:
                row["kernels_per_call"] = _kernels_per_call(fn, device)
            except Exception as err:  # the profiler is optional: keep the times
                row["kernels_per_call"] = None
                notes.append(f"kernel count failed ({first_line(err)})")
            ops.append(row)
    progress("floors: layer ops done")
    sizes = SWEEP_BYTES if device.type == "cuda" else CPU_SWEEP_BYTES
    sweep, sweep_raw = size_sweep(timer, rand, sizes)
    raw.extend(sweep_raw)
    progress("floors: size sweep done")
    draft: list[dict[str, Any]] = []
    if drafter is not None and drafter.kind == "eagle3":
        for batch in DRAFT_BATCH:
            fn = draft_step(drafter, batch, DRAFT_CONTEXT, rand)
            samples = {"eager": timer.measure(fn)}
            if device.type == "cuda":
                try:
                    samples["graph"] = timer.measure(capture_graph(fn))
                except Exception as err:
                    notes.append(f"draft step: CUDA graph capture failed ({first_line(err)})")
            row = {"batch": batch, "context_tokens": DRAFT_CONTEXT}
            row.update(record("draft", drafter.name, batch, samples))
            try:
                row["kernels_per_call"] = _kernels_per_call(fn, device)
            except Exception as err:
                row["kernels_per_call"] = None
                notes.append(f"kernel count failed ({first_line(err)})")
            draft.append(row)
        progress("floors: draft step done")
    table = {
        "chain_kernels": CHAIN,
        "kernel_floor_s": chain,
        "ops": ops,
        "sweep": sweep,
        "draft": draft,
        "drafter": drafter.name if drafter is not None else "",
    }
    return table, raw, "; ".join(dict.fromkeys(notes))
