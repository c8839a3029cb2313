"""What a run records: one row per decode step, per prefill pass and per finished request.

Steps are the bulk of a run's records (one per verify pass: ~10^5 in a long batch-1 run), so
:class:`StepLog` keeps them as typed columns (``array.array``, 8 bytes a value) and hands out a
:class:`StepRecord` only when one is read. Besides each step's totals it keeps which requests
took part and at which position (``members``), so the analysis can price what the step would
have cost without speculation (:func:`simspec.analysis.metrics.plain_decode_s`) without the
engine doing it while it runs.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, overload

import numpy as np

from simspec.costs.offload import LoadedPass
from simspec.params import PassCost


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One decode iteration: the draft phase and its verify pass."""

    start_s: float
    batch_size: int
    fed_tokens: int  # Σ_b (k_b + 1)
    drafted: int  # Σ_b k_b
    accepted: int  # Σ_b min(k_b, m_b)
    draft_s: float
    verify: PassCost
    unique_experts: float  # mean over MoE layers of distinct routed experts in the pass
    probes: int = 0  # draft steps run only to read a confidence the policy declined on
    speculation_overhead_s: float = 0.0  # verify bookkeeping + drafter extend (engine presets)

    @property
    def end_s(self) -> float:
        """When the step's verify pass (and its bookkeeping) ended."""
        return self.start_s + self.draft_s + self.verify.total_s + self.speculation_overhead_s


#: The verify pass's time components: :class:`PassCost`'s fields in seconds, in its order.
PASS_PARTS = tuple(f.name for f in fields(PassCost) if f.name.endswith("_s"))
_FLOATS = ("start_s", "draft_s", *PASS_PARTS, "unique", "speculation_overhead_s")
_INTS = ("batch_size", "fed_tokens", "drafted", "accepted", "probes", "fallback_terms")


