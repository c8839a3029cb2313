"""`simspec routing`: routing statistics of a trace, and unique-expert predictions.

``simspec routing stats TRACE.npz`` estimates per-layer popularity and lag overlaps from a routing
trace (format: :mod:`simspec.routing.trace`), fits the latent routing law
(:mod:`simspec.routing.hmm`) and compares the trace's unique-experts curve U(T) with four
predictions from those statistics, naming the best and the default one. ``simspec routing
predict`` prints U(T) for a catalog model and an overlap profile (optionally checked against
the Monte-Carlo sampler).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from simspec.commands import catalog_entry, check_outputs, check_range, check_writable, table
from simspec.commands._words import count
from simspec.errors import InputError
from simspec.physics.experts import chance_overlap
from simspec.routing.config import MAX_LAGS, RoutingConfig
from simspec.routing.popularity import POPULARITIES
from simspec.schema import help_of

NAME = "routing"
HELP = "Routing statistics of a trace (stats) and unique-expert predictions (predict)."
EXAMPLE = "simspec routing predict --model qwen3-30b-a3b --overlap 0.38 0.32 0.29 0.27 --tokens 8"
STATS_EXAMPLE = "simspec routing stats tests/data/routing_trace.npz --lags 4 --plot u.png"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of `simspec routing stats` and `simspec routing predict`."""
    sub = parser.add_subparsers(dest="routing_command", required=True, metavar="{stats,predict}")
    stats = sub.add_parser(
        "stats",
        help="estimate popularity, lag overlaps and U(T) of a routing trace",
        description="Estimate per-layer expert popularity, lag-d overlaps rho_d and the "
        "unique-experts curve U(T) of a routing trace (.npz), fit the latent (hidden-state) "
        "routing law, and compare U(T) with the independent, Markov (rho_1), multi-lag IPF "
        "(rho_1..rho_D) and latent predictions; the latent one is the default unless the "
        "trace's lag profile is not the geometric decay it implies.",
        epilog=f"example: {STATS_EXAMPLE}\ntrace format: see `python -m pydoc "
        "simspec.routing.trace`",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stats.add_argument("trace", help="routing trace (.npz)")
    stats.add_argument(
        "--lags", type=int, default=4, help=f"largest lag D to estimate (1-{MAX_LAGS})"
    )
    stats.add_argument("--max-tokens", type=int, default=16, help="largest window T of U(T) (1-16)")
    stats.add_argument("--per-layer", action="store_true", help="also print a row per layer")
    stats.add_argument("--plot", metavar="OUT.png", help="write the U(T) figure")
    stats.set_defaults(_routing=_stats)

    predict = sub.add_parser(
        "predict",
        help="expected unique experts U(T) for a model and an overlap profile",
        description="Expected unique routed experts per layer for B sequences of T tokens, "
        "from the model's popularity and lag overlaps rho_1..rho_D (max-entropy IPF).",
        epilog=f"example: {EXAMPLE}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    predict.add_argument("--model", required=True, help="target model (see `simspec models`)")
    predict.add_argument(
        "--overlap",
        type=float,
        nargs="+",
        default=[],
        metavar="RHO",
        help="lag-1..D overlaps rho_1 rho_2 ... (default: independent routing)",
    )
    predict.add_argument("--tokens", type=int, default=8, help="largest T to print (1-16)")
    predict.add_argument("--batch", type=int, default=1, help="sequences per pass B")
    predict.add_argument(
        "--popularity",
        choices=POPULARITIES.names(),
        default="uniform",
        help="expert popularity weights per layer, as in a scenario's [routing] table",
    )
    for name, default, text in _law_parameters():
        predict.add_argument(_flag(name), type=type(default), default=default, help=text)
    predict.add_argument("--seed", type=int, default=0, help="seed of the popularity draw")
    predict.add_argument(
        "--samples",
        type=int,
        default=0,
        help="also sample this many sequences per layer with the Monte-Carlo sampler",
    )
    predict.add_argument("--plot", metavar="OUT.png", help="write the U(T) figure")
    predict.set_defaults(_routing=_predict)


def _law_parameters() -> list[tuple[str, Any, str]]:
    """(name, default, help) of the popularity laws' parameters that are [routing] keys."""
    fields = {f.name: f for f in dataclasses.fields(RoutingConfig)}
    helps = help_of(RoutingConfig)
    names = {p for law in POPULARITIES.names() for p in POPULARITIES.parameters(law)}
    return [(p, fields[p].default, helps[p]) for p in sorted(names & set(fields))]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def execute(args: argparse.Namespace) -> int:
    """Run the chosen subcommand."""
    return int(args._routing(args))


def _pct(value: float) -> str:
    return f"{100.0 * value:+.1f}%"


def _predictions(
    inclusion: np.ndarray, overlaps: np.ndarray, tokens: int, batch: int, flag: str
) -> dict[str, np.ndarray]:
    """Independent / Markov / multi-lag U(T), T = 1..tokens, averaged over layers.

    The IPF fits of T = 1..tokens run together (one stacked fit, the same numbers as separate
    fits, :func:`simspec.routing.ipf.fitted_together`).
    """
    from simspec.routing.ipf import fitted_together
    from simspec.routing.predictor import unique_curves

    try:
        with fitted_together(range(1, tokens + 1)):
            return unique_curves(inclusion, overlaps, tokens, batch)
    except ValueError as err:
        raise InputError(
            "command line", flag, "overlaps a top-k router can have", str(err)
        ) from None


def _plot(
    path: str, tokens: np.ndarray, predicted: dict[str, np.ndarray], k: int, **kw: Any
) -> None:
    from simspec.plots import save
    from simspec.plots.routing import unique_experts_figure

    for written in save(unique_experts_figure(tokens, predicted, k, **kw), path):
        print(f"wrote {written}")


def _stats(args: argparse.Namespace) -> int:
    from simspec.routing.hmm import fit_latent, triple_overlap_of
    from simspec.routing.predictor import choose_predictor
    from simspec.routing.trace import estimate_statistics, fit_zipf_exponent, load_trace

    check_range("--lags", args.lags, 1, MAX_LAGS)
    check_range("--max-tokens", args.max_tokens, 1, 16)
    if args.plot is not None:
        check_outputs([("--plot", args.plot)], [("routing trace", Path(args.trace))])
        check_writable(args.plot, "--plot", stdout=False)
    trace = load_trace(args.trace)
    try:
        st = estimate_statistics(trace, max(args.lags, 2), args.max_tokens)
        triple = triple_overlap_of(trace.expert_ids, trace.sequence_of_token(), trace.num_experts)
    except ValueError as err:
        raise InputError(args.trace, "sequence_starts", "sequences long enough", str(err)) from None
    k, n = st.experts_per_token, st.num_experts
    print(
        f"trace {args.trace}: {trace.model or 'unnamed model'}, {st.num_tokens} tokens in "
        f"{count(st.num_sequences, 'sequence')}, {count(trace.num_layers, 'MoE layer')}, "
        f"top-{k} of {n} experts"
    )
    p = st.inclusion_probabilities
    hottest = p.max(axis=1)
    chance = st.chance
    effective = k / chance  # k_e^2 / Σ p_e^2: experts of a uniform router with this chance overlap
    print(
        f"popularity: hottest expert used by {np.median(hottest):.3f} of tokens (median layer; "
        f"max {hottest.max():.3f}), effective experts k^2/sum p^2 = {np.median(effective):.1f} "
        f"of {n}, Zipf exponent fit {fit_zipf_exponent(p, k):.2f}"
    )
    print()
    lag_rows = [
        (
            d + 1,
            f"{st.pooled_overlaps[d]:.4f}",
            f"{st.overlaps[:, d].min():.4f}",
            f"{st.overlaps[:, d].max():.4f}",
            f"{chance.mean():.4f}",
        )
        for d in range(args.lags)
    ]
    print(table(("lag d", "rho_d", "layer min", "layer max", "chance"), lag_rows))
    print()
    predicted = _predictions(p, st.overlaps[:, : args.lags], args.max_tokens, 1, "--lags")
    fit = fit_latent(p, st.overlaps, triple)
    predicted["latent (fitted)"] = fit.model.unique_curve(args.max_tokens).mean(axis=1)
    measured = st.pooled_unique
    _print_latent(fit, st.num_experts, k, float(triple.mean()))
    headers = ["T", "windows", "trace U(T)"]
    for label in predicted:
        headers += [label, "err"]
    rows = []
    for i in range(args.max_tokens):
        row: list[Any] = [i + 1, int(st.windows[i]), f"{measured[i]:.2f}"]
        for values in predicted.values():
            row += [f"{values[i]:.2f}", _pct(values[i] / measured[i] - 1.0)]
        rows.append(row)
    print("unique experts per layer (mean over layers), predictions from per-layer statistics")
    print(table(headers, rows))
    misses = {label: float(np.abs(v / measured - 1.0).mean()) for label, v in predicted.items()}
    for label, miss in misses.items():
        print(f"  {label}: mean |relative error| {100 * miss:.2f}% over T = 1..{args.max_tokens}")
    chosen = "latent (fitted)" if choose_predictor(fit) == "latent" else list(predicted)[-2]
    print(
        f"best fit to this trace's U(T): {min(misses, key=lambda m: misses[m])}; predictor "
        f"chosen from the statistics alone (default): {chosen}"
    )
    if args.per_layer:
        print()
        t4 = min(4, args.max_tokens)
        lrows = [
            (
                int(trace.layers[i]) if trace.layers is not None else i,
                f"{hottest[i]:.3f}",
                f"{chance[i]:.4f}",
                *(f"{st.overlaps[i, d]:.4f}" for d in range(args.lags)),
                f"{st.unique[i, t4 - 1]:.2f}",
            )
            for i in range(trace.num_layers)
        ]
        lag_headers = [f"rho_{d + 1}" for d in range(args.lags)]
        print(table(("layer", "hottest p", "chance", *lag_headers, f"U({t4})"), lrows))
    pooled_1 = st.pooled_overlaps[0]
    scale = st.overlaps[:, 0] / pooled_1 if pooled_1 > 0 else np.ones(trace.num_layers)
    print()
    print("# scenario [routing] keys with these statistics (popularity as a Zipf fit):")
    print('popularity = "zipf"')
    print(f"zipf_exponent = {fit_zipf_exponent(p, k):.3f}")
    print("overlaps = [" + ", ".join(f"{v:.4f}" for v in st.pooled_overlaps[: args.lags]) + "]")
    print("layer_overlap_scale = [" + ", ".join(f"{v:.3f}" for v in scale) + "]")
    if args.plot:
        _plot(
            args.plot,
            np.arange(1, args.max_tokens + 1),
            predicted,
            k,
            measured={"trace": measured},
            title=f"{trace.model or args.trace}: top-{k} of {n}, statistics of the trace",
            num_experts=n,
        )
    return 0


def _print_latent(fit: Any, num_experts: int, k: int, triple: float) -> None:
    """The fitted latent (hidden-state) routing law and its topic / hot-set readings."""
    h, share, drift = (fit.model.params[key] for key in ("hidden_size", "share", "drift"))
    hot_share = (share * (num_experts - h) + h) / num_experts
    print(
        f"latent fit (three-token overlap {triple:.4f}): latent set of {h:.1f} experts, "
        f"share {share:.3f} of each token's experts, drift {drift:.4f} per token; "
        f"lag profile within {100 * fit.profile_error:.1f}% of the trace's"
    )
    print(
        f"  read as a topic router: reuse {share:.3f}, drift {drift:.4f} (topic of {h:.1f}); "
        f"as a drifting hot set: h = {h:.1f}, hot share {hot_share:.3f}, drift {drift:.4f}"
    )
    print()


def _predict(args: argparse.Namespace) -> int:
    from simspec import rng as rngs
    from simspec.routing.maxent import sampled_unique_curve
    from simspec.routing.popularity import draw_inclusion_probabilities

    check_range("--tokens", args.tokens, 1, 16)
    check_range("--batch", args.batch, 1, 4096)
    check_range("--samples", args.samples, 0, 1_000_000)
    check_range("--seed", args.seed, 0, 2**63 - 1)
    shape = catalog_entry("model", args.model, "--model").shape
    if not shape.num_moe_layers:
        raise InputError("command line", "--model", "a Mixture-of-Experts model", args.model)
    overlaps = np.asarray(args.overlap, dtype=float)
    if len(overlaps) > MAX_LAGS or not ((overlaps >= 0) & (overlaps <= 1)).all():
        raise InputError(
            "command line", "--overlap", f"at most {MAX_LAGS} overlaps in [0, 1]", str(args.overlap)
        )
    law_params = {name: getattr(args, name) for name, _, _ in _law_parameters()}
    for name, value in law_params.items():
        if not (np.isfinite(value) and value > 0):
            raise InputError("command line", _flag(name), "a positive number", str(value))
    if args.plot is not None:
        check_outputs([("--plot", args.plot)])
        check_writable(args.plot, "--plot", stdout=False)
    config = RoutingConfig(popularity=args.popularity, **law_params)
    layers, n, k = shape.num_moe_layers, shape.num_experts, shape.experts_per_token
    p = draw_inclusion_probabilities(config, layers, n, k, rngs.stream(args.seed, "popularity"))
    chance = chance_overlap(p, k, layer_mean=True)
    profile = " ".join(f"{v:g}" for v in overlaps) if len(overlaps) else "independent"
    print(
        f"{args.model}: top-{k} of {n} routed experts, {layers} MoE layers, {args.popularity} "
        f"popularity (chance overlap {chance:.4f}); overlaps {profile}; batch {args.batch}"
    )
    predicted = _predictions(p, overlaps, args.tokens, args.batch, "--overlap")
    measured: dict[str, np.ndarray] = {}
    if args.samples:
        measured["sampled"] = sampled_unique_curve(
            p,
            overlaps,
            args.tokens,
            args.batch,
            args.samples,
            rngs.stream(args.seed, "routing", 0),
        )
    best = list(predicted)[-1]
    headers = ["T", *predicted, "/ k_e", "vs independent", *measured]
    rows = []
    for i in range(args.tokens):
        row: list[Any] = [i + 1, *(f"{v[i]:.2f}" for v in predicted.values())]
        row += [
            f"{predicted[best][i] / k:.2f}",
            _pct(predicted[best][i] / predicted["independent"][i] - 1.0),
        ]
        row += [f"{v[i]:.2f}" for v in measured.values()]
        rows.append(row)
    print(table(headers, rows))
    if args.plot:
        _plot(
            args.plot,
            np.arange(1, args.tokens + 1),
            predicted,
            k,
            measured=measured,
            title=f"{args.model}: top-{k} of {n}, {args.popularity} popularity, "
            f"overlaps {profile}, B = {args.batch}",
            num_experts=n,
        )
    return 0
