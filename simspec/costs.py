"""Time of a forward pass: a per-kernel roofline with named efficiencies.

A target pass over n tokens (from B requests, T_b tokens each, with C_b tokens already in the KV
cache) that touches U_l distinct routed experts in MoE layer l costs (every term is the roofline
max(bytes / (eta·BW), FLOPs / (eta_c·F)) of one kernel, and kernels run one after another, so
the terms add):

    t = t_fixed
      + Σ_l max(U_l·bytes_expert / (eta_moe(U_l)·BW), 2·n·k_e·P_expert / (eta_c·F))   routed experts
      + Σ_l roofline(shared experts + router)                                          (MoE part)
      + Σ_l roofline(attention projections) + roofline(KV reads, attention FLOPs)   (attention)
      + Σ_l roofline(dense FFN) + roofline(LM head over all n tokens)                  (other)

eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S)) models occupancy: a grouped MoE kernel
needs about S bytes in flight to reach its bandwidth plateau, so a handful of small experts
(Qwen3-30B-A3B: 9.4 MB) run far below peak while one Mixtral expert (352 MB) saturates the GPU.
S = 94 MB makes U0 = S / bytes_expert = 10 for Qwen3-30B-A3B (eta(8) ≈ 0.44, eta(22) ≈ 0.71),
in line with reports that one-token MoE decode kernels reach only ~55-60 % of achievable
bandwidth for lack of occupancy. Every efficiency below is an assumption unless a calibration
profile supplies it (``[costs] profile``, :mod:`simspec.profile`); the fixed per-pass overhead
is what Cohere's 2026 analysis of speculative decoding on MoE models identifies as the batch-1
mechanism (amortised over the k+1 tokens).

Two cost models implement :class:`CostModel`: ``roofline`` (the formula above) and
``calibrated`` (:func:`calibrated_pass_cost`: the same terms looked up in a profile's measured
tables, falling back to the roofline with the profile's fitted parameters outside them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from simspec.drafters import DrafterSpec
from simspec.hardware import GpuSpec
from simspec.models import LayerGroup, ModelShape, ModelSpec
from simspec.registry import Registry
from simspec.schema import param

if TYPE_CHECKING:  # the profile module imports this one
    from simspec.profile import CalibrationProfile


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineParams:
    """Assumed efficiencies and overheads of the roofline cost model (to be calibrated)."""

    pass_overhead_s: float = param(
        8e-4,
        "fixed time per target pass: launches, scheduling, sampling, MoE glue, s "
        "(assumed 0.8 ms; plausible range 0.3-2 ms)",
        ge=0,
    )
    draft_step_overhead_s: float = param(
        1e-4, "fixed time per draft step, s (assumed; plausible 0.1-0.3 ms)", ge=0
    )
    moe_efficiency_max: float = param(
        0.80,
        "plateau fraction of HBM bandwidth reached by the grouped MoE kernel (assumed)",
        gt=0,
        le=1,
    )
    moe_saturation_bytes: float = param(
        94e6,
        "expert bytes in flight for the MoE kernel to approach its plateau, bytes "
        "(U0 = 10 experts of Qwen3-30B-A3B; assumed)",
        gt=0,
    )
    weight_efficiency: float = param(
        0.70, "fraction of HBM bandwidth for dense weight GEMV/GEMM reads (assumed)", gt=0, le=1
    )
    kv_efficiency: float = param(
        0.50, "fraction of HBM bandwidth for decode attention KV reads (assumed)", gt=0, le=1
    )
    compute_efficiency: float = param(
        0.60, "fraction of peak bf16 tensor FLOP/s when compute-bound (assumed)", gt=0, le=1
    )
    comm_s_per_layer: float = param(
        2e-5, "collective-communication time per layer when num_gpus > 1, s [A]", ge=0
    )

    def moe_efficiency(self, unique_experts: np.ndarray, expert_bytes: float) -> np.ndarray:
        """eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S)) (see module docstring)."""
        return self.moe_efficiency_max * -np.expm1(
            -unique_experts * expert_bytes / self.moe_saturation_bytes
        )


@dataclass(frozen=True, slots=True)
class PassCost:
    """Time of one forward pass, by component, in seconds."""

    overhead_s: float
    moe_s: float
    attention_s: float
    other_s: float
    fallback_terms: int = 0  # calibrated model: terms taken from the roofline (outside its tables)

    @property
    def total_s(self) -> float:
        """The whole pass."""
        return self.overhead_s + self.moe_s + self.attention_s + self.other_s


def _roofline(nbytes: float | np.ndarray, flops: float | np.ndarray, bw: float, flops_per_s: float):
    return np.maximum(nbytes / bw, flops / flops_per_s)


# Per-kernel terms, shared by the roofline model, the calibrated model's fallback and the
# synthetic tables of simspec.calibrate.analytic (so all three agree to the last bit).


def weights_s(
    nbytes: float, tokens: float, weight_bytes_per_param: float, bw: float, flops_per_s: float
):
    """Roofline of a dense GEMM/GEMV that reads ``nbytes`` of weights for ``tokens`` tokens."""
    return _roofline(nbytes, 2.0 * tokens * nbytes / weight_bytes_per_param, bw, flops_per_s)


def routed_experts_s(
    shape: ModelShape,
    params: RooflineParams,
    unique_experts: np.ndarray,
    rows: float,
    bw: float,
    flops_per_s: float,
) -> np.ndarray:
    """Grouped routed-expert FFN per MoE layer: each distinct expert read once, ``rows`` rows.

    ``rows`` is the number of (token, expert) pairs, n·k_e in a real pass.
    """
    u = np.asarray(unique_experts, dtype=float)
    eta = params.moe_efficiency(np.maximum(u, 1.0), shape.expert_bytes)
    routed_flops = 2.0 * rows * shape.expert_params
    return np.maximum(u * shape.expert_bytes / (eta * bw), routed_flops / flops_per_s)


def attention_core_s(
    group: LayerGroup,
    tokens: np.ndarray,
    context_tokens: np.ndarray,
    bw: float,
    flops_per_s: float,
):
    """KV-cache (or linear-attention state) reads and score FLOPs of one layer of ``group``.

    ``bw`` is the bandwidth already scaled by the KV efficiency.
    """
    seen = np.minimum(context_tokens + tokens, group.window_tokens)
    kv_bytes = float(seen.sum()) * group.kv_bytes_per_token + len(tokens) * group.state_bytes
    pair_flops = float((tokens * seen).sum()) * group.attention_flops_per_pair
    return _roofline(kv_bytes, pair_flops, bw, flops_per_s)


def target_pass_cost(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    num_gpus: int = 1,
    overhead_s: float | None = None,
) -> PassCost:
    """Roofline time of one target pass (module docstring formula).

    Parameters
    ----------
    shape : ModelShape
        Derived architecture (``ModelSpec.shape``).
    gpu : GpuSpec
        Peak numbers; ``num_gpus`` of them act as one device with summed bandwidth and FLOP/s.
    params : RooflineParams
        Efficiencies and overheads.
    tokens_per_request : array of int, shape (B,)
        Tokens each request feeds in this pass (k_b + 1 for a verify pass).
    context_tokens : array of int, shape (B,)
        Tokens each request already holds in its KV cache.
    unique_experts : array, shape (num_moe_layers,)
        Distinct routed experts touched per MoE layer (the union over all tokens).
    overhead_s : float, optional
        Fixed time of the pass; defaults to ``params.pass_overhead_s``.

    Returns
    -------
    PassCost

    Examples
    --------
    A pass with no tokens of work left costs only its overhead:

    >>> from simspec import catalog
    >>> m = catalog.get_model("llama-3.1-8b")
    >>> c = target_pass_cost(m.shape, catalog.get_gpu("h100-sxm"), RooflineParams(),
    ...                      np.array([1]), np.array([0]), np.zeros(0))
    >>> round(c.overhead_s, 6)
    0.0008
    """
    bw = gpu.hbm_bytes_per_s * num_gpus
    flops_per_s = gpu.bf16_flops_per_s * num_gpus * params.compute_efficiency
    tokens = np.asarray(tokens_per_request, dtype=float)
    ctx = np.asarray(context_tokens, dtype=float)
    n = float(tokens.sum())
    wb = shape.weight_bytes_per_param
    w_bw = bw * params.weight_efficiency

    moe = 0.0
    if shape.num_moe_layers:
        rows = n * shape.experts_per_token
        routed = routed_experts_s(shape, params, unique_experts, rows, bw, flops_per_s)
        fixed_bytes = shape.shared_expert_bytes + shape.router_bytes
        fixed = weights_s(fixed_bytes, n, wb, w_bw, flops_per_s)
        moe = float(routed.sum()) + shape.num_moe_layers * float(fixed)

    attention = 0.0
    other = 0.0
    for g in shape.groups:
        proj = weights_s(g.attention_weight_bytes, n, wb, w_bw, flops_per_s)
        core = attention_core_s(g, tokens, ctx, bw * params.kv_efficiency, flops_per_s)
        attention += g.count * float(proj + core)
        if g.ffn_weight_bytes:
            ffn = weights_s(g.ffn_weight_bytes, n, wb, w_bw, flops_per_s)
            other += g.count * float(ffn)
    other += float(weights_s(shape.lm_head_bytes, n, wb, w_bw, flops_per_s))
    if num_gpus > 1:
        other += sum(g.count for g in shape.groups) * params.comm_s_per_layer
    fixed_s = params.pass_overhead_s if overhead_s is None else overhead_s
    return PassCost(overhead_s=fixed_s, moe_s=moe, attention_s=attention, other_s=other)


def independent_unique_experts(num_experts: int, experts_per_token: int, tokens: float) -> float:
    """Expected distinct experts for independent uniform routing: N(1 − (1 − k_e/N)^t) (MoESD)."""
    if num_experts == 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - experts_per_token / num_experts) ** tokens)


def prefill_unique_experts(shape: ModelShape, prompt_tokens: np.ndarray) -> np.ndarray:
    """Distinct experts per MoE layer of a prefill pass.

    A prefill feeds hundreds of tokens, which touch nearly every expert whatever their overlap,
    so the independent-routing expectation is used.
    """
    u = independent_unique_experts(
        shape.num_experts, shape.experts_per_token, float(np.sum(prompt_tokens))
    )
    return np.full(shape.num_moe_layers, u)


def draft_phase_s(
    cost_model: CostModel, context_tokens: np.ndarray, draft_tokens: np.ndarray
) -> float:
    """Time of one step's draft phase: draft step j runs for every request with k_b ≥ j.

    The j-th step of request b sees its context plus the j − 1 drafts before it.
    """
    ks = np.asarray(draft_tokens)
    ctx = np.asarray(context_tokens)
    return float(
        sum(
            cost_model.draft_step(ctx[ks >= j] + (j - 1))
            for j in range(1, int(ks.max(initial=0)) + 1)
        )
    )


class CostModel(Protocol):
    """What the engine asks of a cost model. All methods are pure."""

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """Time of one target pass (verify, or plain decode when every request feeds 1 token)."""
        ...

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """Time of one draft step for the requests still drafting (their contexts)."""
        ...

    def prefill_pass(self, prompt_tokens: np.ndarray) -> PassCost:
        """Time of a prefill pass over newly admitted prompts."""
        ...


COST_MODELS: Registry[CostModel] = Registry("cost model")


@COST_MODELS.register("roofline")
@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineCostModel:
    """Per-kernel roofline of target passes and draft steps (module docstring)."""

    target: ModelSpec
    drafter: DrafterSpec
    gpu: GpuSpec
    params: RooflineParams = RooflineParams()
    num_gpus: int = 1
    draft_model: ModelSpec | None = None  # the dense draft model, when drafter.kind == "dense"

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """See :func:`target_pass_cost`."""
        return target_pass_cost(
            self.target.shape,
            self.gpu,
            self.params,
            tokens_per_request,
            context_tokens,
            unique_experts,
            num_gpus=self.num_gpus,
        )

    def prefill_pass(self, prompt_tokens: np.ndarray) -> PassCost:
        """Prefill of new prompts (see :func:`prefill_unique_experts`)."""
        prompts = np.asarray(prompt_tokens, dtype=float)
        unique = prefill_unique_experts(self.target.shape, prompts)
        return self.verify_pass(prompts, np.zeros_like(prompts), unique)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """One draft token for each request in ``context_tokens`` (the drafting ones).

        The drafter runs on one GPU of the target's group (drafters are replicated).
        """
        ctx = np.asarray(context_tokens, dtype=float)
        if len(ctx) == 0:
            return 0.0
        overhead = self.params.draft_step_overhead_s
        if self.draft_model is not None:
            cost = target_pass_cost(
                self.draft_model.shape,
                self.gpu,
                self.params,
                np.ones_like(ctx),
                ctx,
                np.zeros(self.draft_model.shape.num_moe_layers),
                overhead_s=overhead,
            )
            return cost.total_s
        d = self.drafter
        wbytes = d.head_weight_bytes()
        flops = 2.0 * len(ctx) * wbytes / d.weight_bytes
        bw = self.gpu.hbm_bytes_per_s
        weights = max(
            wbytes / (self.params.weight_efficiency * bw),
            flops / (self.params.compute_efficiency * self.gpu.bf16_flops_per_s),
        )
        kv = float((ctx + 1).sum()) * d.head_kv_bytes_per_token() / (self.params.kv_efficiency * bw)
        return overhead + weights + kv


# -- calibrated --------------------------------------------------------------------------------


def _is_linear(group: LayerGroup) -> bool:
    """Linear-attention layers (Gated DeltaNet) keep a state instead of a KV cache."""
    return group.kv_bytes_per_token == 0 and group.attention_flops_per_pair == 0


def calibrated_pass_cost(
    shape: ModelShape,
    gpu: GpuSpec,
    params: RooflineParams,
    profile: CalibrationProfile,
    tokens_per_request: np.ndarray,
    context_tokens: np.ndarray,
    unique_experts: np.ndarray,
    *,
    num_gpus: int = 1,
    overhead_s: float | None = None,
) -> PassCost:
    """Time of one target pass looked up in a profile's measured tables.

    The same terms as :func:`target_pass_cost`, each taken from a table of ``profile``:

    - per MoE layer, ``moe(n, U_l)`` (router, top-k and the grouped experts) plus
      ``shared_expert(n)``;
    - per layer, ``attention_projections(n)`` (``linear_attention_projections`` for
      linear-attention layers) plus ``attention(B, mean keys per request, mean query tokens)``,
      where keys per request are ``min(context + tokens, window)``;
    - per dense layer ``dense_ffn(n)``, once ``lm_head(n)``; the fixed overhead from ``params``.

    A term whose point lies outside its table (or that the profile did not measure, such as
    the linear-attention state update) comes from the roofline with ``params`` instead, never
    below the table's edge: ``max(table(clamped point), roofline(point))``, which keeps the
    cost monotone across the table's border. Each such term adds one to
    ``PassCost.fallback_terms``. Table times are per GPU; ``num_gpus`` GPUs divide them, the
    same idealisation (one device with summed rates) the roofline makes.

    Parameters
    ----------
    shape, gpu, params, tokens_per_request, context_tokens, unique_experts, num_gpus, overhead_s
        As in :func:`target_pass_cost`; ``gpu`` should carry the profile's peaks
        (:meth:`CalibrationProfile.peak_gpu`) and ``params`` its fitted efficiencies.
    profile : CalibrationProfile
        The measured tables.

    Returns
    -------
    PassCost
        With ``fallback_terms`` counting the terms that came from the roofline.
    """
    bw = gpu.hbm_bytes_per_s * num_gpus
    flops_per_s = gpu.bf16_flops_per_s * num_gpus * params.compute_efficiency
    tokens = np.asarray(tokens_per_request, dtype=float)
    ctx = np.asarray(context_tokens, dtype=float)
    n = float(tokens.sum())
    wb = shape.weight_bytes_per_param
    w_bw = bw * params.weight_efficiency
    fallbacks = 0

    def gemm(name: str, nbytes: float) -> float:
        nonlocal fallbacks
        table = profile.gemm.get(name)
        if table is None:
            fallbacks += 1
            return float(weights_s(nbytes, n, wb, w_bw, flops_per_s))
        value, inside = table.grid.value_at(n)
        if inside:
            return value / num_gpus
        fallbacks += 1
        return max(value / num_gpus, float(weights_s(nbytes, n, wb, w_bw, flops_per_s)))

    moe = 0.0
    if shape.num_moe_layers:
        u = np.asarray(unique_experts, dtype=float)
        if profile.moe is None:
            inside = np.zeros(len(u), dtype=bool)
            value = np.zeros(len(u))
        elif len(u) and u.min() == u.max():  # one lookup serves every layer
            one, ok = profile.moe.grid.value_at(n, float(u[0]))
            value, inside = np.full(len(u), one), np.full(len(u), ok)
        else:
            value, inside = profile.moe.grid.lookup(np.column_stack([np.full(len(u), n), u]))
        per_layer = value / num_gpus
        if not inside.all():
            fallbacks += 1
            rows = n * shape.experts_per_token
            roof = routed_experts_s(shape, params, u, rows, bw, flops_per_s)
            roof = roof + float(weights_s(shape.router_bytes, n, wb, w_bw, flops_per_s))
            per_layer = np.where(inside, per_layer, np.maximum(per_layer, roof))
        moe = float(per_layer.sum())
        if shape.shared_expert_bytes:
            moe += shape.num_moe_layers * gemm("shared_expert", shape.shared_expert_bytes)

    attention = 0.0
    other = 0.0
    batch = len(tokens)
    for g in shape.groups:
        linear = _is_linear(g)
        name = "linear_attention_projections" if linear else "attention_projections"
        proj = gemm(name, g.attention_weight_bytes)
        if linear or profile.attention is None or not batch:
            fallbacks += int(bool(batch))
            core = float(attention_core_s(g, tokens, ctx, bw * params.kv_efficiency, flops_per_s))
        else:
            seen = np.minimum(ctx + tokens, g.window_tokens)
            measured, within = profile.attention.grid.value_at(
                float(batch), float(seen.mean()), float(tokens.mean())
            )
            core = measured / num_gpus
            if not within:
                fallbacks += 1
                roof = attention_core_s(g, tokens, ctx, bw * params.kv_efficiency, flops_per_s)
                core = max(core, float(roof))
        attention += g.count * (proj + core)
        if g.ffn_weight_bytes:
            other += g.count * gemm("dense_ffn", g.ffn_weight_bytes)
    other += gemm("lm_head", shape.lm_head_bytes)
    if num_gpus > 1:
        other += sum(g.count for g in shape.groups) * params.comm_s_per_layer
    fixed_s = params.pass_overhead_s if overhead_s is None else overhead_s
    return PassCost(
        overhead_s=fixed_s,
        moe_s=moe,
        attention_s=attention,
        other_s=other,
        fallback_terms=fallbacks,
    )


@COST_MODELS.register("calibrated")
@dataclass(frozen=True, slots=True, kw_only=True)
class CalibratedCostModel:
    """Target passes looked up in a measured profile (:func:`calibrated_pass_cost`).

    Draft steps use the roofline with the same (fitted) parameters: the profile measures the
    target model, not the drafter.
    """

    target: ModelSpec
    drafter: DrafterSpec
    gpu: GpuSpec
    profile: CalibrationProfile
    params: RooflineParams = RooflineParams()
    num_gpus: int = 1
    draft_model: ModelSpec | None = None
    _drafts: RooflineCostModel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        drafts = RooflineCostModel(
            target=self.target,
            drafter=self.drafter,
            gpu=self.gpu,
            params=self.params,
            num_gpus=self.num_gpus,
            draft_model=self.draft_model,
        )
        object.__setattr__(self, "_drafts", drafts)

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """See :func:`calibrated_pass_cost`."""
        return calibrated_pass_cost(
            self.target.shape,
            self.gpu,
            self.params,
            self.profile,
            tokens_per_request,
            context_tokens,
            unique_experts,
            num_gpus=self.num_gpus,
        )

    def prefill_pass(self, prompt_tokens: np.ndarray) -> PassCost:
        """Prefill of new prompts (see :func:`prefill_unique_experts`)."""
        prompts = np.asarray(prompt_tokens, dtype=float)
        unique = prefill_unique_experts(self.target.shape, prompts)
        return self.verify_pass(prompts, np.zeros_like(prompts), unique)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """See :meth:`RooflineCostModel.draft_step`."""
        return self._drafts.draft_step(context_tokens)
