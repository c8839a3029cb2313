"""Acceptance as serving engines report it, turned into an acceptance process.

Engines do not print an acceptance rate per draft slot; they print

* the **mean acceptance length** AL: tokens committed per verify pass, the bonus token
  included (SGLang's ``accept len``, vLLM's ``mean acceptance length``), measured at one
  setting (``steps``, ``topk``, ``num_draft_tokens``) (SGLang's three speculative flags; vLLM's
  chain is ``(num_speculative_tokens, 1, num_speculative_tokens + 1)``);
* the **per-position acceptance rates** r_j: the share of verify passes whose draft at
  position j was accepted (vLLM's ``spec_decode`` per-position counts over the drafts
  proposed). A draft is accepted only after all before it, so r_j = Π_{i ≤ j} alpha_i and the
  slot's own (conditional) rate is alpha_j = r_j / r_{j−1} (r_0 = 1).

:func:`fit_engine_acceptance` turns either into the process the simulator draws from: an AL
into the i.i.d. alpha whose tree at that setting has that E[AL]
(:func:`simspec.text.tree.fit_alpha`; for a chain, 1 + alpha + … + alpha^steps = AL), rates
into the ``per_position`` process with those alpha_j. It says how well: the AL the fitted
process gives at the measured setting beside the given one (equal to the root finder's
tolerance for an AL alone; a real check when both are given, the rates then deciding the
process).

Two ALs at two depths (a drafter entry's ``default_acceptance_length`` and
``deep_acceptance_length``) fix a per-step acceptance that decays with depth,
alpha_j = a·d^j (:func:`decaying_alphas`): a at the first setting, then the decay d that the
deeper AL asks for. One AL cannot say whether a drafter chained past what it was trained for
keeps its per-step acceptance; a second, deeper one can (a module trained to predict one token
ahead, chained three deep, accepts less per step: DeepSeek's MTP module).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.tree import (
    FIT_TOLERANCE,
    expected_acceptance_length,
    fit_alpha,
    verified_drafts,
)


@dataclass(frozen=True, slots=True)
class AcceptanceFit:
    """What the acceptance process was fitted to, and how well it reproduces it."""

    origin: str  # where the measurement came from (a scenario key or a drafter entry)
    setting: tuple[int, int, int]  # (steps, topk, num_draft_tokens) it was measured at
    given_length: float  # the measured AL (0: rates alone)
    alphas: tuple[float, ...]  # the fitted per-slot alpha (one value: i.i.d.)
    fitted_length: float  # E[AL] of the fitted process at ``setting``
    #: A second, deeper measurement: its setting, AL and the fitted process's AL there
    #: (``deep_setting`` empty: one measurement); ``decay``: d of alpha_j = a·d^j.
    deep_setting: tuple[int, ...] = ()
    deep_length: float = 0.0
    deep_fitted_length: float = 0.0
    decay: float = 1.0
    #: The drafter whose documented default this is ("" when the scenario gave the numbers);
    #: a run drafting deeper than ``setting`` extrapolates it (a guardrail says so).
    default_of: str = ""

    def describe(self) -> str:
        """One line for the run's output."""
        steps, topk, drafts = self.setting
        shown = ", ".join(f"{a:.4f}" for a in self.alphas)
        given = f"given AL {self.given_length:.3f}, " if self.given_length else ""
        if not self.deep_setting:
            return (
                f"acceptance fitted to {self.origin} at (steps {steps}, topk {topk}, "
                f"num_draft_tokens {drafts}): {given}fitted AL {self.fitted_length:.3f}, "
                f"alpha {shown}"
            )
        deep = ", ".join(map(str, self.deep_setting))
        return (
            f"acceptance fitted to {self.origin} at ({steps}, {topk}, {drafts}) and ({deep}): "
            f"{given}fitted AL {self.fitted_length:.3f}; given AL {self.deep_length:.3f}, "
            f"fitted AL {self.deep_fitted_length:.3f}; alpha_j = {self.alphas[0]:.4f} x "
            f"{self.decay:.4f}^j"
        )

    def to_data(self) -> dict[str, object]:
        """The fit as JSON-ready values."""
        data: dict[str, object] = {
            "origin": self.origin,
            "setting": list(self.setting),
            "given_acceptance_length": self.given_length or None,
            "fitted_acceptance_length": self.fitted_length,
            "alphas": list(self.alphas),
        }
        if self.deep_setting:
            data["deep_setting"] = list(self.deep_setting)
            data["deep_acceptance_length"] = self.deep_length
            data["deep_fitted_acceptance_length"] = self.deep_fitted_length
            data["decay"] = self.decay
        return data


