"""Routing traces: the file format, the statistics estimator, and `simspec routing`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from simspec.errors import InputError
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.trace import (
    RoutingTrace,
    estimate_statistics,
    fit_zipf_exponent,
    load_trace,
    save_trace,
)
from tests.commands.test_cli import assert_input_error, run_main
from tests.data.make_routing_trace import generating_statistics

TRACE = Path(__file__).parents[1] / "data" / "routing_trace.npz"


@pytest.fixture(scope="module")
def shipped():
    trace = load_trace(TRACE)
    params = json.loads(trace.source)
    p, overlaps = generating_statistics(params)
    return trace, estimate_statistics(trace, max_lag=4, max_tokens=16), p, overlaps


def test_shipped_trace_is_small_and_well_formed(shipped):
    trace, _, p, _ = shipped
    assert TRACE.stat().st_size < 300_000
    assert (trace.num_tokens, trace.num_layers, trace.experts_per_token) == (4096, 8, 8)
    assert trace.num_experts == 128 and len(trace.sequence_starts) == 16
    assert p.shape == (8, 128)


def test_estimator_recovers_lag_overlaps_within_0_02(shipped):
    """rho_1..rho_4 of a sampled trace, per layer and pooled, within 0.02."""
    _, st, _, overlaps = shipped
    assert np.abs(st.overlaps - overlaps).max() < 0.02
    assert np.abs(st.pooled_overlaps - overlaps.mean(axis=0)).max() < 0.02
    # The per-layer spread (0.8x .. 1.2x) is visible, not averaged away.
    assert st.overlaps[-1, 0] - st.overlaps[0, 0] > 0.1


def test_estimator_recovers_inclusion_probabilities(shipped):
    _, st, p, _ = shipped
    assert st.inclusion_probabilities.sum(axis=1) == pytest.approx(np.full(8, 8.0))
    assert np.abs(st.inclusion_probabilities - p).max() < 0.05
    assert fit_zipf_exponent(st.inclusion_probabilities, 8) == pytest.approx(0.8, abs=0.05)


def test_ipf_from_estimated_statistics_predicts_the_trace(shipped):
    """The trace's own U(T), T = 1..16, from its estimated statistics (per layer)."""
    _, st, _, _ = shipped
    assert st.unique[:, 0] == pytest.approx(np.full(8, 8.0))
    predicted = UniqueExpertPredictor(st.inclusion_probabilities, st.overlaps).unique_curve(
        16
    )  # (T, L)
    errors = predicted.T / st.unique - 1
    assert np.abs(errors).mean() < 0.01
    assert np.abs(errors).max() < 0.03


def test_statistics_of_a_hand_made_trace():
    # One layer, top-2 of 6, two sequences: [0,1] [1,2] [2,3] | [4,5] [4,5].
    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]], [[4, 5]], [[4, 5]]])
    trace = RoutingTrace(ids, 6, np.array([0, 3]))
    st = estimate_statistics(trace, max_lag=2, max_tokens=3)
    # Lag-1 pairs: (0,1),(1,2) share 1 each; (3,4) shares 2 -> mean 4/3 of k = 2.
    assert st.overlaps[0].tolist() == pytest.approx([4 / 6, 0.0])
    assert st.inclusion_probabilities[0].tolist() == pytest.approx([0.2, 0.4, 0.4, 0.2, 0.4, 0.4])
    # Windows never cross the sequence start at token 3.
    assert st.windows.tolist() == [5, 3, 1]
    assert st.unique[0].tolist() == pytest.approx([2.0, (3 + 3 + 2) / 3, 4.0])
    with pytest.raises(ValueError, match="lag 3"):
        estimate_statistics(trace, max_lag=3, max_tokens=2)


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    ids = np.stack([rng.permutation(300)[:4] for _ in range(60)]).reshape(20, 3, 4)
    trace = RoutingTrace(ids, 300, np.array([0, 7]), model="m", source="s", layers=np.arange(3))
    save_trace(tmp_path / "t.npz", trace)
    back = load_trace(tmp_path / "t.npz")
    assert np.array_equal(back.expert_ids, ids)
    assert (back.num_experts, back.model, back.source) == (300, "m", "s")
    assert back.sequence_starts.tolist() == [0, 7]
    assert back.layers is not None and back.layers.tolist() == [0, 1, 2]


def _write(path: Path, **arrays) -> Path:
    np.savez(path, **arrays)
    return path


GOOD_IDS = np.array([[[0, 1]], [[1, 2]], [[2, 3]]])


