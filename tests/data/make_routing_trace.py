"""Regenerate tests/data/routing_trace.npz, the small sampler-made trace the estimator tests use.

    python tests/data/make_routing_trace.py

A Qwen3-30B-A3B-like router (top-8 of 128 experts) on 8 MoE layers: Zipf(0.8) popularity
(a different hot set per layer), slowly decaying lag overlaps rho = (0.38, 0.32, 0.29, 0.27)
scaled per layer from 0.8x (first layer) to 1.2x (last), 16 sequences of 256 tokens, drawn by
simspec's max-entropy sampler. The generating statistics are stored as JSON in the trace's
``source`` field, so the tests can compare the estimates with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simspec import rng as rngs
from simspec.routing.config import RoutingConfig
from simspec.routing.popularity import draw_inclusion_probabilities
from simspec.routing.trace import sample_trace, save_trace

PARAMS = {
    "generator": "simspec.routing.trace.sample_trace",
    "seed": 2026,
    "num_layers": 8,
    "num_experts": 128,
    "experts_per_token": 8,
    "popularity": "zipf",
    "zipf_exponent": 0.8,
    "overlaps": [0.38, 0.32, 0.29, 0.27],
    "layer_overlap_scale": [0.8, 1.2],
    "num_sequences": 16,
    "tokens_per_sequence": 256,
}


def generating_statistics(params: dict) -> tuple[np.ndarray, np.ndarray]:
    """Inclusion probabilities (L, N) and per-layer overlap targets (L, D) of ``params``."""
    config = RoutingConfig(
        popularity=params["popularity"],
        zipf_exponent=params["zipf_exponent"],
        overlaps=tuple(params["overlaps"]),
        layer_overlap_scale=tuple(params["layer_overlap_scale"]),
    )
    layers = params["num_layers"]
    p = draw_inclusion_probabilities(
        config,
        layers,
        params["num_experts"],
        params["experts_per_token"],
        rngs.stream(params["seed"], "popularity"),
    )
    true, _ = config.layer_profiles(layers)
    return p, true


def main() -> None:
    p, overlaps = generating_statistics(PARAMS)
    trace = sample_trace(
        p,
        overlaps,
        num_sequences=PARAMS["num_sequences"],
        tokens_per_sequence=PARAMS["tokens_per_sequence"],
        rng=rngs.stream(PARAMS["seed"], "routing", 0),
        model="synthetic top-8 of 128 (Qwen3-30B-A3B-like)",
        source=json.dumps(PARAMS),
    )
    out = Path(__file__).with_name("routing_trace.npz")
    save_trace(out, trace)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
