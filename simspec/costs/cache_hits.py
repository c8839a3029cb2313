"""What an expert cache on the GPU holds: the expected fraction of a pass's experts found
resident, per MoE layer, for each cache policy (:mod:`simspec.costs.offload` prices the rest).

Expected hit rate (analytic routing, and every policy's cost estimate). A pass uses expert e
with probability q_e = 1 − (1 − p_e)^n, p_e the per-token inclusion probability of the routing
model's popularity law and n chosen so that Σ_e q_e equals the pass's expected union u_l (which
carries the temporal overlap of its tokens). Then:

* ``static`` (the C most popular experts pinned) and ``lfu`` (in steady state an LFU cache holds
  the most frequently used experts): H = Σ_{e ∈ top C} q_e / Σ_e q_e;
* ``lru``: Che's approximation with one step of memory. Consecutive passes share experts beyond
  chance (lag-1 reuse R = (2U(n) − U(2n)) / U(n) from the routing's own statistics); expert e
  reappears after a pass that used it with r_e = q_e + λ(1 − q_e) (λ fitted so the q-weighted
  mean of r_e is R) and after one that did not with q'_e = q_e(1 − r_e)/(1 − q_e) (stationary).
  Under LRU an expert is resident iff it was used in the last T passes; T solves
  Σ_e P(used in the last T passes) = C, and e hits with 1 − (1 − r_e)(1 − q'_e)^(T−1). With
  independent routing (r_e = q_e) this is Che's approximation; with uniform popularity it gives
  the resident fraction C/N. T < 1 (C < u) interpolates linearly (hit_e = T·r_e);
* ``none``: nothing is cached (H = 0; a staging buffer holds one layer's experts).

A per-request working set (``[routing] working_set`` = c): each of the pass's B requests draws
its per-token inclusion probabilities k_e·g, g ~ Dirichlet(c·N·p/k_e) (c per expert around the
layer's popularity p; clipped at 1 and the excess spread over the others), so the pass uses e
with 1 − Π_b (1 − p_e^(b))^n. The LRU hit rate above is the mean over :data:`WORKING_SET_DRAWS`
fixed draws of the B popularities (a quadrature: the same draws for every scenario and seed).
Checked against an exact LRU replay of such routing (``tests/costs/test_offload.py``); static
and LFU caches keep the layer's most popular experts, which the working sets average out to.
"""

from __future__ import annotations

import numpy as np

#: Most Newton steps of the expected-hit solvers (they stop once converged).
_STEPS = 60
#: Upper end of the tokens-per-pass and LRU-window brackets (passes, tokens).
_BIG = 1e7
#: Draws of the batch's per-request popularities the working-set hit rate averages over.
WORKING_SET_DRAWS = 64


def usage_probabilities(inclusion: np.ndarray, union: np.ndarray) -> np.ndarray:
    """Per layer and expert, the probability q_e that a pass uses expert e: 1 − (1 − p_e)^n
    with n solved per layer so that Σ_e q_e = ``union`` (module docstring).

    ``inclusion`` (L, N) p_e per token (rows sum to k_e); ``union`` (L,) expected distinct
    experts of the pass. A union at or above the experts that can be used gives q = 1 for them.
    """
    p = np.clip(np.asarray(inclusion, dtype=float), 0.0, 1.0)
    u = np.asarray(union, dtype=float)
    log1m = np.log1p(-np.minimum(p, 1 - 1e-15))  # (L, N)
    # Newton from below: Σ_e 1 − (1 − p_e)^n is concave in n and at most n·Σp, so n = u/Σp
    # starts left of the root and every step stays left of it.
    # A row stops once converged, so its answer does not depend on the rows solved with it.
    n = u / np.maximum(p.sum(axis=1), 1e-300)
    done = np.zeros(len(u), dtype=bool)
    for _ in range(_STEPS):
        stay = np.exp(n[:, None] * log1m)
        gap = u - (1 - stay).sum(axis=1)
        done |= np.abs(gap) <= 1e-12 * np.maximum(u, 1)
        if done.all():
            break
        slope = -(stay * log1m).sum(axis=1)
        step = np.divide(gap, slope, out=np.full_like(gap, _BIG), where=slope > 0)
        n = np.where(done, n, np.minimum(n + step, _BIG))
    return -np.expm1(n[:, None] * log1m)


