"""The roofline cost model: every pass priced by :func:`simspec.costs.kernels.target_pass_cost`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from simspec.costs.base import COST_MODELS, prefill_unique_experts
from simspec.costs.kernels import PassConstants, pass_constants, pass_cost
from simspec.costs.params import PassCost, RooflineParams
from simspec.physics.drafters import DrafterSpec
from simspec.physics.hardware import GpuSpec
from simspec.physics.models import ModelSpec
from simspec.profile import CalibrationProfile


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
    profile: CalibrationProfile | None = None  # unused: the roofline needs only its fitted params
    # Per-model constants, derived once here rather than in every pass (no spec hashing there).
    _target: PassConstants = field(init=False, repr=False, compare=False)
    _draft: PassConstants | None = field(init=False, repr=False, compare=False)
    _draft_layers: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        target = pass_constants(self.target.shape, self.gpu, self.params, self.num_gpus)
        object.__setattr__(self, "_target", target)
        draft = None if self.draft_model is None else self.draft_model.shape
        constants = None if draft is None else pass_constants(draft, self.gpu, self.params)
        object.__setattr__(self, "_draft", constants)
        object.__setattr__(self, "_draft_layers", 0 if draft is None else draft.num_moe_layers)

    def verify_pass(
        self, tokens_per_request: np.ndarray, context_tokens: np.ndarray, unique_experts: np.ndarray
    ) -> PassCost:
        """See :func:`simspec.costs.kernels.target_pass_cost`."""
        return pass_cost(self._target, tokens_per_request, context_tokens, unique_experts)

    def prefill_pass(self, prompt_tokens: np.ndarray) -> PassCost:
        """Prefill of new prompts (see :func:`prefill_unique_experts`)."""
        prompts = np.asarray(prompt_tokens, dtype=float)
        unique = prefill_unique_experts(self._target.shape, prompts)
        return self.verify_pass(prompts, np.zeros_like(prompts), unique)

    def draft_step(self, context_tokens: np.ndarray) -> float:
        """One draft token for each request in ``context_tokens`` (the drafting ones).

        The drafter runs on one GPU of the target's group (drafters are replicated).
        """
        ctx = np.asarray(context_tokens, dtype=float)
        if len(ctx) == 0:
            return 0.0
        overhead = self.params.draft_step_overhead_s
        if self._draft is not None:
            cost = pass_cost(
                self._draft,
                np.ones_like(ctx),
                ctx,
                np.zeros(self._draft_layers),
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
