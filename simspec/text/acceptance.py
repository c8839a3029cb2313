"""Acceptance processes: which draft tokens the target would accept, and the drafter's confidence.

For every committed position i of a request and every draft slot j = 1..K_max, the drafter
reports a confidence c_{i,j} and the target accepts the draft with probability c_{i,j}, so the
confidence is calibrated by construction (EAGLE-2 reports its draft confidences are well
calibrated; Li et al., arXiv 2406.16858). The confidence is Beta-distributed around the slot's
acceptance probability alpha with concentration kappa: c ~ Beta(alpha·kappa, (1 − alpha)·kappa),
hence P(accept) = E[c] = alpha. The match length m_i is the number of leading accepted slots.

An acceptance process gives alpha per (position, slot); the scenario's ``acceptance.process``
names one registered in :data:`ACCEPTANCE_PROCESSES`:

* ``iid``: alpha for every slot; tokens per verify with k drafts then average
  (1 − alpha^(k+1)) / (1 − alpha) (Leviathan et al. 2023).
* ``per_position``: alpha_j per draft slot (drafts further out are harder).
* ``bursty``: a two-state (easy/hard) Markov regime along the text, e.g. boiler-plate code vs
  novel logic, with alpha_easy / alpha_hard.
* ``trace``: no law at all: the accept/reject outcomes and confidences recorded from a real
  drafter run (``acceptance.trace``, replayed by :mod:`simspec.text.replay`).

A scenario may instead give what an engine prints, a mean acceptance length
(``acceptance_length`` at ``acceptance_setting``) or per-position acceptance rates
(``position_acceptance``): the loader fits ``iid`` or ``per_position`` to them
(:mod:`simspec.text.engine_acceptance`).

Adding a process is one frozen dataclass here, decorated with
``@ACCEPTANCE_PROCESSES.register("name")``, with a ``slot_alphas(positions, slots, rng)`` method
and its own checks in ``__post_init__`` (raising :class:`~simspec.errors.FieldError` with the
scenario key). Its fields are its parameters, read from the :class:`AcceptanceConfig` fields of
the same name, so a process with a new parameter needs that key added to the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simspec.errors import FieldError
from simspec.registry import Registry
from simspec.schema import param


class AcceptanceProcess(Protocol):
    """What an acceptance process does: the acceptance probability of every draft slot."""

    def slot_alphas(self, positions: int, slots: int, rng: np.random.Generator) -> np.ndarray:
        """Acceptance probability per (position, slot), shape (positions, slots)."""
        ...


#: Acceptance processes by scenario name (``acceptance.process``).
ACCEPTANCE_PROCESSES: Registry[AcceptanceProcess] = Registry("acceptance process")


@ACCEPTANCE_PROCESSES.register("iid")
@dataclass(frozen=True, slots=True)
class IidAcceptance:
    """The same alpha for every slot of every position (draws nothing)."""

    alpha: float

    def slot_alphas(self, positions: int, slots: int, rng: np.random.Generator) -> np.ndarray:
        """alpha everywhere."""
        return np.full((positions, slots), self.alpha)


@ACCEPTANCE_PROCESSES.register("per_position")
@dataclass(frozen=True, slots=True)
class PerPositionAcceptance:
    """alpha_j for draft slot j, the last value repeating (draws nothing)."""

    alphas: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.alphas:
            raise FieldError(
                "alphas", "a non-empty array for process = 'per_position'", list(self.alphas)
            )

    def slot_alphas(self, positions: int, slots: int, rng: np.random.Generator) -> np.ndarray:
        """The slot's alpha at every position."""
        per_slot = np.array([self.alphas[min(j, len(self.alphas) - 1)] for j in range(slots)])
        return np.broadcast_to(per_slot, (positions, slots)).copy()


@ACCEPTANCE_PROCESSES.register("bursty")
@dataclass(frozen=True, slots=True)
class BurstyAcceptance:
    """A two-state (easy/hard) Markov chain along positions, alpha per regime."""

    alpha_easy: float
    alpha_hard: float
    easy_to_hard: float
    hard_to_easy: float

    def __post_init__(self) -> None:
        if self.easy_to_hard + self.hard_to_easy == 0:
            raise FieldError("hard_to_easy", "easy_to_hard + hard_to_easy > 0", self.hard_to_easy)

    def slot_alphas(self, positions: int, slots: int, rng: np.random.Generator) -> np.ndarray:
        """The regime's alpha for every slot; one uniform draw per position.

        The chain starts from its stationary law P(easy) = hard_to_easy / (sum of the rates).
        """
        p_easy = self.hard_to_easy / (self.easy_to_hard + self.hard_to_easy)
        u = rng.random(positions)
        easy = np.empty(positions, dtype=bool)
        state = u[0] < p_easy
        for i in range(positions):
            if i:
                flip = self.easy_to_hard if state else self.hard_to_easy
                state = state != (u[i] < flip)
            easy[i] = state
        alpha = np.where(easy, self.alpha_easy, self.alpha_hard)
        return np.repeat(alpha[:, None], slots, axis=1)