@pytest.mark.parametrize(
    ("arrays", "key", "fragment"),
    [
        ({"num_experts": np.array(4)}, "expert_ids", "found nothing"),
        ({"expert_ids": GOOD_IDS}, "num_experts", "found nothing"),
        ({"expert_ids": GOOD_IDS[:, 0], "num_experts": np.array(4)}, "expert_ids", "shape"),
        ({"expert_ids": GOOD_IDS * 1.0, "num_experts": np.array(4)}, "expert_ids", "float64"),
        ({"expert_ids": GOOD_IDS, "num_experts": np.array(3)}, "expert_ids", "[2, 3] at token 2"),
        ({"expert_ids": GOOD_IDS, "num_experts": np.array(1)}, "num_experts", "[k_e = 2, "),
        (
            {"expert_ids": np.array([[[0, 1]], [[2, 2]]]), "num_experts": np.array(4)},
            "expert_ids",
            "distinct",
        ),
        (
            {"expert_ids": GOOD_IDS, "num_experts": np.array(4), "sequence_starts": [1, 2]},
            "sequence_starts",
            "starting at 0",
        ),
        (
            {"expert_ids": GOOD_IDS, "num_experts": np.array(4), "sequence_starts": [0, 2, 2]},
            "sequence_starts",
            "[0, 2, 2]",
        ),
        (
            {"expert_ids": GOOD_IDS, "num_experts": np.array(4), "model": np.arange(3)},
            "model",
            "a string scalar",
        ),
    ],
)
def test_bad_traces_name_the_key(tmp_path, arrays, key, fragment):
    path = _write(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError) as err:
        load_trace(path)
    assert err.value.key_path == key
    assert fragment in str(err.value)
    assert str(path) in str(err.value)


def test_unreadable_traces(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "missing.npz")
    text = tmp_path / "t.npz"
    text.write_text("not a zip")
    with pytest.raises(InputError, match=r"numpy\.savez"):
        load_trace(text)
    pickled = tmp_path / "p.npz"
    np.savez(pickled, expert_ids=np.array([{"a": 1}], dtype=object), num_experts=np.array(4))
    with pytest.raises(InputError):
        load_trace(pickled)  # object arrays need pickle, which is never allowed


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_stats(capsys, tmp_path):
    code, out, err = run_main(
        capsys, "routing", "stats", str(TRACE), "--plot", str(tmp_path / "u.png"), "--per-layer"
    )
    assert code == 0, err
    assert "4096 tokens in 16 sequences, 8 MoE layers, top-8 of 128 experts" in out
    assert "IPF (rho_1..rho_4)" in out and "Markov (rho_1)" in out
    summary = re.search(r"IPF \(rho_1\.\.rho_4\): mean \|relative error\| ([0-9.]+)%", out)
    assert summary is not None and float(summary.group(1)) < 1.0
    assert "overlaps = [0.38" in out and "layer_overlap_scale = [0.8" in out
    assert (tmp_path / "u.png").stat().st_size > 10_000


def test_cli_predict_markov_value(capsys):
    code, out, _ = run_main(
        capsys,
        "routing",
        "predict",
        "--model",
        "qwen3-30b-a3b",
        "--overlap",
        "0.38",
        "--tokens",
        "4",
    )
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line[:1].isdigit()}
    independent, markov, per_k = rows["4"][1], rows["4"][2], rows["4"][3]
    assert (independent, markov, per_k) == ("29.12", "22.27", "2.78")


def test_cli_predict_with_samples_and_plot(capsys, tmp_path):
    code, out, err = run_main(
        capsys,
        "routing",
        "predict",
        "--model",
        "mixtral-8x7b",
        "--overlap",
        "0.55",
        "0.45",
        "--tokens",
        "6",
        "--batch",
        "2",
        "--samples",
        "400",
        "--plot",
        str(tmp_path / "p.png"),
    )
    assert code == 0, err
    header = out.splitlines()[1]
    assert "IPF (rho_1..rho_2)" in header and "sampled" in header
    row6 = next(line.split() for line in out.splitlines() if line.startswith("6 "))
    assert float(row6[-1]) == pytest.approx(float(row6[3]), rel=0.03)  # sampled vs IPF
    assert (tmp_path / "p.png").exists()


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["routing", "stats", "missing.npz"], ("missing.npz", "no such file")),
        (["routing", "stats", str(TRACE), "--lags", "0"], ("--lags", "[1, 12]")),
        (["routing", "predict", "--model", "nope"], ("--model", "qwen3-30b-a3b")),
        (["routing", "predict", "--model", "qwen3-8b"], ("--model", "Mixture-of-Experts")),
        (["routing", "predict", "--model", "qwen3-30b-a3b", "--overlap", "1.5"], ("--overlap",)),
        (
            ["routing", "predict", "--model", "qwen3-30b-a3b", "--overlap", "0.99", "0.0"],
            ("--overlap", "cannot be matched"),
        ),
        (["routing"], ("command line",)),
    ],
)
def test_cli_errors_are_exit_2(capsys, argv, fragments):
    assert_input_error(*run_main(capsys, *argv), *fragments)
