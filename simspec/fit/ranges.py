"""The range of published rows behind each fitted term of an engine preset.

:func:`fitted_ranges` groups a preset's fitted rows by the terms they constrain (the terms whose
probe runs vary on that row, :func:`simspec.fit.presets.probe_runs`) and describes each group by
its GPUs, model families, tensor- and expert-parallel degrees and batch sizes: the
``[[fitted_range]]`` tables of the preset's catalog file (:class:`simspec.params.ranges.
FittedRange`), which :mod:`simspec.analysis.guardrails` checks every run against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from simspec import catalog
from simspec.validation.cases import RATIO_CATEGORIES, Case


def _family(model: str) -> str:
    """A catalog model's family (its name when it states none)."""
    return catalog.get_model(model).family or model


def fitted_ranges(
    cases: Sequence[Case], touches: Callable[[Case], Iterable[str]], *, measured: bool = False
) -> list[dict[str, Any]]:
    """One entry per set of rows that constrains the same terms, in the order the terms first
    appear: ``terms``, ``rows``, ``speculative`` (every row speculative, or one speculative
    setting with and without the engine's overlap scheduler), ``gpus``,
    ``families``, ``tp``, ``ep`` and ``batch`` (``[low, high]``), ``attention_dp`` when some
    row ran data-parallel attention (ep > tp), and the rows' ids (``cases``). ``cases``: the
    rows the preset was fitted on; ``touches(case)``: the terms that row constrains;
    ``measured``: the rows measured the terms directly rather than constraining a fit (written
    as ``measured = true``)."""
    by_term: dict[str, list[Case]] = {}
    for case in cases:
        for term in touches(case):
            by_term.setdefault(term, []).append(case)
    groups: dict[tuple[str, ...], list[str]] = {}
    for term, rows in by_term.items():
        groups.setdefault(tuple(c.id for c in rows), []).append(term)
    entries = []
    for terms in groups.values():
        rows = by_term[terms[0]]
        entries.append(
            {
                "terms": terms,
                "rows": len(rows),
                "speculative": all(c.category in RATIO_CATEGORIES for c in rows),
                "gpus": sorted({c.gpu for c in rows}),
                "families": sorted({_family(c.model) for c in rows}),
                **{
                    key: [min(getattr(c, key) for c in rows), max(getattr(c, key) for c in rows)]
                    for key in ("tp", "ep", "batch")
                },
            }
        )
        if any(c.ep > c.tp for c in rows):  # written only when true: the key's default is false
            entries[-1]["attention_dp"] = True
        if measured:  # the same
            entries[-1]["measured"] = True
        entries[-1]["cases"] = [c.id for c in rows]
    return entries


def range_toml(entries: Sequence[dict[str, Any]]) -> list[str]:
    """The ``[[fitted_range]]`` tables of a preset file, one per entry of :func:`fitted_ranges`."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return f'"{v}"' if isinstance(v, str) else repr(v)

    lines = []
    for entry in entries:
        lines += ["", "[[fitted_range]]"]
        for k, v in entry.items():
            if k == "cases":  # one id per line: the list is long
                lines += ["cases = [", *(f"  {value(c)}," for c in v), "]"]
            else:
                lines.append(f"{k} = {value(v)}")
    return lines
