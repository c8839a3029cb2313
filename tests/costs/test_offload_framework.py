"""An offloading runtime's host time (offload framework presets): closed forms of the pass with
host time per layer and per expert, copies per expert, the CPU's wait exposed, the preset and
its scenario keys, and the validation fit that sets the preset."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import simspec
from simspec import catalog
from simspec.config.load import scenario_from_dict
from simspec.config.offload import OffloadConfig
from simspec.errors import InputError
from simspec.params import PassCost
from simspec.validation import offload as off
from simspec.validation.cases import Case
from tests.costs.test_offload import _model

LAYERS = 4
ONE = 50e6 / 25e9 + 6e-6  # one expert over the test model's link, one copy


def test_host_time_adds_to_every_layer_without_prefetch():
    m = _model(layer_host_s=2e-3, expert_host_s=1e-4)
    union = np.array([3.0, 4.0, 2.0, 5.0])
    misses = np.array([1.0, 2.0, 0.0, 3.0])
    gpu = 1e-3
    pipe = m.price(gpu, union, misses, tokens=2)
    host = LAYERS * 2e-3 + 1e-4 * union.sum()
    # Serial: each layer waits for its copies, then runs its kernels and its host time.
    assert pipe.total_s == pytest.approx(misses.sum() * ONE + LAYERS * gpu + host, rel=1e-12)
    assert pipe.host_s == pytest.approx(host, rel=1e-12)
    assert pipe.compute_s == pytest.approx(LAYERS * gpu + host, rel=1e-12)
    # What offloading adds to the kernels: the copies waited for and the host time.
    assert pipe.added_s == pytest.approx(misses.sum() * ONE + host, rel=1e-12)


def test_prefetched_copies_hide_behind_host_time():
    """Next-layer prefetch, every guess right: layer l's copies overlap layer l − 1's kernels
    and host time, so with host time longer than the copies only the first layer's show."""
    m = _model(prefetch="next_layer", prefetch_accuracy=1.0, layer_host_s=5e-3)
    union = np.full(LAYERS, 2.0)
    misses = np.full(LAYERS, 2.0)
    gpu = 1e-3
    assert gpu + 5e-3 > 2 * ONE  # the copies fit behind a layer
    pipe = m.price(gpu, union, misses, tokens=1)
    assert pipe.total_s == pytest.approx(2 * ONE + LAYERS * (gpu + 5e-3), rel=1e-12)
    # Without host time the same copies are longer than a layer: the link sets the pace.
    bare = _model(prefetch="next_layer", prefetch_accuracy=1.0).price(gpu, union, misses, 1)
    assert bare.total_s == pytest.approx(LAYERS * 2 * ONE + gpu, rel=1e-12)


def test_no_runtime_is_the_physics_pass_exactly():
    union = np.array([3.0, 4.0, 2.0, 5.0])
    misses = np.array([1.0, 2.0, 0.0, 3.0])
    for prefetch in ("none", "next_layer"):
        a = _model(prefetch=prefetch).price(1e-3, union, misses, tokens=2)
        b = _model(prefetch=prefetch, layer_host_s=0.0, expert_host_s=0.0).price(
            1e-3, union, misses, tokens=2
        )
        assert a == b and a.host_s == 0.0 and a.added_s == a.exposed_s


def test_each_copy_of_an_expert_pays_the_copy_latency():
    m = _model(copies_per_expert=21)
    assert m.copy_s == pytest.approx(50e6 / 25e9 + 21 * 6e-6, rel=1e-12)
    union = np.full(LAYERS, 2.0)
    pipe = m.price(1e-3, union, union, tokens=1)
    assert pipe.copy_s == pytest.approx(8 * (50e6 / 25e9 + 21 * 6e-6), rel=1e-12)


def test_a_wait_on_the_cpu_is_exposed():
    """Misses computed on the CPU: after the layer's attention, the CPU's experts (and the
    hidden states' trip each way) take the place of the GPU's expert time; what they take
    beyond it is the pass's wait (it reaches the pass's cost)."""
    m = _model(miss="cpu")
    union = np.full(LAYERS, 2.0)
    gpu, moe = 1e-4, 0.5e-4
    cpu = 2 * max(50e6 / 64e9, 2 / 2 * 5e7 / 2e12) + 2 * 6e-6  # two experts from host DRAM
    assert cpu > moe
    pipe = m.price(gpu, union, union, tokens=1, moe_layer_s=moe)
    assert pipe.total_s == pytest.approx(LAYERS * (gpu - moe + cpu), rel=1e-12)
    assert pipe.exposed_s == pytest.approx(LAYERS * (cpu - moe), rel=1e-12)


