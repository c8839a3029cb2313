"""Routing traces: a file format, and the statistics the IPF predictor needs from one.

A routing trace records which experts a router chose, token by token, in every MoE layer. It is
an ``.npz`` file (``numpy.savez``; read with ``allow_pickle=False``) with these arrays:

===================  ===========================  =================================================
key                  shape / type                 meaning
===================  ===========================  =================================================
``expert_ids``       int (tokens, layers, k_e)    ids of the k_e routed experts of each token in
                                                  each MoE layer, distinct, in [0, num_experts)
``num_experts``      int scalar                   N, routed experts per MoE layer
``sequence_starts``  int (S,), optional           index of the first token of each sequence:
                                                  0, then strictly increasing (default: one
                                                  sequence). Lags and windows never cross a start.
``model``            str scalar, optional         model name, e.g. ``"qwen3-30b-a3b"``
``source``           str scalar, optional         how the trace was produced
``layers``           int (layers,), optional      model layer index of each MoE layer
``format``           str scalar, optional         ``"simspec-routing-trace/1"``
===================  ===========================  =================================================

Tokens of a sequence are in generation order (one row per decoded token; prompt tokens may be
included, they route the same way). Shared experts are not listed: they are always loaded. A trace
recorded with a drafter adds optional draft sections (:mod:`simspec.routing.trace_drafts`).

:func:`estimate_statistics` measures, per layer, the inclusion frequency p_e of every expert,
the lag-d overlaps rho_d = mean |S_t ∩ S_{t+d}| / k_e over token pairs d apart in the same
sequence, and the empirical unique-experts curve U(T) = mean |S_t ∪ … ∪ S_{t+T−1}| over every
window of T consecutive tokens of a sequence. Those are the inputs and the check of
:mod:`simspec.routing.predictor`. Sets are bitsets (N/64 words per token and layer), so unions and
intersections are word-wise ORs/ANDs and popcounts.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simspec.errors import InputError
from simspec.inputs import check_npz, check_regular
from simspec.physics.experts import chance_overlap
from simspec.routing.trace_drafts import DraftSections, parse_draft_sections

FORMAT = "simspec-routing-trace/1"


@dataclass(frozen=True, slots=True)
class RoutingTrace:
    """The contents of a routing trace file (module docstring)."""

    expert_ids: np.ndarray  # (tokens, layers, k_e)
    num_experts: int
    sequence_starts: np.ndarray  # (S,)
    model: str = ""
    source: str = ""
    layers: np.ndarray | None = None
    drafts: DraftSections = DraftSections()

    @property
    def num_tokens(self) -> int:
        """Tokens in the trace (all sequences)."""
        return int(self.expert_ids.shape[0])

    @property
    def num_layers(self) -> int:
        """MoE layers."""
        return int(self.expert_ids.shape[1])

    @property
    def experts_per_token(self) -> int:
        """k_e."""
        return int(self.expert_ids.shape[2])

    def sequence_of_token(self) -> np.ndarray:
        """Index of the sequence each token belongs to, int (tokens,)."""
        seq = np.zeros(self.num_tokens, dtype=np.int64)
        seq[self.sequence_starts[1:]] = 1
        return np.cumsum(seq)


def save_trace(path: str | Path, trace: RoutingTrace) -> None:
    """Write ``trace`` as a compressed ``.npz`` routing trace (ids as the smallest uint type)."""
    ids = trace.expert_ids
    dtype = np.uint8 if trace.num_experts <= 256 else np.uint16
    arrays = {
        "expert_ids": ids.astype(dtype),
        "num_experts": np.array(trace.num_experts),
        "sequence_starts": np.asarray(trace.sequence_starts, dtype=np.int64),
        "model": np.array(trace.model),
        "source": np.array(trace.source),
        "format": np.array(FORMAT),
    }
    if trace.layers is not None:
        arrays["layers"] = np.asarray(trace.layers, dtype=np.int64)
    arrays.update(trace.drafts.arrays())
    with open(path, "wb") as handle:
        np.savez_compressed(handle, **arrays)  # type: ignore[arg-type]


#: Most routed experts per layer a trace may declare (today's largest MoEs have a few hundred;
#: the statistics allocate arrays of this size per layer).
MAX_EXPERTS = 65536


def _text(data: np.lib.npyio.NpzFile, key: str, source: str) -> str:
    if key not in data.files:
        return ""
    value = data[key]
    if value.ndim != 0 or value.dtype.kind not in "US":
        raise InputError(source, key, "a string scalar", f"an array of shape {value.shape}")
    return str(value)


def load_trace(path: str | Path) -> RoutingTrace:
    """Read and validate a routing trace; every problem is an InputError naming the key.

    Raises
    ------
    InputError
        Missing file, not an ``.npz``, missing or malformed arrays, ids out of range or
        repeated within a token, bad sequence starts.
    """
    source = str(path)
    check_regular(path, source, "routing trace (.npz)")  # a FIFO would block np.load forever
    check_npz(path, source, "routing trace (.npz)")  # shapes and sizes before any allocation
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(source, "", "an existing routing trace (.npz)", "no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise InputError(
            source, "", "a routing trace written by numpy.savez (.npz)", type(err).__name__
        ) from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputError(source, "", "an .npz archive of named arrays", "a single .npy array")
    with data:
        try:
            return _parse(data, source)
        except ValueError as err:  # e.g. an object array, which needs pickle: never allowed
            raise InputError(
                source, "", "plain numeric and string arrays (no pickled objects)", str(err)
            ) from None


def _parse(data: np.lib.npyio.NpzFile, source: str) -> RoutingTrace:
    """The validated contents of an open trace archive (see :func:`load_trace`)."""
    if "expert_ids" not in data.files:
        raise InputError(source, "expert_ids", "an integer array (tokens, layers, k_e)", "nothing")
    ids = data["expert_ids"]
    if ids.dtype.kind not in "iu" or ids.ndim != 3:
        raise InputError(
            source,
            "expert_ids",
            "an integer array (tokens, layers, k_e)",
            f"a {ids.dtype} array of shape {ids.shape}",
        )
    if min(ids.shape) == 0:
        raise InputError(source, "expert_ids", "a non-empty array", f"shape {ids.shape}")
    if "num_experts" not in data.files:
        raise InputError(source, "num_experts", "an integer scalar (N)", "nothing")
    n = data["num_experts"]
    if n.ndim != 0 or n.dtype.kind not in "iu" or not ids.shape[2] <= int(n) <= MAX_EXPERTS:
        raise InputError(
            source,
            "num_experts",
            f"an integer scalar in [k_e = {ids.shape[2]}, {MAX_EXPERTS}]",
            f"{n!r}".replace("\n", " "),
        )
    num_experts = int(n)
    ids = ids.astype(np.int64)
    bad = (ids < 0) | (ids >= num_experts)
    if bad.any():
        t, layer, _ = np.argwhere(bad)[0]
        raise InputError(
            source,
            "expert_ids",
            f"ids in [0, {num_experts})",
            f"{ids[t, layer].tolist()} at token {t}, layer {layer}",
        )
    ordered = np.sort(ids, axis=2)
    repeat = (ordered[:, :, 1:] == ordered[:, :, :-1]).any(axis=2)
    if repeat.any():
        t, layer = np.argwhere(repeat)[0]
        raise InputError(
            source,
            "expert_ids",
            "k_e distinct experts per token and layer",
            f"{ids[t, layer].tolist()} at token {t}, layer {layer}",
        )
    starts = np.zeros(1, dtype=np.int64)
    if "sequence_starts" in data.files:
        starts = data["sequence_starts"]
        ok = (
            starts.dtype.kind in "iu"
            and starts.ndim == 1
            and len(starts) >= 1
            and int(starts[0]) == 0
            and bool((np.diff(starts.astype(np.int64)) > 0).all())
            and int(starts[-1]) < ids.shape[0]
        )
        if not ok:
            raise InputError(
                source,
                "sequence_starts",
                f"increasing token indices starting at 0, below {ids.shape[0]}",
                f"{starts.tolist()[:8]}" + (" ..." if starts.size > 8 else ""),
            )
        starts = starts.astype(np.int64)
    layers = None
    if "layers" in data.files:
        layers = data["layers"]
        if layers.shape != (ids.shape[1],) or layers.dtype.kind not in "iu":
            raise InputError(
                source,
                "layers",
                f"an integer array of {ids.shape[1]} layer indices",
                f"a {layers.dtype} array of shape {layers.shape}",
            )
    return RoutingTrace(
        ids,
        num_experts,
        starts,
        model=_text(data, "model", source),
        source=_text(data, "source", source),
        layers=layers,
        drafts=parse_draft_sections(data, source, ids, num_experts),
    )


def _bitsets(trace: RoutingTrace) -> np.ndarray:
    """Expert sets as uint64 bit words, (tokens, layers, ceil(N / 64))."""
    words = (trace.num_experts + 63) // 64
    bits = np.zeros((trace.num_tokens, trace.num_layers, words), dtype=np.uint64)
    t = np.arange(trace.num_tokens)[:, None]
    layer = np.arange(trace.num_layers)[None, :]
    for j in range(trace.experts_per_token):
        ids = trace.expert_ids[:, :, j]
        bits[t, layer, ids // 64] |= np.left_shift(np.uint64(1), (ids % 64).astype(np.uint64))
    return bits


@dataclass(frozen=True, slots=True)
class RoutingStatistics:
    """What :func:`estimate_statistics` measures (arrays per MoE layer)."""

    num_experts: int
    experts_per_token: int
    num_tokens: int
    num_sequences: int
    inclusion_probabilities: np.ndarray  # (L, N) inclusion frequency p_e
    overlaps: np.ndarray  # (L, D) rho_d per layer
    pooled_overlaps: np.ndarray  # (D,) pooled over layers
    unique: np.ndarray  # (L, T_max) empirical U(T), T = 1..T_max
    windows: np.ndarray  # (T_max,) windows averaged per layer

    @property
    def chance(self) -> np.ndarray:
        """Overlap of independent routing with these inclusion frequencies, Σ p_e² / k_e, (L,)."""
        return chance_overlap(self.inclusion_probabilities, self.experts_per_token)

    @property
    def pooled_unique(self) -> np.ndarray:
        """U(T) averaged over layers, (T_max,)."""
        return self.unique.mean(axis=0)


def estimate_statistics(
    trace: RoutingTrace, max_lag: int = 4, max_tokens: int = 16
) -> RoutingStatistics:
    """Per-layer inclusion frequencies, lag overlaps rho_1..rho_D and empirical U(T) of a trace.

    Parameters
    ----------
    trace : RoutingTrace
    max_lag : int
        D, the largest lag whose overlap is estimated.
    max_tokens : int
        Largest window T of the empirical unique-experts curve.

    Raises
    ------
    ValueError
        When no sequence is long enough for a lag or a window (no pair / window to average).
    """
    k = trace.experts_per_token
    seq = trace.sequence_of_token()
    counts = np.zeros((trace.num_layers, trace.num_experts))
    for j in range(k):
        np.add.at(counts, (np.arange(trace.num_layers)[None, :], trace.expert_ids[:, :, j]), 1)
    inclusion = counts / trace.num_tokens
    bits = _bitsets(trace)
    overlaps = np.zeros((trace.num_layers, max_lag))
    pooled = np.zeros(max_lag)
    for d in range(1, max_lag + 1):
        same = seq[d:] == seq[:-d]
        if not same.any():
            raise ValueError(f"no sequence has more than {d} tokens: lag {d} cannot be measured")
        common = np.bitwise_count(bits[d:][same] & bits[:-d][same]).sum(axis=2)
        overlaps[:, d - 1] = common.mean(axis=0) / k
        pooled[d - 1] = overlaps[:, d - 1].mean()
    unique = np.zeros((trace.num_layers, max_tokens))
    windows = np.zeros(max_tokens, dtype=np.int64)
    union = bits.copy()
    for t in range(1, max_tokens + 1):
        if t > 1:
            union = union[:-1] | bits[t - 1 :]
        valid = seq[: len(union)] == seq[t - 1 :]
        if not valid.any():
            raise ValueError(f"no sequence has {t} tokens: U({t}) cannot be measured")
        windows[t - 1] = int(valid.sum())
        unique[:, t - 1] = np.bitwise_count(union[valid]).sum(axis=2).mean(axis=0)
    return RoutingStatistics(
        num_experts=trace.num_experts,
        experts_per_token=k,
        num_tokens=trace.num_tokens,
        num_sequences=len(trace.sequence_starts),
        inclusion_probabilities=inclusion,
        overlaps=overlaps,
        pooled_overlaps=pooled,
        unique=unique,
        windows=windows,
    )


def fit_zipf_exponent(inclusion_probabilities: np.ndarray, experts_per_token: int) -> float:
    """Zipf exponent s whose capped inclusion probabilities best match measured ones (sorted).

    Least squares over the rank-ordered p_e of every layer, by bounded scalar minimisation
    (Brent's method, ``scipy.optimize.minimize_scalar``) on s in [0, 4]; a summary for scenario
    files, which take a Zipf exponent, not a list.
    """
    from scipy.optimize import minimize_scalar

    from simspec.routing.popularity import inclusion_probabilities as capped

    p = np.sort(np.atleast_2d(inclusion_probabilities), axis=1)[:, ::-1].mean(axis=0)
    ranks = np.arange(1, len(p) + 1, dtype=float)

    def loss(s: float) -> float:
        model = capped(ranks**-s, experts_per_token)
        return float(((model - p) ** 2).sum())

    fit = minimize_scalar(loss, bounds=(0.0, 4.0), method="bounded", options={"xatol": 1e-9})
    return float(fit.x)


def sample_trace(
    inclusion_probabilities: np.ndarray,
    overlaps: np.ndarray,
    *,
    num_sequences: int,
    tokens_per_sequence: int,
    rng: np.random.Generator,
    model: str = "",
    source: str = "",
) -> RoutingTrace:
    """A synthetic trace from the max-entropy sampler (:class:`MaxEntSampler`).

    ``inclusion_probabilities`` are p_e (L, N), ``overlaps`` (L, D) or (D,) the lag profile per
    layer.
    """
    from simspec.routing.maxent import MaxEntSampler

    p = np.atleast_2d(np.asarray(inclusion_probabilities, dtype=float))
    profile = np.asarray(overlaps, dtype=float)
    if profile.ndim == 1:
        profile = np.tile(profile, (p.shape[0], 1))
    sampler = MaxEntSampler(p, profile)
    ids = sampler.sample_sequences(rng, num_sequences, tokens_per_sequence)
    flat = ids.reshape(num_sequences * tokens_per_sequence, p.shape[0], sampler.k)
    starts = np.arange(num_sequences, dtype=np.int64) * tokens_per_sequence
    return RoutingTrace(flat.astype(np.int64), p.shape[1], starts, model=model, source=source)
