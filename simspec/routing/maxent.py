"""The max-entropy sampler: exact top-k_e routing with any popularity and any overlap profile.

Each expert's on/off sequence should follow the maximum-entropy law given its inclusion
probability p_e and the lag overlaps rho_1..rho_D: the law the analytic mode predicts from
(:mod:`simspec.routing.predictor`). The sampler fits that law on a window of D + 1 tokens (IPF,
:func:`simspec.routing.ipf.pattern_distribution`, once per inclusion-probability node) and reads
off P(expert e is used now | its use over the last D tokens) (the window's own conditionals for
the first D tokens of a sequence). Token t then takes exactly k_e experts with those
probabilities by Pareto order sampling (Rosén 1997, "On sampling with probability proportional
to size": the k_e smallest odds(U_e)/odds(g_e), close to Hájek's conditional-Poisson design).

Marginals and lag overlaps match the targets to sampling accuracy (forcing exactly k_e of very
few experts, N = 8, raises the overlap by ~0.01) and unique-expert counts match the IPF
prediction to 0.3 % on average over the validation grid of studies/ipf_vs_sampler.py. With D = 1
the per-expert law is the Markov chain of the closed form; with D = 0 (no overlap given) tokens
are independent with inclusion probabilities p_e. A rejected draft gets its own routing,
conditioned on the D tokens before it, with the draft profile's tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.routing.ipf import NODES, pattern_distribution, probability_nodes
from simspec.routing.overlap import layer_reuse, pair_probability
from simspec.routing.sets import history_bits, id_dtype, to_sets

#: Largest per-expert table (entries) the sampler materialises; beyond it, it interpolates.
_TABLE_BUDGET = 8_000_000
_LOGIT_BOUND = 60.0
_ODDS_BOUND = 40.0
#: Chains per block of the float32 sampling pass: (rows, N) temporaries of ~256 kB at N = 128,
#: which stay in cache and in the heap (larger blocks measured slower, page faults included).
_BLOCK_ROWS = 256
#: (sequence, state, layer) chains per call of :func:`continue_drafts`, each chunk's draws
#: before the next chunk's.
CHUNK_CHAINS = 4096


def pareto_keys(u: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Pareto order-sampling keys odds(u) · g in float32, g = 1 / odds(inclusion)."""
    key = np.subtract(np.float32(1.0), u)
    np.divide(u, key, out=key)
    key *= g
    return key


def smallest_sorted(key: np.ndarray, k: int, partitioned: np.ndarray | None = None) -> np.ndarray:
    """Column ids of the ``k`` smallest entries of each row of ``key``, ascending: (rows, k).

    ``np.argpartition`` selects per row with a loop that costs more than the sampling itself at
    N = 128; instead one ``np.partition`` finds each row's k-th smallest value and a comparison
    against it marks the chosen columns, which ``np.flatnonzero`` returns already sorted. When
    a row has ties at that value (or NaN), more or fewer than k columns are marked, and the
    whole call falls back to ``argpartition`` + ``sort``, which it otherwise equals exactly.
    ``partitioned`` is ``np.partition(key, k - 1, axis=1)`` when the caller already has it.
    """
    rows, width = key.shape
    if partitioned is None:
        partitioned = np.partition(key, k - 1, axis=1)
    kth = partitioned[:, k - 1 : k]
    chosen = np.flatnonzero(key <= kth)
    # Without NaN among the k smallest every row marks at least k, so k in all of them.
    if len(chosen) == rows * k and not np.isnan(kth).any():
        return chosen.reshape(rows, k) - (np.arange(rows) * width)[:, None]
    return np.sort(np.argpartition(key, k - 1, axis=1)[:, :k], axis=1)


@dataclass(frozen=True, slots=True)
class _HistoryTables:
    """Conditional laws P(expert used now | its use over the last D tokens), flattened.

    Entry ``row + 2^a − 1 + h`` is the value after ``a`` known earlier tokens with history
    pattern ``h`` (bit d − 1 = used d tokens back). With ``row1`` unset, ``values`` holds
    inverse odds per (layer, expert) row; otherwise logits per inclusion-probability node, mixed per
    expert with ``weight`` (interpolation in logit p).
    """

    values: np.ndarray
    row0: np.ndarray  # (L, N) offsets into ``values``
    row1: np.ndarray | None
    weight: np.ndarray | None
    fixed: np.ndarray | None  # (L, N) logit override for p = 0 / p = 1 experts, else nan
    depth: int