def request_inclusion(
    inclusion: np.ndarray, concentration: float, requests: int, draws: int = WORKING_SET_DRAWS
) -> np.ndarray:
    """Per-token inclusion probabilities of a pass of ``requests`` requests with working sets
    (module docstring): (draws, N) rows 1 − Π_b (1 − p_e^(b)) for one layer's ``inclusion``
    (N,) p_e (summing to k_e). The draws come from a fixed stream: an expectation's nodes."""
    p = np.clip(np.asarray(inclusion, dtype=float), 0.0, None)
    k = float(p.sum())
    alpha = np.maximum(concentration * len(p) * p / max(k, 1e-300), 1e-300)
    rng = np.random.default_rng(0)
    stay = np.zeros((draws, len(p)))
    for _ in range(max(requests, 1)):
        g = rng.dirichlet(alpha, size=draws) * k
        for _ in range(len(p)):  # clip at 1, the excess spread over the unclipped in proportion
            over = g > 1.0
            if not over.any():
                break
            excess = np.where(over, g - 1.0, 0.0).sum(axis=1, keepdims=True)
            g = np.minimum(g, 1.0)
            free = np.where(g < 1.0, g, 0.0)
            g = g + excess * np.divide(
                free, free.sum(axis=1, keepdims=True), out=np.zeros_like(free), where=free > 0
            )
        stay += np.log1p(-np.minimum(g, 1 - 1e-12))
    return -np.expm1(stay)


def hit_fractions(
    inclusion: np.ndarray,
    union: np.ndarray,
    capacity: float,
    policy: str,
    reuse: np.ndarray | float = 0.0,
    working_set: float = 0.0,
    requests: int = 1,
) -> np.ndarray:
    """Expected fraction of a pass's union found resident, per MoE layer (module docstring).

    ``capacity`` experts per layer; ``policy`` lru, lfu, static or none; ``reuse`` the lag-1
    reuse R of consecutive passes (a float or one per layer; ignored unless lru);
    ``working_set`` the per-request working sets' concentration (0: none) of the pass's
    ``requests`` requests (lru only).
    """
    u = np.asarray(union, dtype=float)
    if policy == "none" or capacity <= 0:
        return np.zeros(len(u))
    p = np.asarray(inclusion, dtype=float)
    r = np.broadcast_to(np.asarray(reuse, dtype=float), u.shape)
    # Layers with the same popularity, union and reuse have the same answer: solve each once.
    rows = np.concatenate([p, u[:, None], r[:, None]], axis=1)
    distinct, index = np.unique(rows, axis=0, return_inverse=True)
    if len(distinct) < len(rows):
        n = p.shape[1]
        answer = hit_fractions(
            distinct[:, :n],
            distinct[:, n],
            capacity,
            policy,
            distinct[:, n + 1],
            working_set,
            requests,
        )
        return answer[index.ravel()]
    if policy == "lru" and working_set > 0:
        return _working_set_hits(p, u, capacity, r, working_set, requests)
    q = usage_probabilities(p, u)
    total = q.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    if capacity >= q.shape[1]:
        return np.ones(len(u))
    if policy in ("static", "lfu"):
        c = int(capacity)
        order = np.argsort(-p, axis=1, kind="stable")
        resident = np.take_along_axis(q, order[:, :c], axis=1).sum(axis=1)
        frac = capacity - c  # a fractional slot holds part of the next expert
        if frac and c < q.shape[1]:
            resident += frac * np.take_along_axis(q, order[:, c : c + 1], axis=1)[:, 0]
        return np.where(total > 0, resident / safe, 1.0)
    if policy != "lru":
        raise ValueError(f"unknown cache policy {policy!r}")
    return _lru_hits(q, total, safe, float(capacity), r)


