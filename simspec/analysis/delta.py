"""Delta-space analysis of the oracle's decisions: a boundary test that can fail.

For every state i on the oracle's path and every candidate extension k → k+1 (k = 0..K−1) we
record the marginal expected progress and the marginal cost:

* ΔE[a] = c_{i,1}·…·c_{i,k+1}: the drafter's (calibrated) probability that all k+1 drafts are
  accepted, i.e. the expected extra committed tokens the (k+1)-th draft buys;
* ΔE[cost] = cost(i, k+1) − cost(i, k) (seconds: one draft step plus the verify growth,
  counterfactual experts of rejected drafts included);
* Δa = 1 if m_i ≥ k+1 else 0: the hindsight form of ΔE[a].

An extension is *chosen* when k+1 ≤ k*_i (the oracle drafted at least k+1) and *rejected*
otherwise. Amankulov & Mamatin (arXiv 2609.22156) report that the rejected candidates lie above
a straight line through the origin, ΔE[cost] = λ·ΔE[a], whose slope is a time per token: extend
while ΔE[cost] < λ·ΔE[a]. Through the origin a point's side depends only on its ratio
r = ΔE[cost] / ΔE[a], so the best line is a 1-D threshold on r: we fit the λ that misclassifies
fewest points (:func:`fit_slope`) and report

* the misclassified fraction, λ against the oracle's cost per committed token g = V(1)/tokens;
* the margin: half the gap between the two ratios either side of λ (a hard-margin analogue;
  near 0 when the classes interleave) and how deep the misclassified points sit (|r − λ|/λ);
* the AUC: P(r_rejected > r_chosen), threshold-free (1 = strict boundary, 0.5 = no relation);
* the *local condition on all extensions*: Δcost ≶ Δa·[V(i+k+1) − V(i+k+2)] (chosen ≤,
  rejected ≥). Optimality implies it only for the binding pair k* − 1 → k* and k* → k*+1,
  where it is exactly the DP's own argmin (``dp_consistency_violations`` must be 0 and checks
  this code, not the physics); on every other extension it can fail (non-convex cost in k);
* two controls showing the test can fail: the labels shuffled (permutation), and the whole
  analysis redone on random, physically meaningless cost tables (i.i.d. uniform over the real
  table's range) solved by the same DP on the same match lengths and confidences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simspec.analysis.oracle import RequestTables, solve

#: Label permutations of the permutation control.
PERMUTATIONS = 200


@dataclass(frozen=True)
class DeltaPoints:
    """All candidate extensions on the oracle's paths, as flat arrays."""

    request_id: np.ndarray
    state: np.ndarray
    k: np.ndarray  # the extension is k -> k+1
    delta_a: np.ndarray  # hindsight, 0 or 1
    delta_a_expected: np.ndarray
    delta_cost_s: np.ndarray
    local_slope_s: np.ndarray  # V(i+k+1) − V(i+k+2) where k+1 ≤ m_i, else 0
    chosen: np.ndarray  # bool
    binding: np.ndarray  # bool: k == k* − 1 or k == k*
    cost_s: np.ndarray  # cost(i, k) before the extension


def delta_points(tables: dict[int, RequestTables]) -> DeltaPoints:
    """Collect the extensions k → k+1, k = 0..K−1, at every state of every oracle path."""
    cols: dict[str, list[np.ndarray]] = {name: [] for name in DeltaPoints.__dataclass_fields__}
    for rid in sorted(tables):
        t = tables[rid]
        states = np.array(t.path(), dtype=np.int64)
        if len(states) == 0:
            continue
        kmax = t.cost_s.shape[1] - 1
        ks = np.arange(kmax)
        i = np.repeat(states, kmax)
        k = np.tile(ks, len(states))
        m = t.match_lengths[i]
        best = t.choice[i]
        conf = t.confidences[states][:, :kmax]
        last = len(t.choice)
        after = np.minimum(i + k + 1, last)
        after2 = np.minimum(i + k + 2, last)
        accepted = m >= k + 1
        cols["request_id"].append(np.full(len(i), rid))
        cols["state"].append(i)
        cols["k"].append(k)
        cols["delta_a"].append(accepted.astype(float))
        cols["delta_a_expected"].append(np.cumprod(conf, axis=1).ravel())
        cols["delta_cost_s"].append(t.cost_s[i, k + 1] - t.cost_s[i, k])
        cols["local_slope_s"].append(np.where(accepted, t.value_s[after] - t.value_s[after2], 0.0))
        cols["chosen"].append(k + 1 <= best)
        cols["binding"].append((k == best - 1) | (k == best))
        cols["cost_s"].append(t.cost_s[i, k])
    return points_from_columns(cols)


