"""The scenario's ``[routing]`` table: how tokens route to experts, as statistics.

Routing is described by what can be measured on a router (``simspec routing stats`` measures it
on a trace) and what the unique-experts count of a verify pass depends on:

* ``popularity``: the law of the per-layer expert popularity weights, a name registered in
  :data:`simspec.routing.popularity.POPULARITIES`, with its parameters (``zipf_exponent``,
  ``dirichlet_concentration``);
* the lag overlap profile rho_1..rho_D of true tokens (``overlap`` = rho_1, or ``overlaps``),
  rho_d = E|S_t ∩ S_{t−d}| / k_e; unset = independent routing (chance overlap Σ_e p_e²/k_e);
* the profile of rejected drafts with the tokens before them (``draft_overlap(s)``; default:
  the true tokens' profile), and a per-layer factor on every overlap over depth
  (``layer_overlap_scale``);
* the overlap of two children of one draft-tree node (``sibling_overlap``; default: the lag-1
  overlap of drafts; :mod:`simspec.routing.siblings`);
* a per-request working set (``working_set``): each request draws its experts from its own
  popularity, Dirichlet around the layer's, which is what an expert cache sees over many
  tokens beyond the lag profile (:func:`simspec.costs.cache_hits.hit_fractions`).

``mode`` picks how a pass's unique experts are obtained: sampled expert sets
(:mod:`simspec.routing.independent`, :mod:`simspec.routing.maxent`), the max-entropy
expectation (:mod:`simspec.routing.predictor`), or the sets of a recorded trace, replayed
(``mode = "trace"``, ``trace``; :mod:`simspec.routing.replay`), which replaces the statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.routing.popularity import POPULARITIES
from simspec.schema import param

#: Most lags an overlap profile may have (the sampler tracks 2^D history patterns per expert).
MAX_LAGS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingConfig:
    """How tokens route to experts (scenario table ``[routing]``)."""

    mode: str = param(
        "monte_carlo",
        "monte_carlo: sample expert sets; analytic: expected unique experts from the "
        "max-entropy IPF model (simspec.routing.predictor), no sampling; trace: replay the "
        "expert sets of a recorded routing trace (routing.trace, simspec.routing.replay)",
        choices=("monte_carlo", "analytic", "trace"),
    )
    popularity: str = param(
        "uniform",
        "law of the expert popularity weights per layer, a name registered in "
        "simspec.routing.popularity",
    )
    zipf_exponent: float = param(
        0.8, "Zipf exponent s of popularity weights (rank^-s)", ge=0, le=10
    )
    dirichlet_concentration: float = param(
        0.3, "Dirichlet concentration of popularity", ge=1e-3, le=1e4
    )
    overlap: float | None = param(
        None, "lag-1 overlap rho_1 of true tokens; unset = independent routing", ge=0, le=1
    )
    overlaps: tuple[float, ...] | None = param(
        None,
        f"lag-1..D overlaps [rho_1, rho_2, ...] of true tokens (fraction of a token's experts "
        f"also used d tokens earlier; D <= {MAX_LAGS}); overlaps[0] is overlap",
        ge=0,
        le=1,
    )
    draft_overlap: float | None = param(
        None, "lag-1 overlap of a rejected draft with its predecessor; unset = overlap", ge=0, le=1
    )
    draft_overlaps: tuple[float, ...] | None = param(
        None,
        "lag-1..D overlaps of a rejected draft with the tokens before it; unset = the true "
        "tokens' profile",
        ge=0,
        le=1,
    )
    sibling_overlap: float | None = param(
        None,
        "overlap of two draft-tree siblings (children of one node): fraction of a child's "
        "experts its sibling also uses, analytic mode (simspec.routing.siblings); unset = the "
        "lag-1 overlap of drafts (no published sibling measurement)",
        ge=0,
        le=1,
    )
    working_set: float | None = param(
        None,
        "per-expert Dirichlet concentration of each request's own expert popularity around the "
        "layer's (a per-request working set: smaller = fewer experts per request, more reuse "
        "over many tokens); the expert cache's analytic LRU hit rates draw it "
        "(simspec.costs.offload); analytic mode only; unset = every request routes by the "
        "layer's popularity",
        ge=1e-3,
        le=1e4,
    )
    layer_overlap_scale: tuple[float, ...] | None = param(
        None,
        "factor on every overlap per MoE layer, first to last, interpolated linearly over "
        "depth (one value = all layers); unset = 1",
        ge=0,
        le=1e3,
    )
    trace: str = param(
        "",
        "routing trace (.npz) replayed in mode = 'trace', relative to the folder of "
        "costs.profile (the scenario file's folder; the working folder without a file)",
    )
    trace_wrap: bool = param(
        False,
        "reuse the trace's sequences (cyclically) when the workload needs more or longer "
        "requests than it holds; false = refuse such a workload",
    )

    def __post_init__(self) -> None:
        _check_trace_keys(self)
        if self.working_set is not None and self.mode != "analytic":
            expected = 'unset unless mode = "analytic" (sampled routing draws no working sets)'
            raise FieldError("working_set", expected, self.working_set)
        valid = POPULARITIES.names()
        if self.popularity not in valid:
            raise FieldError("popularity", "one of " + ", ".join(map(repr, valid)), self.popularity)
        for key in ("overlaps", "draft_overlaps", "layer_overlap_scale"):
            value = getattr(self, key)
            limit = MAX_LAGS if key != "layer_overlap_scale" else 100_000
            if value is not None and not 1 <= len(value) <= limit:
                raise FieldError(key, f"an array of 1 to {limit} numbers", list(value))
        # Both spellings may be set (a file's overlap plus a --set overlaps=[...]) if they agree.
        for single, many in (("overlap", "overlaps"), ("draft_overlap", "draft_overlaps")):
            one, profile = getattr(self, single), getattr(self, many)
            if one is not None and profile is not None and profile[0] != one:
                raise FieldError(
                    many,
                    f"an array whose first entry equals {single} = {one} (set both, or only "
                    f"{many})",
                    list(profile),
                )
        unset = self.overlap is None and self.overlaps is None
        for key in ("draft_overlap", "draft_overlaps", "layer_overlap_scale"):
            value = getattr(self, key)
            if value is not None and unset:
                found = list(value) if isinstance(value, tuple) else value
                raise FieldError(key, "to be set only together with overlap or overlaps", found)
        if self.layer_overlap_scale is not None:
            top = max(self.true_profile + (self.draft_profile or ()))
            if max(self.layer_overlap_scale) * top > 1.0:
                raise FieldError(
                    "layer_overlap_scale",
                    f"factors that keep every overlap <= 1 (at most {1.0 / top:.4g} here)",
                    list(self.layer_overlap_scale),
                )

    @property
    def replays_trace(self) -> bool:
        """True in mode = 'trace': expert sets come from a recorded trace, not statistics."""
        return self.mode == "trace"

    @property
    def rejected_overlap(self) -> float | None:
        """Lag-1 overlap used for rejected drafts by the reuse sampler."""
        if self.draft_profile is not None:
            return self.draft_profile[0]
        return self.true_profile[0] if self.true_profile else None

    @property
    def true_profile(self) -> tuple[float, ...]:
        """rho_1..rho_D of true tokens; empty for independent routing."""
        if self.overlaps is not None:
            return tuple(self.overlaps)
        return () if self.overlap is None else (self.overlap,)

    @property
    def draft_profile(self) -> tuple[float, ...] | None:
        """Overlap profile of rejected drafts; None when it is the true tokens' profile."""
        if self.draft_overlaps is not None:
            return tuple(self.draft_overlaps)
        return None if self.draft_overlap is None else (self.draft_overlap,)

    def layer_scale(self, num_layers: int) -> np.ndarray | None:
        """Per-layer factor on every overlap (``layer_overlap_scale`` over depth), or None."""
        if self.layer_overlap_scale is None:
            return None
        scale = np.asarray(self.layer_overlap_scale, dtype=float)
        if len(scale) == 1 or num_layers <= 1:
            return np.full(num_layers, scale[0])
        return np.interp(np.linspace(0.0, 1.0, num_layers), np.linspace(0, 1, len(scale)), scale)

    def layer_profiles(self, num_layers: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(true, draft) overlap profiles per layer, arrays (L, D) and (L, D') or None."""
        scale = self.layer_scale(num_layers)
        factor = np.ones(num_layers) if scale is None else scale
        true = factor[:, None] * np.asarray(self.true_profile, dtype=float)[None, :]
        draft = self.draft_profile
        if draft is None:
            return true, None
        return true, factor[:, None] * np.asarray(draft, dtype=float)[None, :]

    def uses_reuse_sampler(self) -> bool:
        """True when the reuse sampler applies: uniform popularity and lag-1 overlap only."""
        draft = self.draft_profile or ()
        return self.popularity == "uniform" and len(self.true_profile) <= 1 and len(draft) <= 1


def _check_trace_keys(config: RoutingConfig) -> None:
    """``trace`` goes with mode = 'trace', which takes its statistics from the trace itself."""
    if config.mode != "trace":
        if config.trace:
            raise FieldError("trace", "to be set only with mode = 'trace'", config.trace)
        return
    if not config.trace:
        raise FieldError("trace", "a routing trace path (.npz) for mode = 'trace'", config.trace)
    keys = ("overlap", "overlaps", "draft_overlap", "draft_overlaps", "layer_overlap_scale")
    for key in (*keys, "sibling_overlap"):
        value = getattr(config, key)
        if value is not None:
            found = list(value) if isinstance(value, tuple) else value
            raise FieldError(
                key, "unset in mode = 'trace' (the trace's own routing is replayed)", found
            )