def test_the_loaded_pass_carries_the_host_time_in_its_moe_part():
    from simspec.costs.offload import OffloadCostModel

    m = _model(layer_host_s=3e-3)
    cost = PassCost(overhead_s=0.0, moe_s=2e-3, attention_s=1e-3, other_s=1e-3)
    model = OffloadCostModel(base=None, model=m, reuse=lambda t: np.zeros(LAYERS))  # type: ignore[arg-type]
    union = np.full(LAYERS, 2.0)
    loaded = model.load(cost, union, np.zeros(LAYERS), tokens=1)
    assert loaded.cost.moe_s == pytest.approx(2e-3 + LAYERS * 3e-3, rel=1e-12)
    assert loaded.cost.total_s == pytest.approx(cost.total_s + LAYERS * 3e-3, rel=1e-12)


def test_presets_and_scenario_keys():
    assert {"none", "hf-eager"} <= set(catalog.offload_framework_names())
    none = catalog.get_offload_framework("none")
    assert (none.layer_host_s, none.expert_host_s, none.copies_per_expert) == (0.0, 0.0, 1)
    eager = catalog.get_offload_framework("hf-eager")
    # The fitted host time per decoder layer of an eager transformers runtime: milliseconds
    # (tens of Python-dispatched operators and read-backs per layer), not micro- or seconds.
    assert 1e-3 < eager.layer_host_s < 0.05
    assert OffloadConfig().host_times == (0.0, 0.0, 1)
    assert OffloadConfig(framework="hf-eager").host_times == (eager.layer_host_s, 0.0, 1)
    assert OffloadConfig(framework="hf-eager", layer_host_s=0.0, expert_host_s=1e-4).host_times == (
        0.0,
        1e-4,
        1,
    )


def test_an_unknown_framework_names_its_key():
    data = {
        "model": {"target": "qwen3-30b-a3b"},
        "hardware": {"gpu": "rtx-4090"},
        "offload": {"experts": "host_pinned", "framework": "pytorch"},
    }
    with pytest.raises(InputError) as err:
        scenario_from_dict(data, "s.toml")
    assert "offload.framework" in str(err.value) and "hf-eager" in str(err.value)


def test_a_run_with_the_eager_runtime_is_slower_by_its_host_time():
    """Batch 1, no cache, no prefetch: each decode pass gains exactly L x layer_host_s (the
    pass is serial: copies, then kernels and host time)."""
    base = {
        "model": {"target": "qwen3-30b-a3b"},
        "hardware": {"gpu": "rtx-4090"},
        "workload": {"num_requests": 1, "concurrency": 1, "prompt_tokens": 16},
        "offload": {"experts": "host_pinned", "cache_policy": "none"},
    }
    base["workload"]["output_tokens"] = 8
    eager = {**base, "offload": {**base["offload"], "framework": "hf-eager", "layer_host_s": 0.002}}
    a = simspec.run(scenario_from_dict(base, "a"), keep_logs=True)
    b = simspec.run(scenario_from_dict(eager, "b"), keep_logs=True)
    layers = catalog.get_model("qwen3-30b-a3b").shape.num_moe_layers
    sa, sb = a.logs[a.policies[-1].label].steps, b.logs[b.policies[-1].label].steps
    da, db = sa.column("moe_s"), sb.column("moe_s")
    assert len(da) == len(db) > 0
    assert db - da == pytest.approx(np.full(len(da), layers * 0.002), rel=1e-9)


def _case(id_: str, reporter: str, value: float) -> Case:
    return Case(
        id=id_,
        category="offload",
        model="m",
        gpu="g",
        num_gpus=1,
        tp=1,
        ep=1,
        engine="e",
        precision="bf16",
        quantity="tokens_per_s",
        unit="tok/s",
        value=value,
        source="s",
        reporter=reporter,
        framework="hf-eager",
    )


def test_the_fit_recovers_the_host_time_of_exact_lines():
    """Rows whose seconds per token are t0 + s x theta, measured at theta = 7.3 ms: the
    least-squares fit on the log errors finds it (to the grid's step)."""
    truth = 0.0073
    lines = {"a": (0.1, 32.0), "b": (0.25, 32.0), "c": (0.05, 48.0)}
    rows = [_case(k, "r", 1.0 / (t0 + s * truth)) for k, (t0, s) in lines.items()]
    fitted = off.fit_layer_host_s(rows, lines)
    assert fitted == pytest.approx(truth, abs=off.FIT_STEP_S)
    # A row measured slower pulls the fit up; no usable row gives no fit.
    slower = [*rows, dataclasses.replace(rows[0], id="d", value=0.5 / (0.1 + 32 * truth))]
    assert off.fit_layer_host_s(slower, {**lines, "d": lines["a"]}) > fitted
    assert off.fit_layer_host_s(rows, {}) is None


