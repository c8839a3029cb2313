"""Expert routing: which of the N routed experts each token activates, per MoE layer.

A verify pass loads, per layer, the union of the experts of every token it feeds, so its MoE
cost depends on how a router spreads tokens over experts (popularity) and how much consecutive
tokens of a sequence reuse experts (lag overlaps rho_d). This package describes routing by
those statistics and turns them into unique-expert counts, sampled or expected:

==============  ================================================================================
config          ``RoutingConfig``, the scenario's ``[routing]`` table (statistics + mode)
model           ``RoutingModel``: one implementation per mode (a registry), what the reference
                sequences ask of the routing
popularity      the popularity laws (a registry), popularity weights w_e, inclusion
                probabilities p_e
sets            expert sets as ids, membership tables and history bitmasks; pass unions
reuse           Monte-Carlo: the reuse sampler (uniform popularity, lag-1 overlap)
replay          trace mode: a recorded trace's sets, request by request
maxent          Monte-Carlo: the max-entropy sampler (any popularity, any overlap profile)
overlap         lag overlaps per expert by the reuse law (skew and overlap together), Markov form
ipf             the max-entropy law over T tokens by iterative proportional fitting
predictor       analytic mode: expected unique experts of a pass (``UniqueExpertPredictor``)
siblings        analytic mode: draft trees whose nodes at one depth route alike
hmm             the latent law (a hidden two-state chain per expert): exact U(T), fit to a trace
trace           the routing-trace file format and the estimator of its statistics
==============  ================================================================================

The closed forms shared with the rest of simspec (independent union, chance overlap, experts
added by one more draft) live in :mod:`simspec.physics.experts`. The names below are the public
face (``from simspec.routing import routing_model``); each is imported from its module on first
use, so importing a submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the submodule that defines it.
_PUBLIC = {
    "RoutingConfig": "config",
    "RoutingModel": "model",
    "ROUTING_MODELS": "model",
    "routing_model": "model",
    "POPULARITIES": "popularity",
    "UniqueExpertPredictor": "predictor",
    "RoutingTrace": "trace",
    "RoutingStatistics": "trace",
    "load_trace": "trace",
    "save_trace": "trace",
    "estimate_statistics": "trace",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its submodule (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'simspec.routing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"simspec.routing.{module}"), name)
