"""Expert popularity: how unevenly a router spreads tokens over its experts (a registry of laws).

Real routers do not use their experts equally: a few hot experts per layer take a large share of
tokens. Three words name the three layers of that description, and mean only that:

* **popularity**: the scenario's choice (``routing.popularity``), the name of a law registered
  in :data:`POPULARITIES`: ``uniform`` (every expert alike), ``zipf`` (rank^-s over a random
  order of experts per layer, so every layer has its own hot set) or ``dirichlet`` (one
  Dirichlet(c, ..., c) draw per layer; small c = a few dominant experts);
* **popularity weights** w_e: what a law draws, shape (layers, N), each row summing to 1
  (:func:`popularity_weights`);
* **inclusion probabilities** p_e: the fraction of tokens that use expert e, Σ_e p_e = k_e.
  Top-k routing proportional to the weights gives p_e = k_e·w_e capped at 1, the excess of a
  capped expert shared by the others in proportion to their weights (probability-proportional-
  to-size sampling): :func:`inclusion_probabilities`.

Adding a law is one frozen dataclass here, decorated with ``@POPULARITIES.register("name")``
and drawing its weights with ``weights(num_layers, num_experts, rng)``: the scenario key, the
``simspec routing predict --popularity`` choices and the error listing the valid names all read
the registry. Its fields are its parameters; each takes the value of the
:class:`~simspec.routing.config.RoutingConfig` field of the same name (``zipf_exponent``,
``dirichlet_concentration``), so a law with a new parameter uses its default until a scenario key
of that name is added there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from simspec.registry import Registry

if TYPE_CHECKING:
    from simspec.routing.config import RoutingConfig


class PopularityLaw(Protocol):
    """What a popularity law does: draw per-layer popularity weights."""

    def weights(self, num_layers: int, num_experts: int, rng: np.random.Generator) -> np.ndarray:
        """Popularity weights, shape (num_layers, num_experts), each row summing to 1."""
        ...


#: Popularity laws by scenario name (``routing.popularity``).
POPULARITIES: Registry[PopularityLaw] = Registry("popularity")


def _normalised(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum(axis=1, keepdims=True)


@POPULARITIES.register("uniform")
@dataclass(frozen=True, slots=True)
class UniformPopularity:
    """Every expert alike: w_e = 1/N (draws nothing from the generator)."""

    def weights(self, num_layers: int, num_experts: int, rng: np.random.Generator) -> np.ndarray:
        """Rows of 1/N."""
        return np.full((num_layers, num_experts), 1.0 / num_experts)


@POPULARITIES.register("zipf")
@dataclass(frozen=True, slots=True)
class ZipfPopularity:
    """w ∝ rank^-s, the ranks in a random order per layer (a different hot set per layer)."""

    zipf_exponent: float

    def weights(self, num_layers: int, num_experts: int, rng: np.random.Generator) -> np.ndarray:
        """One permutation of the rank weights per layer, normalised."""
        ranks = np.arange(1, num_experts + 1, dtype=float) ** -self.zipf_exponent
        return _normalised(np.stack([rng.permutation(ranks) for _ in range(num_layers)]))


@POPULARITIES.register("dirichlet")
@dataclass(frozen=True, slots=True)
class DirichletPopularity:
    """One Dirichlet(c, ..., c) draw per layer; small concentration c = a few hot experts."""

    dirichlet_concentration: float

    def weights(self, num_layers: int, num_experts: int, rng: np.random.Generator) -> np.ndarray:
        """One draw per layer, floored at 1e-12 so every expert stays reachable, normalised."""
        alpha = np.full(num_experts, self.dirichlet_concentration)
        weights = rng.dirichlet(alpha, size=num_layers)
        return _normalised(np.maximum(weights, 1e-12))


def popularity_law(config: RoutingConfig) -> PopularityLaw:
    """The law named by ``config.popularity``, its parameters read from ``config``'s fields."""
    name = config.popularity
    params = {p: getattr(config, p) for p in POPULARITIES.parameters(name) if hasattr(config, p)}
    return POPULARITIES.create(name, **params)


def popularity_weights(
    config: RoutingConfig, num_layers: int, num_experts: int, rng: np.random.Generator
) -> np.ndarray:
    """Per-layer popularity weights w_e of ``config``'s law, shape (num_layers, N), rows sum to 1.

    Draws from ``rng`` only what the law needs (nothing for ``uniform``).
    """
    return popularity_law(config).weights(num_layers, num_experts, rng)


def inclusion_probabilities(weights: np.ndarray, experts_per_token: int) -> np.ndarray:
    """Inclusion probabilities p_e of top-k routing proportional to popularity ``weights``.

    p_e = k·w_e / Σ w, capped at 1: an expert that would exceed 1 is always chosen and the
    excess is shared by the others in proportion to their weights (probability-proportional-
    to-size sampling). Works row-wise on (..., N) arrays; rows sum to k.

    Examples
    --------
    >>> inclusion_probabilities(np.array([6.0, 1.0, 1.0, 1.0, 1.0]), 2).tolist()
    [1.0, 0.25, 0.25, 0.25, 0.25]
    """
    w = np.asarray(weights, dtype=float)
    w = w / w.sum(axis=-1, keepdims=True)
    k = float(experts_per_token)
    capped = np.zeros(w.shape, dtype=bool)
    p = k * w
    for _ in range(w.shape[-1] + 1):
        over = (p > 1.0) & ~capped
        if not over.any():
            break
        capped |= over
        free = np.where(capped, 0.0, w)
        left = k - capped.sum(axis=-1, keepdims=True)
        total = free.sum(axis=-1, keepdims=True)
        p = np.where(capped, 1.0, left * free / np.where(total > 0, total, 1.0))
    return p


def draw_inclusion_probabilities(
    config: RoutingConfig,
    num_layers: int,
    num_experts: int,
    experts_per_token: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Inclusion probabilities p_e per layer, (L, N): weights of ``config``'s law, then capped.

    Draws the weights from ``rng`` exactly as :func:`popularity_weights` does.
    """
    weights = popularity_weights(config, num_layers, num_experts, rng)
    return inclusion_probabilities(weights, experts_per_token)
