"""U(T) predictors against routers they were not derived from.

Each router samples ``--sequences`` sequences of ``--offset`` + 16 tokens (N = 128, k_e = 8, one
MoE layer unless stated). The whole sample is the "trace": the estimator measures p_e, the lag
overlaps rho_1..rho_D (``--lags``, default 4 as in ``routing stats``) and the three-token
overlap from it, exactly as ``simspec routing stats``
does for a user's trace. From those statistics

* IPF: the max-entropy predictor given p_e and the D lag overlaps
  (routing.predictor.UniqueExpertPredictor), and
* latent: the fitted two-state hidden-Markov law (routing.hmm.fit_latent)

predict E[unique experts] for B in {1, 4, 16, 64} sequences of T = 1..16 tokens, compared with
the unions measured on windows starting at token ``--offset`` (the stationary regime), B
sequences per pass. Prints the mean and max |relative error| over the 64 (B, T) cells per router
and the signed error at (B = 1, T = 16).

Routers: the topic router and the drifting hot set (tests/reference/latent_routers.py), uniform
and Zipf(0.8) popularity; as controls the max-entropy sampler (routing.maxent) with a Markov
(lag-1) and a slowly decaying six-lag overlap profile, the law IPF assumes.

    python -m studies.ipf_vs_routers [--sequences 4096] [--offset 32] [--seed 0]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable

import numpy as np

from simspec.commands import table
from simspec.routing.config import MAX_LAGS
from simspec.routing.hmm import fit_latent, triple_overlap_of
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor, choose_predictor
from simspec.routing.sets import to_sets
from simspec.routing.trace import RoutingTrace, estimate_statistics
from tests.reference.latent_routers import HotSetSampler, TopicSampler

N, K = 128, 8
TOKENS = 16
BATCHES = (1, 4, 16, 64)


def zipf(n: int, k: int, seed: int) -> np.ndarray:
    ranks = np.arange(1, n + 1, dtype=float) ** -0.8
    return inclusion_probabilities(np.random.default_rng(seed).permutation(ranks)[None], k)


def routers(seed: int) -> list[tuple[str, Callable[[np.random.Generator, int, int], np.ndarray]]]:
    z = zipf(N, K, seed)
    uniform = np.full((1, N), K / N)
    slow = np.array([0.38, 0.32, 0.29, 0.27, 0.26, 0.25])
    return [
        ("topic reuse 0.9 drift 0.02", TopicSampler(N, K, 0.9, 0.02).sample_sequences),
        ("topic reuse 0.7 drift 0.05", TopicSampler(N, K, 0.7, 0.05).sample_sequences),
        ("topic reuse 0.5 drift 0.1", TopicSampler(N, K, 0.5, 0.1).sample_sequences),
        ("topic zipf reuse 0.8 drift 0.03", TopicSampler(N, K, 0.8, 0.03, z).sample_sequences),
        ("hot set h 24 s 0.8 drift 0.05", HotSetSampler(N, K, 24, 0.8, 0.05).sample_sequences),
        (
            "hot set zipf h 32 s 0.7 drift 0.02",
            HotSetSampler(N, K, 32, 0.7, 0.02, z).sample_sequences,
        ),
        ("maxent Markov rho 0.38", MaxEntSampler(uniform, np.array([[0.38]])).sample_sequences),
        ("maxent slow-6 rho 0.38..0.25", MaxEntSampler(uniform, slow[None]).sample_sequences),
    ]


def measured_unique(ids: np.ndarray, offset: int) -> np.ndarray:
    """Mean union size of B sequences' windows, (len(BATCHES), TOKENS)."""
    sets = to_sets(ids[:, offset : offset + TOKENS, 0], N)
    union = np.logical_or.accumulate(sets, axis=1)
    out = []
    for b in BATCHES:
        groups = len(union) // b
        grouped = union[: groups * b].reshape(groups, b, TOKENS, N)
        out.append(grouped.any(axis=1).sum(axis=-1).mean(axis=0))
    return np.array(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=4096, help="sampled sequences / router")
    parser.add_argument("--offset", type=int, default=32, help="first token of the windows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lags", type=int, default=4, help=f"lags D given to IPF (1-{MAX_LAGS})")
    parser.add_argument("--only", default="", help="run only routers whose name contains this")
    args = parser.parse_args()

    start_all = time.perf_counter()
    rows = []
    grand: dict[str, list[float]] = {"IPF": [], "latent": [], "chosen": []}
    for name, sample in routers(args.seed):
        if args.only not in name:
            continue
        start = time.perf_counter()
        length = args.offset + TOKENS
        ids = sample(np.random.default_rng(args.seed + 1), args.sequences, length)
        flat = ids.reshape(args.sequences * length, 1, K).astype(np.int64)
        trace = RoutingTrace(flat, N, np.arange(args.sequences, dtype=np.int64) * length)
        stats = estimate_statistics(trace, max_lag=max(args.lags, 2), max_tokens=TOKENS)
        triple = triple_overlap_of(trace.expert_ids, trace.sequence_of_token(), N)
        fit = fit_latent(stats.inclusion_probabilities, stats.overlaps, triple)
        ipf = UniqueExpertPredictor(stats.inclusion_probabilities, stats.overlaps[:, : args.lags])
        chosen = choose_predictor(fit)
        measured = measured_unique(ids, args.offset)
        errors: dict[str, np.ndarray] = {}
        for label, curve in (
            ("IPF", ipf.unique_curve),
            ("latent", fit.model.unique_curve),
        ):
            predicted = np.array([curve(TOKENS, b)[:, 0] for b in BATCHES])
            errors[label] = predicted / measured - 1.0
        errors["chosen"] = errors["latent" if chosen == "latent" else "IPF"]
        row: list[object] = [name, f"{stats.pooled_overlaps[0]:.3f}"]
        for label in ("IPF", "latent"):
            e = errors[label]
            row += [
                f"{100 * np.abs(e).mean():.2f}%",
                f"{100 * np.abs(e).max():.2f}%",
                f"{100 * e[0, -1]:+.1f}%",
            ]
        for label in grand:
            grand[label].append(float(np.abs(errors[label]).mean()))
        row += [chosen, f"{100 * fit.profile_error:.1f}%", f"{time.perf_counter() - start:.1f}"]
        rows.append(row)
    headers = (
        "router",
        "rho_1",
        "IPF mean",
        "IPF max",
        "IPF U(16)",
        "latent mean",
        "latent max",
        "latent U(16)",
        "chosen",
        "profile err",
        "s",
    )
    print(
        f"U(T) relative error, T = 1..{TOKENS} x B in {BATCHES}, N = {N}, k_e = {K}; "
        f"IPF from rho_1..rho_{args.lags}; {args.sequences} sequences per router, windows from "
        f"token {args.offset}; U(16) = signed error at B = 1, T = 16"
    )
    print(table(headers, rows))
    for label, values in grand.items():
        print(f"{label}: mean |error| over routers {100 * np.mean(values):.2f}%")
    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{time.perf_counter() - start_all:.0f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
