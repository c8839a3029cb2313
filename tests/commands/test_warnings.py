"""The guardrails' warnings on the command line: one line each on stderr, listed in the JSON."""

from __future__ import annotations

import json

import pytest

from simspec.cli import main
from tests.analysis.test_guardrails import fake_preset, no_accuracy  # noqa: F401 (fixtures)
from tests.commands.test_cli import run_main

SMALL = [
    "--set",
    "workload.length_jitter=0",
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.output_tokens=24",
    "--set",
    "workload.concurrency=2",
    "--set",
    "policies=[{name = 'fixed', draft_tokens = 0}, {name = 'fixed', draft_tokens = 2}, "
    "{name = 'fixed', draft_tokens = 7}]",
    "--set",
    "acceptance.alpha=0.6",
]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("simspec: warning: ")]


def test_run_inside_the_fit_prints_no_warning(tmp_path, capsys, fake_preset, no_accuracy):  # noqa: F811
    out_path = tmp_path / "out.json"
    code, out, err = run_main(capsys, "run", *SMALL, "--set", "engine.preset=sglang",
                              "--set", "hardware.num_gpus=2", "--json", str(out_path))  # fmt: skip
    assert code == 0
    assert _warnings(err) == [] and "warning" not in out
    assert json.loads(out_path.read_text())["warnings"] == []


def test_run_outside_the_fit_warns_on_stderr_and_in_the_json(tmp_path, capsys, fake_preset):  # noqa: F811
    out_path = tmp_path / "out.json"
    code, _, err = run_main(capsys, "run", *SMALL, "--set", "engine.preset=sglang",
                              "--set", "hardware.gpu=h200", "--json", str(out_path))  # fmt: skip
    assert code == 0
    lines = _warnings(err)
    assert len(lines) >= 1 and lines[0].startswith("simspec: warning: preset-range: ")
    assert "GPU h200" in lines[0]
    written = json.loads(out_path.read_text())["warnings"]
    assert [f"simspec: warning: {w}" for w in written] == lines


def test_replications_list_every_replications_warnings_once(tmp_path, capsys, fake_preset):  # noqa: F811
    out_path = tmp_path / "out.json"
    code, _, err = run_main(capsys, "run", *SMALL, "--set", "engine.preset=sglang",
                            "--set", "hardware.gpu=h200", "--replications", "2",
                            "--json", str(out_path))  # fmt: skip
    assert code == 0
    lines = _warnings(err)
    assert len(lines) == len(set(lines)) >= 1
    assert len(json.loads(out_path.read_text())["warnings"]) == len(lines)


def test_sweep_prints_each_warning_once_with_its_points(tmp_path, capsys):
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        """
name = "w"
[acceptance]
alpha = 0.9
[workload]
concurrency = 1
num_requests = 2
prompt_tokens = 32
output_tokens = 16
[[policies]]
name = "fixed"
draft_tokens = 1
""",
        encoding="utf-8",
    )
    args = ["sweep", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1"]
    code = main([*args, "--grid", "seed=1,2"])
    _, err = capsys.readouterr()
    assert code == 0
    lines = _warnings(err)
    assert lines == [line for line in lines if "(2 of 2 points)" in line]
    assert [line.split(": ")[2] for line in lines] == ["k-at-edge"]


@pytest.mark.parametrize("flag", ["--json"])
def test_recommend_json_lists_warnings(tmp_path, capsys, flag):
    out_path = tmp_path / "rec.json"
    code, _, err = run_main(capsys, "recommend", "--engine-flags", "k", "--batch", "1",
                            "--max-k", "1", "--replications", "2", "--set",
                            "workload.num_requests=2", "--set", "workload.output_tokens=16",
                            "--set", "acceptance.alpha=0.9",
                            "--set", "policies=[{name = 'fixed', draft_tokens = 0}]",
                            flag, str(out_path))  # fmt: skip
    assert code == 0
    (batch,) = json.loads(out_path.read_text())["batches"]
    assert batch["best_k"] == 1
    assert [w.split(":")[0] for w in batch["warnings"]] == ["k-at-edge"]
    assert any("k-at-edge: at batch 1," in line for line in _warnings(err))


@pytest.mark.parametrize(("alpha", "ks", "edge"), [("0.9", "1,2,3", True), ("0.6", "1,2,7", False)])
def test_a_sweep_over_k_is_one_search(tmp_path, capsys, alpha, ks, edge, no_accuracy):  # noqa: F811
    """A grid axis over a fixed policy's draft_tokens: the points search k together; a point's
    own k (against k = 0 alone) is not an edge."""
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        f"""
name = "k"
[acceptance]
alpha = {alpha}
[workload]
concurrency = 2
num_requests = 4
prompt_tokens = 32
output_tokens = 24
[[policies]]
name = "fixed"
draft_tokens = 1
""",
        encoding="utf-8",
    )
    args = ["sweep", str(scenario), "--out", str(tmp_path / "o"), "--workers", "1"]
    code = main([*args, "--grid", f"policies[0].draft_tokens={ks}", "--grid", "seed=1,2"])
    _, err = capsys.readouterr()
    assert code == 0
    lines = _warnings(err)
    if edge:
        assert len(lines) == 2  # one search per seed
        assert all("k-at-edge: at {'seed':" in line for line in lines)
        assert all(f"the best fixed k = {ks[-1]} is the largest searched" in line for line in lines)
    else:
        assert lines == []


def test_validate_says_before_a_run_what_it_will_extrapolate(tmp_path, capsys, fake_preset):  # noqa: F811
    path = tmp_path / "s.toml"
    path.write_text('name = "v"\n[engine]\npreset = "sglang"\n', encoding="utf-8")
    code, out, err = run_main(capsys, "validate", str(path), "--set", "hardware.gpu=h200")
    assert code == 0 and "ok" in out
    lines = _warnings(err)
    assert len(lines) == 2  # the pass term, and the speculative term (the default drafts)
    assert all("preset-range" in line and "GPU h200" in line for line in lines)
    code, _, err = run_main(capsys, "validate", str(path), "--set", "hardware.num_gpus=2")
    # Inside the fitted rows: no preset-range warning. TP 2 over both GPUs is the degree of
    # the published Qwen3-30B-A3B rows on H100s, whose speculative rows simspec misses.
    lines = _warnings(err)
    assert code == 0 and not any("preset-range" in line for line in lines)
    assert all("published-miss" in line and "at TP 2" in line for line in lines)


def test_an_unset_routing_overlap_is_named_once_and_a_set_one_is_not(capsys):
    """A speculative run on an MoE target whose scenario leaves routing.overlap unset routes
    independently: the run says so (a note, not a warning: nothing is out of range), naming
    what the validation ran; with the overlap set, or without drafting, it says nothing."""
    mode = ["--set", 'routing.mode="analytic"']
    code, _, err = run_main(capsys, "run", *SMALL, *mode, "--set", "routing.overlap=0.5")
    assert code == 0 and "routing.overlap is unset" not in err
    unset = ["--set", "routing={mode = 'analytic'}"]  # the default's table without its overlap
    code, _, err = run_main(capsys, "run", *SMALL, *unset)
    assert code == 0
    notes = [line for line in err.splitlines() if "routing.overlap is unset" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "0.38" in notes[0]
    plain = [
        a if not a.startswith("policies=") else "policies=[{name = 'fixed', draft_tokens = 0}]"
        for a in SMALL
    ]
    code, _, err = run_main(capsys, "run", *plain, *unset)
    assert code == 0 and "routing.overlap is unset" not in err
