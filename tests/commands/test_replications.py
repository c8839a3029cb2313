"""`run` and `compare` with --replications R and --requests-csv."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy import stats

from simspec.cli import main
from simspec.rng import replication_seed

SMALL = [
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.output_tokens=16",
    "--set",
    "workload.concurrency=2",
]


def test_one_replication_writes_the_same_json_as_before(tmp_path, capsys):
    assert main(["run", *SMALL, "--json", str(tmp_path / "a.json")]) == 0
    assert main(["run", *SMALL, "--replications", "1", "--json", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert "replications" not in json.loads((tmp_path / "a.json").read_text())
    assert "over 1 replications" not in capsys.readouterr().out


def test_run_with_replications_adds_paired_statistics(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", *SMALL, "--replications", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "over 3 replications" in text and "within noise" in text
    data = json.loads(out.read_text())
    reps = data["replications"]
    assert reps["seeds"] == [replication_seed(0, r) for r in range(3)]
    single = {p["label"]: p for p in data["policies"]}
    rows = {p["policy"]: p for p in reps["policies"]}
    assert set(rows) == set(single)
    assert rows["fixed-0"]["speedup_vs_no_spec"] == 1.0
    assert rows["fixed-0"]["speedup_vs_no_spec_ci95"] == 0.0
    best = max(rows, key=lambda label: rows[label]["speedup_vs_no_spec"])
    assert rows[best]["speedup_diff_vs_best"] == 0.0 and rows[best]["within_noise_of_best"]
    for row in rows.values():
        half = row["speedup_diff_vs_best_ci95"]
        lo, hi = row["speedup_diff_vs_best"] - half, row["speedup_diff_vs_best"] + half
        assert row["within_noise_of_best"] == (lo <= 0.0 <= hi)


def test_compare_writes_one_csv_row_per_request_policy_and_replication(tmp_path, capsys):
    path = tmp_path / "requests.csv"
    flags = ["--set", "slo.tpot_ms=6.0", "--replications", "2", "--requests-csv", str(path)]
    code = main(["compare", *SMALL, *flags, "--json", str(tmp_path / "c.json")])
    assert code == 0
    rows = list(csv.DictReader(path.open()))
    data = json.loads((tmp_path / "c.json").read_text())
    policies = [p["label"] for p in data["policies"]]
    assert len(rows) == 2 * 4 * len(policies)
    assert {r["replication"] for r in rows} == {"0", "1"}
    # Replication 0's rows reproduce the JSON's per-policy metrics.
    for p in data["policies"]:
        mine = [r for r in rows if r["replication"] == "0" and r["policy"] == p["label"]]
        tpot = np.array([float(r["tpot_ms"]) for r in mine])
        assert tpot.mean() == pytest.approx(p["tpot_ms"])
        assert np.percentile(tpot, 99) == pytest.approx(p["tpot_p99_ms"])
        assert np.mean([int(r["meets_slo"]) for r in mine]) == pytest.approx(p["slo_attainment"])
    summary = data["replications"]["policies"]
    assert all("gap_to_oracle_pct_ci95" in row for row in summary)  # compare has an oracle


def test_bad_replications_is_exit_2(capsys):
    assert main(["run", *SMALL, "--replications", "0"]) == 2
    assert "--replications" in capsys.readouterr().err


def test_the_ci_column_is_the_t_interval_of_the_replications(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["run", *SMALL, "--replications", "2", "--json", str(out)]) == 0
    reps = json.loads(out.read_text())["replications"]["policies"]
    rows = {r["policy"]: r for r in reps}
    # Recompute fixed-2's speedup from two separate runs with the replications' seeds.
    speedups = []
    for seed in (replication_seed(0, 0), replication_seed(0, 1)):
        path = tmp_path / f"s{seed}.json"
        assert main(["run", *SMALL, "--set", f"seed={seed}", "--json", str(path)]) == 0
        data = json.loads(path.read_text())
        speedups.append(
            next(p for p in data["policies"] if p["label"] == "fixed-2")["speedup_vs_no_spec"]
        )
    assert rows["fixed-2"]["speedup_vs_no_spec"] == pytest.approx(np.mean(speedups))
    assert rows["fixed-2"]["speedup_vs_no_spec_ci95"] == pytest.approx(
        stats.sem(speedups) * stats.t.ppf(0.975, len(speedups) - 1)
    )


def test_run_and_compare_end_with_a_one_line_answer(capsys):
    from simspec.cli import main

    argv = ["--set", "workload.num_requests=2", "--set", "workload.output_tokens=24"]
    assert main(["run", *argv, "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {p["label"]: p for p in data["policies"]}
    best = max(rows, key=lambda label: rows[label]["speedup_vs_no_spec"])
    assert main(["run", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("scenario default")  # what is simulated, first
    answer = f"best: {best}, {rows[best]['speedup_vs_no_spec']:.2f}x vs no speculation"
    codes = list(dict.fromkeys(w.split(":")[0] for w in data["warnings"]))
    assert lines[-1] == answer + (
        f"; see warning{'s' * (len(codes) > 1)} {', '.join(codes)}" if codes else ""
    )
    assert main(["compare", *argv]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("best: ") and "; oracle bound " in last
    bound = float(last.split("; oracle bound ")[1].split("x")[0])
    assert bound >= float(last.split(", ")[1].split("x")[0])


def test_the_answer_line_names_the_warnings_that_qualify_it(capsys):
    """A best k at the edge of the search (fixed k = 1, 2 only, all faster than k = 0): the
    one-line answer says so, not only the warning printed before the tables."""
    from simspec.cli import main

    argv = ["--set", "workload.num_requests=2", "--set", "workload.output_tokens=24"]
    argv += [
        "--set",
        'policies=[{name = "fixed", draft_tokens = 1}, {name = "fixed", draft_tokens = 2}]',
    ]
    assert main(["run", *argv]) == 0
    out, err = capsys.readouterr()
    assert "warning: k-at-edge: the best fixed k = 2" in err
    assert out.splitlines()[-1].endswith("vs no speculation; see warning k-at-edge")
    assert main(["run", *argv[:4]]) == 0  # k = 0..4, best inside the range
    out, err = capsys.readouterr()
    assert "k-at-edge" not in err and "see warning" not in out
