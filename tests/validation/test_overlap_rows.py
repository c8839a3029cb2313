"""Overlap rows: one speculative setting measured with the engine's overlap scheduler for
speculative decoding and without it (SGLang spec v2 against v1)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simspec import catalog
from simspec.errors import InputError
from simspec.validation import cases as cases_mod
from simspec.validation import predictions as predict

CASES = Path(__file__).resolve().parents[2] / "validation" / "cases.toml"

ROW = """
[sources.s]
url = "https://example.org"
[[cases]]
id = "x"
category = "overlap"
model = "qwen3-30b-a3b"
gpu = "h100-sxm"
num_gpus = 1
tp = 1
ep = 1
engine = "SGLang EAGLE3"
precision = "bf16"
batch = 1
prompt_tokens = 100
output_tokens = 256
method = "eagle3"
steps = 3
topk = 1
draft_tokens = 4
acceptance_length = 2.5
quantity = "tokens_per_s"
unit = "tok/s"
value = 220.0
baseline_value = 200.0
source = "s"
reporter = "r"
"""


def _row(tmp_path, text=ROW):
    path = tmp_path / "cases.toml"
    path.write_text(text, encoding="utf-8")
    return cases_mod.load_cases(path).cases[0]


def test_the_measured_host_time_is_the_difference_of_the_two_runs_iterations():
    """SGLang PR #12128: DeepSeek-R1 at AL 2.296, 140.52 tok/s (spec v1) and 159.71 tok/s (spec
    v2) for one request: an iteration commits AL tokens, so it took AL / throughput."""
    row = next(c for c in cases_mod.load_cases(CASES).cases if c.source == "sglang-12128")
    assert row.category == "overlap" and row.role == "fit"  # it measures a preset term
    assert row.measured == pytest.approx(159.71 / 140.52)
    assert row.exposed_host_ms == pytest.approx((2.296 / 140.52 - 2.296 / 159.71) * 1e3)
    assert row.exposed_host_ms == pytest.approx(1.963, abs=1e-3)
    # The other quantities: whole-batch throughput counts B requests' AL per iteration, a
    # per-user throughput one request's, and a TPOT is already time per token.
    batch = dataclasses.replace(row, batch=4)
    assert batch.exposed_host_ms == pytest.approx(4 * row.exposed_host_ms)
    per_user = dataclasses.replace(batch, quantity="tokens_per_s_per_user")
    assert per_user.exposed_host_ms == pytest.approx(row.exposed_host_ms)
    tpot = dataclasses.replace(row, quantity="tpot_ms", value=6.0, baseline_value=7.0)
    assert tpot.exposed_host_ms == pytest.approx(2.296)
    assert tpot.measured == pytest.approx(7.0 / 6.0)
    with pytest.raises(ValueError):
        _ = dataclasses.replace(row, category="speculative").exposed_host_ms


def test_an_overlap_row_is_predicted_as_the_host_time_the_overlap_hides(tmp_path):
    """The row runs its speculative setting twice, overlap on and off: the two runs differ by
    the preset's verify_overhead_s per iteration and nothing else, and physics alone (preset
    ideal, which exposes no host time) predicts no gain."""
    row = _row(tmp_path)
    times = predict.run_times(row)
    hidden = catalog.get_engine("sglang").overrides()["verify_overhead_s"]
    assert hidden > 0
    # Per iteration (AL committed tokens): the slower run's time less the faster run's.
    per_iteration = row.acceptance_length * (times["baseline_s_per_token"] - times["s_per_token"])
    assert per_iteration == pytest.approx(hidden, rel=0.1)
    # The two runs are the row's speculative setting with the overlap off and on (the same
    # reference sequences), not plain decoding.
    spec = dataclasses.replace(row, category="speculative")
    off = predict.run_times(dataclasses.replace(spec, overlap_scheduling="off"))
    on = predict.run_times(dataclasses.replace(spec, overlap_scheduling="on"))
    assert times["baseline_s_per_token"] == off["s_per_token"]
    assert times["s_per_token"] == on["s_per_token"]
    assert times["baseline_s_per_token"] != off["baseline_s_per_token"]
    predicted = predict.quantity(row, times)
    assert predicted == pytest.approx(times["baseline_s_per_token"] / times["s_per_token"])
    assert predicted > 1.0
    assert predict.predict_run(row, "ideal") == pytest.approx(1.0, abs=1e-9)
    outcome = predict.predict(row)
    assert outcome.measured == pytest.approx(1.1)
    assert outcome.sign_right is None  # the sign check is the speculative rows' own


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ('reporter = "r"', 'reporter = "r"\noverlap_scheduling = "on"', "overlap_scheduling"),
        ("baseline_value = 200.0\n", "", "baseline_value"),
        ("acceptance_length = 2.5\n", "", "acceptance_length"),
        ('quantity = "tokens_per_s"', 'quantity = "e2e_latency_s"', "quantity"),
    ],
)
def test_a_bad_overlap_row_names_the_key(tmp_path, old, new, key):
    with pytest.raises(InputError) as err:
        _row(tmp_path, ROW.replace(old, new))
    assert err.value.key_path == f"cases[0].{key}"
