"""Where an engine preset's fitted terms were fitted: the range of the published rows behind them.

A fitted term is only as good as the rows it was fitted on; a run outside them (another GPU,
model family, parallel degree or batch size) leans on an extrapolation. Each
:class:`FittedRange` of a preset (``[[fitted_range]]`` in its catalog file, written by
``simspec fidelity --fit-presets``: :mod:`simspec.fit.ranges`) names some of its terms and the
rows that constrain exactly those terms; :mod:`simspec.analysis.guardrails` warns when a run
that uses the terms falls outside.
"""

from __future__ import annotations

from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedRange:
    """The published rows behind some of a preset's fitted terms: their GPUs, model families,
    tensor- and expert-parallel degrees and batch sizes (``[low, high]``)."""

    terms: tuple[str, ...] = param(help="the preset's keys these rows were fitted on")
    rows: int = param(help="published rows behind them", ge=1)
    speculative: bool = param(
        False, "the rows are all speculative: only a run that speculates uses these terms"
    )
    gpus: tuple[str, ...] = param(help="catalog GPUs of the rows")
    families: tuple[str, ...] = param(help="model families of the rows (catalog `family`)")
    tp: tuple[int, ...] = param(help="lowest and highest tensor-parallel degree", ge=1)
    ep: tuple[int, ...] = param(help="lowest and highest expert-parallel degree", ge=1)
    batch: tuple[int, ...] = param(help="lowest and highest batch size (concurrency)", ge=1)
    measured: bool = param(
        False,
        "the terms were measured directly on these rows (each row a measurement of them), not "
        "fitted",
    )
    attention_dp: bool = param(
        False,
        "some rows ran data-parallel attention (expert parallelism beyond the tensor-parallel "
        "group, simspec.costs.parallel)",
    )
    cases: tuple[str, ...] = param(
        (),
        "ids of those rows in the cases file they come from (validation/cases.toml), so a "
        "fidelity report can tell the rows the shipped preset was fitted on from those it "
        "never saw (simspec.validation.fitted); as many as rows",
    )

    def __post_init__(self) -> None:
        for key in ("tp", "ep", "batch"):
            low_high = getattr(self, key)
            if len(low_high) != 2 or low_high[0] > low_high[1]:
                raise FieldError(key, "[low, high] with low <= high", list(low_high))
        if self.cases and len(self.cases) != self.rows:
            raise FieldError("cases", f"{self.rows} row ids (rows = {self.rows})", list(self.cases))
