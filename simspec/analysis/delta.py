"""Delta-space analysis of the oracle's decisions.

For every state i on the oracle's path and every candidate extension k → k+1, we record the
marginal progress and the marginal cost:

* hindsight: Δa = 1 if m_i ≥ k+1 else 0 (the extra draft would be accepted);
* expected: ΔE[a] = c_{i,1}·…·c_{i,k+1}, the drafter's (calibrated) probability that all k+1
  drafts are accepted;
* Δcost = cost(i, k+1) − cost(i, k) (seconds: one draft step plus the verify growth,
  counterfactual experts included).

An extension is *chosen* when k+1 ≤ k*_i (the oracle drafted at least k+1) and *rejected*
otherwise. Amankulov & Mamatin (arXiv 2609.22156) find that in the (ΔE[a], ΔE[cost]) plane the
rejected candidates lie above a straight line through the origin whose slope is a time per token:
extend while ΔE[cost] < g·ΔE[a]. We fit that line (the slope that misclassifies fewest points),
and check the exact local form of the condition on the oracle's binding decisions (the last
extension it took and the first it declined): with V the DP values,

    chosen  (k = k* − 1):  Δcost ≤ Δa·[V(i+k+1) − V(i+k+2)]
    rejected (k = k*):     Δcost ≥ Δa·[V(i+k+1) − V(i+k+2)]   (Δa = 0 makes it Δcost ≥ 0)

which optimality implies, so its violation count must be zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.analysis.oracle import RequestTables


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
    return DeltaPoints(
        **{name: (np.concatenate(v) if v else np.zeros(0)) for name, v in cols.items()}
    )


def fit_slope(delta_a: np.ndarray, delta_cost: np.ndarray, chosen: np.ndarray) -> tuple[float, int]:
    """Slope s of the line Δcost = s·Δa through the origin that misclassifies fewest points.

    Only points with Δa > 0 carry information. Returns (s, violations); s is the midpoint of
    the best gap between sorted ratios Δcost / Δa.
    """
    keep = delta_a > 0
    ratio = delta_cost[keep] / delta_a[keep]
    label = chosen[keep]
    if len(ratio) == 0:
        return 0.0, 0
    order = np.argsort(ratio, kind="stable")
    r, lab = ratio[order], label[order]
    # Threshold between positions p-1 and p: chosen at or after p and rejected before p err.
    chosen_after = np.concatenate([np.cumsum(lab[::-1])[::-1], [0]])
    rejected_before = np.concatenate([[0], np.cumsum(~lab)])
    errors = chosen_after + rejected_before
    p = int(np.argmin(errors))
    if p == 0:
        slope = r[0] - abs(r[0]) * 0.5 - 1e-12
    elif p == len(r):
        slope = r[-1] + abs(r[-1]) * 0.5 + 1e-12
    else:
        slope = 0.5 * (r[p - 1] + r[p])
    return float(slope), int(errors[p])


def analyse(tables: dict[int, RequestTables]) -> tuple[DeltaPoints, dict[str, Any]]:
    """Points and the summary: fitted slope, oracle time per token, margin, violations."""
    pts = delta_points(tables)
    slope, violations = fit_slope(pts.delta_a_expected, pts.delta_cost_s, pts.chosen)
    tokens = sum(len(t.choice) - 1 for t in tables.values())
    time = sum(float(t.value_s[1]) for t in tables.values())
    side = pts.delta_cost_s - slope * pts.delta_a_expected  # < 0 below the line
    correct = np.where(pts.chosen, side <= 0, side >= 0) & (pts.delta_a_expected > 0)
    margin = float(np.min(np.abs(side[correct]))) if correct.any() else 0.0
    bind = pts.binding
    local_ok = np.where(
        pts.chosen,
        pts.delta_cost_s <= pts.delta_a * pts.local_slope_s + 1e-12,
        pts.delta_cost_s >= pts.delta_a * pts.local_slope_s - 1e-12,
    )
    summary = {
        "points": len(pts.k),
        "chosen": int(pts.chosen.sum()),
        "rejected": int((~pts.chosen).sum()),
        "fitted_slope_s_per_token": slope,
        "fit_violations": violations,
        "oracle_time_per_token_s": time / tokens if tokens else 0.0,
        "margin_s": margin,
        "binding_decisions": int(bind.sum()),
        "local_condition_violations": int((~local_ok & bind).sum()),
        "local_condition_violations_all_extensions": int((~local_ok).sum()),
    }
    return pts, summary
