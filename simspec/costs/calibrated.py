"""The calibrated cost model: target passes looked up in a measured profile's tables.

Outside the tables (or for terms the profile did not measure) it falls back to the roofline
with the profile's fitted parameters, never below the table's edge, and counts the fallback.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from simspec.costs.base import COST_MODELS, prefill_unique_experts
from simspec.costs.kernels import (
    attention_core_s,
    routed_experts_s,
    untimed_kernel_floors_s,
    weights_s,
)
from simspec.costs.parallel import Parallelism, attention_share
from simspec.costs.passes import collectives_s, pass_constants, tree_attention_s
from simspec.costs.roofline import RooflineCostModel
from simspec.params import PassCost, RooflineParams
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.launches import table_cell_kernels
from simspec.physics.models import ModelShape, ModelSpec, is_linear_attention
from simspec.profile import CalibrationProfile


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
    parallel: Parallelism | None = None,
    hidden_size: int = 0,
    prefill: bool = False,
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
    ``PassCost.fallback_terms``. Table times are one GPU's; split over t tensor-parallel GPUs
    each term takes 1/t of them (a GPU computes its shard), plus the pass's collectives
    (:func:`simspec.costs.passes.collectives_s`). Expert parallelism is priced as tensor
    parallelism here (the tables hold no per-rank expert counts). With data-parallel
    attention every term but the routed experts is looked up for the busiest attention
    group's requests (:func:`~simspec.costs.parallel.attention_share`).

    Parameters
    ----------
    shape, gpu, params, tokens_per_request, context_tokens, unique_experts, num_gpus, overhead_s
        As in :func:`target_pass_cost` (so are ``parallel`` and ``hidden_size``); ``gpu``
        should carry the profile's peaks (:meth:`CalibrationProfile.peak_gpu`) and ``params``
        its fitted efficiencies.
    profile : CalibrationProfile
        The measured tables.
    prefill : bool
        The pass is a prefill (its attention roofline in the prefill form,
        :func:`~simspec.costs.kernels.attention_core_s`).

    Returns
    -------
    PassCost
        With ``fallback_terms`` counting the terms that came from the roofline.
    """
    split = parallel or Parallelism.of(num_gpus, 0, 1)
    num_gpus = split.tensor
    bw = gpu.hbm_bytes_per_s * num_gpus
    flops_per_s = gpu.bf16_flops_per_s * num_gpus * params.compute_efficiency
    tokens = np.asarray(tokens_per_request, dtype=float)
    ctx = np.asarray(context_tokens, dtype=float)
    n = float(tokens.sum())
    # Data-parallel attention: all but the routed experts run on the busiest group's requests.
    share = float(attention_share(split, float(len(tokens))))
    group = n * share
    wb = shape.weight_bytes_per_param
    w_bw = bw * params.weight_efficiency
    fallbacks = 0
    # A table cell's time holds its own kernels' floors; a term priced by the roofline instead
    # adds them, so the pass charges every kernel's floor once either way.
    floor = gpu.kernel_floor_s(params.cuda_graphs)
    cell_floors = {k: c * floor for k, c in table_cell_kernels(shape.attention_kind).items()}
    latency = profile.cell_latency_s  # each isolated cell's own graph launch (profile.parse)

    def cell(value: float | np.ndarray) -> np.ndarray:
        """A table value as part of a whole pass: less its isolated graph launch."""
        return np.maximum(value - latency, 0.5 * np.asarray(value))

    def gemm(name: str, nbytes: float, bpp: float = wb, whole: float = 0.0) -> float:
        """The GEMM of ``nbytes`` split over the ranks: a measured table's time (one GPU, the
        whole weight) over the ranks, else the roofline; ``whole``: the bytes the tensor
        ranks read together when some are replicated (0: ``nbytes`` split evenly)."""
        nonlocal fallbacks
        read = whole or nbytes
        roof = float(weights_s(read, group, bpp, w_bw, flops_per_s)) + cell_floors[name]
        table = profile.gemm.get(name)
        if table is None:
            fallbacks += 1
            return roof
        value, inside = table.grid.value_at(group)
        value = float(cell(value)) * (read / nbytes if nbytes else 1.0)
        if inside:
            return value / num_gpus
        fallbacks += 1
        return max(value / num_gpus, roof)

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
        per_layer = cell(value) / num_gpus
        if not inside.all():
            fallbacks += 1
            rows = n * shape.experts_per_token
            roof = routed_experts_s(
                shape, params, u, rows, bw, flops_per_s, latency_scale=gpu.latency_scale
            )
            router = shape.router_bytes * num_gpus  # replicated on every rank (passes.py)
            roof = roof + float(weights_s(router, group, wb, w_bw, flops_per_s))
            roof = roof + cell_floors["moe"]
            per_layer = np.where(inside, per_layer, np.maximum(per_layer, roof))
        moe = float(per_layer.sum())
        moe += shape.num_moe_layers * params.moe_engine_s(shape.fp8_experts)
        if shape.shared_expert_bytes:
            moe += shape.num_moe_layers * gemm(
                "shared_expert", shape.shared_expert_bytes, shape.ffn_bytes_per_param
            )

    attention = 0.0
    other = 0.0
    batch = len(tokens)
    group_batch = batch * share  # the busiest attention group's requests (ceil(B / d))
    for g in shape.groups:
        linear = is_linear_attention(g)
        name = "linear_attention_projections" if linear else "attention_projections"
        proj = gemm(
            name,
            g.attention_weight_bytes,
            shape.attention_bytes_per_param,
            whole=g.attention_bytes_read(num_gpus),
        )
        if linear or profile.attention is None or not batch:
            fallbacks += int(bool(batch))
            kv_bw = bw * params.kv_efficiency / g.kv_copies(num_gpus)
            core = attention_core_s(g, tokens, ctx, kv_bw, flops_per_s, prefill=prefill)
            core = float(core) * share
            core += 0.0 if linear or not batch else cell_floors["attention"]
        else:
            seen = np.minimum(ctx + tokens, g.window_tokens)
            measured, within = profile.attention.grid.value_at(
                float(group_batch), float(seen.mean()), float(tokens.mean())
            )
            core = float(cell(measured)) / num_gpus
            if not within:
                fallbacks += 1
                kv_bw = bw * params.kv_efficiency / g.kv_copies(num_gpus)
                roof = attention_core_s(g, tokens, ctx, kv_bw, flops_per_s, prefill=prefill)
                core = max(core, float(roof) * share + cell_floors["attention"])
        attention += g.count * (proj + core)
        if g.ffn_weight_bytes:
            other += g.count * gemm("dense_ffn", g.ffn_weight_bytes, shape.ffn_bytes_per_param)
    other += gemm("lm_head", shape.lm_head_bytes)
    comm = 0.0
    if split.is_split:
        constants = pass_constants(shape, gpu, params, parallel=split, hidden_size=hidden_size)
        comm = float(collectives_s(constants, group))
    # The floors of the kernels no table times (norms, residual adds, RoPE, KV writes,
    # activations: the tables' measured times hold their own kernels' floors); a measured
    # profile's pass_overhead_s is what its layer stack needs beyond the tables and the floors.
    return PassCost(
        overhead_s=params.pass_overhead_s if overhead_s is None else overhead_s,
        moe_s=moe,
        attention_s=attention,
        other_s=other,
        fallback_terms=fallbacks,
        floors_s=untimed_kernel_floors_s(shape, gpu, params, split),
        collectives_s=comm,
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
    tensor_parallel: int = 0
    expert_parallel: int = 1
    draft_model: ModelSpec | None = None
    #: The drafter's roofline, with the same (fitted) parameters.
    drafter_costs: RooflineCostModel = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        drafts = RooflineCostModel(
            target=self.target,
            drafter=self.drafter,
            gpu=self.gpu,
            params=self.params,
            num_gpus=self.num_gpus,
            tensor_parallel=self.tensor_parallel,
            expert_parallel=self.expert_parallel,
            draft_model=self.draft_model,
        )
        object.__setattr__(self, "drafter_costs", drafts)

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """See :func:`calibrated_pass_cost`; a pass that verifies drafts adds its attention
        mask as the roofline prices it (:func:`~simspec.costs.passes.tree_attention_s`: the
        profile's tables time plain attention)."""
        cost = self._pass(tokens_per_request, context_tokens, unique_experts)
        tokens = np.asarray(tokens_per_request, dtype=float)
        ctx = np.asarray(context_tokens, dtype=float)
        tree = tree_attention_s(self.drafter_costs.target_constants, tokens, ctx)
        return dataclasses.replace(cost, tree_attention_s=float(tree)) if tree else cost

    def _pass(
        self, tokens_per_request, context_tokens, unique_experts, *, prefill: bool = False
    ) -> PassCost:
        return calibrated_pass_cost(
            self.target.shape,
            self.gpu,
            self.params,
            self.profile,
            tokens_per_request,
            context_tokens,
            unique_experts,
            num_gpus=self.num_gpus,
            parallel=Parallelism.of(self.num_gpus, self.tensor_parallel, self.expert_parallel),
            hidden_size=self.target.hidden_size,
            prefill=prefill,
        )

    def prefill(self, prompt_tokens: np.ndarray) -> PassCost:
        """Prefill of new prompts (see :func:`prefill_unique_experts`)."""
        prompts = np.asarray(prompt_tokens, dtype=float)
        unique = prefill_unique_experts(self.target.shape, prompts)
        return self._pass(prompts, np.zeros_like(prompts), unique, prefill=True)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """See :meth:`RooflineCostModel.draft_step`."""
        return self.drafter_costs.draft_step(context_tokens)

    def speculation_overhead_s(
        self, accepted_tokens: np.ndarray, context_tokens: np.ndarray
    ) -> float:
        """See :meth:`RooflineCostModel.speculation_overhead_s` (the drafter's roofline)."""
        return self.drafter_costs.speculation_overhead_s(accepted_tokens, context_tokens)
