"""Expected unique experts of a verify pass from routing statistics (the analytic mode).

A pass feeds B sequences of T_b tokens each; in every MoE layer it loads the union of their
experts. Sequences are independent and, by linearity of expectation, only each expert's own
on/off pattern matters:

    E[U] = Σ_e [1 − Π_b P(expert e silent over the T_b tokens of sequence b)]

:class:`UniqueExpertPredictor` computes log P(silent) from the inclusion probabilities p_e and
the lag overlaps rho_1..rho_D under the maximum-entropy pattern law: the Markov closed form when
only lag 1 is constrained (per expert, exact), IPF on inclusion-probability nodes otherwise
(:mod:`simspec.routing.ipf`), each lag's overlap shared among experts by the reuse law
(:mod:`simspec.routing.overlap`). Layers with the same reuse share their fits, and results are
cached per (nodes, statistics, T) and per batch composition, so a query inside the simulator is a
dictionary lookup. Rejected drafts may have their own overlap profile: a pair (s, t) whose later
token is a rejected draft uses the draft profile.

A draft tree is fed as the chain of its nodes, corrected by how much the shared routing of
its nodes at one depth lowers P(silent) under the lag-1 chain
(:mod:`simspec.routing.siblings`): exact for a lag-1 profile, the chain's multi-lag answer
times the lag-1 tree-over-chain factor otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from simspec.physics.experts import independent_union_from_inclusion
from simspec.routing.ipf import NODES, interpolate_nodes, ipf_log_silent, probability_nodes
from simspec.routing.memo import FitMemo
from simspec.routing.overlap import layer_reuse, markov_log_silent, pair_probability
from simspec.routing.siblings import sibling_share, tree_log_silent

if TYPE_CHECKING:
    from simspec.routing.hmm import LatentFit


def _fit_node_log_silent(
    node_bytes: bytes,
    q_true_bytes: bytes,
    q_draft_bytes: bytes,
    shape: tuple[int, int, int],
    tokens: int,
    true_tokens: int,
) -> np.ndarray:
    m, d_true, d_draft = shape
    p = np.frombuffer(node_bytes).copy()
    q_true = np.frombuffer(q_true_bytes).reshape(m, d_true)
    q_draft = np.frombuffer(q_draft_bytes).reshape(m, d_draft)
    out = ipf_log_silent(p, q_true, tokens, q_draft=q_draft, true_tokens=true_tokens)
    out.setflags(write=False)
    return out


#: ``_fit_node_log_silent`` remembered per arguments; a sweep's processes share the answers.
_node_log_silent = FitMemo("routing.predictor.node_log_silent", _fit_node_log_silent, 4096)


def _pad(q: np.ndarray, width: int) -> np.ndarray:
    """Pad lag columns with nan (no constraint) up to ``width``."""
    out = np.full((q.shape[0], width), np.nan)
    out[:, : q.shape[1]] = q
    return np.ascontiguousarray(out)


class UniqueExpertPredictor:
    """Expected unique experts per layer for a batch of sequences, from (p_e, rho_1..rho_D).

    Parameters
    ----------
    inclusion_probabilities : array (L, N)
        p_e per layer (each row sums to k_e).
    overlaps : array (D,) or (L, D)
        Lag-1..D overlaps of true tokens: one profile pooled over all layers (a common reuse
        per lag) or one per layer.
    draft_overlaps : array (D',) or (L, D'), optional
        Overlap profile of rejected drafts with the tokens before them; default ``overlaps``.
    nodes : int
        Inclusion-probability nodes per layer group (:mod:`simspec.routing.ipf`).
    sibling_overlap : float, optional
        Overlap of two children of one draft-tree node (:mod:`simspec.routing.siblings`);
        default the lag-1 overlap of drafts.

    Tables of log P(silent) per (T, true tokens) and answers per batch composition are cached,
    so repeated queries cost a dictionary lookup.

    Examples
    --------
    >>> pred = UniqueExpertPredictor(np.full((1, 128), 8 / 128), [0.38])
    >>> round(float(pred.expected_unique([4])[0]) / 8, 2)  # Markov closed form: U(4) = 2.78 k_e
    2.78
    """

    def __init__(
        self,
        inclusion_probabilities: np.ndarray,
        overlaps: Sequence[float] | np.ndarray,
        draft_overlaps: Sequence[float] | np.ndarray | None = None,
        *,
        nodes: int = NODES,
        sibling_overlap: float | None = None,
    ):
        self.inclusion_probabilities = np.atleast_2d(
            np.asarray(inclusion_probabilities, dtype=float)
        )
        self.num_layers, self.num_experts = self.inclusion_probabilities.shape
        self.nodes = nodes
        self._lam_true = self._fit(overlaps)
        self.split = draft_overlaps is not None
        self._lam_draft = self._lam_true if draft_overlaps is None else self._fit(draft_overlaps)
        # Layers sharing their reuse share nodes (pooled statistics: one group).
        joint = np.concatenate([self._lam_true, self._lam_draft], axis=1)
        _, self._group_of_layer = np.unique(joint, axis=0, return_inverse=True)
        self._group_of_layer = self._group_of_layer.ravel()
        self._tables: dict[tuple[int, int], np.ndarray] = {}
        self._trees: dict[tuple[tuple[int, ...], int], np.ndarray] = {}
        self._tree_answers: dict[tuple, np.ndarray] = {}
        self._answers: dict[tuple[int, bytes], np.ndarray] = {}
        self._exact: dict[tuple[bytes, bytes], np.ndarray] = {}  # raw inputs -> answer

        _, q_draft = self._lag1_pairs()
        self.sibling_share = sibling_share(self.inclusion_probabilities, q_draft, sibling_overlap)

    def _fit(self, overlaps: Sequence[float] | np.ndarray) -> np.ndarray:
        return layer_reuse(self.inclusion_probabilities, overlaps)

    def _lag1_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Lag-1 pair probabilities q of true tokens and of drafts per expert, (L, N) each."""
        p = self.inclusion_probabilities
        pairs = []
        for reuse in (self._lam_true, self._lam_draft):
            if reuse.shape[1]:
                pairs.append(pair_probability(p, reuse[:, :1]))
            else:
                pairs.append(p * p)
        return pairs[0], pairs[1]

    def tree_log_silent(self, parents: tuple[int, ...], true_tokens: int) -> np.ndarray:
        """log P(expert silent over a draft tree's nodes), array (L, N) (module docstring).

        ``parents[i]`` is the parent of node i + 1 (node 0, the root, is the last committed
        token); ``true_tokens`` nodes (the root and its accepted path) are true tokens.
        """
        key = (parents, true_tokens)
        table = self._trees.get(key)
        if table is not None:
            return table
        chain = self.log_silent(len(parents) + 1, true_tokens)
        if self.sibling_share == 0.0 or len(set(parents)) == len(parents):
            table = chain  # no depth holds two nodes (a chain), or no sibling correlation
        else:
            p = self.inclusion_probabilities
            q_true, q_draft = self._lag1_pairs()
            a = true_tokens if self.split else len(parents) + 1
            shared = tree_log_silent(p, q_true, q_draft, parents, a, self.sibling_share)
            alone = tree_log_silent(p, q_true, q_draft, parents, a, 0.0)
            with np.errstate(invalid="ignore"):
                table = np.where(np.isfinite(chain), chain + (shared - alone), chain)
            table.setflags(write=False)
        self._trees[key] = table
        return table

    def log_silent(self, tokens: int, true_tokens: int | None = None) -> np.ndarray:
        """log P(expert silent over ``tokens`` tokens of one sequence), array (L, N).

        ``true_tokens`` leading tokens are true tokens; the rest are rejected drafts (only
        matters when a draft profile was given).
        """
        n_true = tokens if (true_tokens is None or not self.split) else min(true_tokens, tokens)
        key = (tokens, n_true)
        table = self._tables.get(key)
        if table is not None:
            return table
        p = self.inclusion_probabilities
        table = np.zeros_like(p)
        with np.errstate(divide="ignore"):
            table[p >= 1.0] = -np.inf
        inner = (p > 0.0) & (p < 1.0)
        fits = []  # (layers, node p, q true, q draft) of every group that needs IPF
        for g in range(int(self._group_of_layer.max(initial=-1)) + 1):
            layers = np.flatnonzero(self._group_of_layer == g)
            lam_t, lam_d = self._lam_true[layers[0]], self._lam_draft[layers[0]]
            group_p = p[layers]
            if lam_t.shape[0] <= 1 and lam_d.shape[0] <= 1:
                # Lag-1 only: the closed form is exact per expert, no nodes needed.
                q_t = pair_probability(group_p, lam_t[0]) if len(lam_t) else group_p * group_p
                q_d = pair_probability(group_p, lam_d[0]) if len(lam_d) else group_p * group_p
                pairs = [q_t if t <= n_true else q_d for t in range(2, tokens + 1)]
                values = markov_log_silent(group_p, pairs)
                table[layers] = np.where(inner[layers], values, table[layers])
                continue
            node_p = probability_nodes(group_p.ravel(), self.nodes)
            if len(node_p):
                q_t = pair_probability(node_p[:, None], lam_t[None, :])
                q_d = pair_probability(node_p[:, None], lam_d[None, :])
                fits.append((layers, node_p, q_t, q_d))
        if fits:
            # One vectorised IPF over the nodes of every group (profiles padded with nan =
            # unconstrained lags).
            width_t = max(f[2].shape[1] for f in fits)
            width_d = max(f[3].shape[1] for f in fits)
            all_p = np.concatenate([f[1] for f in fits])
            all_t = np.concatenate([_pad(f[2], width_t) for f in fits])
            all_d = np.concatenate([_pad(f[3], width_d) for f in fits])
            silent = _node_log_silent(
                all_p.tobytes(),
                all_t.tobytes(),
                all_d.tobytes(),
                (len(all_p), width_t, width_d),
                tokens,
                n_true,
            )
            start = 0
            for layers, node_p, _, _ in fits:
                node_silent = silent[start : start + len(node_p)]
                start += len(node_p)
                # Interpolate the effective number of independent tokens, log P / log(1 − p):
                # nearly flat in p, unlike log P itself.
                ratio = node_silent / np.log1p(-node_p)
                group_p = p[layers]
                safe = np.where(inner[layers], group_p, 0.5)
                values = interpolate_nodes(node_p, ratio, safe) * np.log1p(-safe)
                table[layers] = np.where(inner[layers], values, table[layers])
        table.setflags(write=False)
        self._tables[key] = table
        return table

    def expected_unique(
        self,
        tokens_per_sequence: Sequence[int] | np.ndarray,
        true_tokens: Sequence[int] | np.ndarray | None = None,
        trees: Sequence[tuple[int, ...]] | None = None,
    ) -> np.ndarray:
        """E[unique experts] per layer for B independent sequences, array (L,).

        Parameters
        ----------
        tokens_per_sequence : sequence of int
            T_b for each sequence of the pass (draft tokens + 1 in a verify pass).
        true_tokens : sequence of int, optional
            How many of each sequence's tokens are true tokens (accepted drafts + 1); the rest
            are rejected drafts. Ignored unless a draft profile was given.
        trees : sequence of tuple of int, optional
            Each sequence's draft tree as parent indices (:meth:`tree_log_silent`), its
            ``tokens_per_sequence`` being the tree's nodes; default chains.
        """
        if trees is not None:
            return self._tree_answer(tokens_per_sequence, true_tokens, trees)
        # A pass often repeats an earlier pass exactly (every plain decode pass of B requests;
        # equal draft lengths when only T matters): the raw inputs are a first, cheaper key.
        lengths = np.asarray(tokens_per_sequence, dtype=np.int64)
        exact = true_tokens is None or not self.split
        true = lengths if exact else np.asarray(true_tokens, dtype=np.int64)
        raw = (lengths.tobytes(), b"" if exact else true.tobytes())
        answer = self._exact.get(raw)
        if answer is not None:
            return answer
        answer = self._composition_answer(lengths, None if exact else true)
        if len(self._exact) > 4096:  # keys grow with B: keep this cache small
            self._exact.clear()
        self._exact[raw] = answer
        return answer

    def _composition_answer(self, lengths: np.ndarray, true: np.ndarray | None) -> np.ndarray:
        """:meth:`expected_unique` of int arrays, cached per batch composition."""
        # The batch composition as a histogram of (T, true tokens) codes: a few array calls
        # instead of a Counter over Python tuples. Codes ascend as (T, a) do, so the terms are
        # summed in the same order as sorted (T, a) pairs.
        stride = 0
        if true is None:
            codes = lengths
        else:
            if true.shape != lengths.shape:
                raise ValueError("tokens_per_sequence and true_tokens differ in length")
            # At most T true tokens; fewer than 0 reads as 0 (all drafts).
            stride = int(lengths.max(initial=0)) + 1
            codes = lengths * stride + np.minimum(np.maximum(true, 0), lengths)
        if len(codes) and codes.min() < 0:  # sequences of no tokens are ignored
            codes = codes[lengths > 0]
        counts = np.bincount(codes)
        counts[: stride or 1] = 0  # T = 0
        key = (stride, counts.tobytes())
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        total = np.zeros_like(self.inclusion_probabilities)
        for code in np.flatnonzero(counts):
            t, a = divmod(int(code), stride) if stride else (int(code), int(code))
            total = total + int(counts[code]) * self.log_silent(t, a)
        answer = (1.0 - np.exp(total)).sum(axis=1)
        answer.setflags(write=False)
        if len(self._answers) > 100_000:
            self._answers.clear()
        self._answers[key] = answer
        return answer

    def _tree_answer(
        self,
        tokens_per_sequence: Sequence[int] | np.ndarray,
        true_tokens: Sequence[int] | np.ndarray | None,
        trees: Sequence[tuple[int, ...]],
    ) -> np.ndarray:
        """:meth:`expected_unique` of a pass of draft trees, cached per composition."""
        lengths = np.asarray(tokens_per_sequence, dtype=np.int64).tolist()
        true = lengths if true_tokens is None else np.asarray(true_tokens, dtype=np.int64).tolist()
        if len(trees) != len(lengths) or len(true) != len(lengths):
            raise ValueError("tokens_per_sequence, true_tokens and trees differ in length")
        items = []
        for t, a, parents in zip(lengths, true, trees, strict=True):
            if t <= 0:
                continue
            if len(parents) + 1 != t:
                raise ValueError(f"a tree of {len(parents) + 1} nodes fed as {t} tokens")
            items.append((tuple(parents), min(max(int(a), 0), t) if self.split else t))
        key = tuple(sorted(items))
        answer = self._tree_answers.get(key)
        if answer is not None:
            return answer
        total = np.zeros_like(self.inclusion_probabilities)
        for parents, a in key:
            total = total + self.tree_log_silent(parents, a)
        answer = (1.0 - np.exp(total)).sum(axis=1)
        answer.setflags(write=False)
        if len(self._tree_answers) > 100_000:
            self._tree_answers.clear()
        self._tree_answers[key] = answer
        return answer

    def unique_curve(self, max_tokens: int, batch: int = 1) -> np.ndarray:
        """E[U](T) for T = 1..max_tokens with ``batch`` sequences each, array (max_tokens, L)."""
        return np.stack([self.expected_unique([t] * batch) for t in range(1, max_tokens + 1)])