def conditional_rates(position_rates: tuple[float, ...]) -> tuple[float, ...]:
    """alpha_j = r_j / r_{j−1} from per-position acceptance rates r_1 ≥ r_2 ≥ … (module
    docstring); a slot after a rate of 0 gets 0. Raises FieldError (key
    ``position_acceptance``) when a rate exceeds the one before it.

    >>> conditional_rates((0.8, 0.4, 0.1))
    (0.8, 0.5, 0.25)
    """
    alphas, before = [], 1.0
    for j, rate in enumerate(position_rates):
        if rate > before:
            raise FieldError(
                "position_acceptance",
                f"non-increasing rates (a draft is accepted only after those before it); "
                f"position {j + 1} exceeds position {j}",
                list(position_rates),
            )
        alphas.append(rate / before if before > 0 else 0.0)
        before = rate
    return tuple(alphas)


def _length(alphas: tuple[float, ...], setting: tuple[int, int, int], rho: float) -> float:
    steps, topk, drafts = setting
    per_depth = [alphas[min(j, len(alphas) - 1)] for j in range(steps)]
    return expected_acceptance_length(per_depth, steps, topk, drafts, rho)


def decaying_alphas(
    first: tuple[tuple[int, int, int], float],
    deep: tuple[tuple[int, int, int], float],
    rank_decay: float,
    slots: int,
) -> tuple[tuple[float, ...], float]:
    """alpha_j = a·d^j for ``slots`` draft slots, and d, such that the tree at each of the two
    (setting, AL) measurements has that E[AL] (module docstring): for each d the a that fits
    ``first`` (a root find), and the d in (0, 1] whose a fits ``deep`` too. ``deep`` must be
    measured more steps deep. Raises ValueError when no d in (0, 1] fits: the deeper AL above
    what ``first``'s per-step acceptance held at every depth gives, or below what it gives
    with nothing accepted past ``first``'s depth.

    a = 0.8, d = 0.5: a chain accepts 1 + a at one step, 1 + a + a·ad + a·ad·ad² at three.

    >>> deep_al = 1 + 0.8 + 0.8 * 0.4 + 0.8 * 0.4 * 0.2
    >>> alphas, d = decaying_alphas(((1, 1, 2), 1.8), ((3, 1, 4), deep_al), 0.0, 4)
    >>> round(d, 6), [round(a, 6) for a in alphas]
    (0.5, [0.8, 0.4, 0.2, 0.1])
    """
    from scipy.optimize import brentq

    def _solve(f: Callable[[float], float], target: float, lo: float, hi: float) -> float:
        return float(brentq(lambda x: f(x) - target, lo, hi, xtol=FIT_TOLERANCE))

    (setting, length), (deep_setting, deep_length) = first, deep
    if deep_setting[0] <= setting[0]:
        raise ValueError(f"the deeper setting {deep_setting} has no more steps than {setting}")

    def per_slot(a: float, d: float) -> tuple[float, ...]:
        return tuple(a * d**j for j in range(max(slots, deep_setting[0])))

    def first_fit(d: float) -> float:
        return _solve(lambda a: _length(per_slot(a, d), setting, rank_decay), length, 0.0, 1.0)

    def deep_al(d: float) -> float:
        return _length(per_slot(first_fit(d), d), deep_setting, rank_decay)

    # The strongest decay the first measurement allows: below it even a = 1 falls short.
    floor = 1e-9
    if _length(per_slot(1.0, floor), setting, rank_decay) < length:
        floor = _solve(lambda d: _length(per_slot(1.0, d), setting, rank_decay), length, floor, 1.0)
    low, high = deep_al(floor), deep_al(1.0)
    if not low - FIT_TOLERANCE <= deep_length <= high + FIT_TOLERANCE:
        raise ValueError(
            f"acceptance length {deep_length} at {deep_setting} outside [{low:.4g}, {high:.4g}]"
        )
    if deep_length >= high - FIT_TOLERANCE:  # the first's acceptance at every depth
        d = 1.0
    elif deep_length <= low + FIT_TOLERANCE:
        d = floor
    else:
        d = _solve(deep_al, deep_length, floor, 1.0)
    return per_slot(first_fit(d), d)[:slots], d