def test_leave_one_reporter_out_never_fits_on_the_rows_it_predicts(monkeypatch):
    """Each reporter's rows are predicted with a value fitted on the others' rows only."""
    rows = [_case("a[0]", "x", 2.0), _case("a[1]", "x", 3.0), _case("b", "y", 1.0)]
    seen: dict[str, float] = {}

    def lines(rows, *, workers=1):
        return {c.id: (0.0, 1.0 / c.value / 0.01) for c in rows}  # each row: theta = 10 ms

    def fit(rows, lines):
        key = ",".join(sorted(c.reporter for c in rows))
        seen[key] = 0.001 * len(rows)
        return seen[key]

    def predict(rows, theta, workers):
        return [off.Outcome(c, c.value, 1.0 / (theta * 100)) for c in rows]

    monkeypatch.setattr(off, "trial_lines", lines)
    monkeypatch.setattr(off, "fit_layer_host_s", fit)
    monkeypatch.setattr(off, "_predict_with", predict)
    out, fitted = off.leave_one_reporter_out(rows)
    assert fitted == {"x": 0.001, "y": 0.002}  # x left out: fitted on y's one row
    assert [o.case.id for o in out] == ["a[0]", "a[1]", "b"]
    assert [o.predicted for o in out] == pytest.approx([10.0, 10.0, 5.0])
    assert math.isclose(out[2].predicted, 1 / (0.002 * 100))


def test_a_cache_in_gb_holds_whole_experts_not_whole_layers():
    """cache_gb of 4 experts per layer and 3 more: 4 + 3 / L slots per layer on average."""
    from simspec.config._memory import cache_experts_per_layer

    shape = catalog.get_model("qwen3-30b-a3b").shape
    layers, eb = shape.num_moe_layers, shape.expert_bytes
    data = {
        "model": {"target": "qwen3-30b-a3b"},
        "hardware": {"gpu": "rtx-4090"},
        "offload": {"experts": "host_pinned", "cache_gb": (4 * layers + 3) * eb / 1e9},
    }
    s = scenario_from_dict(data, "s")
    assert cache_experts_per_layer(s) == pytest.approx(4 + 3 / layers, rel=1e-12)


@pytest.mark.parametrize("mode", ["analytic", "monte_carlo"])
def test_an_eager_drafter_pays_host_time_per_layer_and_draft_pass(mode):
    """Each draft pass gains drafter layers x draft_layer_host_s: a step drafting k tokens
    (k passes) gains k times that, on the bulk-priced path (analytic) and the timed one."""
    base = {
        "model": {"target": "qwen3-30b-a3b", "drafter": "eagle3-qwen3-30b-a3b"},
        "hardware": {"gpu": "rtx-4090"},
        "workload": {"num_requests": 1, "concurrency": 1, "prompt_tokens": 16},
        "offload": {"experts": "host_pinned", "cache_experts_per_layer": 16},
        "routing": {"mode": mode},
        "policies": [{"name": "fixed", "draft_tokens": 3}],
    }
    base["workload"]["output_tokens"] = 12
    eager = {**base, "offload": {**base["offload"], "draft_layer_host_s": 0.004}}
    a = simspec.run(scenario_from_dict(base, "a"), keep_logs=True)
    b = simspec.run(scenario_from_dict(eager, "b"), keep_logs=True)
    layers = catalog.get_drafter("eagle3-qwen3-30b-a3b").num_layers
    sa, sb = a.logs["fixed-3"].steps, b.logs["fixed-3"].steps
    passes = np.array([r.drafted for r in sa])  # one request: drafted tokens = draft passes
    assert passes.max() == 3
    assert sb.column("draft_s") - sa.column("draft_s") == pytest.approx(
        passes * layers * 0.004, rel=1e-9, abs=1e-12
    )


def test_cancelled_wrong_guesses_closed_form():
    """Three layers of 1 s, 3 s of prefetches each (1 s of it wrong), 0.5 s on demand.
    Kept: S_0 = 3.5, each later layer max(3, 1) + 0.5, the last layer's 1: 11.5 s, the link
    busy 10.5 s. Cancelled: layer 0's router has run at once (its wrong second never starts),
    S_0 = 2 + 0.5; later layers: by the router (1 s) a third of the 3 s is done, the right
    copies' other two thirds (4/3 s) continue: 1 + 4/3 + 0.5."""
    from simspec.costs.offload import pipeline

    compute, ahead, wrong, demand = [1.0] * 3, [3.0] * 3, [1.0] * 3, [0.5] * 3
    kept = pipeline(compute, demand, ahead)
    assert (kept.total_s, kept.copy_s) == (11.5, 10.5)
    dropped = pipeline(compute, demand, ahead, wrong_s=wrong)
    assert dropped.total_s == pytest.approx(2.5 + 2 * (1 + 4 / 3 + 0.5) + 1, rel=1e-12)
    assert dropped.copy_s == pytest.approx(2.5 + 2 * (1 + 4 / 3 + 0.5), rel=1e-12)
    # Prefetches that fit behind the previous layer finish before the router runs: none dropped.
    short = pipeline(compute, demand, [0.8] * 3, wrong_s=[0.3] * 3)
    assert short.total_s == pytest.approx(0.5 + 0.5 + 2 * (1 + 0.5) + 1, rel=1e-12)
    # Copies done while drafting are never dropped (no router has run yet).
    lead = pipeline(compute, demand, ahead, lead_s=9.0, draft_guided=True, wrong_s=wrong)
    assert lead == pipeline(compute, demand, ahead, lead_s=9.0, draft_guided=True)


