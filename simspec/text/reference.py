"""Reference sequences: what the text fixes before any policy runs (common random numbers).

For request r with L output tokens y_1..y_L, state i means "y_1..y_i committed" (the prefill
commits y_1). At state i the request feeds y_i plus k drafts. The reference data are:

* ``match_lengths[i]`` = m_i, leading drafts the target would accept, capped at the drafter's
  K_max and at L − i − 1 (so every request commits exactly L tokens);
* ``confidences[i, j-1]`` = the drafter's confidence for draft slot j;
* the routing of the true token y_t (``true[t]``, a Markov chain along the text) and of the r-th
  rejected draft at state i (``rejected[r-1][i]``), which continues the chain from the last
  accepted token y_{i+m_i} with its own draws: its experts are loaded even though it is
  discarded (the counterfactual MoE cost of Amankulov & Mamatin, arXiv 2609.22156).

A verify pass at state i with k drafts therefore feeds the routing of y_i..y_{i+min(k,m_i)} and of
the first k − m_i rejected drafts: :meth:`ReferenceSet.fed_routing`. Every policy, and the oracle,
reads the same numbers. Each quantity comes from its own named stream (``simspec.rng``); routing
is generated in blocks of requests, lazily, and rejected depth r has its own stream, so asking for
deeper drafts never changes shallower ones. When every policy's budget is known to stay within
a bound (``draft_bound``), each depth keeps only the states that can feed it
(:mod:`~simspec.text.rejected_levels`: ~57 % of the ids for fixed k <= 4 at acceptance 0.7); a
read beyond draws the block again with every state kept. With a multi-lag overlap profile a
rejected draft conditions on the D tokens before it (true tokens up to y_{i+m_i}, then shallower
rejected drafts).

In ``routing.mode = "analytic"`` nothing is sampled for costs: the unique experts of a pass are
the max-entropy expectation of :class:`~simspec.routing.predictor.UniqueExpertPredictor` for its B
sequences of
k_b + 1 tokens, of which min(k_b, m_b) + 1 are true tokens — the same statistics (popularity,
overlap profiles) the Monte-Carlo sampler realises.

With ``routing.mode = "trace"`` / ``acceptance.process = "trace"`` they are replayed from a
recorded trace the loader read (:mod:`simspec.routing.replay`, :mod:`simspec.text.replay`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simspec import rng as rngs
from simspec.errors import InputError
from simspec.physics.models import ModelShape
from simspec.routing.config import RoutingConfig
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.popularity import draw_inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.reuse import ReuseSampler
from simspec.routing.sets import union_sizes
from simspec.routing.trace import RoutingTrace
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.mc_routing import continue_maxent, continue_reuse, gather_pass
from simspec.text.rejected_levels import BlockInputs, RejectedStore
from simspec.text.replay import TraceReplay
from simspec.text.workload import WorkloadConfig, draw_lengths

BLOCK_REQUESTS = 64  # requests whose routing is generated together


@dataclass(frozen=True, slots=True)
class ReferenceSequence:
    """One request's text, as far as speculation is concerned (see module docstring)."""

    request_id: int
    prompt_tokens: int
    output_tokens: int
    match_lengths: np.ndarray  # (L,), index = state i; index 0 unused
    confidences: np.ndarray  # (L, K_max)


