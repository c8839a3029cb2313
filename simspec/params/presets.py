"""Engine presets: a serving engine's overheads as named cost-model parameters.

A serving engine adds host time to what the GPU's kernels cost (their bytes, FLOPs and
per-kernel floors, :mod:`simspec.physics.launches`). A preset (one TOML file under
``simspec/catalog/engines``, scenario key ``[engine] preset``) sets the
:class:`~simspec.params.RooflineParams` that describe an engine rather than the GPU, at most
three of them fitted:

- ``pass_overhead_s``: host time per target pass the GPU waits for (scheduling, sampler);
- ``verify_overhead_s``: host synchronisations of a speculative iteration, exposed without an
  overlap scheduler (``[engine] overlap_scheduling``; SGLang's is measured directly, not
  fitted: :data:`simspec.fit.presets.MEASURED`);
- ``comm_s_per_layer``: the engine's software time per layer on top of the alpha-beta
  collectives of a model split over GPUs (:mod:`simspec.costs.parallel`);
- ``fp8_moe_s_per_layer``: the engine's own time per MoE layer whose routed experts are FP8,
  beyond the fused-MoE kernel form fitted on the Triton kernels' tables
  (:mod:`simspec.costs.moe_kernel`): TensorRT-LLM's FP8 block-scale MoE path measures slower
  than that form where its NVFP4 path at the same parallel layout does not (the catalog entry
  says which rows show it);
- ``draft_step_overhead_s``: host time per drafter pass beyond its kernels;
- ``draft_extend_passes``: drafter passes over the accepted tokens after each verify (1 for
  EAGLE-3 in SGLang and vLLM, whose extend is also the pass that drafts the first token; set by
  the engine's design, not fitted);
- ``top_p_renorm_passes``: the engine's sampling path at temperature > 0 (a design setting);
- ``overlap_scheduling``: whether the engine hides a speculative iteration's host work behind
  the GPU (a design setting, the default of ``[engine] overlap_scheduling``).

A key the preset leaves out keeps the profile's or the built-in value. The fitted values, and
the published rows they were fitted on, are in the files' comments (written by
``simspec fidelity --fit-presets``, :mod:`simspec.fit.presets`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.params import OVERHEAD_MAX_S
from simspec.params.ranges import FittedRange
from simspec.schema import param

#: The RooflineParams keys an engine preset may set.
PRESET_KEYS = (
    "pass_overhead_s",
    "draft_step_overhead_s",
    "verify_overhead_s",
    "draft_extend_passes",
    "comm_s_per_layer",
    "fp8_moe_s_per_layer",
    "top_p_renorm_passes",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnginePreset:
    """A serving engine's named overheads (one catalog file)."""

    name: str = param(help="catalog key (the [engine] preset value)")
    display_name: str = param("", "human-readable name")
    source: str = param("", "what the values were fitted on or taken from")
    notes: str = param("", "assumptions")
    pass_overhead_s: float | None = param(
        None, "host time per target pass, s", ge=0, lt=OVERHEAD_MAX_S
    )
    draft_step_overhead_s: float | None = param(
        None, "host time per drafter pass, s", ge=0, lt=OVERHEAD_MAX_S
    )
    verify_overhead_s: float | None = param(
        None, "host synchronisations per speculative iteration, s", ge=0, lt=OVERHEAD_MAX_S
    )
    draft_extend_passes: float | None = param(
        None, "drafter passes over the accepted tokens after each verify", ge=0, le=4
    )
    comm_s_per_layer: float | None = param(
        None, "software time per layer on top of the collectives, s", ge=0, lt=0.01
    )
    fp8_moe_s_per_layer: float | None = param(
        None, "time per MoE layer with FP8 routed experts beyond the kernel form, s", ge=0, lt=0.01
    )
    top_p_renorm_passes: float | None = param(
        None,
        "the engine's sampling path: passes over the vocabulary of a sampled verify's top-p "
        "renormalisation per verified row (unset = the kernel's default)",
        ge=0,
        le=1000,
    )
    overlap_scheduling: bool | None = param(
        None,
        "the engine overlaps the next iteration's host work with the GPU during speculative "
        "decoding (the default of [engine] overlap_scheduling; unset = false)",
    )

    fitted_range: tuple[FittedRange, ...] = param(
        (),
        "the published rows each fitted term was fitted on (simspec.params.ranges; none for a "
        "preset that fits nothing)",
    )

    def overrides(self) -> dict[str, float]:
        """The RooflineParams values this preset sets (its keys that are not None)."""
        values = {key: getattr(self, key) for key in PRESET_KEYS}
        return {key: float(value) for key, value in values.items() if value is not None}
