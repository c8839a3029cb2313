"""Monte-Carlo expert routing with popularity skew and temporal overlap.

In every MoE layer a token activates exactly ``k_e`` of ``N`` routed experts. Two properties of
real routers matter for verification cost:

* **popularity**: some experts are chosen more often (uniform, Zipf or Dirichlet weights,
  a different hot set per layer);
* **temporal overlap**: consecutive tokens of one sequence reuse experts. ``overlap`` is the lag-1
  overlap rho_1 = E|S_t ∩ S_{t-1}| / k_e. Independent routing has rho_1 = Σ p_e² / k_e (= k_e/N
  when uniform); real routers are far above: Cohere (2026) reports 38 % overlap between adjacent
  tokens, about 6x chance for a k_e/N = 1/16 model.

The sampler: token t reuses R ~ Binomial(k_e, rho_1) experts chosen uniformly
from S_{t-1} and fills the other k_e − R slots by weighted sampling without replacement from the
experts not in S_{t-1}, so the lag-1 overlap is exactly rho_1 in expectation. With ``overlap``
unset, tokens are independent weighted samples. Weighted sampling without replacement is done by
successive draws with replacement, skipping repeats (the same law as successive sampling).

Sets are stored as expert ids (int16, k_e per token and layer). The union over every token of
every request in a verify pass is one scatter into a (layers, N) membership table and one sum.
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
            raise FieldError(
                "draft_overlap", "to be set only together with overlap", self.draft_overlap
            )

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


def alias_tables(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Walker/Vose alias tables, one per row of ``weights`` (rows need not be normalised).

    Drawing slot j uniformly, then keeping j with probability ``accept[j]`` and otherwise taking
    ``alias[j]``, samples index j with probability weights[j] / Σ weights, in O(1) per draw.
    """
    rows, n = weights.shape
    accept = np.ones((rows, n))
    alias = np.tile(np.arange(n), (rows, 1))
    for r in range(rows):
        scaled = weights[r] * n / weights[r].sum()
        small = [j for j in range(n) if scaled[j] < 1.0]
        large = [j for j in range(n) if scaled[j] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            accept[r, s], alias[r, s] = scaled[s], g
            scaled[g] -= 1.0 - scaled[s]
            (small if scaled[g] < 1.0 else large).append(g)
    return accept, alias


class ExpertSampler:
    """Draws exact top-k_e expert sets for many independent chains at once.

    A chain is one (sequence, layer) pair; ``layer_of_chain`` says which layer's popularity it
    uses. Methods take an explicit Generator and return expert ids, shape (chains, k_e).
    """

    def __init__(self, weights: np.ndarray, experts_per_token: int):
        self.weights = weights
        self.num_layers, self.num_experts = weights.shape
        self.k = experts_per_token
        self.uniform = bool(np.allclose(weights, 1.0 / self.num_experts))
        self._accept, self._alias = alias_tables(weights)

    def _candidates(self, rng: np.random.Generator, layers: np.ndarray, width: int) -> np.ndarray:
        """``width`` draws with replacement per chain, from its layer's weights (alias method)."""
        slots = rng.integers(0, self.num_experts, size=(len(layers), width))
        if self.uniform:
            return slots
        rows = layers[:, None]
        keep = rng.random((len(layers), width)) < self._accept[rows, slots]
        return np.where(keep, slots, self._alias[rows, slots])

    def sample(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        previous: np.ndarray | None = None,
        overlap: float | None = None,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int array (chains, k_e).

        With ``previous`` (the preceding token's ids, same shape) and ``overlap`` set, the token
        reuses Binomial(k_e, overlap) of the previous experts and samples the rest from the
        others; otherwise it is an independent weighted sample.
        """
        n, k = len(layer_of_chain), self.k
        out = np.full((n, k), -1, dtype=np.int64)
        if k == 0 or n == 0:
            return out
        count = np.zeros(n, dtype=np.int64)
        excluded = None
        if previous is not None and overlap is not None:
            reuse = rng.binomial(k, overlap, size=n)
            order = np.argsort(rng.random((n, k)), axis=1)
            shuffled = np.take_along_axis(previous, order, axis=1)
            out = np.where(np.arange(k)[None, :] < reuse[:, None], shuffled, -1)
            count = reuse.astype(np.int64)
            excluded = previous
        # taken[c, e]: expert e is already chosen for chain c, or excluded (previous token).
        taken = np.zeros((n, self.num_experts), dtype=bool)
        rows = np.arange(n)
        if excluded is not None:
            taken[rows[:, None], excluded] = True
        pending = np.flatnonzero(count < k)
        while len(pending):
            # Successive sampling: draws with replacement, skipping repeats, in draw order.
            width = int(k - count[pending].min()) + 4
            cand = self._candidates(rng, layer_of_chain[pending], width)
            for c in range(width):
                col = cand[:, c]
                ok = (count[pending] < k) & ~taken[pending, col]
                chosen, expert = pending[ok], col[ok]
                taken[chosen, expert] = True
                out[chosen, count[chosen]] = expert
                count[chosen] += 1
            pending = pending[count[pending] < k]
        return out


def sample_sequences(
    sampler: ExpertSampler,
    rng: np.random.Generator,
    num_sequences: int,
    length: int,
    overlap: float | None,
) -> np.ndarray:
    """Routing of ``num_sequences`` sequences of ``length`` tokens: expert ids.

    Returns int16 array (num_sequences, length, num_layers, k_e). The loop runs over token
    positions only; sequences and layers are vectorised.
    """
    layers = np.tile(np.arange(sampler.num_layers), num_sequences)
    out = np.zeros((num_sequences, length, sampler.num_layers, sampler.k), dtype=np.int16)
    previous = None
    for t in range(length):
        current = sampler.sample(rng, layers, previous, overlap)
        out[:, t] = current.reshape(num_sequences, sampler.num_layers, sampler.k)
        previous = current
    return out


def to_sets(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Expert ids (..., k_e) as boolean membership (..., N)."""
    sets = np.zeros((*ids.shape[:-1], num_experts), dtype=bool)
    np.put_along_axis(sets, ids.astype(np.int64), True, axis=-1)
    return sets


def union_sizes(ids: np.ndarray, num_experts: int) -> np.ndarray:
    """Distinct experts per layer of the union over tokens.

    ``ids`` is (tokens, layers, k_e); returns int array (layers,).
    """
    tokens, layers, _ = ids.shape
    if tokens == 0 or layers == 0:
        return np.zeros(layers, dtype=np.int64)
    member = np.zeros((layers, num_experts), dtype=bool)
    layer_index = np.broadcast_to(np.arange(layers)[None, :, None], ids.shape)
    member[layer_index, ids] = True
    return member.sum(axis=1)
