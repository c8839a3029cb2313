"""Monte-Carlo expert routing with popularity skew and temporal overlap (multi-lag).

In every MoE layer a token activates exactly ``k_e`` of ``N`` routed experts. Two properties of
real routers matter for verification cost:

* **popularity**: some experts are chosen more often. A scenario gives per-layer weights w_e
  (uniform, Zipf or Dirichlet, a different hot set per layer); expert e is then used by a
  fraction p_e = k_e·w_e of tokens (capped at 1:
  :func:`simspec.routing.ipf.inclusion_probabilities`).
* **temporal overlap**: tokens of one sequence reuse experts. The lag-d overlap is
  rho_d = E|S_t ∩ S_{t−d}| / k_e. Independent routing has rho_d = Σ p_e² / k_e (= k_e/N when
  uniform); real routers are far above: Cohere (2026) reports 38 % overlap between adjacent
  tokens, about 6x chance for a k_e/N = 1/16 model, and reuse persists over several tokens
  (rho_d decays slowly), which lag 1 alone cannot express.

``overlap`` sets rho_1; ``overlaps = [rho_1, rho_2, ...]`` a whole profile; ``draft_overlap(s)``
the profile of rejected drafts (a rejected draft gets its own routing, conditioned on the tokens
before it); ``layer_overlap_scale`` lets overlap vary with depth.

Two samplers, both exact top-k_e:

* :class:`MaxEntSampler` (any popularity, any profile). Each expert's on/off sequence should
  follow the maximum-entropy law given p_e and rho_1..rho_D — the law :mod:`simspec.routing.ipf`
  predicts from. The sampler fits that law on a window of D + 1 tokens (IPF, once per
  popularity node) and reads off P(expert e is used now | its use over the last D tokens)
  (the window's own conditionals for the first D tokens of a sequence). Token t then takes
  exactly k_e experts with those probabilities by Pareto order sampling (Rosén 1997, "On
  sampling with probability proportional to size": the k_e smallest odds(U_e)/odds(g_e), close
  to Hájek's conditional-Poisson design). Marginals and lag overlaps match the targets to
  sampling accuracy (forcing exactly k_e of very few experts, N = 8, raises the overlap by
  ~0.01) and unique-expert counts match the IPF prediction to 0.3 % on average over the
  validation grid of bench/ipf_vs_sampler.py. With D = 1 the per-expert law is the Markov
  chain of the closed form.
* The reuse sampler (:class:`ExpertSampler`, uniform popularity with lag-1 overlap only, the
  original one, kept so those scenarios reproduce byte for byte): token t reuses
  R ~ Binomial(k_e, rho_1) experts chosen uniformly from S_{t−1} and fills the other k_e − R
  slots from the experts not in S_{t−1}, so the lag-1 overlap is exactly rho_1 in expectation and
  each expert follows that same Markov chain; it also reaches overlaps below chance.

Sets are stored as expert ids (int16, k_e per token and layer). The union over every token of
every request in a verify pass is one scatter into a (layers, N) membership table and one sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import FieldError
from simspec.routing import ipf
from simspec.schema import param

#: Most lags an overlap profile may have (the sampler tracks 2^D history patterns per expert).
MAX_LAGS = 12


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutingConfig:
    """How tokens route to experts (scenario table ``[routing]``)."""

    mode: str = param(
        "monte_carlo",
        "monte_carlo: sample expert sets; analytic: expected unique experts from the "
        "max-entropy IPF model (simspec.routing.ipf), no sampling",
        choices=("monte_carlo", "analytic"),
    )
    popularity: str = param(
        "uniform", "expert popularity weights per layer", choices=("uniform", "zipf", "dirichlet")
    )
    zipf_exponent: float = param(0.8, "Zipf exponent s of popularity weights (rank^-s)", ge=0)
    dirichlet_concentration: float = param(0.3, "Dirichlet concentration of popularity", gt=0)
    overlap: float | None = param(
        None, "lag-1 overlap rho_1 of true tokens; unset = independent routing", ge=0, le=1
    )
    overlaps: tuple[float, ...] | None = param(
        None,
        f"lag-1..D overlaps [rho_1, rho_2, ...] of true tokens (fraction of a token's experts "
        f"also used d tokens earlier; D <= {MAX_LAGS}); overlaps[0] is overlap",
        ge=0,
        le=1,
    )
    draft_overlap: float | None = param(
        None, "lag-1 overlap of a rejected draft with its predecessor; unset = overlap", ge=0, le=1
    )
    draft_overlaps: tuple[float, ...] | None = param(
        None,
        "lag-1..D overlaps of a rejected draft with the tokens before it; unset = the true "
        "tokens' profile",
        ge=0,
        le=1,
    )
    layer_overlap_scale: tuple[float, ...] | None = param(
        None,
        "factor on every overlap per MoE layer, first to last, interpolated linearly over "
        "depth (one value = all layers); unset = 1",
        ge=0,
    )

    def __post_init__(self) -> None:
        for key in ("overlaps", "draft_overlaps", "layer_overlap_scale"):
            value = getattr(self, key)
            limit = MAX_LAGS if key != "layer_overlap_scale" else 100_000
            if value is not None and not 1 <= len(value) <= limit:
                raise FieldError(key, f"an array of 1 to {limit} numbers", list(value))
        # Both spellings may be set (a file's overlap plus a --set overlaps=[...]) if they agree.
        for single, many in (("overlap", "overlaps"), ("draft_overlap", "draft_overlaps")):
            one, profile = getattr(self, single), getattr(self, many)
            if one is not None and profile is not None and profile[0] != one:
                raise FieldError(
                    many,
                    f"an array whose first entry equals {single} = {one} (set both, or only "
                    f"{many})",
                    list(profile),
                )
        unset = self.overlap is None and self.overlaps is None
        for key in ("draft_overlap", "draft_overlaps", "layer_overlap_scale"):
            value = getattr(self, key)
            if value is not None and unset:
                found = list(value) if isinstance(value, tuple) else value
                raise FieldError(key, "to be set only together with overlap or overlaps", found)
        if self.layer_overlap_scale is not None:
            top = max(self.true_profile + (self.draft_profile or ()))
            if max(self.layer_overlap_scale) * top > 1.0:
                raise FieldError(
                    "layer_overlap_scale",
                    f"factors that keep every overlap <= 1 (at most {1.0 / top:.4g} here)",
                    list(self.layer_overlap_scale),
                )

    @property
    def rejected_overlap(self) -> float | None:
        """Lag-1 overlap used for rejected drafts by the reuse sampler."""
        if self.draft_profile is not None:
            return self.draft_profile[0]
        return self.true_profile[0] if self.true_profile else None

    @property
    def true_profile(self) -> tuple[float, ...]:
        """rho_1..rho_D of true tokens; empty for independent routing."""
        if self.overlaps is not None:
            return tuple(self.overlaps)
        return () if self.overlap is None else (self.overlap,)

    @property
    def draft_profile(self) -> tuple[float, ...] | None:
        """Overlap profile of rejected drafts; None when it is the true tokens' profile."""
        if self.draft_overlaps is not None:
            return tuple(self.draft_overlaps)
        return None if self.draft_overlap is None else (self.draft_overlap,)

    def layer_scale(self, num_layers: int) -> np.ndarray | None:
        """Per-layer factor on every overlap (``layer_overlap_scale`` over depth), or None."""
        if self.layer_overlap_scale is None:
            return None
        scale = np.asarray(self.layer_overlap_scale, dtype=float)
        if len(scale) == 1 or num_layers <= 1:
            return np.full(num_layers, scale[0])
        return np.interp(np.linspace(0.0, 1.0, num_layers), np.linspace(0, 1, len(scale)), scale)

    def layer_profiles(self, num_layers: int) -> tuple[np.ndarray, np.ndarray | None]:
        """(true, draft) overlap profiles per layer, arrays (L, D) and (L, D') or None."""
        scale = self.layer_scale(num_layers)
        factor = np.ones(num_layers) if scale is None else scale
        true = factor[:, None] * np.asarray(self.true_profile, dtype=float)[None, :]
        draft = self.draft_profile
        if draft is None:
            return true, None
        return true, factor[:, None] * np.asarray(draft, dtype=float)[None, :]

    def uses_reuse_sampler(self) -> bool:
        """True when the reuse sampler applies: uniform popularity and lag-1 overlap only."""
        draft = self.draft_profile or ()
        return self.popularity == "uniform" and len(self.true_profile) <= 1 and len(draft) <= 1


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
        overlap: float | np.ndarray | None = None,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int array (chains, k_e).

        With ``previous`` (the preceding token's ids, same shape) and ``overlap`` set (a number,
        or one per chain), the token reuses Binomial(k_e, overlap) of the previous experts and
        samples the rest from the others; otherwise it is an independent weighted sample.
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
    overlap: float | np.ndarray | None,
) -> np.ndarray:
    """Routing of ``num_sequences`` sequences of ``length`` tokens: expert ids.

    ``overlap`` is a number or one value per layer. Returns int16 array (num_sequences, length,
    num_layers, k_e). The loop runs over token positions only; sequences and layers are
    vectorised.
    """
    layers = np.tile(np.arange(sampler.num_layers), num_sequences)
    if isinstance(overlap, np.ndarray):
        overlap = overlap[layers]
    out = np.zeros((num_sequences, length, sampler.num_layers, sampler.k), dtype=np.int16)
    previous = None
    for t in range(length):
        current = sampler.sample(rng, layers, previous, overlap)
        out[:, t] = current.reshape(num_sequences, sampler.num_layers, sampler.k)
        previous = current
    return out


