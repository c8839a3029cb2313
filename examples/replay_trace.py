"""Replay a recorded trace, then run the same policies on the trace's statistics alone.

python examples/replay_trace.py

scenarios/replay-tiny-mixtral.toml replays scenarios/traces/tiny-mixtral-8x7b.npz (made by
`simspec record`, see the scenario file): every request's routing, draft outcomes and draft
confidences are those recorded. The second run replaces the trace with what `simspec routing
stats` summarises it by (a Zipf popularity fit and pooled lag overlaps, sampled by Monte Carlo)
and a per-slot acceptance law with the trace's conditional acceptance rates: the gap between the
two runs is what those statistics leave out.
"""

from pathlib import Path

import simspec
from simspec.routing.trace import estimate_statistics, fit_zipf_exponent, load_trace

scenarios = Path(__file__).resolve().parents[1] / "scenarios"
replayed = simspec.load_scenario(scenarios / "replay-tiny-mixtral.toml")
trace = load_trace(scenarios / "traces" / "tiny-mixtral-8x7b.npz")
stats = estimate_statistics(trace, max_lag=2, max_tokens=4)
zipf = fit_zipf_exponent(stats.inclusion_probabilities, stats.experts_per_token)
accepted = trace.drafts.accepted
# P(draft j accepted | drafts 1..j-1 accepted): the per_position law with the same match lengths
alphas = [accepted[accepted[:, :j].all(axis=1), j].mean() for j in range(accepted.shape[1])]
print(
    f"trace: {len(trace.sequence_starts)} sequences, {trace.num_tokens} tokens, Zipf fit "
    f"{zipf:.2f}, rho_1 {stats.pooled_overlaps[0]:.3f}, U(4) {stats.pooled_unique[3]:.2f} "
    f"experts, slot acceptance " + " ".join(f"{a:.3f}" for a in alphas)
)
statistics = simspec.with_overrides(
    replayed,
    {
        "routing": {
            "popularity": "zipf",
            "zipf_exponent": round(zipf, 3),
            "overlaps": [round(float(v), 4) for v in stats.pooled_overlaps],
        },
        "acceptance": {"process": "per_position", "alphas": [round(float(a), 4) for a in alphas]},
    },
)
for title, scenario in (("replayed trace", replayed), ("trace statistics", statistics)):
    print(title)
    for row in simspec.run(scenario).policies:
        print(
            f"  {row.label:>8}: acceptance length {row.acceptance_length:.3f}, unique experts "
            f"{row.unique_experts_per_layer:.2f}/layer, speedup {row.speedup_vs_no_spec:.3f}x"
        )
