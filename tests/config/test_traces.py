"""Scenarios that replay traces: the loader reads and checks the trace, a run replays it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import simspec
from simspec.cli import main
from simspec.errors import ScenarioError
from simspec.routing.trace import RoutingTrace, save_trace
from simspec.routing.trace_drafts import DraftSections
from simspec.sim.setup import build_setup
from simspec.text.acceptance import match_lengths

LAYERS, EXPERTS, TOP_K, SLOTS = 32, 8, 2, 4  # mixtral-8x7b's router; four recorded drafts


def synthetic_trace(lengths=(14, 14, 14), seed=0, drafts=True) -> RoutingTrace:
    """Random top-2-of-8 routing on 32 layers, random draft outcomes, rejected drafts' sets."""
    rng = np.random.default_rng(seed)
    tokens = sum(lengths)
    ids = np.argsort(rng.random((tokens, LAYERS, EXPERTS)), axis=2)[:, :, :TOP_K]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    sections = DraftSections()
    if drafts:
        accepted = rng.random((tokens, SLOTS)) < 0.6
        rejected = np.full((tokens, SLOTS, LAYERS, TOP_K), -1)
        for t, m in enumerate(match_lengths(accepted)):
            sets = np.argsort(rng.random((SLOTS - m, LAYERS, EXPERTS)), axis=2)[:, :, :TOP_K]
            rejected[t, : SLOTS - m] = sets
        sections = DraftSections(accepted, rng.random((tokens, SLOTS)), rejected)
    return RoutingTrace(ids, EXPERTS, starts, model="synthetic", drafts=sections)


def write_scenario(folder: Path, trace: RoutingTrace, **extra: str) -> Path:
    """A scenario file next to ``traces/t.npz`` (a path relative to the scenario's folder)."""
    (folder / "traces").mkdir(exist_ok=True)
    save_trace(folder / "traces" / "t.npz", trace)
    routing = extra.get("routing", 'mode = "trace"\ntrace = "traces/t.npz"')
    acceptance = extra.get("acceptance", 'process = "trace"\ntrace = "traces/t.npz"')
    workload = extra.get("workload", "num_requests = 3\noutput_tokens = 12")
    text = f"""
seed = 3
[model]
target = "mixtral-8x7b"
[hardware]
gpu = "h100-sxm"
num_gpus = 2
[routing]
{routing}
[acceptance]
{acceptance}
[workload]
concurrency = 2
prompt_tokens = 32
{workload}
[[policies]]
name = "fixed"
draft_tokens = 0
[[policies]]
name = "fixed"
draft_tokens = 3
"""
    path = folder / "scenario.toml"
    path.write_text(text)
    return path


def test_requests_replay_their_sequence(tmp_path):
    trace = synthetic_trace()
    scenario = simspec.load_scenario(write_scenario(tmp_path, trace))
    refs = build_setup(scenario).references
    for r in range(3):
        for i in (1, 5, 11):
            assert np.array_equal(refs.fed_routing(r, i, 0)[0], trace.expert_ids[14 * r + i])


def test_match_lengths_and_rejected_drafts_come_from_the_trace(tmp_path):
    trace = synthetic_trace()
    scenario = simspec.load_scenario(write_scenario(tmp_path, trace))
    refs = build_setup(scenario).references
    for r in range(3):
        seq = refs.sequence(r)
        for i in range(1, 12):
            row = 14 * r + i
            recorded = int(match_lengths(trace.drafts.accepted[row : row + 1])[0])
            m = min(recorded, 12 - i - 1)
            assert seq.match_lengths[i] == m
            fed = refs.fed_routing(r, i, SLOTS)
            accepted = min(SLOTS, m)
            assert np.array_equal(fed[: accepted + 1], trace.expert_ids[row : row + accepted + 1])
            if m == recorded:  # not cut by the request's end: the recorded rejected drafts
                want = trace.drafts.rejected_ids[row, : SLOTS - accepted]
                assert np.array_equal(fed[accepted + 1 :], want)


def _walk_acceptance_length(trace: RoutingTrace, draft_tokens: int, lengths: list[int]) -> float:
    """Tokens per verify pass of fixed-k on the recorded outcomes, by hand."""
    steps = committed = 0
    for r, n in enumerate(lengths):
        i = 1
        while i < n:
            recorded = int(match_lengths(trace.drafts.accepted[14 * r + i][None, :])[0])
            step = min(draft_tokens, recorded, n - i - 1) + 1
            i, steps, committed = i + step, steps + 1, committed + step
    return committed / steps