class StepLog(Sequence[StepRecord]):
    """The steps of one run as columns; indexing or iterating gives :class:`StepRecord` rows."""

    #: Steps held as tuples before they are moved into the columns, at most this many.
    PENDING = 4096

    def __init__(self) -> None:
        self._floats = {name: array("d") for name in _FLOATS}
        self._ints = {name: array("q") for name in _INTS}
        self._request_id = array("q")  # every step's requests, concatenated
        self._position = array("q")  # their positions (committed output tokens) at the step
        self._pending: list[tuple[Any, ...]] = []  # appended, not yet in the columns

    def append(
        self,
        start_s: float,
        fed_tokens: int,
        drafted: int,
        accepted: int,
        draft_s: float,
        verify: PassCost,
        unique_experts: float,
        probes: int,
        speculation_overhead_s: float,
        request_id: np.ndarray,
        position: np.ndarray,
    ) -> None:
        """Add one step (the fields of :class:`StepRecord`) whose batch was requests
        ``request_id`` (int64) at ``position`` (int64); its batch size is their number."""
        self._pending.append(
            (
                start_s,
                draft_s,
                verify,
                unique_experts,
                speculation_overhead_s,
                len(request_id),
                fed_tokens,
                drafted,
                accepted,
                probes,
                request_id.tobytes(),
                position.tobytes(),
            )
        )
        if len(self._pending) >= self.PENDING:
            self._flush()

    def extend(
        self,
        start_s: Sequence[float],
        fed_tokens: Sequence[int],
        drafted: Sequence[int],
        accepted: Sequence[int],
        draft_s: Sequence[float],
        verify: Sequence[Sequence[Any]],
        unique_experts: Sequence[float],
        probes: Sequence[int],
        speculation_overhead_s: Sequence[float],
        batch_size: Sequence[int],
        request_id: bytes,
        position: bytes,
    ) -> None:
        """Add many steps at once, one entry of each sequence per step (the fields of
        :func:`append`; ``verify`` as its columns: :data:`PASS_PARTS` in order, then
        ``fallback_terms``); ``request_id`` and ``position``: every step's int64
        values concatenated, ``batch_size[s]`` of them for step s."""
        self._flush()
        f, n = self._floats, self._ints
        f["start_s"].extend(start_s)
        f["draft_s"].extend(draft_s)
        for name, column in zip(PASS_PARTS, verify[:-1], strict=True):
            f[name].extend(column)
        f["unique"].extend(unique_experts)
        f["speculation_overhead_s"].extend(speculation_overhead_s)
        n["batch_size"].extend(batch_size)
        n["fed_tokens"].extend(fed_tokens)
        n["drafted"].extend(drafted)
        n["accepted"].extend(accepted)
        n["probes"].extend(probes)
        n["fallback_terms"].extend(verify[-1])
        self._request_id.frombytes(request_id)
        self._position.frombytes(position)

    def _flush(self) -> None:
        """Move the pending steps into the columns."""
        pending = self._pending
        if not pending:
            return
        start, draft, verify, unique, extra, batch, fed, drafted, accepted, probes, ids, pos = zip(
            *pending, strict=True
        )
        columns = (
            *([getattr(v, name) for v in verify] for name in PASS_PARTS),
            [v.fallback_terms for v in verify],
        )
        pending.clear()
        self.extend(
            start,
            fed,
            drafted,
            accepted,
            draft,
            columns,
            unique,
            probes,
            extra,
            batch,
            b"".join(ids),
            b"".join(pos),
        )

    def __len__(self) -> int:
        return len(self._ints["batch_size"]) + len(self._pending)

    @overload
    def __getitem__(self, index: int) -> StepRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepRecord]: ...

    def __getitem__(self, index: int | slice) -> StepRecord | list[StepRecord]:
        self._flush()
        if isinstance(index, slice):
            return [self[j] for j in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("step index out of range")
        f, n = self._floats, self._ints
        verify = PassCost(
            **{name: f[name][index] for name in PASS_PARTS},
            fallback_terms=n["fallback_terms"][index],
        )
        return StepRecord(
            f["start_s"][index],
            n["batch_size"][index],
            n["fed_tokens"][index],
            n["drafted"][index],
            n["accepted"][index],
            f["draft_s"][index],
            verify,
            f["unique"][index],
            n["probes"][index],
            f["speculation_overhead_s"][index],
        )

    def __iter__(self) -> Iterator[StepRecord]:
        return (self[j] for j in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepLog):
            return NotImplemented
        self._flush()
        other._flush()
        return (
            self._floats == other._floats
            and self._ints == other._ints
            and self._request_id == other._request_id
            and self._position == other._position
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StepLog({len(self)} steps)"

    def column(self, name: str) -> np.ndarray:
        """One field of every step, in step order: a :class:`StepRecord` field name (or one of
        ``verify``'s: :data:`PASS_PARTS`, ``fallback_terms``; ``unique_experts``)."""
        self._flush()
        key = "unique" if name == "unique_experts" else name
        if key in self._floats:
            return np.array(self._floats[key], dtype=float)
        if key in self._ints:
            return np.array(self._ints[key], dtype=np.int64)
        raise KeyError(name)

    def members(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(offset, request_id, position)``: step s's batch is requests
        ``request_id[offset[s]:offset[s + 1]]`` at ``position[...]`` (admission order)."""
        sizes = self.column("batch_size")  # (flushes)
        offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        ids = np.array(self._request_id, dtype=np.int64)
        return offset, ids, np.array(self._position, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class PrefillRecord:
    """One prefill pass over newly admitted prompts."""

    start_s: float
    requests: int
    prompt_tokens: int
    cost: PassCost


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One finished request."""

    request_id: int
    arrival_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    committed: int  # output tokens committed (must equal output_tokens)
    steps: int  # verify passes it took part in
    drafted: int
    accepted: int


@dataclass
class OffloadLog:
    """The host link's work when experts are offloaded: one entry per pass (decode steps and
    prefills, in time order); the pass's start, its experts needed, missed and sent over the
    link (Σ over layers), the link's busy time, when its first copy started (from the pass's
    start; < 0 during the draft phase) and the time the pass waited on its loads."""

    start_s: array = field(default_factory=lambda: array("d"))
    needed: array = field(default_factory=lambda: array("d"))
    missed: array = field(default_factory=lambda: array("d"))
    copied: array = field(default_factory=lambda: array("d"))
    copied_bytes: array = field(default_factory=lambda: array("d"))
    copy_s: array = field(default_factory=lambda: array("d"))
    link_start_s: array = field(default_factory=lambda: array("d"))
    exposed_s: array = field(default_factory=lambda: array("d"))
    decode: array = field(default_factory=lambda: array("b"))  # 1: a decode step, 0: prefill

    def append(self, start_s: float, loaded: LoadedPass, decode: bool) -> None:
        """Record one pass starting at ``start_s`` (the verify pass's start for a step)."""
        pipe = loaded.pipeline
        self.start_s.append(start_s)
        self.needed.append(loaded.needed)
        self.missed.append(loaded.missed)
        self.copied.append(loaded.copied)
        self.copied_bytes.append(loaded.copied_bytes)
        self.copy_s.append(pipe.copy_s)
        self.link_start_s.append(pipe.link_start_s)
        self.exposed_s.append(pipe.exposed_s)
        self.decode.append(1 if decode else 0)


@dataclass
class RunLog:
    """Everything one simulation run recorded."""

    steps: StepLog = field(default_factory=StepLog)
    prefills: list[PrefillRecord] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)
    offload: OffloadLog | None = None  # experts offloaded: the link's work

    def mean_tpot_s(self) -> float:
        """Mean time per output token after the first, over the finished requests."""
        tpots = [(r.finish_s - r.first_token_s) / (r.output_tokens - 1) for r in self.requests]
        return float(np.mean(tpots)) if tpots else 0.0
