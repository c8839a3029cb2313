"""Routing models: how a scenario's tokens route to experts, one implementation per mode.

The reference sequences (:mod:`simspec.text.reference`) hold the text of every request (match
lengths, confidences) and one :class:`RoutingModel`, which gives them the routing that text
induces: the expert ids of a block of requests' true tokens (:meth:`RoutingModel.true_block`),
of their r-th rejected drafts at every state (:meth:`RoutingModel.rejected_level`, continuing
from the last accepted token and the shallower drafts), and the max-entropy expectation of a
pass's unique experts (:meth:`RoutingModel.expected_unique`). Every model draws from the
Generators it is handed, so the caller's named streams fix the routing.

========  ===================================================================================
reuse     sampled: uniform popularity, a lag-1 overlap (:mod:`simspec.routing.reuse`)
maxent    sampled: any popularity, any overlap profile (:mod:`simspec.routing.maxent`)
analytic  expected unique experts from the statistics (:mod:`simspec.routing.predictor`); the
          expert sets, when a reader asks for them, from the sampler of the same statistics
trace     the sets of a recorded trace (:mod:`simspec.routing.replay`); rejected drafts it did
          not record from the max-entropy sampler fitted to it
========  ===================================================================================

:func:`routing_model` picks the implementation a scenario's ``[routing]`` table asks for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simspec import rng as rngs
from simspec.errors import InputError
from simspec.physics.models import ModelShape
from simspec.registry import Registry
from simspec.routing import maxent, reuse
from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import draw_inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.replay import RoutingReplay
from simspec.routing.trace import RoutingTrace


class RoutingModel(Protocol):
    """What the reference sequences ask of the routing (module docstring)."""

    @property
    def analytic(self) -> bool:
        """True when a pass's unique experts are the expectation, not a count of sampled sets."""
        ...

    @property
    def inclusion_probabilities(self) -> np.ndarray:
        """P(expert e is used by a token) per MoE layer, (layers, N)."""
        ...

    @property
    def draft_memory(self) -> int:
        """How many shallower rejected depths a rejected draft conditions on."""
        ...

    def true_block(
        self, rng: np.random.Generator, request_ids: range, lengths: Sequence[int]
    ) -> np.ndarray:
        """Ids (requests, max length, layers, k_e) of the true tokens of the requests."""
        ...

    def rejected_level(
        self,
        rng: np.random.Generator,
        request_ids: range,
        lengths: Sequence[int],
        true: np.ndarray,
        anchor: np.ndarray,
        shallower: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """Ids of the rejected drafts of depth len(``shallower``) + 1 at every state of the
        requests (shape of ``true``): each after the true tokens up to ``anchor`` (i + m_i,
        (requests, length)) and the shallower depths; at least at the states ``keep`` marks."""
        ...

    @property
    def predictor(self) -> UniqueExpertPredictor:
        """The max-entropy expectation of the model's statistics."""
        ...

    def expected_unique(
        self, fed: np.ndarray, true: np.ndarray, trees: Sequence[tuple[int, ...]] | None = None
    ) -> np.ndarray:
        """Expected unique experts per layer of a pass whose request b feeds ``fed[b]`` tokens,
        ``true[b]`` of them true; with ``trees``, request b's tokens are the nodes of a draft
        tree (parent indices, :meth:`UniqueExpertPredictor.tree_log_silent`)."""
        ...


#: Routing models by name (:func:`routing_model` maps a ``[routing]`` table to one).
ROUTING_MODELS: Registry[RoutingModel] = Registry("routing model")


@dataclass(frozen=True, eq=False)
class _Statistics:
    """What every model shares: the scenario's routing statistics and their expectation."""

    config: RoutingConfig
    shape: ModelShape
    seed: int
    max_draft_tokens: int
    trace: RoutingTrace | None = None

    @property
    def analytic(self) -> bool:
        """Sampled sets, counted (:class:`AnalyticRouting` says otherwise)."""
        return False

    @functools.cached_property
    def inclusion_probabilities(self) -> np.ndarray:
        """Drawn from the popularity law (stream "popularity")."""
        return _drawn_inclusion(self.config, self.shape, self.seed)

    def statistics_error(self, err: ValueError) -> InputError:
        """The scenario error for overlap statistics no top-k router can have."""
        key = "overlaps" if self.config.overlaps is not None else "overlap"
        if "sibling overlap" in str(err):
            key = "sibling_overlap"
        return InputError(
            "", f"routing.{key}", "overlap statistics that a top-k router can have", str(err)
        )

    @functools.cached_property
    def predictor(self) -> UniqueExpertPredictor:
        """The max-entropy expectation of these statistics, checked up to K_max + 1 tokens."""
        true, draft = self.config.layer_profiles(self.shape.num_moe_layers)
        if self.config.layer_overlap_scale is None:  # pooled statistics: one row
            true, draft = true[0], None if draft is None else draft[0]
        try:
            predictor = UniqueExpertPredictor(
                self.inclusion_probabilities,
                true,
                draft,
                sibling_overlap=self.config.sibling_overlap,
            )
            predictor.log_silent(self.max_draft_tokens + 1)  # fails now if inconsistent
        except ValueError as err:
            raise self.statistics_error(err) from None
        return predictor

    def expected_unique(
        self, fed: np.ndarray, true: np.ndarray, trees: Sequence[tuple[int, ...]] | None = None
    ) -> np.ndarray:
        """:meth:`RoutingModel.expected_unique` (read-only, cached per batch composition)."""
        try:
            return self.predictor.expected_unique(fed, true, trees)
        except ValueError as err:
            raise self.statistics_error(err) from None


@ROUTING_MODELS.register("reuse")
@dataclass(frozen=True, eq=False)
class ReuseRouting(_Statistics):
    """Sampled sets, uniform popularity, a lag-1 overlap (:class:`~simspec.routing.reuse.
    ReuseSampler`); a rejected draft continues from its predecessor with the draft overlap."""

    @property
    def draft_memory(self) -> int:
        """A Markov chain: the depth before."""
        return 1

    @functools.cached_property
    def inclusion_probabilities(self) -> np.ndarray:
        """k_e / N everywhere (nothing drawn)."""
        return _uniform_inclusion(self.shape)

    @functools.cached_property
    def sampler(self) -> reuse.ReuseSampler:
        """The sampler of this model's shape."""
        return reuse.ReuseSampler(self.shape.num_experts, self.shape.experts_per_token)

    def _overlap(self, *, true: bool) -> float | np.ndarray | None:
        """A number, or one per layer with a per-layer scale."""
        value = self.config.true_profile[0] if self.config.true_profile else None
        if not true:
            value = self.config.rejected_overlap
        scale = self.config.layer_scale(self.shape.num_moe_layers)
        if value is None or scale is None:
            return value
        return np.minimum(value * scale, 1.0)

    def true_block(
        self, rng: np.random.Generator, request_ids: range, lengths: Sequence[int]
    ) -> np.ndarray:
        """:meth:`RoutingModel.true_block`."""
        layers = self.shape.num_moe_layers
        overlap = self._overlap(true=True)
        return self.sampler.sample_sequences(rng, len(request_ids), layers, max(lengths), overlap)

    def rejected_level(
        self,
        rng: np.random.Generator,
        request_ids: range,
        lengths: Sequence[int],
        true: np.ndarray,
        anchor: np.ndarray,
        shallower: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """:meth:`RoutingModel.rejected_level`: one more draft after y_{i+m_i} (depth 1) or
        after the depth before."""
        if not shallower:  # y_{i+m_i} at every state i: one gather
            previous = true[np.arange(true.shape[0])[:, None], anchor]
        else:
            previous = shallower[-1]
        overlap = self._overlap(true=False)
        return reuse.continue_drafts(self.sampler, previous, overlap, rng, keep)


@ROUTING_MODELS.register("maxent")
@dataclass(frozen=True, eq=False)
class MaxEntRouting(_Statistics):
    """Sampled sets, any popularity and overlap profile (:class:`~simspec.routing.maxent.
    MaxEntSampler`); a rejected draft conditions on the D tokens before it."""

    def __post_init__(self) -> None:
        if self.shape.num_moe_layers:
            self.sampler  # noqa: B018  (inconsistent statistics fail when the scenario loads)

    @functools.cached_property
    def sampler(self) -> maxent.MaxEntSampler:
        """The sampler of these statistics."""
        true, draft = self.config.layer_profiles(self.shape.num_moe_layers)
        try:
            return maxent.MaxEntSampler(self.inclusion_probabilities, true, draft)
        except ValueError as err:
            raise self.statistics_error(err) from None

    @property
    def draft_memory(self) -> int:
        """The sampler's D (at least 1)."""
        return max(1, self.sampler.depth)

    def true_block(
        self, rng: np.random.Generator, request_ids: range, lengths: Sequence[int]
    ) -> np.ndarray:
        """:meth:`RoutingModel.true_block`."""
        return self.sampler.sample_sequences(rng, len(request_ids), max(lengths))

    def rejected_level(
        self,
        rng: np.random.Generator,
        request_ids: range,
        lengths: Sequence[int],
        true: np.ndarray,
        anchor: np.ndarray,
        shallower: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """:meth:`RoutingModel.rejected_level`."""
        n = self.shape.num_experts
        return maxent.continue_drafts(self.sampler, true, anchor, shallower, rng, n, keep)


@ROUTING_MODELS.register("analytic")
@dataclass(frozen=True, eq=False)
class AnalyticRouting(_Statistics):
    """Expected unique experts from the statistics; expert sets, for a reader that asks for
    them, from the sampled model of the same statistics (:func:`sampled_model`)."""

    @property
    def analytic(self) -> bool:
        """The expectation."""
        return True

    def __post_init__(self) -> None:
        if self.shape.num_moe_layers:
            self.predictor  # noqa: B018  (inconsistent statistics fail when the scenario loads)

    @functools.cached_property
    def sampled(self) -> ReuseRouting | MaxEntRouting:
        """The sampled model of the same statistics (built on first use)."""
        kind = ReuseRouting if self.config.uses_reuse_sampler() else MaxEntRouting
        return kind(self.config, self.shape, self.seed, self.max_draft_tokens)

    @functools.cached_property
    def inclusion_probabilities(self) -> np.ndarray:
        """The sampled model's (uniform for the reuse sampler's statistics, else drawn)."""
        if self.config.uses_reuse_sampler():
            return _uniform_inclusion(self.shape)
        return _drawn_inclusion(self.config, self.shape, self.seed)

    @property
    def draft_memory(self) -> int:
        """The sampled model's."""
        return self.sampled.draft_memory

    def true_block(
        self, rng: np.random.Generator, request_ids: range, lengths: Sequence[int]
    ) -> np.ndarray:
        """:meth:`RoutingModel.true_block` of the sampled model."""
        return self.sampled.true_block(rng, request_ids, lengths)

    def rejected_level(
        self,
        rng: np.random.Generator,
        request_ids: range,
        lengths: Sequence[int],
        true: np.ndarray,
        anchor: np.ndarray,
        shallower: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """:meth:`RoutingModel.rejected_level` of the sampled model."""
        args = (rng, request_ids, lengths, true, anchor, shallower, keep)
        return self.sampled.rejected_level(*args)


@ROUTING_MODELS.register("trace")
@dataclass(frozen=True, eq=False)
class TraceRouting(_Statistics):
    """The expert sets of a recorded trace (:class:`~simspec.routing.replay.RoutingReplay`);
    rejected drafts it did not record from the max-entropy sampler fitted to it."""

    @property
    def draft_memory(self) -> int:
        """Recorded drafts may sit at any depth: every shallower depth."""
        return 1 << 30

    @functools.cached_property
    def replay(self) -> RoutingReplay:
        """The trace, read request by request."""
        assert self.trace is not None, "mode = 'trace' needs its trace"
        return RoutingReplay(self.trace, self.config.trace_wrap)

    @functools.cached_property
    def inclusion_probabilities(self) -> np.ndarray:
        """The trace's inclusion frequencies (zeros before a trace is given: a scenario check
        builds the model from its statistics alone)."""
        if not self.shape.num_moe_layers or self.trace is None:
            return np.zeros((self.shape.num_moe_layers, self.shape.num_experts))
        return self.replay.inclusion_probabilities

    def true_block(
        self, rng: np.random.Generator, request_ids: range, lengths: Sequence[int]
    ) -> np.ndarray:
        """:meth:`RoutingModel.true_block`: the replayed tokens (nothing drawn)."""
        return self.replay.true_block(request_ids, list(lengths))

    def rejected_level(
        self,
        rng: np.random.Generator,
        request_ids: range,
        lengths: Sequence[int],
        true: np.ndarray,
        anchor: np.ndarray,
        shallower: list[np.ndarray],
        keep: np.ndarray | None,
    ) -> np.ndarray:
        """:meth:`RoutingModel.rejected_level`: the recorded drafts over the fitted model's
        (drawn only when some are not recorded)."""
        level = len(shallower)
        if self.replay.needs_model(level):
            sampler = self.replay.fitted_sampler()
            n = self.shape.num_experts
            drawn = maxent.continue_drafts(sampler, true, anchor, shallower, rng, n, keep)
        else:
            drawn = np.zeros(true.shape, dtype=np.int16)
        return self.replay.overlay_rejected(drawn, request_ids, list(lengths), level)


def _drawn_inclusion(config: RoutingConfig, shape: ModelShape, seed: int) -> np.ndarray:
    """Inclusion probabilities drawn from the popularity law (stream "popularity")."""
    if not shape.num_moe_layers:
        return np.zeros((0, shape.num_experts))
    return draw_inclusion_probabilities(
        config,
        shape.num_moe_layers,
        shape.num_experts,
        shape.experts_per_token,
        rngs.stream(seed, "popularity"),
    )


def _uniform_inclusion(shape: ModelShape) -> np.ndarray:
    """k_e / N for every expert of every MoE layer."""
    p = shape.experts_per_token / max(shape.num_experts, 1)
    return np.full((shape.num_moe_layers, shape.num_experts), p)


def routing_model(
    config: RoutingConfig,
    shape: ModelShape,
    *,
    seed: int,
    max_draft_tokens: int,
    trace: RoutingTrace | None = None,
) -> RoutingModel:
    """The model a ``[routing]`` table asks for: its trace replayed (mode = "trace"), the
    expectation (mode = "analytic"), else sampled sets, by the reuse sampler where it applies
    (:meth:`~simspec.routing.config.RoutingConfig.uses_reuse_sampler`)."""
    if config.replays_trace:
        name = "trace"
    elif config.mode == "analytic":
        name = "analytic"
    else:
        name = "reuse" if config.uses_reuse_sampler() else "maxent"
    return ROUTING_MODELS.create(
        name, config=config, shape=shape, seed=seed, max_draft_tokens=max_draft_tokens, trace=trace
    )