@pytest.mark.parametrize("seed", range(20))
def test_cancelling_never_slows_a_pass_and_keeps_its_bounds(seed):
    from simspec.costs.offload import pipeline

    rng = np.random.default_rng(seed)
    layers = int(rng.integers(1, 10))
    compute = rng.uniform(0, 2e-3, layers)
    ahead = rng.exponential(1e-3, layers)
    wrong = ahead * rng.random(layers)
    demand = rng.exponential(5e-4, layers)
    kept = pipeline(compute, demand, ahead)
    dropped = pipeline(compute, demand, ahead, wrong_s=wrong)
    assert dropped.total_s <= kept.total_s * (1 + 1e-12)
    assert dropped.copy_s <= kept.copy_s * (1 + 1e-12)
    assert max(dropped.copy_s, compute.sum()) <= dropped.total_s * (1 + 1e-12)
    # Nothing wrong: nothing to drop, the same pass as without cancelling.
    none = pipeline(compute, demand, ahead, wrong_s=np.zeros(layers))
    assert none.total_s == pytest.approx(kept.total_s, rel=1e-12)
    assert none.copy_s == pytest.approx(kept.copy_s, rel=1e-12)


def test_a_cancelling_runtime_sends_fewer_experts():
    union = np.full(LAYERS, 4.0)
    misses = np.full(LAYERS, 4.0)
    keep = _model(prefetch="next_layer", prefetch_accuracy=0.5)
    drop = _model(prefetch="next_layer", prefetch_accuracy=0.5, cancel_wrong_prefetch=True)
    a, b = keep.price(1e-3, union, misses, 1), drop.price(1e-3, union, misses, 1)
    assert b.total_s < a.total_s and b.copy_s < a.copy_s
    # Layer 0 drops its two wrong guesses at once; later layers drop what is left of theirs.
    router = 1e-3
    late = 2 * ONE * (1 - router / (4 * ONE))
    expected = 2 * ONE + 2 * ONE + (LAYERS - 1) * (router + late + 2 * ONE) + router
    assert b.total_s == pytest.approx(expected, rel=1e-12)


def test_the_released_repository_is_the_eager_runtime_with_a_swapping_cache():
    """mixtral-offloading-release is hf-eager's runtime (one fitted host time, shared) whose
    cache swaps; hf-eager (the paper's own implementation) sends one transfer per miss."""
    eager = catalog.get_offload_framework("hf-eager")
    release = catalog.get_offload_framework("mixtral-offloading-release")
    same = ("layer_host_s", "expert_host_s", "draft_layer_host_s", "copies_per_expert")
    assert {k: getattr(release, k) for k in same} == {k: getattr(eager, k) for k in same}
    assert release.swaps_evicted and not eager.swaps_evicted


@pytest.mark.parametrize("rho", [0.3, 0.38, 0.45, 0.6])
def test_a_cache_of_top_k_slots_hits_at_the_lag_1_overlap_and_a_swap_needs_it_above_half(rho):
    """An LRU of k_e slots per layer holds the previous token's k_e experts: at batch 1 its hit
    rate is the lag-1 overlap rho. A miss that swaps costs two transfers, so such a cache sends
    2 k_e (1 − rho) experts per layer against k_e without a cache: it is faster than no cache
    only for rho > 1/2, while a cache that drops the evicted expert is faster for any rho > 0
    (Mixtral-offloading's RTX 3060 rows, k = 2: LRU 1.33x faster than no cache)."""
    from simspec.costs.cache_hits import hit_fractions

    k, n = 2, 8
    inclusion = np.full((LAYERS, n), k / n)
    union = np.full(LAYERS, float(k))
    hit = hit_fractions(inclusion, union, float(k), "lru", rho)
    assert hit == pytest.approx(np.full(LAYERS, rho), rel=1e-9)
    misses = union * (1 - hit)
    gpu = 1e-3
    none = _model(layer_host_s=2e-3).price(gpu, union, union, tokens=1).total_s
    drop = _model(layer_host_s=2e-3).price(gpu, union, misses, tokens=1).total_s
    swap = _model(layer_host_s=2e-3, transfers_per_miss=2).price(gpu, union, misses, 1).total_s
    assert drop < none
    assert (swap < none) == (rho > 0.5)