def predict_unique_experts(
    inclusion_probabilities: np.ndarray,
    overlaps: Sequence[float] | np.ndarray,
    tokens_per_sequence: Sequence[int],
) -> np.ndarray:
    """One-shot :meth:`UniqueExpertPredictor.expected_unique` (see there), array (L,).

    Examples
    --------
    >>> p = np.full((1, 128), 8 / 128)
    >>> u = predict_unique_experts(p, [8 / 128], [4])  # chance overlap = independence
    >>> round(float(u[0]) / 8, 2)  # N(1 − (1 − k/N)^4) / k
    3.64
    """
    predictor = UniqueExpertPredictor(inclusion_probabilities, overlaps)
    return predictor.expected_unique(tokens_per_sequence)


#: U(T) predictors for a routing trace: the fitted latent law, or max-entropy IPF.
TRACE_PREDICTORS = ("latent", "ipf")
#: The latent law fits a trace's lag profile when its overlaps are within this of the trace's.
PROFILE_TOLERANCE = 0.02


def choose_predictor(fit: LatentFit, tolerance: float = PROFILE_TOLERANCE) -> str:
    """The U(T) predictor to use for a trace: ``"latent"`` unless its lag profile misfits.

    Lag-pair statistics do not fix U(T): a router whose persistence comes from a hidden state
    (a topic, a drifting hot set) can have the lag overlaps of a max-entropy law and far
    stronger higher-order correlation; IPF given rho_1..rho_4 then over-predicts U(T) by up to
    +23 % (topic router, reuse 0.9, drift 0.02) and +24 % (drifting hot set) at T = 16, B = 1
    (``studies/ipf_vs_routers.py``). The latent law, fitted from p_e, rho_d and the three-token
    overlap, predicts those routers to 0.3 % on average (max 1.3 %) and a Markov max-entropy
    router as well as IPF; only when the trace's lag profile is not the geometric decay of one
    hidden state (``fit.profile_error`` above ``tolerance``, e.g. a slowly decaying max-entropy
    profile: 3 %) is IPF, which matches any profile, the better guess.
    """
    return "latent" if fit.profile_error <= tolerance else "ipf"