def test_fixed_policy_commits_what_the_recorded_drafter_matched(tmp_path):
    trace = synthetic_trace()
    results = simspec.run(simspec.load_scenario(write_scenario(tmp_path, trace)))
    rows = {row.label: row for row in results.policies}
    want = _walk_acceptance_length(trace, 3, [12, 12, 12])
    assert rows["fixed-3"].acceptance_length == pytest.approx(want)
    assert rows["fixed-0"].acceptance_length == 1.0


def test_replay_is_deterministic_and_the_digest_sees_the_trace(tmp_path):
    path = write_scenario(tmp_path, synthetic_trace())
    first = json.dumps(simspec.run(simspec.load_scenario(path)).to_dict(), sort_keys=True)
    second = json.dumps(simspec.run(simspec.load_scenario(path)).to_dict(), sort_keys=True)
    assert first == second
    digest = simspec.load_scenario(path).digest()
    save_trace(tmp_path / "traces" / "t.npz", synthetic_trace(seed=1))
    assert simspec.load_scenario(path).digest() != digest


def test_routing_replay_with_drawn_acceptance(tmp_path):
    trace = synthetic_trace(drafts=False)  # no draft sections: rejected drafts from the fit
    path = write_scenario(tmp_path, trace, acceptance='process = "iid"\nalpha = 0.6')
    refs = build_setup(simspec.load_scenario(path)).references
    fed = refs.fed_routing(0, 2, 3)
    assert fed.shape == (4, LAYERS, TOP_K)
    assert (np.sort(fed, axis=2)[:, :, 1:] != np.sort(fed, axis=2)[:, :, :-1]).all()


@pytest.mark.parametrize(
    ("extra", "key", "words"),
    [
        ({"workload": "num_requests = 4\noutput_tokens = 12"}, "routing.trace", "3 sequences"),
        ({"workload": "num_requests = 3\noutput_tokens = 15"}, "routing.trace", "needs 15"),
        ({"routing": 'mode = "trace"\ntrace = "nope.npz"'}, "routing.trace", "existing trace"),
        ({"routing": 'mode = "trace"'}, "routing.trace", "trace path"),
        ({"routing": 'trace = "traces/t.npz"'}, "routing.trace", "only with mode"),
        (
            {"routing": 'mode = "trace"\ntrace = "traces/t.npz"\noverlap = 0.3'},
            "routing.overlap",
            "unset",
        ),
        ({"acceptance": 'process = "trace"'}, "acceptance.trace", "trace path"),
    ],
)
def test_bad_trace_settings_name_the_key(tmp_path, extra, key, words):
    path = write_scenario(tmp_path, synthetic_trace(), **extra)
    with pytest.raises(ScenarioError) as info:
        simspec.load_scenario(path)
    assert info.value.key_path == key
    assert words in str(info.value)


def test_wrapping_serves_a_larger_workload(tmp_path):
    workload = "num_requests = 5\noutput_tokens = 20"
    routing = 'mode = "trace"\ntrace = "traces/t.npz"\ntrace_wrap = true'
    acceptance = 'process = "trace"\ntrace = "traces/t.npz"\ntrace_wrap = true'
    trace = synthetic_trace()
    path = write_scenario(
        tmp_path, trace, workload=workload, routing=routing, acceptance=acceptance
    )
    refs = build_setup(simspec.load_scenario(path)).references
    # request 4 reads sequence 1 (of 3), row 15 -> 15 mod 14 = 1
    assert np.array_equal(refs.fed_routing(4, 15, 0)[0], trace.expert_ids[14 + 1])


def test_shape_mismatch_and_missing_draft_section(tmp_path):
    small = RoutingTrace(np.tile(np.arange(2), (40, 2, 1)), 8, np.array([0, 14, 28]))
    with pytest.raises(ScenarioError, match="32 MoE layers, top-2 of 8"):
        simspec.load_scenario(write_scenario(tmp_path, small, acceptance='process = "iid"'))
    no_drafts = synthetic_trace(drafts=False)
    with pytest.raises(ScenarioError, match="no draft section") as info:
        simspec.load_scenario(write_scenario(tmp_path, no_drafts))
    assert info.value.key_path == "acceptance.trace"


def test_cli_exits_2_on_a_short_trace(tmp_path, capsys):
    path = write_scenario(tmp_path, synthetic_trace(), workload="num_requests = 9")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "routing.trace" in err and "Traceback" not in err
