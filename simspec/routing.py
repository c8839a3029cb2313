"""Monte-Carlo expert routing with popularity skew and temporal overlap.

In every MoE layer a token activates exactly ``k_e`` of ``N`` routed experts. Two properties of
real routers matter for verification cost (reference physics §7):

* **popularity**: some experts are chosen more often (uniform, Zipf or Dirichlet weights,
  a different hot set per layer);
* **temporal overlap**: consecutive tokens of one sequence reuse experts. ``overlap`` is the lag-1
  overlap rho_1 = E|S_t ∩ S_{t-1}| / k_e. Independent routing has rho_1 = Σ p_e² / k_e (= k_e/N
  when uniform); real routers are far above (about 0.38 for a k_e/N = 1/16 model, physics §1.2).

The sampler follows physics §7.5: token t reuses R ~ Binomial(k_e, rho_1) experts chosen uniformly
from S_{t-1} and fills the other k_e − R slots by weighted sampling without replacement from the
experts not in S_{t-1}, so the lag-1 overlap is exactly rho_1 in expectation. With ``overlap``
unset, tokens are independent weighted samples. Weighted sampling without replacement is done by
successive draws with replacement, skipping repeats (the same law as successive sampling).

Sets are stored as bitmasks (``numpy.packbits`` over the N experts, one row per token and layer),
so the union over every token of every request in a verify pass is one ``bitwise_or`` reduction
and its size one popcount.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.schema import param


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingConfig:
    """How tokens route to experts (scenario table ``[routing]``)."""

    mode: str = param("monte_carlo", "monte_carlo: sample expert sets", choices=("monte_carlo",))
    popularity: str = param(
        "uniform", "expert popularity weights per layer", choices=("uniform", "zipf", "dirichlet")
    )
    zipf_exponent: float = param(0.8, "Zipf exponent s of popularity weights (rank^-s)", ge=0)
    dirichlet_concentration: float = param(0.3, "Dirichlet concentration of popularity", gt=0)
    overlap: float | None = param(
        None, "lag-1 overlap rho_1 of true tokens; unset = independent routing", ge=0, le=1
    )
    draft_overlap: float | None = param(
        None, "lag-1 overlap of a rejected draft with its predecessor; unset = overlap", ge=0, le=1
    )

    def __post_init__(self) -> None:
        if self.draft_overlap is not None and self.overlap is None:
            raise FieldError("draft_overlap", "to be set only together with overlap", self.draft_overlap)

    @property
    def rejected_overlap(self) -> float | None:
        """Overlap used for rejected drafts."""
        return self.overlap if self.draft_overlap is None else self.draft_overlap


def popularity_weights(
    config: RoutingConfig, num_layers: int, num_experts: int, rng: np.random.Generator
) -> np.ndarray:
    """Per-layer expert weights, shape (num_layers, N), each row summing to 1.

    Zipf weights are rank^-s over a random permutation of experts per layer; Dirichlet weights
    are one draw per layer. Uniform weights are 1/N.
    """
    if config.popularity == "uniform":
        return np.full((num_layers, num_experts), 1.0 / num_experts)
    if config.popularity == "zipf":
        ranks = np.arange(1, num_experts + 1, dtype=float) ** -config.zipf_exponent
        weights = np.stack([rng.permutation(ranks) for _ in range(num_layers)])
    else:
        alpha = np.full(num_experts, config.dirichlet_concentration)
        weights = rng.dirichlet(alpha, size=num_layers)
        weights = np.maximum(weights, 1e-12)  # every expert stays reachable
    return weights / weights.sum(axis=1, keepdims=True)


class ExpertSampler:
    """Draws exact top-k_e expert sets for many independent chains at once.

    A chain is one (sequence, layer) pair; ``layer_of_chain`` says which layer's popularity it
    uses. All methods take an explicit Generator and return boolean membership arrays of shape
    (chains, N).
    """

    def __init__(self, weights: np.ndarray, experts_per_token: int):
        self.weights = weights
        self.num_layers, self.num_experts = weights.shape
        self.k = experts_per_token
        self.uniform = bool(np.allclose(weights, 1.0 / self.num_experts))
        # Row l's CDF shifted by l, so one searchsorted serves every layer at once.
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        self._shifted_cdf = (cdf + np.arange(self.num_layers)[:, None]).ravel()

    def _candidates(self, rng: np.random.Generator, layers: np.ndarray, width: int) -> np.ndarray:
        if self.uniform:
            return rng.integers(0, self.num_experts, size=(len(layers), width))
        u = rng.random((len(layers), width)) + layers[:, None]
        flat = np.searchsorted(self._shifted_cdf, u, side="right")
        return np.minimum(flat - layers[:, None] * self.num_experts, self.num_experts - 1)

    def sample(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        previous: np.ndarray | None = None,
        overlap: float | None = None,
    ) -> np.ndarray:
        """One token per chain: its expert set as a boolean (chains, N) array.

        With ``previous`` (boolean sets of the preceding token) and ``overlap`` set, the token
        reuses Binomial(k_e, overlap) of the previous experts and samples the rest from the
        others; otherwise it is an independent weighted sample.
        """
        n, k = len(layer_of_chain), self.k
        chosen = np.zeros((n, self.num_experts), dtype=bool)
        if k == 0 or n == 0:
            return chosen
        blocked = np.zeros((n, self.num_experts), dtype=bool)
        count = np.zeros(n, dtype=np.int64)
        if previous is not None and overlap is not None:
            reuse = rng.binomial(k, overlap, size=n)
            prev_ids = np.argsort(~previous, axis=1, kind="stable")[:, :k]  # the k previous experts
            order = np.argsort(rng.random((n, k)), axis=1)
            shuffled = np.take_along_axis(prev_ids, order, axis=1)
            keep = np.arange(k)[None, :] < reuse[:, None]
            rows = np.repeat(np.arange(n), k)
            chosen[rows[keep.ravel()], shuffled.ravel()[keep.ravel()]] = True
            blocked |= previous
            count += reuse
        rows_all = np.arange(n)
        pending = rows_all[count < k]
        while len(pending):
            width = int(k - count[pending].min()) + 4
            cand = self._candidates(rng, layer_of_chain[pending], width)
            for c in range(width):
                col = cand[:, c]
                ok = (count[pending] < k) & ~blocked[pending, col]
                r, e = pending[ok], col[ok]
                chosen[r, e] = True
                blocked[r, e] = True
                count[r] += 1
            pending = pending[count[pending] < k]
        return chosen


def sample_sequences(
    sampler: ExpertSampler,
    rng: np.random.Generator,
    num_sequences: int,
    length: int,
    overlap: float | None,
) -> np.ndarray:
    """Routing of ``num_sequences`` sequences of ``length`` tokens, as packed bitmasks.

    Returns uint8 array (num_sequences, length, num_layers, ceil(N/8)). The loop runs over token
    positions only; sequences and layers are vectorised.
    """
    layers = np.tile(np.arange(sampler.num_layers), num_sequences)
    nbytes = (sampler.num_experts + 7) // 8
    out = np.zeros((num_sequences, length, sampler.num_layers, nbytes), dtype=np.uint8)
    previous = None
    for t in range(length):
        current = sampler.sample(rng, layers, previous, overlap)
        out[:, t] = np.packbits(current, axis=1).reshape(num_sequences, sampler.num_layers, nbytes)
        previous = current
    return out


def unpack(masks: np.ndarray, num_experts: int) -> np.ndarray:
    """Packed bitmasks (..., nbytes) back to boolean sets (..., N)."""
    return np.unpackbits(masks, axis=-1, count=num_experts).astype(bool)


def union_sizes(masks: np.ndarray) -> np.ndarray:
    """Distinct experts per layer of the union over tokens.

    ``masks`` is uint8 (tokens, layers, nbytes); returns int array (layers,).
    """
    if masks.shape[0] == 0:
        return np.zeros(masks.shape[1], dtype=np.int64)
    union = np.bitwise_or.reduce(masks, axis=0)
    return np.bitwise_count(union).sum(axis=-1).astype(np.int64)