def _working_set_hits(
    inclusion: np.ndarray,
    union: np.ndarray,
    capacity: float,
    reuse: np.ndarray | float,
    working_set: float,
    requests: int,
) -> np.ndarray:
    """LRU hits per layer with per-request working sets: :func:`_lru_hits` on each draw of the
    batch's popularities (:func:`request_inclusion`), averaged (module docstring)."""
    p = np.asarray(inclusion, dtype=float)
    r = np.broadcast_to(np.asarray(reuse, dtype=float), union.shape)
    out = np.empty(len(union))
    for layer in range(len(union)):
        drawn = request_inclusion(p[layer], working_set, requests)
        u = np.full(len(drawn), union[layer])
        q = usage_probabilities(drawn, u)
        total = q.sum(axis=1)
        safe = np.where(total > 0, total, 1.0)
        if capacity >= q.shape[1]:
            out[layer] = 1.0
            continue
        hits = _lru_hits(q, total, safe, float(capacity), np.full(len(drawn), r[layer]))
        out[layer] = float(np.mean(hits))
    return out


def _lru_hits(
    q: np.ndarray, total: np.ndarray, safe: np.ndarray, capacity: float, reuse: np.ndarray
) -> np.ndarray:
    """Che's approximation with lag-1 memory (module docstring), per layer."""
    sq = (q * q).sum(axis=1)
    spread = (q * (1 - q)).sum(axis=1)
    lam = np.clip(
        np.divide(reuse * total - sq, spread, out=np.zeros_like(total), where=spread > 1e-12),
        0.0,
        1.0,
    )
    r = q + lam[:, None] * (1 - q)
    q_after_miss = np.divide(q * (1 - r), 1 - q, out=np.ones_like(q), where=q < 1 - 1e-12)
    log_stay = np.log1p(-np.minimum(q_after_miss, 1 - 1e-15))
    usable = np.count_nonzero(q > 0, axis=1)

    # T solves occupancy(T) = C: linear (T · Σq) up to one pass, then concave and at most T · Σq,
    # so Newton from T = C / Σq stays left of the root.
    t = capacity / safe
    done = t <= 1
    for _ in range(_STEPS if not done.all() else 0):
        decay = (1 - q) * np.exp(np.maximum(t - 1, 0)[:, None] * log_stay)
        gap = capacity - (1 - decay).sum(axis=1)
        done |= np.abs(gap) <= 1e-12 * capacity
        if done.all():
            break
        slope = -(decay * log_stay).sum(axis=1)
        step = np.divide(gap, slope, out=np.full_like(gap, _BIG), where=slope > 0)
        t = np.where(done, t, np.minimum(t + step, _BIG))
    hit = np.where(
        t[:, None] >= 1,
        1 - (1 - r) * np.exp(np.maximum(t - 1, 0)[:, None] * log_stay),
        t[:, None] * r,
    )
    fraction = (q * hit).sum(axis=1) / safe
    return np.where((usable <= capacity) | (total <= 0), 1.0, np.clip(fraction, 0.0, 1.0))


def pair_reuse(single: np.ndarray, double: np.ndarray) -> np.ndarray:
    """Lag-1 reuse of consecutive passes, per layer: (2U(n) − U(2n)) / U(n) from the expected
    union of one pass (``single``) and of two consecutive ones (``double``), in [0, 1]."""
    single = np.asarray(single, dtype=float)
    shared = 2 * single - np.asarray(double, dtype=float)
    out = np.divide(shared, single, out=np.zeros_like(single), where=single > 0)
    return np.clip(out, 0.0, 1.0)
