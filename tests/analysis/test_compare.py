"""`simspec compare` and the paper-A scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simspec.cli import main
from simspec.config.load import load_scenario
from tests.helpers import simulate, tiny

ROOT = Path(__file__).resolve().parents[2]
PAPER_A = ROOT / "scenarios" / "limits-of-speculation.toml"


def test_compare_adds_baseline_and_oracle_rows():
    s = tiny(
        "workload.concurrency=1",
        "workload.num_requests=2",
        "workload.output_tokens=50",
        policies=[{"name": "fixed", "draft_tokens": 2}, {"name": "cost_aware"}],
    )
    res = simulate(s, oracle=True)
    labels = [p["label"] for p in res["policies"]]
    assert labels == ["no-spec", "fixed-2", "cost_aware", "oracle"]
    rows = {p["label"]: p for p in res["policies"]}
    assert rows["oracle"]["gap_to_oracle_pct"] == 0.0
    assert rows["no-spec"]["speedup_vs_no_spec"] == pytest.approx(1.0)
    for label in ("no-spec", "fixed-2", "cost_aware"):
        assert rows[label]["gap_to_oracle_pct"] > 0.0
    assert res["oracle"]["exact"] is True
    assert res["oracle"]["delta"]["dp_consistency_violations"] == 0


def test_paper_a_cost_aware_beats_best_fixed_k():
    s = load_scenario(PAPER_A, ["workload.num_requests=3"])
    rows = {p["label"]: p for p in simulate(s, oracle=True)["policies"]}
    best_fixed = min(p["tpot_ms"] for p in rows.values() if p["name"] == "fixed")
    assert rows["cost_aware"]["tpot_ms"] < best_fixed
    assert rows["oracle"]["tpot_ms"] <= min(p["tpot_ms"] for p in rows.values())


def test_compare_cli_writes_json_and_figures(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    figs = tmp_path / "figs"
    code = main(
        [
            "compare",
            str(PAPER_A),
            "--set",
            "workload.num_requests=1",
            "--set",
            "workload.output_tokens=80",
            "--json",
            str(out),
            "--plot",
            str(figs),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "oracle" in text and "gap to oracle %" in text
    data = json.loads(out.read_text())
    assert data["policies"][-1]["name"] == "oracle"
    assert {"exact", "method", "delta"} <= set(data["oracle"])
    for name in ("policies.png", "delta-space.png"):
        assert (figs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