#: ``acceptance.process`` that replays a recorded trace: not a law, so not in the registry.
TRACE_PROCESS = "trace"


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptanceConfig:
    """The acceptance process (scenario table ``[acceptance]``)."""

    process: str = param("iid", "acceptance process, a name registered in simspec.text.acceptance")
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
        8.0,
        "Beta concentration kappa of drafter confidences around alpha (about 1-100)",
        ge=0.01,
        le=1e4,
    )
    trace: str = param(
        "",
        "trace (.npz) with recorded draft outcomes, replayed by process = 'trace', relative "
        "to the folder of costs.profile (the scenario file's; the working folder without one)",
    )
    trace_wrap: bool = param(
        False,
        "reuse the trace's sequences (cyclically) when the workload needs more or longer "
        "requests than it holds (trace); false = refuse such a workload",
    )

    acceptance_length: float = param(
        0.0,
        "measured mean acceptance length, bonus token included, as SGLang ('accept len') and "
        "vLLM ('mean acceptance length') print it; sets alpha (process iid) by a fit at "
        "acceptance_setting (0 = not given)",
        ge=0,
        le=1025,
    )
    acceptance_setting: tuple[int, ...] = param(
        (),
        "(steps, topk, num_draft_tokens) acceptance_length was measured at (empty = the "
        "scenario's own: its policies' deepest chain, [speculation] topk and num_draft_tokens)",
        ge=0,
        le=1024,
    )
    position_acceptance: tuple[float, ...] = param(
        (),
        "measured per-position acceptance rates r_1, r_2, ... (share of drafts at position j "
        "accepted, as vLLM's spec_decode metrics count them); sets alphas (process "
        "per_position) to r_j / r_(j-1)",
        ge=0,
        le=1,
    )

    def __post_init__(self) -> None:
        if 0 < self.acceptance_length < 1:
            raise FieldError(
                "acceptance_length",
                "0 (not given) or at least 1 (the bonus token is always committed)",
                self.acceptance_length,
            )
        setting = self.acceptance_setting
        if setting and (len(setting) != 3 or min(setting[:2]) < 1 or setting[2] == 1):
            raise FieldError(
                "acceptance_setting",
                "[steps >= 1, topk >= 1, num_draft_tokens (0 = every node, else >= 2)]",
                list(setting),
            )
        if setting and not self.acceptance_length:
            raise FieldError(
                "acceptance_setting", "to be set only with acceptance_length", list(setting)
            )
        valid = [*ACCEPTANCE_PROCESSES.names(), TRACE_PROCESS]
        if self.process not in valid:
            raise FieldError("process", "one of " + ", ".join(map(repr, valid)), self.process)
        if self.process == TRACE_PROCESS and not self.trace:
            raise FieldError("trace", "a trace path (.npz) for process = 'trace'", self.trace)
        if self.process != TRACE_PROCESS:
            if self.trace:
                raise FieldError("trace", "to be set only with process = 'trace'", self.trace)
            self.acceptance_process()  # runs the process's own checks

    def acceptance_process(self) -> AcceptanceProcess:
        """The process named by ``process``, its parameters read from this table's fields."""
        name = self.process
        if name == TRACE_PROCESS:
            raise ValueError("process = 'trace' replays recorded outcomes; it has no law")
        params = {
            p: getattr(self, p) for p in ACCEPTANCE_PROCESSES.parameters(name) if hasattr(self, p)
        }
        return ACCEPTANCE_PROCESSES.create(name, **params)


def slot_alphas(
    config: AcceptanceConfig, positions: int, slots: int, rng: np.random.Generator
) -> np.ndarray:
    """Acceptance probability per (position, slot), shape (positions, slots)."""
    return config.acceptance_process().slot_alphas(positions, slots, rng)


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
