"""Engine presets: a serving engine's overheads as named cost-model parameters.

Real speculative iterations cost more than draft steps plus one verify pass. A preset (one TOML
file under ``simspec/catalog/engines``, scenario key ``[engine] preset``) sets the
:class:`~simspec.params.RooflineParams` that describe an engine rather than the GPU:

- ``pass_overhead_s``: fixed time of every target pass (launches, scheduling, sampling);
- ``draft_step_overhead_s``: fixed time of every drafter pass (a draft step or the extend);
- ``verify_overhead_s``: verify bookkeeping per speculative iteration (tree mask, rejection
  sampling, copies of the accepted tokens' KV and hidden states);
- ``verify_overhead_per_tp_s``: extra verify bookkeeping per speculative iteration per
  additional tensor-parallel rank (x·(t − 1); sglang issue #6949);
- ``draft_extend_passes``: drafter passes over the accepted tokens after each verify (1 for
  EAGLE-3 in SGLang and vLLM);
- ``comm_s_per_layer``: the engine's software time per layer on top of the alpha-beta
  collectives of a model split over GPUs (:mod:`simspec.costs.parallel`);
- ``request_overhead_s``: software time per running request per target pass
  (:func:`simspec.costs.parallel.request_overhead_s`).

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
    "request_overhead_s",
    "verify_overhead_per_tp_s",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnginePreset:
    """A serving engine's named overheads (one catalog file)."""

    name: str = param(help="catalog key (the [engine] preset value)")
    display_name: str = param("", "human-readable name")
    source: str = param("", "what the values were fitted on or taken from")
    notes: str = param("", "assumptions")
    pass_overhead_s: float | None = param(
        None, "fixed time per target pass, s", ge=0, lt=OVERHEAD_MAX_S
    )
    draft_step_overhead_s: float | None = param(
        None, "fixed time per drafter pass, s", ge=0, lt=OVERHEAD_MAX_S
    )
    verify_overhead_s: float | None = param(
        None, "verify bookkeeping per speculative iteration, s", ge=0, lt=OVERHEAD_MAX_S
    )
    draft_extend_passes: float | None = param(
        None, "drafter passes over the accepted tokens after each verify", ge=0, le=4
    )
    comm_s_per_layer: float | None = param(
        None, "software time per layer on top of the collectives, s", ge=0, lt=0.01
    )
    request_overhead_s: float | None = param(
        None, "software time per running request per target pass, s", ge=0, le=0.002
    )
    verify_overhead_per_tp_s: float | None = param(
        None,
        "verify bookkeeping per speculative iteration per additional tensor-parallel rank, s",
        ge=0,
        le=0.01,
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
