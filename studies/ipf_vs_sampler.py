"""IPF prediction vs the Monte-Carlo sampler over the full validation grid.

For every (N, k_e) in {(8, 2), (64, 8), (128, 8), (256, 8), (512, 10)}, uniform and Zipf(0.8)
popularity, Markov (one lag) and slowly decaying (six lags) overlaps, the max-entropy sampler
(routing.maxent.MaxEntSampler) draws sequences with the given statistics and the IPF predictor
(routing.predictor.UniqueExpertPredictor) predicts E[unique experts] for B in {1, 4, 16}
sequences of T = 1..12 tokens. Prints one row per statistics setting (mean and max |relative
error| over the 36 (B, T) cells) and the grand mean; ``--cells`` prints every cell.

The overlap profiles carry the correlation of a slowly decaying profile (0.38, 0.32, 0.29,
0.27, 0.26, 0.25 at k_e/N = 1/16; 0.38 adjacent overlap as Cohere reports) to each setting's
chance level Σp²/k_e:
rho_d = chance + r_d (1 − chance), r_d = (rho_d(1/16) − 1/16) / (1 − 1/16).
Windows start at token 16 of each sequence (the stationary regime); ``--offset 0`` measures
the first tokens of sequences instead.

    python -m studies.ipf_vs_sampler [--sequences 6400] [--offset 16] [--cells]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from simspec.commands import table
from simspec.physics.experts import chance_overlap
from simspec.routing.maxent import MaxEntSampler
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.sets import to_sets

SLOW = np.array([0.38, 0.32, 0.29, 0.27, 0.26, 0.25])
CONFIGS = ((8, 2), (64, 8), (128, 8), (256, 8), (512, 10))
TOKENS = tuple(range(1, 13))
BATCHES = (1, 4, 16)


def inclusion(n: int, k: int, kind: str, seed: int) -> np.ndarray:
    if kind == "uniform":
        return np.full((1, n), k / n)
    ranks = np.arange(1, n + 1, dtype=float) ** -0.8
    return inclusion_probabilities(np.random.default_rng(seed).permutation(ranks)[None], k)


def profile(p: np.ndarray, lags: int) -> np.ndarray:
    chance = float(chance_overlap(p)[0])
    excess = (SLOW[:lags] - 1 / 16) / (1 - 1 / 16)
    return chance + excess * (1 - chance)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=6400, help="sampled sequences / setting")
    parser.add_argument("--offset", type=int, default=16, help="first token of the windows")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells", action="store_true", help="print every (B, T) cell")
    args = parser.parse_args()

    start_all = time.perf_counter()
    rows, cells, all_errors = [], [], []
    for n, k in CONFIGS:
        for kind in ("uniform", "zipf"):
            p = inclusion(n, k, kind, args.seed)
            for name, lags in (("Markov", 1), ("slow-6", 6)):
                rho = profile(p, lags)
                sampler = MaxEntSampler(p, rho[None, :])
                rng = np.random.default_rng(args.seed + 1)
                ids = sampler.sample_sequences(rng, args.sequences, args.offset + max(TOKENS))
                sets = to_sets(ids[:, args.offset :, 0], n)  # (S, T, N)
                union = np.logical_or.accumulate(sets, axis=1)
                pred = UniqueExpertPredictor(p, rho)
                errors = []
                for b in BATCHES:
                    groups = args.sequences // b
                    batch_union = union[: groups * b].reshape(groups, b, len(TOKENS), n)
                    sampled = batch_union.any(axis=1).sum(axis=-1).mean(axis=0)
                    for t in TOKENS:
                        predicted = float(pred.expected_unique([t] * b)[0])
                        err = sampled[t - 1] / predicted - 1.0
                        errors.append(abs(err))
                        cells.append(
                            (
                                n,
                                k,
                                kind,
                                name,
                                b,
                                t,
                                f"{sampled[t - 1]:.3f}",
                                f"{predicted:.3f}",
                                f"{100 * err:+.2f}%",
                            )
                        )
                all_errors.extend(errors)
                rows.append(
                    (
                        f"({n}, {k})",
                        kind,
                        name,
                        " ".join(f"{v:.3f}" for v in rho[:3]) + (" ..." if lags > 3 else ""),
                        f"{100 * np.mean(errors):.2f}%",
                        f"{100 * np.max(errors):.2f}%",
                    )
                )
    print(
        f"machine: {platform.platform()}, Python {platform.python_version()}, "
        f"numpy {np.__version__}"
    )
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(
        f"{args.sequences} sampled sequences per setting, windows from token {args.offset}, "
        f"T = 1..12, B in {{1, 4, 16}}"
    )
    print()
    print(
        table(
            ("(N, k_e)", "popularity", "overlap", "rho_1 rho_2 rho_3", "mean |err|", "max |err|"),
            rows,
        )
    )
    print()
    print(
        f"grand mean |relative error| over {len(all_errors)} cells: "
        f"{100 * np.mean(all_errors):.2f}% (max {100 * np.max(all_errors):.2f}%); "
        f"{time.perf_counter() - start_all:.0f} s"
    )
    if args.cells:
        print()
        print(
            table(("N", "k_e", "popularity", "overlap", "B", "T", "sampled", "IPF", "error"), cells)
        )


if __name__ == "__main__":
    main()
