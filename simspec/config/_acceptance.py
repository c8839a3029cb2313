"""The scenario's acceptance process from what engines report, or from the drafter's default.

``[acceptance] acceptance_length`` (with ``acceptance_setting``, default the scenario's own
setting) or ``position_acceptance`` is fitted by :func:`simspec.text.engine_acceptance.
fit_engine_acceptance`. A scenario whose ``[acceptance]`` table sets no acceptance at all
(no ``process``, ``alpha``, ``alphas``, regime alphas, trace or engine numbers) gets its
drafter's documented ``default_acceptance_length`` at the setting it was measured at, when
the catalog entry has one; otherwise the table's own defaults, as before. Either way
:func:`acceptance_note` says which acceptance a run uses and where it came from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from simspec.config.scenario import PolicySpec, Resolved
from simspec.config.speculation import SpeculationConfig
from simspec.errors import FieldError, ScenarioError, describe
from simspec.text.acceptance import TRACE_PROCESS, AcceptanceConfig
from simspec.text.engine_acceptance import AcceptanceFit, fit_engine_acceptance

#: ``[acceptance]`` keys that state an acceptance: with none of them the drafter's default
#: applies.
STATING_KEYS = (
    "process",
    "alpha",
    "alphas",
    "alpha_easy",
    "alpha_hard",
    "trace",
    "acceptance_length",
    "position_acceptance",
)


def scenario_setting(
    speculation: SpeculationConfig, policies: Sequence[PolicySpec], max_draft_tokens: int
) -> tuple[int, int, int]:
    """(steps, topk, num_draft_tokens) of the scenario: its policies' deepest chain (within
    the drafter's cap) and the ``[speculation]`` tree."""
    cap = max_draft_tokens
    steps = max((min(p.policy.budget_cap(cap), cap) for p in policies), default=cap)
    return max(steps, 1), speculation.topk, speculation.num_draft_tokens


def fit_scenario_acceptance(
    raw: Any,
    acceptance: AcceptanceConfig,
    speculation: SpeculationConfig,
    policies: Sequence[PolicySpec],
    resolved: Resolved,
    source: str,
) -> tuple[AcceptanceConfig, AcceptanceFit | None, str]:
    """The acceptance config a run uses, the fit behind it (None: as written) and a word on
    where an unfitted one came from (module docstring). ``raw``: the ``[acceptance]`` table as
    written."""
    written = raw if isinstance(raw, Mapping) else {}
    drafter = resolved.drafter
    stated = any(key in written for key in STATING_KEYS)
    length, origin = 0.0, ""
    deep: tuple[tuple[int, int, int], float] | None = None
    setting = scenario_setting(speculation, policies, drafter.max_draft_tokens)
    if acceptance.acceptance_setting:
        s = acceptance.acceptance_setting
        setting = (s[0], s[1], s[2])
    if not stated and drafter.default_acceptance_length:
        length = drafter.default_acceptance_length
        s = drafter.default_acceptance_setting
        setting = (s[0], s[1], s[2])
        origin = (
            f"drafter {drafter.name}'s default_acceptance_length "
            f"({drafter.default_acceptance_source or drafter.source})"
        )
        if drafter.deep_acceptance_length:
            d = drafter.deep_acceptance_setting
            deep = ((d[0], d[1], d[2]), drafter.deep_acceptance_length)
            origin = (
                f"drafter {drafter.name}'s default_acceptance_length and deep_acceptance_length "
                f"({drafter.default_acceptance_source}; {drafter.deep_acceptance_source})"
            )
    try:
        fitted, fit = fit_engine_acceptance(
            acceptance,
            setting,
            speculation.rank_decay,
            origin=origin,
            length=length,
            deep=deep,
            slots=drafter.max_draft_tokens,
        )
    except FieldError as err:
        key = f"acceptance.{err.key}"
        if length and err.key in ("acceptance_setting", "deep_acceptance_length"):
            entry = "default_acceptance_setting" if err.key == "acceptance_setting" else err.key
            key = f"model.drafter ({drafter.name}: {entry})"
        raise ScenarioError(source, key, err.expected, describe(err.found)) from None
    if fit is not None:
        if length:
            fit = dataclasses.replace(fit, default_of=drafter.name)
        return fitted, fit, ""
    if acceptance.process == TRACE_PROCESS:
        word = "replayed from acceptance.trace"
    elif stated:
        word = "as the scenario's [acceptance] table states it"
    else:
        word = (
            f"the [acceptance] table's defaults: drafter {drafter.name} states no "
            "default_acceptance_length"
        )
    return acceptance, None, word


def acceptance_note(acceptance: AcceptanceConfig, fit: AcceptanceFit | None, word: str) -> str:
    """One line: the acceptance a run uses and where it came from."""
    if fit is not None:
        return fit.describe()
    if acceptance.process == "iid":
        return f"acceptance: process iid, alpha {acceptance.alpha:g} ({word})"
    return f"acceptance: process {acceptance.process} ({word})"


def with_fit(resolved: Resolved, fit: AcceptanceFit | None, word: str) -> Resolved:
    """``resolved`` recording the acceptance fit (or where the acceptance came from)."""
    return dataclasses.replace(resolved, acceptance_fit=fit, acceptance_origin=word)


__all__ = ["acceptance_note", "fit_scenario_acceptance", "scenario_setting", "with_fit"]