class ReferenceSet:
    """The reference sequences of every request of a scenario, built lazily and cached."""

    def __init__(
        self,
        *,
        seed: int,
        workload: WorkloadConfig,
        acceptance: AcceptanceConfig,
        routing: RoutingConfig,
        shape: ModelShape,
        max_draft_tokens: int,
        routing_trace: RoutingTrace | None = None,
        acceptance_trace: RoutingTrace | None = None,
        draft_bound: int | None = None,
    ):
        self.seed = seed
        self.workload = workload
        self.acceptance = acceptance
        self.routing = routing
        self.shape = shape
        self.max_draft_tokens = max_draft_tokens
        self._sequences: dict[int, ReferenceSequence] = {}
        self._true: dict[int, np.ndarray] = {}
        #: The most drafts a chain reader feeds at one state (every policy's budget cap), if
        #: known and below K_max: rejected depths then keep only the rows it can read.
        self.draft_bound = (
            draft_bound if draft_bound is not None and draft_bound < max_draft_tokens else None
        )
        self._rejected = RejectedStore(
            self._rejected_inputs,
            self._draw_rejected,
            self.draft_bound,
            self._draft_memory,
            cap=max_draft_tokens,
        )
        self.num_layers = shape.num_moe_layers
        self.num_experts = shape.num_experts
        self._sampler: ReuseSampler | None = None
        self._maxent: MaxEntSampler | None = None
        self._predictor: UniqueExpertPredictor | None = None
        self._trace = TraceReplay(routing_trace, acceptance_trace, routing, acceptance)
        #: Inclusion probability of each expert per MoE layer, (layers, N).
        self.inclusion_probabilities = np.zeros((self.num_layers, self.num_experts))
        if self.num_layers and routing.replays_trace:  # the trace is the model: nothing to fit
            self.inclusion_probabilities = self._trace.inclusion_or(self.inclusion_probabilities)
        elif self.num_layers:
            k = shape.experts_per_token
            stream = rngs.stream(seed, "popularity")
            if routing.uses_reuse_sampler():
                self._sampler = ReuseSampler(self.num_experts, k)
                self.inclusion_probabilities = np.full(
                    (self.num_layers, self.num_experts), k / self.num_experts
                )
            else:
                self.inclusion_probabilities = draw_inclusion_probabilities(
                    routing, self.num_layers, self.num_experts, k, stream
                )
            if routing.mode == "analytic":
                self._predictor = self._build_predictor()
            elif self._sampler is None:
                self._maxent = self._build_maxent()

    # -- statistics -> models -----------------------------------------------------------------
    def _profiles(self) -> tuple[np.ndarray, np.ndarray | None]:
        true, draft = self.routing.layer_profiles(self.num_layers)
        if self.routing.layer_overlap_scale is None:  # pooled statistics: one row
            return true[0], None if draft is None else draft[0]
        return true, draft

    def _statistics_error(self, err: ValueError) -> InputError:
        key = "overlaps" if self.routing.overlaps is not None else "overlap"
        return InputError(
            "", f"routing.{key}", "overlap statistics that a top-k router can have", str(err)
        )

    def _build_predictor(self) -> UniqueExpertPredictor:
        true, draft = self._profiles()
        try:
            predictor = UniqueExpertPredictor(self.inclusion_probabilities, true, draft)
            predictor.log_silent(self.max_draft_tokens + 1)  # fails now if inconsistent
        except ValueError as err:
            raise self._statistics_error(err) from None
        return predictor

    def _build_maxent(self) -> MaxEntSampler:
        true, draft = self.routing.layer_profiles(self.num_layers)
        try:
            return MaxEntSampler(self.inclusion_probabilities, true, draft)
        except ValueError as err:
            raise self._statistics_error(err) from None

    @property
    def predictor(self) -> UniqueExpertPredictor:
        """The analytic unique-expert predictor of these statistics (built on first use)."""
        if self._predictor is None:
            self._predictor = self._build_predictor()
        return self._predictor

    def __len__(self) -> int:
        return self.workload.num_requests

    def sequence(self, request_id: int) -> ReferenceSequence:
        """Lengths, confidences and match lengths of request ``request_id``."""
        seq = self._sequences.get(request_id)
        if seq is None:
            prompt, output = draw_lengths(
                self.workload, rngs.stream(self.seed, "workload", request_id)
            )
            confidence, match = self._trace.draw_acceptance(  # or replay a recorded run's
                request_id,
                self.acceptance,
                output,
                self.max_draft_tokens,
                rngs.stream(self.seed, "acceptance", request_id),
            )
            cap = np.maximum(output - 1 - np.arange(output), 0)
            match = np.minimum(match, cap)
            match[0] = 0
            seq = ReferenceSequence(request_id, prompt, output, match, confidence)
            self._sequences[request_id] = seq
        return seq

    # -- routing -----------------------------------------------------------------------------
    def _ensure_sampler(self) -> None:
        if self._sampler is None and self._maxent is None:
            self._maxent = self._trace.fitted_sampler() or self._build_maxent()

    def _block_true(self, block: int) -> np.ndarray:
        masks = self._true.get(block)
        if masks is None and self._trace.routing is not None:
            ids = range(block * BLOCK_REQUESTS, min((block + 1) * BLOCK_REQUESTS, len(self)))
            masks = self._true[block] = self._trace.true_block(ids, self.sequence)
        if masks is None:
            self._ensure_sampler()
            ids = range(block * BLOCK_REQUESTS, min((block + 1) * BLOCK_REQUESTS, len(self)))
            length = max(self.sequence(r).output_tokens for r in ids)
            rng = rngs.stream(self.seed, "routing", block)
            if self._maxent is not None:
                masks = self._maxent.sample_sequences(rng, len(ids), length)
            else:
                assert self._sampler is not None
                masks = self._sampler.sample_sequences(
                    rng, len(ids), self.num_layers, length, self._reuse_overlap(true=True)
                )
            self._true[block] = masks
        return masks

    def _reuse_overlap(self, *, true: bool) -> float | np.ndarray | None:
        """Overlap of the reuse sampler: a number, or one per chain with a per-layer scale."""
        value = self.routing.true_profile[0] if self.routing.true_profile else None
        if not true:
            value = self.routing.rejected_overlap
        scale = self.routing.layer_scale(self.num_layers)
        if value is None or scale is None:
            return value
        return np.minimum(value * scale, 1.0)

    def _rejected_inputs(self, block: int) -> BlockInputs:
        """What drawing ``block``'s rejected depths reads (:class:`BlockInputs`)."""
        true = self._block_true(block)
        nseq, length = true.shape[:2]
        matches = np.zeros((nseq, length), dtype=np.int64)
        outputs = np.zeros(nseq, dtype=np.int64)
        for q in range(nseq):
            seq = self.sequence(block * BLOCK_REQUESTS + q)
            outputs[q] = seq.output_tokens
            matches[q, : outputs[q]] = seq.match_lengths
        # Predecessor of the first rejected draft at state i: y_{i+m_i}.
        anchor = np.where(np.arange(length) < outputs[:, None], np.arange(length) + matches, 0)
        return BlockInputs(true, matches, outputs, anchor)

    def _draft_memory(self) -> int:
        """How many shallower depths a rejected draft conditions on: 1 for the reuse sampler,
        the max-entropy sampler's D, every depth (a large number) for replayed drafts."""
        if self._trace.routing is not None:
            return 1 << 30
        return 1 if self._maxent is None else max(1, self._maxent.depth)

    def _draw_rejected(
        self,
        block: int,
        level: int,
        inputs: BlockInputs,
        full: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """Rejected depth ``level`` + 1 of ``block``, from its own stream, after the shallower
        depths ``full``: every row, or at least the rows ``keep`` marks."""
        rng = rngs.stream(self.seed, "rejected_routing", block, level)
        true, anchor = inputs.true, inputs.anchor
        if self._trace.routing is not None:  # recorded drafts, the rest from a fitted model
            first, nseq = block * BLOCK_REQUESTS, true.shape[0]
            draw = functools.partial(self._continue_maxent, true, anchor, full, rng)
            return self._trace.rejected(first, nseq, self.sequence, level, draw)
        if self._maxent is not None:
            return self._continue_maxent(true, anchor, full, rng, keep)
        if level == 0:  # y_{i+m_i} at every state i: one gather (take_along_axis would build
            # (requests, length, layers, k_e) index arrays)
            previous = true[np.arange(true.shape[0])[:, None], anchor]
        else:
            previous = full[level - 1]
        assert self._sampler is not None
        overlap = self._reuse_overlap(true=False)
        return continue_reuse(self._sampler, previous, overlap, rng, keep)

    def _continue_maxent(
        self,
        true: np.ndarray,
        anchor: np.ndarray,
        levels: list[np.ndarray],
        rng: np.random.Generator,
        keep: np.ndarray | None = None,
    ) -> np.ndarray:
        """Rejected drafts of the next level r, each conditioned on the D tokens before it
        (``levels``: the shallower depths), at least at the states ``keep`` marks."""
        self._ensure_sampler()  # replayed traces fit theirs on first use
        assert self._maxent is not None
        return continue_maxent(self._maxent, true, anchor, levels, rng, self.num_experts, keep)

    def fed_routing(
        self, request_id: int, state: int, draft_tokens: int, accepted: int | None = None
    ) -> np.ndarray:
        """Expert ids of the k + 1 tokens fed at ``state`` with k = ``draft_tokens``.

        ``accepted`` overrides the accepted drafts min(k, m_i) (a draft tree accepts its own
        count: the nodes off its accepted path are fed as the rejected drafts of the chain).
        Returns ids (k + 1, num_moe_layers, k_e) (uint8 up to 256 experts, else int16,
        :func:`~simspec.routing.sets.id_dtype`); zero layers for a dense model.
        """
        seq = self.sequence(request_id)
        if not self.num_layers:
            return np.zeros((draft_tokens + 1, 0, 0), dtype=np.int16)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q]
        if accepted is None:
            accepted = min(draft_tokens, int(seq.match_lengths[state]))
        parts = [true[state : state + accepted + 1]]
        rejected = draft_tokens - accepted
        if rejected:
            ids = [self._rejected.ids(block, r, q, state) for r in range(1, rejected + 1)]
            parts.append(np.stack(ids))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def state_routing(self, request_id: int, draft_tokens: int) -> np.ndarray:
        """``fed_routing(request_id, i, draft_tokens)`` for every state i at once, stacked:
        (L, k + 1, num_moe_layers, k_e), one gather per rejected depth (the oracle's tables)."""
        seq = self.sequence(request_id)
        states = np.arange(seq.output_tokens)
        if not self.num_layers:
            return np.zeros((len(states), draft_tokens + 1, 0, 0), dtype=np.int16)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q]
        depth = (
            np.arange(draft_tokens + 1)[None, :]
            - np.minimum(draft_tokens, seq.match_lengths[states])[:, None]
        )  # <= 0: a true token; r > 0: the rejected draft of depth r
        position = np.minimum(states[:, None] + np.arange(draft_tokens + 1), len(true) - 1)
        out = true[position]
        deepest = int(depth.max(initial=0))
        for r in range(1, deepest + 1):
            state, j = np.nonzero(depth == r)
            out[state, j] = self._rejected.ids(block, r, q, state)
        return out

    def state_tokens(
        self, request_id: int, draft_tokens: int
    ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """What :meth:`state_routing` gathers, before gathering (views where every row is
        stored): the ids of the true tokens (L, layers, k_e) and of the rejected drafts of
        depth r = 1..deepest ((L, layers, k_e) each, row i: state i; rows no pass feeds may
        hold anything), and the accepted drafts min(k, m_i) per state
        (L,), from which :func:`~simspec.routing.sets.window_union_sizes` counts every state's
        unions (each stored token read once)."""
        seq = self.sequence(request_id)
        last = seq.output_tokens
        accepted = np.minimum(draft_tokens, seq.match_lengths).astype(np.int64)
        block, q = divmod(request_id, BLOCK_REQUESTS)
        true = self._block_true(block)[q, :last]
        rejected = draft_tokens - accepted  # rejected drafts fed at each state
        return true, self._rejected.states(block, q, last, rejected), accepted

    def pass_unique_experts(
        self,
        fed: list[tuple[int, int, int]] | np.ndarray,
        accepted: Sequence[int] | np.ndarray | None = None,
    ) -> np.ndarray:
        """Distinct routed experts per MoE layer of one pass.

        ``fed`` lists, for every request in the pass, (request id, state, draft tokens) (or is
        an int array (B, 3)). The pass loads, per layer, the union of the experts of all the
        tokens it feeds. Returns a float array (num_moe_layers,); empty for a dense model. In
        analytic routing mode it is the max-entropy expectation (read-only, cached per batch
        composition). ``accepted``, one per request, overrides the accepted drafts of each (a
        draft tree's accepted path; the engine also passes a chain's min(k, m_i) to save lookups).
        """
        if not self.num_layers:
            return np.zeros(0)
        triples = np.asarray(fed, dtype=np.int64).reshape(-1, 3)
        if self.routing.mode == "analytic":
            if accepted is None:  # a chain's min(k, m_i)
                rows = triples.tolist()
                accepted = [min(k, int(self.sequence(r).match_lengths[i])) for r, i, k in rows]
            return self.expected_unique(triples[:, 2] + 1, np.asarray(accepted, dtype=np.int64) + 1)
        routing = self._pass_routing(fed if isinstance(fed, list) else fed.tolist(), accepted)
        return union_sizes(routing, self.num_experts).astype(float)

    def expected_unique(self, fed: np.ndarray, true: np.ndarray) -> np.ndarray:
        """Analytic mode: :meth:`pass_unique_experts` of a pass whose request b feeds ``fed[b]``
        tokens (k_b + 1), ``true[b]`` of them true (a_b + 1): all the expectation reads."""
        if not self.num_layers:
            return np.zeros(0)
        try:
            return self.predictor.expected_unique(fed, true)
        except ValueError as err:
            raise self._statistics_error(err) from None

    def _pass_routing(
        self,
        fed: list[tuple[int, int, int]] | np.ndarray,
        accepted: Sequence[int] | np.ndarray | None,
    ) -> np.ndarray:
        """Every token a pass feeds (its requests' :meth:`fed_routing`, in another order),
        gathered per block at once (:func:`~simspec.text.mc_routing.gather_pass`)."""
        triples = np.asarray(fed, dtype=np.int64).reshape(-1, 3)
        if accepted is None:
            matches = [self.sequence(r).match_lengths[i] for r, i, _ in triples.tolist()]
            taken = np.minimum(triples[:, 2], np.array(matches, dtype=np.int64))
        else:
            taken = np.asarray(accepted, dtype=np.int64)
        return gather_pass(self._block_true, self._rejected.ids, triples, taken, BLOCK_REQUESTS)
