"""Whether a scenario's weights fit its GPUs: pooled over every GPU, and on each GPU.

Each GPU of the serving group holds 1/t of the attention, dense and embedding weights and
1/(e · s) of the routed experts (t the tensor-parallel degree, e the expert-parallel degree,
s = max(t / e, 1) the shards of each expert inside its rank: :class:`~simspec.costs.parallel.
Parallelism`); the drafter is split like the dense weights. ``num_gpus = 8, tensor_parallel =
1`` therefore puts the whole model on one GPU, however much memory the other seven have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simspec.costs.parallel import Parallelism
from simspec.errors import ScenarioError
from simspec.physics.models import ModelSpec
from simspec.physics.mtp import drafter_weight_bytes
from simspec.physics.precision import with_precision

if TYPE_CHECKING:
    from simspec.config.scenario import Scenario


def _split(s: Scenario) -> Parallelism:
    h = s.hardware
    return Parallelism.of(h.num_gpus, h.tensor_parallel, h.expert_parallel)


def weight_bytes_per_gpu(s: Scenario, target: ModelSpec | None = None) -> float:
    """Weights on the busiest GPU of the serving group (module docstring)."""
    shape = (target or s.target).shape
    split = _split(s)
    routed = shape.num_moe_layers * shape.num_experts * shape.expert_bytes
    drafter = drafter_weight_bytes(target or s.target, s.drafter, s.draft_model)
    rest = shape.total_weight_bytes - routed + drafter
    return rest / split.tensor + routed / (split.expert * split.expert_shards)


def _splits_heads(s: Scenario, t: int) -> bool:
    """True when tensor parallelism ``t`` splits the target's heads as engines can (the rule
    :func:`simspec.config.load._check_parallel` enforces)."""
    a = s.target.attention
    kv_ok = a.kind == "mla" or not (a.num_kv_heads % t and t % a.num_kv_heads)
    return a.num_heads % t == 0 and kv_ok


def check_weights_fit(s: Scenario, source: str) -> None:
    """A ScenarioError when the weights exceed the GPUs' memory, with what would fit."""
    per_gpu_usable = s.gpu.memory_bytes * s.hardware.memory_utilization
    pooled, usable = s.weight_bytes, s.usable_memory_bytes
    on_one = weight_bytes_per_gpu(s)
    fp8 = with_precision(s.target, "fp8")
    hint = ""
    if (
        (
            s.model.precision != "fp8"
            and fp8.shape.total_weight_bytes < s.target.shape.total_weight_bytes
        )
        and weight_bytes_per_gpu(s, fp8) < per_gpu_usable
        and (
            s.weight_bytes - s.target.shape.total_weight_bytes + fp8.shape.total_weight_bytes
            < usable
        )
    ):
        hint = 'They would fit in FP8: set [model] precision = "fp8".'
    if pooled >= usable:
        need = int(-(-pooled // per_gpu_usable))
        if not s.hardware.tensor_parallel:  # the count must also split the heads
            need = next((n for n in range(need, 1025) if _splits_heads(s, n)), need)
        raise ScenarioError(
            source,
            "hardware.num_gpus",
            f"enough GPUs to hold {pooled / 1e9:.1f} GB of weights (at least {need})",
            f"{s.hardware.num_gpus} x {s.gpu.memory_bytes / 1e9:.0f} GB x "
            f"{s.hardware.memory_utilization} usable",
            hint,
        )
    if on_one >= per_gpu_usable:
        split = _split(s)
        raise ScenarioError(
            source,
            "hardware.tensor_parallel",
            f"a split whose share of the weights fits one GPU ({per_gpu_usable / 1e9:.1f} GB "
            "usable): a larger tensor_parallel (0 = all num_gpus) or expert_parallel",
            f"tensor_parallel = {split.tensor}, expert_parallel = {split.expert}: "
            f"{on_one / 1e9:.1f} GB on each GPU",
            hint,
        )
