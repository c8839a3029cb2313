"""Draft sections of a routing trace: the drafter's outcomes and the rejected drafts' routing.

A trace recorded with a drafter (``simspec record --drafter``) holds, besides the routing of the
true tokens (:mod:`simspec.routing.trace`), what happened in the verify pass that feeds token row
t (token x_t of its sequence) followed by the drafter's K greedy drafts d_1..d_K:

=======================  =========================  ===========================================
key                      shape / type               meaning
=======================  =========================  ===========================================
``draft_accepted``       bool (tokens, K)           d_j equals x_{t+j}, the target's own next
                                                    token: slot j is accepted once slots
                                                    1..j−1 are
``draft_confidences``    float (tokens, K), [0, 1]  the drafter's probability of its draft d_j
``rejected_expert_ids``  int (tokens, R, layers,    the target's routing of the r-th rejected
                         k_e)                       draft of that pass, d_{m_t + r} (m_t =
                                                    leading accepted slots); a (t, r) block of
                                                    −1 = not recorded (fewer were rejected)
=======================  =========================  ===========================================

The first two come together (the acceptance section), the third may come alone. Old traces have
none: they stay readable, and replay takes rejected drafts from a model fitted to the true tokens
(:mod:`simspec.routing.replay`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import InputError

ACCEPTED, CONFIDENCES, REJECTED = "draft_accepted", "draft_confidences", "rejected_expert_ids"


@dataclass(frozen=True, slots=True)
class DraftSections:
    """The optional draft sections of a trace (module docstring); None when absent."""

    accepted: np.ndarray | None = None  # bool (tokens, K)
    confidences: np.ndarray | None = None  # float (tokens, K)
    rejected_ids: np.ndarray | None = None  # int (tokens, R, layers, k_e), −1 = not recorded

    @property
    def draft_slots(self) -> int:
        """K, draft slots recorded per token (0 without the acceptance section)."""
        return 0 if self.accepted is None else int(self.accepted.shape[1])

    def arrays(self) -> dict[str, np.ndarray]:
        """The sections as arrays to save (compact dtypes)."""
        out: dict[str, np.ndarray] = {}
        if self.accepted is not None and self.confidences is not None:
            out[ACCEPTED] = self.accepted.astype(bool)
            out[CONFIDENCES] = self.confidences.astype(np.float32)
        if self.rejected_ids is not None:  # −1 needs a signed type: int8 up to 127 experts
            small = self.rejected_ids.size == 0 or int(self.rejected_ids.max()) < 127
            out[REJECTED] = self.rejected_ids.astype(np.int8 if small else np.int16)
        return out


def _shape_error(source: str, key: str, expected: str, value: np.ndarray) -> InputError:
    return InputError(source, key, expected, f"a {value.dtype} array of shape {value.shape}")


def parse_draft_sections(
    data: np.lib.npyio.NpzFile, source: str, ids: np.ndarray, num_experts: int
) -> DraftSections:
    """Validated draft sections of an open trace archive whose true-token ids are ``ids``.

    Raises
    ------
    InputError
        A section of the wrong shape or type, only one of the acceptance pair, confidences
        outside [0, 1], rejected ids out of range, repeated, or partly recorded in a block.
    """
    tokens, layers, k = ids.shape
    accepted = confidences = rejected = None
    present = [key for key in (ACCEPTED, CONFIDENCES) if key in data.files]
    if len(present) == 1:
        other = CONFIDENCES if present[0] == ACCEPTED else ACCEPTED
        raise InputError(source, other, f"an array alongside {present[0]}", "nothing")
    if present:
        accepted, confidences = data[ACCEPTED], data[CONFIDENCES]
        if accepted.dtype != bool or accepted.ndim != 2 or accepted.shape[0] != tokens:
            raise _shape_error(source, ACCEPTED, f"a bool array ({tokens}, K)", accepted)
        if accepted.shape[1] == 0:
            raise _shape_error(source, ACCEPTED, "at least one draft slot (K >= 1)", accepted)
        if confidences.dtype.kind != "f" or confidences.shape != accepted.shape:
            raise _shape_error(
                source, CONFIDENCES, f"a float array of shape {accepted.shape}", confidences
            )
        confidences = confidences.astype(float)
        bad = ~((confidences >= 0) & (confidences <= 1))
        if bad.any():
            t, j = np.argwhere(bad)[0]
            raise InputError(
                source, CONFIDENCES, "probabilities in [0, 1]", f"{confidences[t, j]} at [{t}, {j}]"
            )
    if REJECTED in data.files:
        rejected = data[REJECTED]
        if rejected.dtype.kind not in "iu" or rejected.ndim != 4 or rejected.shape[0] != tokens:
            raise _shape_error(
                source, REJECTED, f"an integer array ({tokens}, R, {layers}, {k})", rejected
            )
        if rejected.shape[2:] != (layers, k) or rejected.shape[1] == 0:
            raise _shape_error(
                source, REJECTED, f"an integer array ({tokens}, R, {layers}, {k})", rejected
            )
        rejected = rejected.astype(np.int64)
        _check_rejected(rejected, num_experts, source)
    return DraftSections(accepted, confidences, rejected)


def _check_rejected(rejected: np.ndarray, num_experts: int, source: str) -> None:
    """Every (token, r) block is all −1 or k_e distinct ids in [0, N) in every layer."""
    missing = rejected < 0
    block = missing.reshape(*rejected.shape[:2], -1)
    partial = block.any(axis=2) & ~block.all(axis=2)
    bad = (rejected >= num_experts) | ((rejected < 0) & (rejected != -1))
    if partial.any() or bad.any():
        t, r = np.argwhere(partial | bad.reshape(*rejected.shape[:2], -1).any(axis=2))[0]
        raise InputError(
            source,
            REJECTED,
            f"ids in [0, {num_experts}) in every layer, or −1 in every layer (not recorded)",
            f"{rejected[t, r].tolist()[:4]}... at token {t}, rejected draft {r + 1}",
        )
    ordered = np.sort(rejected, axis=3)
    repeat = ((ordered[..., 1:] == ordered[..., :-1]) & (ordered[..., 1:] >= 0)).any(axis=(2, 3))
    if repeat.any():
        t, r = np.argwhere(repeat)[0]
        raise InputError(
            source,
            REJECTED,
            "k_e distinct experts per layer",
            f"a repeated id at token {t}, rejected draft {r + 1}",
        )