#: Largest per-expert table (entries) the sampler materialises; beyond it, it interpolates.
_TABLE_BUDGET = 8_000_000
_LOGIT_BOUND = 60.0
_ODDS_BOUND = 40.0


@dataclass(frozen=True, slots=True)
class _HistoryTables:
    """Conditional laws P(expert used now | its use over the last D tokens), flattened.

    Entry ``row + 2^a − 1 + h`` is the value after ``a`` known earlier tokens with history
    pattern ``h`` (bit d − 1 = used d tokens back). With ``row1`` unset, ``values`` holds
    inverse odds per (layer, expert) row; otherwise logits per popularity node, mixed per
    expert with ``weight`` (interpolation in logit p).
    """

    values: np.ndarray
    row0: np.ndarray  # (L, N) offsets into ``values``
    row1: np.ndarray | None
    weight: np.ndarray | None
    fixed: np.ndarray | None  # (L, N) logit override for p = 0 / p = 1 experts, else nan
    depth: int


def _history_tables(popularity: np.ndarray, profiles: np.ndarray, nodes: int) -> _HistoryTables:
    """Fit the (D + 1)-token max-entropy window law per node; read its conditionals."""
    depth = profiles.shape[1]
    size = (1 << (depth + 1)) - 1  # Σ_a 2^a history patterns over a = 0..D known tokens
    lam = ipf.layer_log_odds_ratios(popularity, profiles)
    _, group = np.unique(lam, axis=0, return_inverse=True)
    group = group.ravel()
    node_tables, node_x, node_group = [], [], []
    for g in range(int(group.max()) + 1):
        members = np.flatnonzero(group == g)
        node_p = ipf.popularity_nodes(popularity[members].ravel(), nodes)
        if not len(node_p):
            node_p = np.array([0.5])
        q = ipf.pair_probability(node_p[:, None], lam[members[0]][None, :])
        law = ipf.pattern_distribution(node_p, q, depth + 1)
        table = np.zeros((len(node_p), size))
        for a in range(depth + 1):
            head = law.reshape(len(node_p), 1 << (a + 1), -1).sum(axis=2)
            head = head.reshape(len(node_p), 1 << a, 2)
            with np.errstate(divide="ignore", invalid="ignore"):
                logit = np.log(head[:, :, 1]) - np.log(head[:, :, 0])
            table[:, (1 << a) - 1 : (1 << (a + 1)) - 1] = np.nan_to_num(
                logit, nan=0.0, posinf=_LOGIT_BOUND, neginf=-_LOGIT_BOUND
            )
        node_tables.append(np.clip(table, -_LOGIT_BOUND, _LOGIT_BOUND))
        node_x.append(np.log(node_p) - np.log1p(-node_p))
        node_group.append(members)
    # Per expert: bracketing nodes and interpolation weight.
    lo = np.zeros(popularity.shape, dtype=np.int64)
    hi = np.zeros(popularity.shape, dtype=np.int64)
    weight = np.zeros(popularity.shape)
    offset = 0
    for members, x in zip(node_group, node_x, strict=True):
        gp = popularity[members]
        with np.errstate(divide="ignore"):
            xp = np.clip(np.log(gp) - np.log1p(-gp), x[0], x[-1])
        if len(x) > 1:
            up = np.clip(np.searchsorted(x, xp), 1, len(x) - 1)
            down = up - 1
            weight[members] = (xp - x[down]) / (x[up] - x[down])
        else:
            up = down = np.zeros(xp.shape, dtype=np.int64)
        lo[members], hi[members] = down + offset, up + offset
        offset += len(x)
    nodes_logit = np.concatenate(node_tables)
    fixed = np.full(popularity.shape, np.nan)
    fixed[popularity <= 0.0] = -2 * _LOGIT_BOUND
    fixed[popularity >= 1.0] = 2 * _LOGIT_BOUND
    # Materialise one row per distinct (group, p) when it fits: one lookup per expert per token.
    key = np.stack([group[:, None].repeat(popularity.shape[1], 1), popularity], axis=-1)
    distinct, inverse = np.unique(key.reshape(-1, 2), axis=0, return_inverse=True)
    if len(distinct) * size <= _TABLE_BUDGET:
        first = np.zeros(len(distinct), dtype=np.int64)
        first[inverse.ravel()[::-1]] = np.arange(popularity.size)[::-1]
        w = weight.ravel()[first][:, None]
        rows = (1 - w) * nodes_logit[lo.ravel()[first]] + w * nodes_logit[hi.ravel()[first]]
        pinned = fixed.ravel()[first]
        # float32 inverse odds (|logit| <= 40, pinned experts at 50): no overflow in the keys.
        rows = np.clip(rows, -_ODDS_BOUND, _ODDS_BOUND)
        rows = np.where(np.isnan(pinned)[:, None], rows, np.sign(pinned)[:, None] * 50.0)
        row0 = (inverse.reshape(popularity.shape) * size).astype(np.int32)
        values = np.exp(-rows).astype(np.float32).ravel()
        return _HistoryTables(values, row0, None, None, None, depth)
    return _HistoryTables(
        nodes_logit.ravel(),
        (lo * size).astype(np.int32),
        (hi * size).astype(np.int32),
        weight,
        fixed if not np.isnan(fixed).all() else None,
        depth,
    )