def _history_tables(p: np.ndarray, profiles: np.ndarray, nodes: int) -> _HistoryTables:
    """Fit the (D + 1)-token max-entropy window law per node; read its conditionals.

    ``p`` are the inclusion probabilities (L, N), ``profiles`` the overlaps (L, D).
    """
    depth = profiles.shape[1]
    size = (1 << (depth + 1)) - 1  # Σ_a 2^a history patterns over a = 0..D known tokens
    lam = layer_reuse(p, profiles)
    _, group = np.unique(lam, axis=0, return_inverse=True)
    group = group.ravel()
    node_tables, node_x, node_group = [], [], []
    for g in range(int(group.max()) + 1):
        members = np.flatnonzero(group == g)
        node_p = probability_nodes(p[members].ravel(), nodes)
        if not len(node_p):
            node_p = np.array([0.5])
        q = pair_probability(node_p[:, None], lam[members[0]][None, :])
        law = pattern_distribution(node_p, q, depth + 1)
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
    lo = np.zeros(p.shape, dtype=np.int64)
    hi = np.zeros(p.shape, dtype=np.int64)
    weight = np.zeros(p.shape)
    offset = 0
    for members, x in zip(node_group, node_x, strict=True):
        gp = p[members]
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
    fixed = np.full(p.shape, np.nan)
    fixed[p <= 0.0] = -2 * _LOGIT_BOUND
    fixed[p >= 1.0] = 2 * _LOGIT_BOUND
    # Materialise one row per distinct (group, p) when it fits: one lookup per expert per token.
    key = np.stack([group[:, None].repeat(p.shape[1], 1), p], axis=-1)
    distinct, inverse = np.unique(key.reshape(-1, 2), axis=0, return_inverse=True)
    if len(distinct) * size <= _TABLE_BUDGET:
        first = np.zeros(len(distinct), dtype=np.int64)
        first[inverse.ravel()[::-1]] = np.arange(p.size)[::-1]
        w = weight.ravel()[first][:, None]
        rows = (1 - w) * nodes_logit[lo.ravel()[first]] + w * nodes_logit[hi.ravel()[first]]
        pinned = fixed.ravel()[first]
        # float32 inverse odds (|logit| <= 40, pinned experts at 50): no overflow in the keys.
        rows = np.clip(rows, -_ODDS_BOUND, _ODDS_BOUND)
        rows = np.where(np.isnan(pinned)[:, None], rows, np.sign(pinned)[:, None] * 50.0)
        row0 = (inverse.reshape(p.shape) * size).astype(np.intp)  # take() wants intp indices
        values = np.exp(-rows).astype(np.float32).ravel()
        return _HistoryTables(values, row0, None, None, None, depth)
    return _HistoryTables(
        nodes_logit.ravel(),
        (lo * size).astype(np.intp),
        (hi * size).astype(np.intp),
        weight,
        fixed if not np.isnan(fixed).all() else None,
        depth,
    )