def unique_curves(
    inclusion_probabilities: np.ndarray, overlaps: np.ndarray, tokens: int, batch: int = 1
) -> dict[str, np.ndarray]:
    """Predicted U(T), T = 1..tokens, averaged over layers: independent, Markov and multi-lag.

    ``inclusion_probabilities`` is (layers, N) expert usage p_e; ``overlaps`` the lag profile
    rho_1..rho_D (shape (D,) or (layers, D); empty for independent routing). Raises ValueError
    for overlaps no top-k router can have.
    """
    p = inclusion_probabilities
    overlaps = np.asarray(overlaps, dtype=float)
    if overlaps.ndim == 1:
        overlaps = np.tile(overlaps, (p.shape[0], 1))
    out = {
        "independent": np.array(
            [independent_union_from_inclusion(p, float(batch * t)) for t in range(1, tokens + 1)]
        )
    }
    if overlaps.shape[-1] >= 1:
        markov = UniqueExpertPredictor(p, overlaps[:, :1])
        out["Markov (rho_1)"] = markov.unique_curve(tokens, batch)
    if overlaps.shape[-1] >= 2:
        full = UniqueExpertPredictor(p, overlaps)
        out[f"IPF (rho_1..rho_{overlaps.shape[-1]})"] = full.unique_curve(tokens, batch)
    return {label: values.mean(axis=1) for label, values in out.items()}