class MaxEntSampler:
    """Exact top-k_e routing whose per-expert law is the max-entropy one (module docstring).

    Parameters
    ----------
    popularity : array (L, N)
        Inclusion probabilities per layer (rows sum to k_e).
    true_profiles : array (L, D)
        Lag-1..D overlaps of true tokens per layer (D = 0: independent routing).
    draft_profiles : array (L, D'), optional
        Overlaps of rejected drafts with the tokens before them; default ``true_profiles``.
    nodes : int
        Popularity nodes whose window laws are fitted (experts interpolate between them).
    """

    def __init__(
        self,
        popularity: np.ndarray,
        true_profiles: np.ndarray,
        draft_profiles: np.ndarray | None = None,
        *,
        nodes: int = ipf.NODES,
    ):
        self.popularity = np.asarray(popularity, dtype=float)
        self.num_layers, self.num_experts = self.popularity.shape
        self.k = round(float(self.popularity[0].sum()))
        true_profiles = np.asarray(true_profiles, dtype=float).reshape(self.num_layers, -1)
        self._true = _history_tables(self.popularity, true_profiles, nodes)
        if draft_profiles is None:
            self._draft = self._true
        else:
            draft_profiles = np.asarray(draft_profiles, dtype=float).reshape(self.num_layers, -1)
            self._draft = _history_tables(self.popularity, draft_profiles, nodes)
        #: Lags of history a caller must provide.
        self.depth = max(self._true.depth, self._draft.depth)

    def step(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        history: np.ndarray,
        known: np.ndarray | int,
        *,
        draft: bool = False,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int array (chains, k_e), sorted.

        ``history[c, e]`` has bit d − 1 set when expert e was used d tokens earlier in chain c;
        ``known`` (per chain or one number) is how many earlier tokens exist.
        """
        return self._step(rng, layer_of_chain, None, history, known, draft)

    def _step(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        base: np.ndarray | None,
        history: np.ndarray,
        known: np.ndarray | int,
        draft: bool,
    ) -> np.ndarray:
        n = len(layer_of_chain)
        if n == 0 or self.k == 0:
            return np.zeros((n, self.k), dtype=np.int64)
        tables = self._draft if draft else self._true
        if base is None:
            base = tables.row0[layer_of_chain]
        if not isinstance(known, int | np.integer) and (known >= tables.depth).all():
            known = tables.depth  # the usual case: the whole window is known
        if isinstance(known, int | np.integer):
            a: int | np.ndarray = min(int(known), tables.depth)
            pattern = history if a == self.depth else history & ((1 << a) - 1)
        else:
            a = np.minimum(np.asarray(known), tables.depth)[:, None]
            pattern = history & ((1 << a) - 1)
        index = base + ((1 << a) - 1) + pattern
        if tables.row1 is None:
            # Pareto order sampling: the k smallest of odds(U_e) / odds(g_e), in float32.
            u = rng.random((n, self.num_experts), dtype=np.float32)
            np.maximum(u, np.float32(2.0**-25), out=u)
            key = np.subtract(np.float32(1.0), u)
            np.divide(u, key, out=key)
            key *= tables.values.take(index)
        else:
            u64 = rng.random((n, self.num_experts))
            assert tables.weight is not None
            w = tables.weight[layer_of_chain]
            far = tables.row1[layer_of_chain] - tables.row0[layer_of_chain]
            g = (1.0 - w) * tables.values.take(index) + w * tables.values.take(index + far)
            if tables.fixed is not None:
                pinned = tables.fixed[layer_of_chain]
                g = np.where(np.isnan(pinned), g, pinned)
            key = np.log(u64) - np.log1p(-u64) - g
        if self.k < self.num_experts:
            ids = np.argpartition(key, self.k - 1, axis=1)[:, : self.k]
        else:
            ids = np.broadcast_to(np.arange(self.num_experts), (n, self.k))
        return np.sort(ids, axis=1)

    def sample_sequences(
        self, rng: np.random.Generator, num_sequences: int, length: int
    ) -> np.ndarray:
        """Routing of ``num_sequences`` sequences of ``length`` true tokens, from their start.

        Returns int16 array (num_sequences, length, num_layers, k_e).
        """
        layers = np.tile(np.arange(self.num_layers), num_sequences)
        out = np.zeros((num_sequences, length, self.num_layers, self.k), dtype=np.int16)
        history = np.zeros((len(layers), self.num_experts), dtype=np.int32)
        mask = (1 << self.depth) - 1
        rows = np.arange(len(layers))[:, None]
        base = self._true.row0[layers]
        for t in range(length):
            ids = self._step(rng, layers, base, history, t, False)
            out[:, t] = ids.reshape(num_sequences, self.num_layers, self.k)
            history <<= 1
            history &= mask
            history[rows, ids] |= 1
        return out


def history_bits(previous: list[np.ndarray], num_experts: int) -> np.ndarray:
    """History bitmask for :meth:`MaxEntSampler.step` from the ids of earlier tokens.

    ``previous[d - 1]`` holds the ids (chains, k_e) of the token d positions back (entries < 0
    mean "no such token"). Returns int32 (chains, N).
    """
    chains = previous[0].shape[0] if previous else 0
    bits = np.zeros((chains, num_experts), dtype=np.int32)
    rows = np.arange(chains)[:, None]
    for d, ids in enumerate(previous):
        ids = ids.astype(np.int64)
        valid = ids >= 0
        bits[np.broadcast_to(rows, ids.shape)[valid], ids[valid]] |= 1 << d
    return bits


def inclusion_popularity(
    config: RoutingConfig,
    num_layers: int,
    num_experts: int,
    experts_per_token: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Inclusion probabilities p_e per layer, (L, N): k_e times the popularity weights, capped.

    Draws the weights from ``rng`` exactly as :func:`popularity_weights` does.
    """
    weights = popularity_weights(config, num_layers, num_experts, rng)
    return ipf.inclusion_probabilities(weights, experts_per_token)


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


def sampled_unique_curve(
    popularity: np.ndarray,
    overlaps: np.ndarray,
    tokens: int,
    batch: int,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Measured U(T), T = 1..tokens, averaged over layers: ``samples`` passes of ``batch``
    sequences drawn by the max-entropy sampler (``overlaps``: (D,) or (layers, D))."""
    layers, n = popularity.shape
    profile = np.asarray(overlaps, dtype=float)
    if profile.ndim == 1:
        profile = np.tile(profile, (layers, 1))
    ids = MaxEntSampler(popularity, profile).sample_sequences(rng, samples * batch, tokens)
    member = to_sets(ids, n).reshape(samples, batch, tokens, layers, n)
    union = np.logical_or.accumulate(member.any(axis=1), axis=1)
    return union.sum(axis=-1).mean(axis=(0, 2))
