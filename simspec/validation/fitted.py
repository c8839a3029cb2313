"""Which published rows the shipped numbers rest on: the rows each engine preset was fitted on
(named by id in its ``[[fitted_range]]`` tables, :attr:`simspec.params.ranges.FittedRange.
cases`) and the kernel series of the launch form's constants
(:data:`simspec.params.MOE_KERNEL_FIT_SERIES`). Every other row is held out from them by
construction: a fidelity report summarises those rows apart (:mod:`.report`), and the
errors per model, GPU and TP degree behind a run's ``published-miss`` guardrail count them
(:mod:`.accuracy`).
"""

from __future__ import annotations

from simspec import catalog
from simspec.params import MOE_KERNEL_FIT_MAX_TOKENS, MOE_KERNEL_FIT_SERIES

from .cases import Case, engine_preset


def fitted_on(case: Case) -> bool:
    """Whether the shipped constants that price ``case`` were fitted on it: a kernel row of a
    series the launch form's constants were fitted on (:data:`~simspec.params.
    MOE_KERNEL_FIT_SERIES`, at most :data:`~simspec.params.MOE_KERNEL_FIT_MAX_TOKENS` tokens), or
    a row its engine preset's fitted ranges name by id (:attr:`~simspec.params.ranges.
    FittedRange.cases`). Any other row (a test row, one called inconsistent, a row of an engine
    without a fitted preset, a row of a cases file the shipped numbers never saw) is held out
    from them by construction.
    """
    if case.role != "fit":
        return False
    if case.category == "kernel":
        series = case.id.split("[")[0]
        return series in MOE_KERNEL_FIT_SERIES and case.tokens <= MOE_KERNEL_FIT_MAX_TOKENS
    preset = catalog.get_engine(engine_preset(case))
    return any(case.id in entry.cases for entry in preset.fitted_range)
