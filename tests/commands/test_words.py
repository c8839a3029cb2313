"""Counts in words, and the analytic-routing hint before long Monte-Carlo runs."""

from __future__ import annotations

import pytest

from simspec.cli import main
from simspec.commands._hints import SLOW_MONTE_CARLO_TOKENS
from simspec.commands._words import count


@pytest.mark.parametrize(
    ("n", "noun", "text"),
    [(1, "policy", "1 policy"), (2, "policy", "2 policies"), (0, "axis", "0 axes"),
     (1, "axis", "1 axis"), (1, "worker", "1 worker"), (4, "point", "4 points")],
)  # fmt: skip
def test_count_is_singular_for_one_only(n, noun, text):
    assert count(n, noun) == text


def test_validate_and_sweep_say_one_policy_and_one_axis(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        '[workload]\nnum_requests = 2\noutput_tokens = 8\n[[policies]]\nname = "fixed"\n'
        'draft_tokens = 2\n[sweep]\ngrid = { "acceptance.alpha" = [0.5, 0.6] }\n'
    )
    assert main(["validate", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert ", 1 policy, " in out
    assert main(["sweep", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "sweep: 2 points (1 axis, 1 case, 1 replication), 1 worker," in out


def test_a_long_monte_carlo_run_suggests_analytic_routing(capsys):
    requests = SLOW_MONTE_CARLO_TOKENS // (256 * 6) + 1  # 5 policies + the baseline
    long = ["--set", f"workload.num_requests={requests}", "--set", "workload.output_tokens=256"]
    assert main(["validate", "scenarios/qwen3-30b-h100-batch32.toml", *long]) == 0
    assert 'routing.mode="analytic"' in capsys.readouterr().out
    analytic = [*long, "--set", 'routing.mode="analytic"']
    assert main(["validate", "scenarios/qwen3-30b-h100-batch32.toml", *analytic]) == 0
    assert "routing.mode" not in capsys.readouterr().out


def test_a_lockstep_closed_loop_gets_a_ttft_note(capsys):
    # 2 clients, 6 requests: plain decoding's replacements arrive in pairs
    small = ["--set", "workload.num_requests=6", "--set", "workload.concurrency=2"]
    small += ["--set", "workload.output_tokens=8", "--set", "workload.prompt_tokens=2048"]
    small += ["--set", "workload.length_jitter=0"]  # equal lengths: lockstep
    assert main(["run", *small]) == 0
    assert "comes from lockstep" in capsys.readouterr().err
    assert main(["run", *small[:-2], "--set", "workload.length_jitter=0.5"]) == 0
    assert "lockstep" not in capsys.readouterr().err


def test_every_help_example_parses_and_names_files_that_exist():
    import shlex
    from pathlib import Path

    from simspec.cli import _modules, _parser

    root = Path(__file__).resolve().parents[2]
    modules = _modules()
    parser = _parser(modules)
    for name, module in modules.items():
        words = shlex.split(module.EXAMPLE)
        assert words[0] == "simspec", name
        parser.parse_args(words[1:])  # every flag of the example exists
        for word in words[2:]:
            if word.endswith((".toml", ".csv")) and "/" in word and not word.startswith("-"):
                assert (root / word).exists(), f"{name}: {word}"


def test_fit_says_one_parameter(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "batch,quantity,value,prompt_tokens,output_tokens\n1,tpot_ms,5.0,64,16\n"
        "4,tpot_ms,6.0,64,16\n",
        encoding="utf-8",
    )
    out = tmp_path / "p.json"
    argv = ["fit", str(rows), "--out", str(out)]
    argv += ["--scenario", "scenarios/qwen3-30b-h100-batch32.toml", "--params", "pass_overhead_s"]
    assert main(argv) == 0
    assert "fitted 1 parameter to 2 rows of " in capsys.readouterr().out


def test_routing_stats_of_one_sequence_and_one_layer(tmp_path, capsys):
    import numpy as np

    path = tmp_path / "one.npz"
    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]], [[0, 3]]], dtype=np.int64)  # tokens x 1 layer x 2
    np.savez(path, expert_ids=ids, num_experts=np.array(8, dtype=np.int64))
    assert main(["routing", "stats", str(path), "--lags", "1", "--max-tokens", "2"]) == 0
    assert "4 tokens in 1 sequence, 1 MoE layer, top-2 of 8 experts" in capsys.readouterr().out


def test_recommend_of_a_one_shape_grid_says_one_shape_and_one_finalist(capsys):
    argv = ["recommend", "--batch", "1", "--max-k", "1", "--topk", "1", "--num-draft-tokens", "3"]
    argv += ["--replications", "2", "--set", "workload.num_requests=2"]
    assert main([*argv, "--set", "workload.output_tokens=16"]) == 0
    assert "; 1 of 1 shape screened, 1 finalist" in capsys.readouterr().out


def test_record_reports_one_sequence_and_one_layer(tmp_path, capsys):
    import numpy as np

    from simspec.commands.record import _report
    from simspec.routing.trace import load_trace

    path = tmp_path / "one.npz"
    ids = np.array([[[0, 1]], [[1, 2]], [[2, 3]]], dtype=np.int64)  # tokens x 1 layer x 2
    np.savez(path, expert_ids=ids, num_experts=np.array(8, dtype=np.int64))
    _report(load_trace(path), str(tmp_path / "again.npz"))
    printed = capsys.readouterr().out
    assert "recorded 1 sequence, 3 tokens, 1 MoE layer, top-2 of 8 experts" in printed


@pytest.mark.parametrize("flags", ["k", "sglang"])
def test_a_long_monte_carlo_recommend_suggests_analytic_routing(monkeypatch, capsys, flags):
    from simspec.commands import _hints

    monkeypatch.setattr(_hints, "SLOW_MONTE_CARLO_TOKENS", 100)  # this small search is "long"
    argv = ["recommend", "--batch", "1", "--max-k", "1", "--replications", "2"]
    argv += ["--engine-flags", flags, "--set", "workload.num_requests=2"]
    argv += ["--set", "workload.output_tokens=16"]
    if flags == "sglang":
        argv += ["--topk", "1", "--num-draft-tokens", "3"]
    assert main(argv) == 0
    assert 'routing.mode="analytic"' in capsys.readouterr().err
    assert main([*argv, "--set", 'routing.mode="analytic"']) == 0
    assert "routing.mode" not in capsys.readouterr().err