def fit_engine_acceptance(
    config: AcceptanceConfig,
    setting: tuple[int, int, int],
    rank_decay: float,
    *,
    origin: str = "",
    length: float = 0.0,
    deep: tuple[tuple[int, int, int], float] | None = None,
    slots: int = 1,
) -> tuple[AcceptanceConfig, AcceptanceFit | None]:
    """``config`` with its process fitted to the engine's numbers (module docstring), and the
    fit; ``config`` unchanged and None when it gives neither.

    ``setting`` is (steps, topk, num_draft_tokens) the numbers were measured at
    (``num_draft_tokens`` 0: every node the tree grows); ``length`` and ``origin`` stand in for
    ``config.acceptance_length`` (a drafter's documented default); ``deep``, a second (setting,
    AL) measured deeper, makes the per-step acceptance decay with depth (:func:`decaying_alphas`,
    ``slots`` alphas). Raises FieldError naming the key for an AL impossible at that setting
    or rates that are not non-increasing.
    """
    al = config.acceptance_length or length
    rates = config.position_acceptance
    if not al and not rates:
        return config, None
    steps, topk, drafts = setting
    drafts = drafts or verified_drafts(steps, topk, 0) + 1
    setting = (steps, topk, drafts)
    key = "acceptance_length" if config.acceptance_length else "acceptance_setting"
    if rates:
        alphas = conditional_rates(rates)
        fitted = dataclasses.replace(config, process="per_position", alphas=alphas)
        origin = origin or "acceptance.position_acceptance"
    else:
        top = expected_acceptance_length(1.0, steps, topk, drafts, rank_decay)
        if not 1.0 <= al <= top:
            raise FieldError(
                key,
                f"an acceptance length in [1, {top:g}] (bonus token included) for (steps "
                f"{steps}, topk {topk}, num_draft_tokens {drafts})",
                al,
            )
        origin = origin or "acceptance.acceptance_length"
        if deep is not None:
            try:
                alphas, decay = decaying_alphas((setting, al), deep, rank_decay, slots)
            except ValueError as err:
                raise FieldError("deep_acceptance_length", str(err), deep[1]) from None
            fitted = dataclasses.replace(config, process="per_position", alphas=alphas)
        else:
            alphas = (fit_alpha(al, steps, topk, drafts, rank_decay),)
            fitted = dataclasses.replace(config, process="iid", alpha=alphas[0])
    fit = AcceptanceFit(
        origin=origin,
        setting=setting,
        given_length=al,
        alphas=alphas,
        fitted_length=_length(alphas, setting, rank_decay),
    )
    if deep is not None and not rates:
        fit = dataclasses.replace(
            fit,
            deep_setting=deep[0],
            deep_length=deep[1],
            deep_fitted_length=_length(alphas, deep[0], rank_decay),
            decay=decay,
        )
    return fitted, fit


__all__ = ["AcceptanceFit", "conditional_rates", "decaying_alphas", "fit_engine_acceptance"]
