"""Recording from tiny random models of every MoE family of ``transformers`` (slow).

Each test builds a tiny model from the family's config class (2 layers, 8 experts, hidden 32),
records a trace, and checks the recorded ids against the top-k recomputed from each router's
captured input and its weights with the family's own rule: softmax top-k (Mixtral, Qwen-MoE,
OLMoE), group-limited greedy top-k (DeepSeek-V2), sigmoid scores plus correction bias with
top-2-sum group selection (DeepSeek-V3), top-k of biased logits (gpt-oss).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from simspec.record.hooks import (  # noqa: E402
    FAMILIES,
    available_families,
    early_exit_drafter,
    router_modules,
    tiny_model,
)
from simspec.record.trace import record_trace  # noqa: E402
from simspec.text.acceptance import match_lengths  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (a pool only adds contention); restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _top_k(family: str, router, x: np.ndarray, k: int) -> np.ndarray:
    """The family's routing rule, in numpy float64, from the router's weights."""
    w = router.weight.detach().double().numpy()
    logits = x @ w.T
    if family == "gpt_oss":
        return np.argsort(-(logits + router.bias.detach().double().numpy()), axis=1)[:, :k]
    groups = router.num_group if family.startswith("deepseek") else 1
    if family == "deepseek_v3":
        scores = 1.0 / (1.0 + np.exp(-logits)) + router.e_score_correction_bias.double().numpy()
        grouped = np.sort(scores.reshape(len(x), groups, -1), axis=2)[:, :, -2:].sum(axis=2)
    else:
        scores = np.exp(logits - logits.max(axis=1, keepdims=True))
        scores /= scores.sum(axis=1, keepdims=True)
        grouped = scores.reshape(len(x), groups, -1).max(axis=2)
    if groups > 1:
        keep = np.argsort(-grouped, axis=1)[:, : router.topk_group]
        mask = np.zeros_like(grouped, dtype=bool)
        np.put_along_axis(mask, keep, True, axis=1)
        scores = np.where(np.repeat(mask, scores.shape[1] // groups, axis=1), scores, -np.inf)
    return np.argsort(-scores, axis=1)[:, :k]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_recorded_ids_are_the_routers_own_top_k(family):
    have, missing = available_families()
    if family not in have:
        pytest.skip(missing[family])
    model = tiny_model(family, layers=2, experts=8, top_k=2, hidden=32, seed=1)
    routers = router_modules(model)
    assert len(routers) == 2
    if family == "deepseek_v3":  # make the correction bias matter
        for _, router in routers:
            router.e_score_correction_bias.copy_(torch.linspace(-0.05, 0.05, 8))
    inputs: list[list[np.ndarray]] = [[] for _ in routers]
    for slot, (_, router) in enumerate(routers):
        router.register_forward_hook(
            lambda m, args, out, slot=slot: inputs[slot].append(
                args[0].detach().double().reshape(-1, 32).numpy()
            )
        )
    trace = record_trace(model, [[3, 1, 4, 1, 5], [9, 2, 6]], 6, grouped=FAMILIES[family].grouped)
    assert trace.expert_ids.shape == (14, 2, 2)
    assert trace.sequence_starts.tolist() == [0, 7]
    for slot, (_, router) in enumerate(routers):
        # calls: prefill, 6 decode steps, per prompt; row 0 is the prompt's last token
        calls = inputs[slot]
        rows = [
            calls[0][-1],
            *(c[0] for c in calls[1:7]),
            calls[7][-1],
            *(c[0] for c in calls[8:14]),
        ]
        want = np.sort(_top_k(family, router, np.stack(rows), 2), axis=1)
        assert np.array_equal(np.sort(trace.expert_ids[:, slot], axis=1), want)


def test_drafts_are_judged_against_the_targets_own_text():
    sizes = {"layers": 2, "experts": 8, "top_k": 2, "hidden": 32, "vocab": 32, "seed": 2}
    target = tiny_model("mixtral", **sizes)
    drafter = early_exit_drafter(target, "mixtral", 1, **sizes)
    trace = record_trace(target, [[1, 2, 3]], 10, drafter=drafter, draft_tokens=3)
    drafts = trace.drafts
    assert drafts.accepted.shape == (11, 3) and drafts.rejected_ids.shape == (11, 3, 2, 2)
    assert ((drafts.confidences > 0) & (drafts.confidences <= 1)).all()
    assert not drafts.accepted[-1].any()  # nothing follows the last token
    # rejected drafts are recorded exactly for the slots after the leading matches
    recorded = (drafts.rejected_ids[:, :, 0, 0] >= 0).sum(axis=1)
    assert recorded.tolist() == (3 - match_lengths(drafts.accepted)).tolist()
    # the drafter's first draft from the prefix ending at x_t, recomputed
    text = [1, 2, 3]
    with torch.no_grad():
        for _ in range(10):
            text.append(int(target(input_ids=torch.tensor([text])).logits[0, -1].argmax()))
        for t in range(10):
            first = int(drafter(input_ids=torch.tensor([text[: 3 + t]])).logits[0, -1].argmax())
            assert drafts.accepted[t, 0] == (first == text[3 + t])


def test_a_recorded_trace_replays_in_a_scenario(tmp_path):
    import simspec
    from simspec.routing.trace import load_trace, save_trace

    sizes = {"layers": 32, "experts": 8, "top_k": 2, "hidden": 16, "vocab": 32, "seed": 0}
    target = tiny_model("mixtral", **sizes)  # the router shape of mixtral-8x7b
    drafter = early_exit_drafter(target, "mixtral", 1, **sizes)
    trace = record_trace(target, [[1, 2], [3, 4]], 5, drafter=drafter, draft_tokens=2)
    save_trace(tmp_path / "t.npz", trace)
    assert load_trace(tmp_path / "t.npz").drafts.draft_slots == 2
    scenario = simspec.load_scenario(
        None,
        {
            "model.target": "mixtral-8x7b",
            "hardware.num_gpus": 2,
            "routing": {"mode": "trace", "trace": str(tmp_path / "t.npz")},
            "acceptance": {"process": "trace", "trace": str(tmp_path / "t.npz")},
            "workload.num_requests": 2,
            "workload.output_tokens": 6,
            "workload.length_jitter": 0.0,  # every request as long as its recorded sequence
            "policies": [
                {"name": "fixed", "draft_tokens": 0},
                {"name": "fixed", "draft_tokens": 2},
            ],
        },
    )
    rows = {row.label: row for row in simspec.run(scenario).policies}
    walk = []
    for r in range(2):
        i, steps = 1, 0
        while i < 6:
            m = int(match_lengths(trace.drafts.accepted[6 * r + i][None, :])[0])
            i, steps = i + min(2, m, 6 - i - 1) + 1, steps + 1
        walk.append(steps)
    assert rows["fixed-2"].acceptance_length == pytest.approx(10 / sum(walk))
    assert 1.0 <= rows["fixed-0"].unique_experts_per_layer / 2 <= 2.0  # B <= 2 tokens of top-2
