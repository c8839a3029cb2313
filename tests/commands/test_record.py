"""`simspec record`: bad arguments exit 2 before any model loads; a tiny model records a trace."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.cli import main
from simspec.routing.trace import load_trace
from simspec.text.acceptance import match_lengths


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--model", "some/model"], "--prompts"),
        (["--model", "some/model", "--prompts", "missing.txt"], "readable"),
        (["--tiny", "mixtral", "--new-tokens", "0"], "--new-tokens"),
        (["--tiny", "mixtral", "--top-k", "9"], "--top-k"),
        (["--tiny", "mixtral", "--drafter-layers", "3"], "--drafter-layers"),
        (["--tiny", "mixtral", "--model", "x"], "not allowed"),
        (["--tiny", "mixtral", "--drafter", "x"], "--drafter-layers"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, argv, words):
    assert main(["record", *argv, "--out", str(tmp_path / "t.npz")]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not (tmp_path / "t.npz").exists()


def test_an_empty_prompts_file_is_refused(tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n  \n")
    argv = ["record", "--model", "m", "--prompts", str(prompts), "--out", str(tmp_path / "t.npz")]
    assert main(argv) == 2
    assert "one prompt per line" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_model_records_a_trace_with_drafts(tmp_path, capsys):
    pytest.importorskip("transformers")
    out = tmp_path / "t.npz"
    argv = "--tiny olmoe --sequences 2 --new-tokens 6 --draft-tokens 3 --drafter-layers 1"
    assert main(["record", *argv.split(), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "recorded 2 sequences, 14 tokens, 2 MoE layers, top-2 of 8 experts" in printed
    trace = load_trace(out)
    assert trace.sequence_starts.tolist() == [0, 7]
    assert trace.drafts.draft_slots == 3
    mean_match = match_lengths(trace.drafts.accepted).mean()
    assert f"mean match length {mean_match:.3f}" in printed
    assert np.isin(trace.expert_ids, np.arange(8)).all()