class MaxEntSampler:
    """Exact top-k_e routing whose per-expert law is the max-entropy one (module docstring).

    Parameters
    ----------
    inclusion_probabilities : array (L, N)
        p_e per layer (rows sum to k_e).
    true_profiles : array (L, D)
        Lag-1..D overlaps of true tokens per layer (D = 0: independent routing).
    draft_profiles : array (L, D'), optional
        Overlaps of rejected drafts with the tokens before them; default ``true_profiles``.
    nodes : int
        Popularity nodes whose window laws are fitted (experts interpolate between them).
    """

    def __init__(
        self,
        inclusion_probabilities: np.ndarray,
        true_profiles: np.ndarray,
        draft_profiles: np.ndarray | None = None,
        *,
        nodes: int = NODES,
    ):
        p = np.asarray(inclusion_probabilities, dtype=float)
        self.inclusion_probabilities = p
        self.num_layers, self.num_experts = p.shape
        self.k = round(float(p[0].sum()))
        true_profiles = np.asarray(true_profiles, dtype=float).reshape(self.num_layers, -1)
        self._true = _history_tables(p, true_profiles, nodes)
        if draft_profiles is None:
            self._draft = self._true
        else:
            draft_profiles = np.asarray(draft_profiles, dtype=float).reshape(self.num_layers, -1)
            self._draft = _history_tables(p, draft_profiles, nodes)
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
        chains: int | None = None,
        subset: np.ndarray | None = None,
    ) -> np.ndarray:
        """One token per chain: its k_e expert ids, int array (chains, k_e), sorted.

        ``history[c, e]`` has bit d − 1 set when expert e was used d tokens earlier in chain c;
        ``known`` (per chain or one number) is how many earlier tokens exist. With ``subset``
        the arguments describe only the chains ``subset`` of ``chains``: the draws are made for
        all ``chains``, so a chain's ids do not depend on which others are computed.
        """
        drawn = (chains, subset) if subset is not None and chains is not None else None
        return self._step(rng, layer_of_chain, None, history, known, draft, drawn)

    def _step(
        self,
        rng: np.random.Generator,
        layer_of_chain: np.ndarray,
        base: np.ndarray | None,
        history: np.ndarray,
        known: np.ndarray | int,
        draft: bool,
        drawn: tuple[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        """:meth:`step`; ``base``, when given, is ``tables.row0[layer_of_chain]`` precomputed
        (each step then skips that gather); ``drawn``: (chains, subset) of :meth:`step`."""
        n = len(layer_of_chain)
        if self.k == 0 or (n == 0 and drawn is None):
            return np.zeros((n, self.k), dtype=np.int64)
        tables = self._draft if draft else self._true
        if not isinstance(known, int | np.integer) and (known >= tables.depth).all():
            known = tables.depth  # the usual case: the whole window is known
        if isinstance(known, int | np.integer):
            a: int | np.ndarray = min(int(known), tables.depth)
            mask = 0 if a == 0 else None if a == self.depth else (1 << a) - 1
        else:
            a = np.minimum(np.asarray(known), tables.depth)[:, None]
            mask = (1 << a) - 1
        offset = (1 << a) - 1
        if tables.row1 is not None:
            u64 = _draw(rng, (n, self.num_experts), np.float64, drawn)
            return self._step_interpolated(u64, tables, layer_of_chain, base, history, mask, a)
        # Pareto order sampling: the k smallest of odds(U_e) / odds(g_e), in float32. One draw
        # for all chains, then blocks of rows small enough that the (rows, N) temporaries stay
        # in cache; every row's arithmetic is the same elementwise as one whole-array pass.
        u = _draw(rng, (n, self.num_experts), np.float32, drawn)
        if self.k >= self.num_experts:
            return np.broadcast_to(np.arange(self.num_experts), (n, self.k)).copy()
        out = np.empty((n, self.k), dtype=np.int64)
        if base is None and isinstance(offset, int):
            row0, offset = tables.row0 + offset, 0  # (L, N): cheaper than an (n, N) pass
        else:
            row0 = tables.row0
        for lo in range(0, n, _BLOCK_ROWS):
            rows = slice(lo, lo + _BLOCK_ROWS)
            shift = offset if isinstance(offset, int) else offset[rows]
            if base is not None:
                index = base[rows] + shift
            else:
                index = row0[layer_of_chain[rows]]
                if not isinstance(shift, int):
                    index += shift
            if mask is None:
                index += history[rows]
            elif isinstance(mask, int):
                if mask:
                    index += history[rows] & mask
            else:
                index += history[rows] & mask[rows]
            ub, g = u[rows], tables.values.take(index)
            key = pareto_keys(ub, g)
            part = np.partition(key, self.k - 1, axis=1)
            if part[:, : self.k].all():
                out[rows] = smallest_sorted(key, self.k, part)
            else:
                # Only a draw u = 0 gives a key 0 (else u >= 2^-24 and g >= e^-50), which then
                # is among the k smallest: floor the draws at 2^-25 and redo the block. Draws
                # are multiples of 2^-24, so the floor moves nothing else.
                np.maximum(ub, np.float32(2.0**-25), out=ub)
                out[rows] = smallest_sorted(pareto_keys(ub, g), self.k)
        return out

    def _step_interpolated(
        self,
        u64: np.ndarray,
        tables: _HistoryTables,
        layer_of_chain: np.ndarray,
        base: np.ndarray | None,
        history: np.ndarray,
        mask: int | np.ndarray | None,
        a: int | np.ndarray,
    ) -> np.ndarray:
        """:meth:`_step` with node tables (logits mixed per expert), in float64."""
        n = len(layer_of_chain)
        pattern = history if mask is None else history & mask
        index = tables.row0[layer_of_chain] if base is None else base.copy()
        index += (1 << a) - 1
        index += pattern
        assert tables.weight is not None and tables.row1 is not None
        w = tables.weight[layer_of_chain]
        far = tables.row1[layer_of_chain] - tables.row0[layer_of_chain]
        g = (1.0 - w) * tables.values.take(index) + w * tables.values.take(index + far)
        if tables.fixed is not None:
            pinned = tables.fixed[layer_of_chain]
            g = np.where(np.isnan(pinned), g, pinned)
        key = np.log(u64) - np.log1p(-u64) - g
        if self.k < self.num_experts:
            return smallest_sorted(key, self.k)
        return np.broadcast_to(np.arange(self.num_experts), (n, self.k)).copy()

    def sample_sequences(
        self, rng: np.random.Generator, num_sequences: int, length: int
    ) -> np.ndarray:
        """Routing of ``num_sequences`` sequences of ``length`` true tokens, from their start.

        Returns ids (num_sequences, length, num_layers, k_e) of
        :func:`~simspec.routing.sets.id_dtype` (uint8 up to 256 experts).
        """
        layers = np.tile(np.arange(self.num_layers), num_sequences)
        shape = (num_sequences, length, self.num_layers, self.k)
        out = np.zeros(shape, dtype=id_dtype(self.num_experts))
        history = np.zeros(
            (len(layers), self.num_experts), dtype=np.int8 if self.depth < 8 else np.int32
        )
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


def continue_drafts(
    sampler: MaxEntSampler,
    true: np.ndarray,
    anchor: np.ndarray,
    levels: list[np.ndarray],
    rng: np.random.Generator,
    num_experts: int,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """Rejected drafts of the next level r = len(levels) + 1 at every state, each conditioned on
    the D tokens before it: true tokens up to ``anchor`` = i + m_i, then shallower drafts.
    With ``keep`` (sequences, length) only the marked states' drafts are computed (the others
    are zeros; the shallower levels must hold those states); each chunk's draws are made for
    all its chains, so a draft's ids do not depend on ``keep``."""
    nseq, length, layers, k = true.shape
    r = len(levels) + 1
    total = nseq * length * layers
    out = np.zeros((total, k), dtype=true.dtype)
    flat_levels = [lv.reshape(-1, k) for lv in levels]
    wanted = None if keep is None else np.repeat(keep.reshape(-1), layers)
    depth = sampler.depth
    for start in range(0, total, CHUNK_CHAINS):
        stop = min(start + CHUNK_CHAINS, total)
        subset = None if wanted is None else np.flatnonzero(wanted[start:stop])
        chain = np.arange(start, stop) if subset is None else start + subset
        q, rest = np.divmod(chain, length * layers)
        i, layer = np.divmod(rest, layers)
        previous = []
        for d in range(1, depth + 1):
            if d < r:
                previous.append(flat_levels[r - d - 1][chain])
                continue
            index = anchor[q, i] - (d - r)
            ids = true[q, np.maximum(index, 0), layer].astype(np.int16)
            previous.append(np.where(index[:, None] >= 0, ids, -1))
        history = history_bits(previous, num_experts)
        ids = sampler.step(
            rng, layer, history, anchor[q, i] + r, draft=True, chains=stop - start, subset=subset
        )
        out[chain] = ids.astype(true.dtype)
    return out.reshape(nseq, length, layers, k)


def _draw(
    rng: np.random.Generator,
    shape: tuple[int, int],
    dtype: type,
    drawn: tuple[int, np.ndarray] | None,
) -> np.ndarray:
    """Uniform draws (rows, N) for the chains computed: all of them, or with ``drawn`` =
    (chains, subset) the rows ``subset`` of draws made for ``chains`` chains."""
    if drawn is None:
        return rng.random(shape, dtype=dtype)
    chains, subset = drawn
    return rng.random((chains, shape[1]), dtype=dtype)[subset]


def sampled_unique_curve(
    inclusion_probabilities: np.ndarray,
    overlaps: np.ndarray,
    tokens: int,
    batch: int,
    samples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Measured U(T), T = 1..tokens, averaged over layers: ``samples`` passes of ``batch``
    sequences drawn by the max-entropy sampler (``overlaps``: (D,) or (layers, D))."""
    p = inclusion_probabilities
    layers, n = p.shape
    profile = np.asarray(overlaps, dtype=float)
    if profile.ndim == 1:
        profile = np.tile(profile, (layers, 1))
    ids = MaxEntSampler(p, profile).sample_sequences(rng, samples * batch, tokens)
    member = to_sets(ids, n).reshape(samples, batch, tokens, layers, n)
    union = np.logical_or.accumulate(member.any(axis=1), axis=1)
    return union.sum(axis=-1).mean(axis=(0, 2))
