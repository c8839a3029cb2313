"""Which published rows are called inconsistent: stated rules on the measurements alone.

A row called inconsistent is predicted and reported but not fitted. The label never looks at a
prediction (a label chosen from predictions would flatter the fit that made them), so it comes
from these rules, applied to whatever set of rows a fit sees (all rows for the shipped presets,
the training rows of each held-out fold in :mod:`simspec.fit.nested`):

1. **Scaling**: two plain-decode rows of the same model, GPU, weight formats, engine, expert
   parallelism, lengths and running requests, where the row with more tensor parallelism (and a
   benchmark at least as long) measures more than :data:`SCALING_TOLERANCE` slower per decode
   step. Splitting a memory-bound step over more GPUs divides the bytes each one reads; the
   collectives it adds (tens of µs per layer) can eat that gain on a small model, but a step
   clearly slower than its smaller-TP twin's points to the setup (PCIe, configuration), not to
   the model. The row with more GPUs is labelled.
2. **Disagreement**: two rows of that configuration at the same TP degree and benchmark, from
   different fold groups (reporters or sources), more than :data:`AGREEMENT_TOLERANCE` apart
   per step: both are labelled, since neither is known to be the right one.
3. **Baseline**: a speculative row whose baseline (the plain-decode row of its group and setting
   with its ``baseline_value``) is labelled: its speedup divides by that number.
4. **Source**: the source itself attributes the number to an effect simspec does not model
   (:data:`SOURCE_STATED`, each with the source's words).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._sections import step_ms
from .cases import Case, engine_preset

#: Rule 1: the per-step time more TP may add before a row is called inconsistent.
SCALING_TOLERANCE = 0.05
#: Rule 2: how far two reports of one configuration may differ per step.
AGREEMENT_TOLERANCE = 0.20
#: Rule 3: a baseline row matches a speculative row's ``baseline_value`` within this.
BASELINE_MATCH = 0.005
#: Rule 4: rows whose source says the number includes an effect outside the model.
SOURCE_STATED = {
    "gpt-oss-120b-8xh100-tp8-vllm-1k8k[4]": "the source attributes the jump to KV-cache "
    "preemption, which simspec does not model",
}


def fold_key(case: Case) -> str:
    """The group a row is held out with: its ``reporter`` (two sources of one reporter share a
    setup and a protocol, so they leave together), else its ``source``."""
    return case.reporter or case.source


def source_reporters(rows: Sequence[Case]) -> dict[str, str]:
    """Source key -> the group its rows are held out with (:func:`fold_key`): the mapping the
    preset fit weighs reporters by (:func:`simspec.fit.presets.reporter_weights`)."""
    return {c.source: fold_key(c) for c in rows}


def is_test_row(case: Case) -> bool:
    """A row that is predicted, never fitted (``role = "test"``, :data:`~.cases.ROLES`)."""
    return case.role != "fit"


def _running(case: Case) -> int:
    return min(case.batch, case.num_requests) if case.num_requests else case.batch


def _setting(case: Case) -> tuple[Any, ...]:
    """What two decode rows must share to be one configuration (TP and benchmark aside)."""
    return (
        case.model,
        case.gpu,
        case.precision,
        case.expert_precision,
        case.kv_cache_dtype,
        engine_preset(case),
        case.ep,
        case.prompt_tokens,
        case.output_tokens,
        _running(case),
    )


def _scaling(decode: list[tuple[Case, float]], labels: dict[str, str]) -> None:
    for a, step_a in decode:
        for b, step_b in decode:
            if (
                b.tp > a.tp
                and _setting(a) == _setting(b)
                and b.num_requests >= a.num_requests
                and step_b > (1.0 + SCALING_TOLERANCE) * step_a
            ):
                labels.setdefault(
                    b.id,
                    f"TP{b.tp} measures {step_b / step_a - 1:.0%} slower per decode step than "
                    f"TP{a.tp} (`{a.id}`) at the same model, GPU, engine, lengths and batch "
                    f"(rule 1: more than {SCALING_TOLERANCE:.0%})",
                )


def _disagreement(
    decode: list[tuple[Case, float]], labels: dict[str, str], group: Callable[[Case], str]
) -> None:
    for i, (a, step_a) in enumerate(decode):
        for b, step_b in decode[i + 1 :]:
            same = (
                _setting(a) == _setting(b)
                and (a.tp, a.num_requests) == (b.tp, b.num_requests)
                and group(a) != group(b)
            )
            ratio = max(step_a, step_b) / min(step_a, step_b)
            if same and ratio > 1.0 + AGREEMENT_TOLERANCE:
                why = (
                    f"disagrees with `{{}}` about one configuration by {ratio - 1:.0%} per step "
                    f"(rule 2: more than {AGREEMENT_TOLERANCE:.0%})"
                )
                labels.setdefault(a.id, why.format(b.id))
                labels.setdefault(b.id, why.format(a.id))


def _baseline(rows: Sequence[Case], labels: dict[str, str]) -> None:
    for spec in rows:
        if spec.category != "speculative" or spec.id in labels:
            continue
        for base in rows:
            if (
                base.category == "decode"
                and base.id in labels
                and base.source == spec.source
                and _setting(base) == _setting(spec)
                and (base.tp, base.num_requests, base.quantity)
                == (spec.tp, spec.num_requests, spec.quantity)
                and abs(base.value / spec.baseline_value - 1.0) <= BASELINE_MATCH
            ):
                labels[spec.id] = f"its baseline `{base.id}` is called inconsistent (rule 3)"
                break


def inconsistent(rows: Sequence[Case], group: Callable[[Case], str] = fold_key) -> dict[str, str]:
    """Row id -> why, for the rows of ``rows`` the module's rules call inconsistent.

    ``group`` names a row's reporter or source (rule 2 compares rows of different groups).
    Only ``rows`` are compared: a fold's labels come from its training rows alone, and test
    rows (:func:`is_test_row`) neither get nor give a label, since they never enter a fit.
    """
    rows = [c for c in rows if not is_test_row(c)]
    labels = {c.id: f"{SOURCE_STATED[c.id]} (rule 4)" for c in rows if c.id in SOURCE_STATED}
    decode = []
    for c in rows:
        if c.category == "decode":
            step = step_ms(c, c.value)
            if step is not None:
                decode.append((c, step))
    _scaling(decode, labels)
    _disagreement(decode, labels, group)
    _baseline(rows, labels)
    return labels