def points_from_columns(cols: dict[str, list[np.ndarray]]) -> DeltaPoints:
    """:class:`DeltaPoints` from per-request column pieces (empty columns as empty arrays)."""
    empty = {"chosen": np.zeros(0, dtype=bool), "binding": np.zeros(0, dtype=bool)}
    return DeltaPoints(
        **{
            name: np.concatenate(v) if v else empty.get(name, np.zeros(0))
            for name, v in cols.items()
        }
    )


def _sorted_ratios(
    delta_a: np.ndarray, delta_cost: np.ndarray, chosen: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    keep = delta_a > 0
    ratio = delta_cost[keep] / delta_a[keep]
    order = np.argsort(ratio, kind="stable")
    return ratio[order], np.asarray(chosen[keep], dtype=bool)[order]


def _split_errors(labels: np.ndarray) -> np.ndarray:
    """Errors of a threshold before sorted position p, p = 0..n (chosen below, rejected above)."""
    chosen_after = np.concatenate([np.cumsum(labels[::-1])[::-1], [0]])
    rejected_before = np.concatenate([[0], np.cumsum(~labels)])
    return chosen_after + rejected_before


def _best_split(ratio: np.ndarray, errors: np.ndarray) -> tuple[float, int, float]:
    """(slope, position, half-gap) of the fewest-errors threshold on sorted ``ratio``."""
    p = int(np.argmin(errors))
    if p == 0:
        return float(ratio[0] - abs(ratio[0]) * 0.5 - 1e-12), p, float(abs(ratio[0]) * 0.5)
    if p == len(ratio):
        return float(ratio[-1] + abs(ratio[-1]) * 0.5 + 1e-12), p, float(abs(ratio[-1]) * 0.5)
    return float(0.5 * (ratio[p - 1] + ratio[p])), p, float(0.5 * (ratio[p] - ratio[p - 1]))


def fit_slope(delta_a: np.ndarray, delta_cost: np.ndarray, chosen: np.ndarray) -> tuple[float, int]:
    """Slope s of the line Δcost = s·Δa through the origin that misclassifies fewest points.

    Only points with Δa > 0 carry information. Returns (s, misclassified); s is the midpoint of
    the best gap between sorted ratios Δcost / Δa.
    """
    ratio, labels = _sorted_ratios(delta_a, delta_cost, chosen)
    if len(ratio) == 0:
        return 0.0, 0
    errors = _split_errors(labels)
    slope, p, _ = _best_split(ratio, errors)
    return slope, int(errors[p])


def auc(delta_a: np.ndarray, delta_cost: np.ndarray, chosen: np.ndarray) -> float:
    """P(ratio of a rejected extension > ratio of a chosen one), ties counted half."""
    ratio, labels = _sorted_ratios(delta_a, delta_cost, chosen)
    r_chosen, r_rejected = ratio[labels], ratio[~labels]  # both sorted
    if len(r_chosen) == 0 or len(r_rejected) == 0:
        return float("nan")
    below = np.searchsorted(r_rejected, r_chosen, side="left")
    ties = np.searchsorted(r_rejected, r_chosen, side="right") - below
    above = len(r_rejected) - below - ties
    return float((above.sum() + 0.5 * ties.sum()) / (len(r_chosen) * len(r_rejected)))


def oracle_cost_per_token_s(points: DeltaPoints) -> float:
    """The oracle's cost per committed token, Σ cost(i, k*_i) / Σ (min(k*_i, m_i) + 1).

    Recovered from the points alone: cost(i, k*) = cost(i, 0) + the chosen Δcost, and the
    tokens committed at i = 1 + the chosen extensions accepted in hindsight. NaN without points.
    """
    if len(points.k) == 0:
        return float("nan")
    first = points.k == 0
    cost = points.cost_s[first].sum() + points.delta_cost_s[points.chosen].sum()
    tokens = first.sum() + points.delta_a[points.chosen].sum()
    return float(cost / tokens)


def drafts_to_first_rejection_fraction(points: DeltaPoints) -> float:
    """Share of the oracle's states where it drafts exactly min(m_i, K): up to the first draft
    the target rejects, known in hindsight. (k*_i = the chosen extensions at i; min(m_i, K) =
    the extensions accepted in hindsight.)"""
    if len(points.k) == 0:
        return float("nan")
    _, group = np.unique(np.stack([points.request_id, points.state]), axis=1, return_inverse=True)
    group = group.ravel()
    chosen = np.bincount(group, weights=points.chosen.astype(float))
    accepted = np.bincount(group, weights=points.delta_a)
    return float(np.mean(chosen == accepted))


def separation(points: DeltaPoints) -> dict[str, Any]:
    """The best line through the origin and how well it separates chosen from rejected."""
    a, cost, chosen = points.delta_a_expected, points.delta_cost_s, points.chosen
    n = len(points.k)
    ratio, labels = _sorted_ratios(a, cost, chosen)
    if n == 0 or len(ratio) == 0:
        nan = float("nan")
        return {"points": n, "fitted_slope_s_per_token": nan, "misclassified": 0,
                "misclassified_fraction": nan, "misclassified_over_trivial": nan,
                "margin_s_per_token": nan, "margin_rel": nan,
                "misclassified_depth_rel": nan, "auc": nan,
                "auc_progress_only": nan}  # fmt: skip
    slope, _, half_gap = _best_split(ratio, _split_errors(labels))
    side = cost - slope * a  # < 0 below the line
    wrong = np.where(chosen, side > 0, side < 0)
    positive = a > 0
    trivial = min(int(chosen.sum()), n - int(chosen.sum()))
    depth = np.abs(cost[wrong & positive] / a[wrong & positive] - slope) / abs(slope)
    return {
        "points": n,
        "fitted_slope_s_per_token": slope,
        "misclassified": int(wrong.sum()),
        "misclassified_fraction": float(wrong.mean()),
        # The same error relative to the best rule with no line at all (label every point with
        # the majority class): 1 = the line explains nothing; comparable across class balances.
        "misclassified_over_trivial": float(wrong.sum() / trivial) if trivial else float("nan"),
        "margin_s_per_token": half_gap,
        "margin_rel": half_gap / abs(slope) if slope else float("nan"),
        "misclassified_depth_rel": float(np.median(depth)) if len(depth) else 0.0,
        "auc": auc(a, cost, chosen),
        # The same AUC from ΔE[a] alone (ignoring the cost axis): how much the cost adds.
        "auc_progress_only": auc(np.ones_like(a), -a, chosen),
    }


def permutation_control(
    points: DeltaPoints, rng: np.random.Generator, permutations: int = PERMUTATIONS
) -> dict[str, float]:
    """Refit the line on shuffled labels: the misclassified fraction with no relation, and the
    permutation p-value of the real fit (the share of shuffles that fit at least as well)."""
    ratio, labels = _sorted_ratios(points.delta_a_expected, points.delta_cost_s, points.chosen)
    if len(ratio) == 0:
        return {"misclassified_fraction": float("nan"), "p_value": float("nan")}
    real = int(_split_errors(labels).min())
    shuffled = np.array([_split_errors(rng.permutation(labels)).min() for _ in range(permutations)])
    return {
        "misclassified_fraction": float(shuffled.mean() / len(ratio)),
        "p_value": float((1 + (shuffled <= real).sum()) / (1 + permutations)),
    }


def random_tables(
    tables: dict[int, RequestTables], rng: np.random.Generator
) -> dict[int, RequestTables]:
    """The same requests with i.i.d. uniform cost tables over each real table's range, re-solved
    by the oracle's DP on the same transitions (match lengths) and confidences."""
    out = {}
    for rid in sorted(tables):
        t = tables[rid]
        body = t.cost_s[1:]
        cost = np.zeros_like(t.cost_s)
        cost[1:] = rng.uniform(float(body.min()), float(body.max()), size=body.shape)
        value, choice = solve(cost, t.next_state)
        out[rid] = replace(t, cost_s=cost, value_s=value, choice=choice)
    return out


def local_condition(points: DeltaPoints) -> np.ndarray:
    """Per point: does Δcost ≶ Δa·[V(i+k+1) − V(i+k+2)] hold (chosen ≤, rejected ≥)?"""
    rhs = points.delta_a * points.local_slope_s
    scale = 1e-9 * np.maximum(np.abs(points.delta_cost_s), np.abs(rhs))
    return np.where(
        points.chosen, points.delta_cost_s <= rhs + scale, points.delta_cost_s >= rhs - scale
    )


def analyse(
    tables: dict[int, RequestTables],
    rng: np.random.Generator | None = None,
    points_of: Callable[[dict[int, RequestTables]], DeltaPoints] = delta_points,
) -> tuple[DeltaPoints, dict[str, Any]]:
    """Points and the summary (module docstring); ``rng`` drives the two controls.

    Without ``rng`` the controls use a fixed default stream (results stay reproducible).
    ``points_of`` collects the extensions of a set of tables (the tree oracle's:
    :func:`simspec.analysis.tree_delta.ladder_points`).
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    pts = points_of(tables)
    summary = separation(pts)
    g = oracle_cost_per_token_s(pts)
    slope = summary["fitted_slope_s_per_token"]
    ok = local_condition(pts)
    n = max(len(pts.k), 1)
    perm = permutation_control(pts, rng)
    rand_pts = points_of(random_tables(tables, rng))
    rand = separation(rand_pts)
    summary.update(
        chosen=int(pts.chosen.sum()),
        rejected=int((~pts.chosen).sum()),
        oracle_time_per_token_s=g,
        drafts_to_first_rejection_fraction=drafts_to_first_rejection_fraction(pts),
        slope_over_oracle_cost=slope / g if g and np.isfinite(g) else float("nan"),
        local_condition_violations_all_extensions=int((~ok).sum()),
        local_condition_violation_fraction=float((~ok).sum() / n),
        binding_decisions=int(pts.binding.sum()),
        dp_consistency_violations=int((~ok & pts.binding).sum()),
        control_permutation_misclassified_fraction=perm["misclassified_fraction"],
        control_permutation_p_value=perm["p_value"],
        control_random_tables_misclassified_fraction=rand["misclassified_fraction"],
        control_random_tables_misclassified_over_trivial=rand["misclassified_over_trivial"],
        control_random_tables_auc=rand["auc"],
        control_random_tables_local_condition_violation_fraction=float(
            (~local_condition(rand_pts)).sum() / max(len(rand_pts.k), 1)
        ),
    )
    # JSON has no NaN: an undefined number (no points, one class empty) is null.
    finite = {
        k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in summary.items()
    }
    return pts, finite


def completed(points: DeltaPoints, summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with the numbers it lacks (or has as null) computed from ``points``.

    A sweep's figure gets only the fitted slope; the oracle's cost per token then comes from the
    points (it was drawn as 0 before). The controls need the tables and stay absent.
    """
    full: dict[str, Any] = {
        "oracle_time_per_token_s": oracle_cost_per_token_s(points),
        **separation(points),
    }
    full.update((k, v) for k, v in summary.items() if v is not None)
    return full


def control_failure(summary: dict[str, Any]) -> str | None:
    """Why the separation says nothing, or None: a line that misclassifies at least as much
    of the oracle's decisions as it does with random cost tables (the control) has not found
    a boundary the costs explain."""
    found = summary.get("misclassified_fraction")
    random_ = summary.get("control_random_tables_misclassified_fraction")
    if found is None or random_ is None or found < random_:
        return None
    return (
        f"the analysis failed its control: the line misclassifies {100 * found:.1f} % of the "
        f"extensions, no fewer than with random cost tables ({100 * random_:.1f} %), so it "
        "is no boundary here"
    )


def describe(summary: dict[str, Any]) -> str:
    """One line for people: the boundary, how well it separates, and the controls."""

    def num(key: str, scale: float = 1.0, fmt: str = ".3f") -> str:
        v = summary.get(key)
        return "n/a" if v is None else format(v * scale, fmt)

    control = "control_random_tables_"
    return (
        f"{summary.get('points', 0)} extensions ({summary.get('chosen', 0)} chosen); best line "
        f"through the origin {num('fitted_slope_s_per_token', 1e3)} ms/token vs the oracle's "
        f"{num('oracle_time_per_token_s', 1e3)} ms per committed token; "
        f"{num('misclassified_fraction', 100, '.1f')} % misclassified, AUC {num('auc', 1, '.2f')} "
        f"(random cost tables: {num(control + 'misclassified_fraction', 100, '.1f')} %, "
        f"AUC {num(control + 'auc', 1, '.2f')}; shuffled labels: "
        f"{num('control_permutation_misclassified_fraction', 100, '.1f')} %); local condition "
        f"fails on {num('local_condition_violation_fraction', 100, '.1f')} % of all extensions"
        + (f"; WARNING: {failure}" if (failure := control_failure(summary)) else "")
    )
