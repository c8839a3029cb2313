"""The cost model's named parameters: efficiencies and overheads (calibrated or assumed).

Every efficiency is a fraction of a spec-sheet peak (HBM bandwidth, bf16 FLOP/s). The routed
experts' kernel has two forms (:mod:`simspec.costs.moe_kernel`): the default ``launch``,
t0 + U·(c_e + bytes_expert / (eta_bw·BW)) (or FLOPs), fitted to published fused_moe tables, and
the v0.1 ``saturation`` curve, whose efficiency rises with the expert bytes in flight:

    eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S))

— :func:`moe_efficiency` is its one definition, used by the roofline, the calibrated model's
fallback and the calibration fit alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.schema import param

#: Lowest efficiency (fraction of a peak) a scenario or profile may state; the calibration fit
#: searches efficiencies from here to 1 (a CPU test run fits low ones against measured peaks).
EFFICIENCY_MIN = 0.002
#: Overheads (per pass, per draft step) are below this, s: anything longer is not a GPU pass.
OVERHEAD_MAX_S = 1.0
#: Forms of the routed-expert kernel time (``[costs] moe_kernel``; simspec.costs.moe_kernel).
MOE_KERNEL_FORMS = ("saturation", "launch")
#: The kernel-table series of ``validation/cases.toml`` that the launch form's shipped constants
#: (``moe_launch_s``, ``moe_expert_s``, ``moe_bandwidth_efficiency``,
#: ``moe_exposed_fraction``) were fitted on, at most
#: :data:`MOE_KERNEL_FIT_MAX_TOKENS` tokens per row (validation/KERNEL_FIT.md): a fidelity
#: report tells those rows from the ones the constants never saw (``simspec.fit.kernels``'s
#: fit series are these).
MOE_KERNEL_FIT_SERIES = (
    "mixtral-8x7b-h100-tp2-bf16-tuned",
    "qwen3-30b-h100-fp8-pr-defaults",
    "qwen3-30b-a100-pcie-bf16",
    "qwen3-235b-h200-tp8-fp8-untuned",
    "gpt-oss-120b-h100-triton-after",
)
MOE_KERNEL_FIT_MAX_TOKENS = 1024
#: What L2 does to co-routed re-reads of an expert in one pass (simspec.costs.moe_kernel).
L2_REUSE_MODES = ("ideal", "fit", "none")
#: [costs] keys added after profile schema 1: a profile's ``fitted`` table may omit them (the
#: default then applies), so profiles written before them still load.
PROFILE_OPTIONAL_KEYS = (
    "moe_kernel",
    "moe_launch_s",
    "moe_expert_s",
    "moe_bandwidth_efficiency",
    "moe_exposed_fraction",
    "moe_l2_reuse",
    "moe_tile_rows",
    "verify_overhead_s",
    "draft_extend_passes",
    "top_p_renorm_passes",
    "fp8_moe_s_per_layer",
    *("cuda_graphs", "overlap_scheduling", "temperature", "top_p"),
)
#: RooflineParams fields that the scenario sets from its own tables (``[engine]``,
#: ``[workload]``), not from ``[costs]``: :attr:`simspec.config.scenario.Scenario.roofline`.
SCENARIO_OWNED_KEYS = ("cuda_graphs", "overlap_scheduling", "temperature", "top_p")


def moe_efficiency(
    unique_experts: np.ndarray | float,
    expert_bytes: float,
    efficiency_max: float,
    saturation_bytes: float,
) -> np.ndarray:
    """eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S)) (see the module docstring)."""
    return efficiency_max * -np.expm1(-np.asarray(unique_experts) * expert_bytes / saturation_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class RooflineParams:
    """Assumed efficiencies and overheads of the roofline cost model (to be calibrated)."""

    pass_overhead_s: float = param(
        0.0,
        "engine host time per target pass that the GPU waits for (scheduling, batch assembly, "
        "sampler launch), s; the pass's kernels pay their floors separately (kernel_floor_* of "
        "the GPU, simspec.physics.launches); 0 = physics only",
        ge=0,
        lt=OVERHEAD_MAX_S,
    )
    draft_step_overhead_s: float = param(
        0.0,
        "engine host time per drafter pass beyond its kernels' floors, s (0 = physics only)",
        ge=0,
        lt=OVERHEAD_MAX_S,
    )
    moe_efficiency_max: float = param(
        0.80,
        "plateau fraction of HBM bandwidth reached by the grouped MoE kernel (assumed)",
        ge=EFFICIENCY_MIN,
        le=1,
    )
    moe_saturation_bytes: float = param(
        94e6,
        "expert bytes in flight for the MoE kernel to approach its plateau, bytes "
        "(U0 = 10 experts of Qwen3-30B-A3B; assumed)",
        ge=1,
        le=1e11,
    )
    moe_kernel: str = param(
        "launch",
        "form of the routed-expert kernel time: launch (moe_launch_s + per-expert cost + "
        "bytes at moe_bandwidth_efficiency, fitted to published fused_moe tables; "
        "validation/KERNEL_FIT.md; the default) or saturation (the v0.1 occupancy curve of "
        "moe_efficiency_max, moe_saturation_bytes)",
        choices=MOE_KERNEL_FORMS,
    )
    moe_launch_s: float = param(
        2.69e-5,
        "launch form: fixed time of one MoE layer's routed-expert kernels at the reference SM "
        "clock (1980 MHz; a slower GPU takes longer: GpuSpec.latency_scale), s (fitted: "
        "validation/KERNEL_FIT.md)",
        ge=0,
        lt=0.01,
    )
    moe_expert_s: float = param(
        2.47e-7,
        "launch form: time per distinct expert on top of its bytes at the reference SM clock, "
        "s (fitted: "
        "validation/KERNEL_FIT.md)",
        ge=0,
        lt=0.001,
    )
    moe_bandwidth_efficiency: float = param(
        0.935,
        "launch form: fraction of HBM bandwidth at which expert bytes stream (fitted: "
        "validation/KERNEL_FIT.md)",
        ge=EFFICIENCY_MIN,
        le=1,
    )
    moe_exposed_fraction: float = param(
        0.468,
        "launch form: fraction of the shorter of a MoE layer's two phases (streaming its "
        "experts' bytes, their tensor-core FLOPs) that the longer does not hide: 0 overlaps "
        "them fully (the longer alone), 1 runs them one after the other (fitted: "
        "validation/KERNEL_FIT.md)",
        ge=0,
        le=1,
    )
    moe_l2_reuse: str = param(
        "ideal",
        "launch form: co-routed re-reads of an expert within one pass are L2 hits always "
        "(ideal), only when the layer's distinct expert bytes fit in L2 (fit), or never (none)",
        choices=L2_REUSE_MODES,
    )
    moe_tile_rows: float = param(
        64.0,
        "launch form: rows per tile of the grouped GEMM (Triton fused_moe BLOCK_SIZE_M); an "
        "expert with more rows in a pass is streamed once per tile",
        ge=1,
        le=65536,
    )
    weight_efficiency: float = param(
        0.70,
        "fraction of HBM bandwidth for dense weight GEMV/GEMM reads (assumed)",
        ge=EFFICIENCY_MIN,
        le=1,
    )
    kv_efficiency: float = param(
        0.50,
        "fraction of HBM bandwidth for decode attention KV reads (assumed)",
        ge=EFFICIENCY_MIN,
        le=1,
    )
    compute_efficiency: float = param(
        0.60,
        "fraction of peak bf16 tensor FLOP/s when compute-bound (assumed)",
        ge=EFFICIENCY_MIN,
        le=1,
    )
    comm_s_per_layer: float = param(
        0.0,
        "engine software time per layer on top of its alpha-beta collectives when the model is "
        "split over GPUs (simspec.costs.parallel), s (0 = physics only)",
        ge=0,
        lt=0.01,
    )
    fp8_moe_s_per_layer: float = param(
        0.0,
        "engine time per MoE layer whose routed experts are FP8, beyond the fitted fused-MoE "
        "kernel form: an engine whose FP8 (block-scaled) MoE path runs other kernels than the "
        "ones the form was fitted on (simspec.params.presets), s (0 = physics only)",
        ge=0,
        lt=0.01,
    )
    verify_overhead_s: float = param(
        0.0,
        "host time of a speculative iteration's synchronisations (accepted tokens copied to the "
        "host, the next draft planned from them), s: exposed unless the engine overlaps "
        "scheduling with the GPU (overlap_scheduling), 0 = physics only",
        ge=0,
        lt=OVERHEAD_MAX_S,
    )
    draft_extend_passes: float = param(
        0.0,
        "drafter passes over the accepted tokens after each verify (EAGLE-3 in SGLang and vLLM "
        "run 1, a draft extend); the first is the draft phase's first step widened to those "
        "tokens (it adds what they add to a one-row step), further ones cost a full pass over "
        "them (0 = none)",
        ge=0,
        le=4,
    )
    top_p_renorm_passes: float = param(
        30.0,
        "passes over the vocabulary of the top-p renormalisation of one verified row when "
        "sampling (temperature > 0, top_p < 1), one thread block per row (FlashInfer's "
        "ternary search, ~30 passes: https://github.com/flashinfer-ai/flashinfer/pull/2752)",
        ge=0,
        le=1000,
    )
    cuda_graphs: bool = param(
        True,
        "passes and draft steps replay CUDA graphs (kernel_floor_graph_s per kernel) rather "
        "than launching eagerly (kernel_floor_eager_s); set by [engine] cuda_graphs",
    )
    overlap_scheduling: bool = param(
        False,
        "the engine plans the next iteration while the GPU runs this one, so a speculative "
        "iteration's host synchronisations (verify_overhead_s) are hidden; set by [engine] "
        "overlap_scheduling",
    )
    temperature: float = param(
        0.0,
        "sampling temperature (0 = greedy verify); set by [workload] temperature",
        ge=0,
        le=100,
    )
    top_p: float = param(
        1.0,
        "nucleus sampling mass (1 = off); set by [workload] top_p",
        gt=0,
        le=1,
    )

    def moe_efficiency(self, unique_experts: np.ndarray, expert_bytes: float) -> np.ndarray:
        """eta_moe(U) = eta_max·(1 − exp(−U·bytes_expert / S)) (see module docstring)."""
        return moe_efficiency(
            unique_experts, expert_bytes, self.moe_efficiency_max, self.moe_saturation_bytes
        )

    def moe_engine_s(self, fp8_experts: bool) -> float:
        """The engine's own time per MoE layer beyond the fitted kernel form: its FP8 MoE
        path's (``fp8_moe_s_per_layer``) where the routed experts are FP8
        (:attr:`simspec.physics.models.ModelShape.fp8_experts`), else 0."""
        return self.fp8_moe_s_per_layer if fp8_experts else 0.0


@dataclass(frozen=True, slots=True)
class PassCost:
    """Time of one forward pass, by component, in seconds.

    ``overhead_s`` is the engine's host time, ``floors_s`` every kernel's fixed floor
    (:mod:`simspec.physics.launches`), ``collectives_s`` the pass's all-reduces and
    all-to-alls (:mod:`simspec.costs.parallel`); ``other_s`` holds dense FFNs, the LM head and a
    sampled verify's top-p renormalisation; ``tree_attention_s`` a verify pass's attention
    beyond a decode step's: the mask over its draft tokens (built, packed and read by every
    attention layer) and the linear-attention states kept per verified token
    (:func:`simspec.costs.passes.tree_attention_s`; 0 for a plain decode or a prefill).
    """

    overhead_s: float
    moe_s: float
    attention_s: float
    other_s: float
    fallback_terms: int = 0  # calibrated model: terms taken from the roofline (outside its tables)
    floors_s: float = 0.0
    collectives_s: float = 0.0
    tree_attention_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The whole pass."""
        return (
            self.overhead_s
            + self.moe_s
            + self.attention_s
            + self.other_s
            + self.floors_s
            + self.collectives_s
            + self.tree_attention_s
        )
