"""Acceptance processes: which draft tokens the target would accept, and the drafter's confidence.

For every committed position i of a request and every draft slot j = 1..K_max, the drafter
reports a confidence c_{i,j} and the target accepts the draft with probability c_{i,j}, so the
confidence is calibrated by construction (EAGLE-2 reports its draft confidences are well
calibrated; Li et al., arXiv 2406.16858). The confidence is Beta-distributed around the slot's
acceptance probability alpha with concentration kappa: c ~ Beta(alpha·kappa, (1 − alpha)·kappa),
hence P(accept) = E[c] = alpha. The match length m_i is the number of leading accepted slots.

Three processes give alpha:

* ``iid``: alpha for every slot; tokens per verify with k drafts then average
  (1 − alpha^(k+1)) / (1 − alpha) (Leviathan et al. 2023).
* ``per_position``: alpha_j per draft slot (drafts further out are harder).
* ``bursty``: a two-state (easy/hard) Markov regime along the text, e.g. boiler-plate code vs
  novel logic, with alpha_easy / alpha_hard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptanceConfig:
    """The acceptance process (scenario table ``[acceptance]``)."""

    process: str = param(
        "iid", "iid, per_position or bursty", choices=("iid", "per_position", "bursty")
    )
    alpha: float = param(0.7, "acceptance probability of every draft slot (iid)", ge=0, le=1)
    alphas: tuple[float, ...] = param(
        (),
        "acceptance probability of draft slots 1, 2, ... (per_position; the last repeats)",
        ge=0,
        le=1,
    )
    alpha_easy: float = param(0.9, "acceptance probability in the easy regime (bursty)", ge=0, le=1)
    alpha_hard: float = param(0.4, "acceptance probability in the hard regime (bursty)", ge=0, le=1)
    easy_to_hard: float = param(
        0.05, "per-position probability of leaving the easy regime", ge=0, le=1
    )
    hard_to_easy: float = param(
        0.10, "per-position probability of leaving the hard regime", ge=0, le=1
    )
    confidence_concentration: float = param(
        8.0, "Beta concentration kappa of drafter confidences around alpha", gt=0
    )

    def __post_init__(self) -> None:
        if self.process == "per_position" and not self.alphas:
            raise FieldError(
                "alphas", "a non-empty array for process = 'per_position'", list(self.alphas)
            )
        if self.process == "bursty" and self.easy_to_hard + self.hard_to_easy == 0:
            raise FieldError("hard_to_easy", "easy_to_hard + hard_to_easy > 0", self.hard_to_easy)


def slot_alphas(
    config: AcceptanceConfig, positions: int, slots: int, rng: np.random.Generator
) -> np.ndarray:
    """Acceptance probability per (position, slot), shape (positions, slots)."""
    if config.process == "iid":
        return np.full((positions, slots), config.alpha)
    if config.process == "per_position":
        per_slot = np.array([config.alphas[min(j, len(config.alphas) - 1)] for j in range(slots)])
        return np.broadcast_to(per_slot, (positions, slots)).copy()
    # Bursty: a two-state Markov chain along positions, started from its stationary law.
    p_easy = config.hard_to_easy / (config.easy_to_hard + config.hard_to_easy)
    u = rng.random(positions)
    easy = np.empty(positions, dtype=bool)
    state = u[0] < p_easy
    for i in range(positions):
        if i:
            flip = config.easy_to_hard if state else config.hard_to_easy
            state = state != (u[i] < flip)
        easy[i] = state
    alpha = np.where(easy, config.alpha_easy, config.alpha_hard)
    return np.repeat(alpha[:, None], slots, axis=1)


def draw_confidences(
    alpha: np.ndarray, concentration: float, rng: np.random.Generator
) -> np.ndarray:
    """Calibrated confidences c ~ Beta(alpha·kappa, (1 − alpha)·kappa), c = alpha at 0 or 1."""
    a = alpha * concentration
    b = (1.0 - alpha) * concentration
    inner = (a > 0) & (b > 0)
    c = alpha.astype(float).copy()
    c[inner] = rng.beta(a[inner], b[inner])
    return c


def match_lengths(accepted: np.ndarray) -> np.ndarray:
    """Leading run of accepted slots per row: (positions, slots) bool -> (positions,) int."""
    rejected = ~accepted
    first_reject = np.where(rejected.any(axis=1), rejected.argmax(axis=1), accepted.shape[1])
    return first_reject.astype(np.int64)


def draw_acceptance(
    config: AcceptanceConfig, positions: int, slots: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Confidences (positions, slots) and match lengths (positions,) for one request's text."""
    alpha = slot_alphas(config, positions, slots, rng)
    confidence = draw_confidences(alpha, config.confidence_concentration, rng)
    accepted = rng.random((positions, slots)) < confidence
    return confidence, match_lengths(accepted)
