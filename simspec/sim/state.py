"""The engine's request state as arrays: one entry per request, one array per field.

:func:`simspec.sim.schedule.schedule` advances every request of the batch by the same few array
operations per iteration instead of a Python loop over request objects ("struct of arrays"):

* :class:`RequestTable` holds what the text fixes for every request of a run, read once from the
  :class:`~simspec.text.reference.ReferenceSet`: prompt and output lengths, the KV bytes each
  request reserves, and every request's match lengths (and, for policies that read them, the
  drafter's confidences) concatenated into one flat array, so request ``r`` at state ``i`` is
  row ``offset[r] + i``. A whole batch's match lengths are then one gather.
* :class:`ActiveBatch` holds the mutable decode state of the admitted requests, in admission
  order: positions, counters and timestamps as arrays. Finished requests are removed with one
  boolean mask, which keeps the admission order of the rest.

Both are pure bookkeeping: every number they hold is what the per-request objects held before
(``tests/sim/test_state.py`` checks them against a direct computation from the reference set).
"""

from __future__ import annotations

import numpy as np

from simspec.physics.models import kv_bytes_for_context
from simspec.text.reference import ReferenceSet


class RequestTable:
    """Per-request constants of one run (see the module docstring), indexed by request id."""

    def __init__(
        self, refs: ReferenceSet, num_requests: int, max_draft_tokens: int, tensor: int = 1
    ):
        self.refs = refs
        sequences = [refs.sequence(r) for r in range(num_requests)]
        self.prompt = np.array([s.prompt_tokens for s in sequences], dtype=np.int64)
        self.output = np.array([s.output_tokens for s in sequences], dtype=np.int64)
        #: KV bytes reserved at admission: the whole output plus a full draft, as many copies as
        #: the ``tensor`` ranks hold (Python floats, so the running total adds and subtracts
        #: exactly the values it always did).
        self.kv_bytes = [
            kv_bytes_for_context(
                refs.shape, s.prompt_tokens + s.output_tokens + max_draft_tokens, tensor
            )
            for s in sequences
        ]
        lengths = np.array([len(s.match_lengths) for s in sequences], dtype=np.int64)
        self.offset = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.match = (
            np.concatenate([s.match_lengths for s in sequences]).astype(np.int64)
            if sequences
            else np.zeros(0, dtype=np.int64)
        )
        self._confidences: np.ndarray | None = None

    @property
    def confidences(self) -> np.ndarray:
        """Every request's confidence rows, stacked like ``match`` (built on first use)."""
        if self._confidences is None:
            rows = [self.refs.sequence(r).confidences for r in range(len(self.prompt))]
            self._confidences = np.concatenate(rows) if rows else np.zeros((0, 0))
        return self._confidences


class ActiveBatch:
    """The admitted requests' decode state, one array entry per request (admission order)."""

    INT_FIELDS: tuple[str, ...] = ("request_id", "row", "position", "prompt", "output")
    INT_FIELDS += ("steps", "drafted", "accepted")
    FLOAT_FIELDS = ("arrival_s", "first_token_s", "kv_bytes")

    def __init__(self) -> None:
        for name in self.INT_FIELDS:
            setattr(self, name, np.zeros(0, dtype=np.int64))
        for name in self.FLOAT_FIELDS:
            setattr(self, name, np.zeros(0, dtype=float))
        self.request_id: np.ndarray
        self.row: np.ndarray  # offset of the request's state 0 in the table's flat arrays
        self.position: np.ndarray
        self.prompt: np.ndarray
        self.output: np.ndarray
        self.steps: np.ndarray
        self.drafted: np.ndarray
        self.accepted: np.ndarray
        self.arrival_s: np.ndarray
        self.first_token_s: np.ndarray
        self.kv_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.request_id)

    def admit(self, table: RequestTable, ids: list[int], arrival_s: np.ndarray, now: float) -> None:
        """Append requests ``ids`` after their prefill (position 1, first token at ``now``)."""
        rid = np.array(ids, dtype=np.int64)
        n = len(ids)
        new = {
            "request_id": rid,
            "row": table.offset[rid],
            "position": np.ones(n, dtype=np.int64),
            "prompt": table.prompt[rid],
            "output": table.output[rid],
            "steps": np.zeros(n, dtype=np.int64),
            "drafted": np.zeros(n, dtype=np.int64),
            "accepted": np.zeros(n, dtype=np.int64),
            "arrival_s": np.array([arrival_s[r] for r in ids], dtype=float),
            "first_token_s": np.full(n, now, dtype=float),
            "kv_bytes": np.array([table.kv_bytes[r] for r in ids], dtype=float),
        }
        for name, values in new.items():
            setattr(self, name, np.concatenate([getattr(self, name), values]))

    def contexts(self) -> np.ndarray:
        """Prompt plus committed output tokens of every request."""
        return self.prompt + self.position

    def match_lengths(self, table: RequestTable) -> np.ndarray:
        """m_i of every request at its current state (one gather)."""
        return table.match[self.row + self.position]

    def confidence_rows(self, table: RequestTable, width: int) -> np.ndarray:
        """The first ``width`` draft-slot confidences of every request at its state."""
        return table.confidences[self.row + self.position, :width]

    def advance(self, committed: np.ndarray, accepted: np.ndarray, drafted: np.ndarray) -> None:
        """Commit ``committed`` (= ``accepted + 1``) tokens per request after a verify pass of
        ``drafted`` drafts."""
        self.position += committed
        self.steps += 1
        self.drafted += drafted
        self.accepted += accepted

    def keep(self, mask: np.ndarray) -> None:
        """Drop the requests where ``mask`` is False (the rest keep their order)."""
        for name in (*self.INT_FIELDS, *self.FLOAT_FIELDS):
            setattr(self, name, getattr(self, name)[mask])
