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
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from simspec.errors import FieldError
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.tree import expected_acceptance_length, fit_alpha, verified_drafts


@dataclass(frozen=True, slots=True)
class AcceptanceFit:
    """What the acceptance process was fitted to, and how well it reproduces it."""

    origin: str  # where the measurement came from (a scenario key or a drafter entry)
    setting: tuple[int, int, int]  # (steps, topk, num_draft_tokens) it was measured at
    given_length: float  # the measured AL (0: rates alone)
    alphas: tuple[float, ...]  # the fitted per-slot alpha (one value: i.i.d.)
    fitted_length: float  # E[AL] of the fitted process at ``setting``
    #: The drafter whose documented default this is ("" when the scenario gave the numbers);
    #: a run drafting deeper than ``setting`` extrapolates it (a guardrail says so).
    default_of: str = ""

    def describe(self) -> str:
        """One line for the run's output."""
        steps, topk, drafts = self.setting
        shown = ", ".join(f"{a:.4f}" for a in self.alphas)
        given = f"given AL {self.given_length:.3f}, " if self.given_length else ""
        return (
            f"acceptance fitted to {self.origin} at (steps {steps}, topk {topk}, "
            f"num_draft_tokens {drafts}): {given}fitted AL {self.fitted_length:.3f}, "
            f"alpha {shown}"
        )

    def to_data(self) -> dict[str, object]:
        """The fit as JSON-ready values."""
        return {
            "origin": self.origin,
            "setting": list(self.setting),
            "given_acceptance_length": self.given_length or None,
            "fitted_acceptance_length": self.fitted_length,
            "alphas": list(self.alphas),
        }


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


def fit_engine_acceptance(
    config: AcceptanceConfig,
    setting: tuple[int, int, int],
    rank_decay: float,
    *,
    origin: str = "",
    length: float = 0.0,
) -> tuple[AcceptanceConfig, AcceptanceFit | None]:
    """``config`` with its process fitted to the engine's numbers (module docstring), and the
    fit; ``config`` unchanged and None when it gives neither.

    ``setting`` is (steps, topk, num_draft_tokens) the numbers were measured at
    (``num_draft_tokens`` 0: every node the tree grows); ``length`` and ``origin`` stand in for
    ``config.acceptance_length`` (a drafter's documented default). Raises FieldError naming the
    key for an AL impossible at that setting or rates that are not non-increasing.
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
        alphas = (fit_alpha(al, steps, topk, drafts, rank_decay),)
        fitted = dataclasses.replace(config, process="iid", alpha=alphas[0])
        origin = origin or "acceptance.acceptance_length"
    fit = AcceptanceFit(
        origin=origin,
        setting=setting,
        given_length=al,
        alphas=alphas,
        fitted_length=_length(alphas, setting, rank_decay),
    )
    return fitted, fit


__all__ = ["AcceptanceFit", "conditional_rates", "fit_engine_acceptance"]
