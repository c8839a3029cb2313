"""The physics of offloaded experts (simspec.costs.offload): closed forms of a pass's copies,
the copy/compute pipeline's overlap bounds, and the analytic expected hit rate
(simspec.costs.cache_hits) against its invariants, a simulated cache (simspec.sim.expert_cache)
and LRU replays of routing with working sets."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simspec.costs.cache_hits import hit_fractions, pair_reuse, usage_probabilities
from simspec.costs.offload import OffloadModel, pipeline
from simspec.sim.expert_cache import ExpertCache, layer_slots
from tests.reference.lru_cache import ReferenceLru


def _model(**edit) -> OffloadModel:
    values = {
        "num_moe_layers": 4,
        "num_experts": 16,
        "experts_per_token": 2,
        "expert_bytes": 50e6,
        "expert_flops_per_token": 2 * 25e6,
        "link_bytes_per_s": 25e9,
        "copy_latency_s": 6e-6,
        "capacity": 0.0,
        "policy": "none",
        "prefetch": "none",
        "prefetch_accuracy": 0.9,
        "miss": "copy",
        "host_bytes_per_s": 64e9,
        "cpu_flops_per_s": 2e12,
        "inclusion": np.full((4, 16), 2 / 16),
    }
    values.update(edit)
    return OffloadModel(**values)


def test_no_cache_copies_the_union_at_the_link_bandwidth():
    m = _model()
    union = np.array([3.0, 4.0, 2.0, 5.0])
    misses = m.expected_misses(union, 0.0)
    assert misses.tolist() == union.tolist()
    layer_s = 1e-3
    pipe = m.price(layer_s, union, misses, tokens=2)
    one = 50e6 / 25e9 + 6e-6
    assert pipe.copy_s == pytest.approx(union.sum() * one, rel=1e-12)
    # No prefetch: each layer waits for its own copies, then computes.
    assert pipe.total_s == pytest.approx(union.sum() * one + 4 * layer_s, rel=1e-12)
    assert m.copied(misses) * m.expert_bytes == pytest.approx(union.sum() * 50e6)


def test_everything_cached_is_the_resident_pass():
    m = _model(capacity=16.0, policy="lru")
    union = np.array([3.0, 4.0, 2.0, 5.0])
    misses = m.expected_misses(union, 0.3)
    assert misses.tolist() == [0.0] * 4
    pipe = m.price(2e-3, union, misses, tokens=3)
    assert pipe.exposed_s == 0.0 and pipe.copy_s == 0.0


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("prefetch", [False, True])
def test_pipeline_within_its_overlap_bounds(seed, prefetch):
    rng = np.random.default_rng(seed)
    layers = int(rng.integers(1, 12))
    compute = rng.uniform(0, 2e-3, layers).tolist()
    copies = rng.exponential(1e-3, layers) * (rng.random(layers) < 0.7)
    split = rng.random(layers) if prefetch else np.zeros(layers)
    ahead, demand = (copies * split).tolist(), (copies * (1 - split)).tolist()
    pipe = pipeline(compute, demand, ahead)
    copy, work = float(copies.sum()), float(sum(compute))
    assert pipe.copy_s == pytest.approx(copy)
    assert max(copy, work) <= pipe.total_s * (1 + 1e-12)
    assert pipe.total_s <= (copy + work) * (1 + 1e-12)


def test_prefetch_hides_at_most_the_compute():
    compute, copy = [1.0] * 5, [2.0] * 5
    serial = pipeline(compute, copy, [0.0] * 5).total_s
    ahead = pipeline(compute, [0.0] * 5, copy).total_s
    assert serial == 15.0
    # copies back to back, the last layer's compute after its copy: 5 · 2 + 1
    assert ahead == 11.0
    assert serial - ahead <= sum(compute)


def test_draft_guided_copies_overlap_the_draft_phase():
    compute, copy = [1.0] * 3, [2.0] * 3
    pipe = pipeline(compute, [0.0] * 3, copy, lead_s=3.0, draft_guided=True)
    assert pipe.link_start_s == -3.0
    assert pipe.total_s == 4.0  # the third copy ends at 3, its layer runs 3..4


def test_cpu_misses_run_beside_the_gpu_experts_after_the_attention():
    """A layer: attention and router on the GPU, then its resident experts on the GPU beside
    the CPU's (weights streamed from DRAM, hidden states sent and returned: two copies)."""
    m = _model(miss="cpu")
    union = np.full(4, 2.0)
    misses = np.array([2.0, 1.0, 0.0, 1.0])
    layer_s, moe_s = 1e-3, 0.6e-3
    pipe = m.price(layer_s, union, misses, tokens=1, moe_layer_s=moe_s)
    cpu_one = max(50e6 / 64e9, 1 * 2 / 2 * 5e7 / 2e12)
    expected = sum(
        layer_s - moe_s + max(moe_s * (2 - c) / 2, c * cpu_one + 2 * 6e-6) if c else layer_s
        for c in misses
    )
    assert pipe.copy_s == 0.0
    assert pipe.total_s == pytest.approx(expected, rel=1e-12)
    # Every expert on the CPU: the layer is its attention, then the CPU's experts in series.
    whole = m.price(layer_s, union, union, tokens=1, moe_layer_s=moe_s)
    assert whole.total_s == pytest.approx(4 * (layer_s - moe_s + 2 * cpu_one + 12e-6))


def test_layers_whose_experts_stay_on_the_gpu_never_miss():
    """llama.cpp --n-cpu-moe N: the first N MoE layers' experts on the host, the rest resident."""
    m = _model(host_layers=1)
    union = np.array([3.0, 4.0, 2.0, 5.0])
    pipe = m.price(1e-3, union, union, tokens=2)
    assert pipe.copy_s == pytest.approx(3 * (50e6 / 25e9 + 6e-6), rel=1e-12)
    assert m.on_host(union).tolist() == [3.0, 0.0, 0.0, 0.0]


def test_wrong_prefetches_cost_copies():
    m = _model(prefetch="next_layer", prefetch_accuracy=0.75)
    misses = np.full(4, 4.0)
    assert m.copied(misses) == pytest.approx(16 * (1 + 0.25))
    assert m.copied(misses, predicted=False) == 16


def test_usage_probabilities_match_the_union():
    p = np.random.default_rng(1).dirichlet(np.full(32, 0.5), size=3) * 4
    p = np.minimum(p, 1.0)
    union = np.array([4.0, 9.5, 20.0])
    q = usage_probabilities(p, union)
    assert q.sum(axis=1) == pytest.approx(union, rel=1e-6)


@pytest.mark.parametrize("policy", ["lru", "lfu", "static"])
def test_uniform_independent_routing_hits_the_resident_fraction(policy):
    n, k = 64, 4
    p = np.full((2, n), k / n)
    for capacity in (8, 16, 40):
        union = np.array([4.0, 11.0])
        q = usage_probabilities(p, union)[:, 0]
        hit = hit_fractions(p, union, capacity, policy, reuse=q)  # independent: reuse = q
        assert hit == pytest.approx([capacity / n] * 2, abs=1e-6)


@pytest.mark.parametrize("policy", ["lru", "lfu", "static", "none"])
def test_hit_rate_is_one_with_every_expert_cached_and_monotone(policy):
    p = np.minimum(np.random.default_rng(2).dirichlet(np.full(32, 0.4), size=2) * 2, 1)
    union = np.array([3.0, 6.0])
    rates = [hit_fractions(p, union, c, policy, reuse=0.3) for c in range(0, 33, 4)]
    if policy == "none":
        assert all((r == 0).all() for r in rates)
        return
    assert rates[-1].tolist() == [1.0, 1.0]
    assert rates[0].tolist() == [0.0, 0.0]
    assert all((b >= a - 1e-9).all() for a, b in itertools.pairwise(rates))


def test_pair_reuse_closed_form():
    # Two passes of 4 tokens: U(4) = 3, U(8) = 5 -> they share 1 of 3.
    assert pair_reuse(np.array([3.0]), np.array([5.0])).tolist() == [pytest.approx(1 / 3)]


def _simulate(p, passes, capacity, policy, rng, stick=0.0):
    """Hit fraction of a simulated cache over independent passes of ``tokens`` tokens (with
    probability ``stick`` a layer repeats the previous pass's experts)."""
    layers, n = p.shape
    k = round(p[0].sum())
    cache = ExpertCache(capacity, policy, p)
    needed_total = missed = 0.0
    previous = None
    for t in range(passes):
        needed = np.zeros((layers, n), dtype=bool)
        for layer in range(layers):
            if previous is not None and rng.random() < stick:
                needed[layer] = previous[layer]
                continue
            for _ in range(2):  # two tokens per pass
                ids = rng.choice(n, size=k, replace=False, p=p[layer] / k)
                needed[layer, ids] = True
        if t >= passes // 5:  # after a warm-up
            needed_total += needed.sum()
            missed += cache.misses(needed).sum()
        cache.after(needed)
        previous = needed
    return 1 - missed / needed_total


@pytest.mark.parametrize("policy", ["lru", "static", "lfu"])
@pytest.mark.parametrize("capacity", [8, 16, 32])
def test_analytic_hit_rate_agrees_with_the_simulated_cache(policy, capacity):
    rng = np.random.default_rng(7)
    n, k = 64, 2
    w = np.sort(rng.dirichlet(np.full(n, 0.6)))[::-1]
    p = np.minimum(np.tile(w * k, (2, 1)), 1.0)
    p = p / p.sum(axis=1, keepdims=True) * k
    # 800 measured passes: the simulated fraction's noise (about 0.005 between seeds) is a
    # tenth of the tolerance
    simulated = _simulate(p, 1000, capacity, policy, rng)
    # The expected union of two independent tokens, and the reuse of independent passes.
    union = np.full(2, (1 - (1 - p[0]) ** 2).sum())
    q = usage_probabilities(p, union)
    reuse = (q * q).sum(axis=1) / q.sum(axis=1)
    analytic = hit_fractions(p, union, capacity, policy, reuse)
    assert analytic.mean() == pytest.approx(simulated, abs=0.05)


def test_lru_temporal_reuse_raises_the_hit_rate_as_simulated():
    rng = np.random.default_rng(11)
    n, k, capacity, stick = 64, 2, 8, 0.5
    p = np.full((2, n), k / n)
    simulated = _simulate(p, 1000, capacity, "lru", rng, stick=stick)
    union = np.full(2, (1 - (1 - p[0]) ** 2).sum())
    q = usage_probabilities(p, union)[:, 0]
    reuse = stick + (1 - stick) * q  # a repeated layer reuses all of its experts
    analytic = hit_fractions(p, union, capacity, "lru", reuse)
    assert simulated > capacity / n + 0.1  # reuse beats the resident fraction
    assert analytic.mean() == pytest.approx(simulated, abs=0.06)


def test_cache_matches_a_reference_lru():
    rng = np.random.default_rng(3)
    layers, n, capacity = 3, 24, 6
    p = np.minimum(rng.dirichlet(np.full(n, 0.5), size=layers) * 2, 1.0)
    p = p / p.sum(axis=1, keepdims=True) * 2
    cache = ExpertCache(capacity, "lru", p)
    reference = ReferenceLru(capacity, p)
    for _ in range(400):
        needed = np.zeros((layers, n), dtype=bool)
        for layer in range(layers):
            size = int(rng.integers(1, capacity + 1))
            needed[layer, rng.choice(n, size=size, replace=False)] = True
        assert cache.misses(needed).tolist() == reference.misses(needed)
        cache.after(needed)
        reference.use(needed)


def test_a_cache_of_whole_experts_spreads_them_over_the_layers():
    assert layer_slots(5.5, 4, 24).tolist() == [6, 6, 5, 5]
    assert layer_slots(56 / 32, 32, 8).sum() == 56  # Fiddler: 56 experts over 32 layers
    assert layer_slots(0.25, 8, 8).tolist() == [1, 1, 0, 0, 0, 0, 0, 0]
    assert layer_slots(3.0, 4, 2).tolist() == [2, 2, 2, 2]  # at most a layer's experts


def test_uneven_layers_match_a_reference_lru_per_layer():
    rng = np.random.default_rng(5)
    layers, n, capacity = 4, 24, 5.5
    slots = layer_slots(capacity, layers, n).tolist()
    p = np.minimum(rng.dirichlet(np.full(n, 0.5), size=layers) * 2, 1.0)
    p = p / p.sum(axis=1, keepdims=True) * 2
    cache = ExpertCache(capacity, "lru", p)
    reference = ReferenceLru(slots, p)
    assert cache.resident.sum(axis=1).tolist() == slots
    for _ in range(400):
        needed = np.zeros((layers, n), dtype=bool)
        for layer in range(layers):
            size = int(rng.integers(1, slots[layer] + 1))
            needed[layer, rng.choice(n, size=size, replace=False)] = True
        assert cache.misses(needed).tolist() == reference.misses(needed)
        cache.after(needed)
        reference.use(needed)
        assert (cache.resident.sum(axis=1) <= np.array(slots)).all()


def test_static_cache_never_changes_and_none_holds_nothing():
    p = np.tile(np.linspace(1, 0.1, 10) / np.linspace(1, 0.1, 10).sum() * 2, (2, 1))
    static = ExpertCache(3, "static", p)
    before = static.resident.copy()
    static.after(np.ones((2, 10), dtype=bool))
    assert (static.resident == before).all() and before[:, :3].all() and before.sum() == 6
    none = ExpertCache(3, "none", p)
    assert none.misses(np.ones((2, 10), dtype=bool)).tolist() == [10.0, 10.0]


def test_a_layer_answer_does_not_depend_on_the_layers_solved_with_it():
    rng = np.random.default_rng(9)
    p = np.minimum(rng.dirichlet(np.full(32, 0.5), size=6) * 2, 1.0)
    union = rng.uniform(2, 12, 6)
    reuse = rng.uniform(0, 0.6, 6)
    for policy in ("lru", "static"):
        together = hit_fractions(p, union, 10, policy, reuse)
        alone = [
            hit_fractions(p[i : i + 1], union[i : i + 1], 10, policy, reuse[i : i + 1])[0]
            for i in range(6)
        ]
        assert together.tolist() == alone


def test_a_prefill_passes_through_the_cache():
    """A prefill uses its union's most popular experts: against an LRU cache that a decode pass
    filled with the least popular ones, every one misses, and afterwards the cache holds the
    most popular ones; a static cache hits its pinned experts and does not change."""
    p = np.tile(np.linspace(1, 0.1, 10) / np.linspace(1, 0.1, 10).sum() * 2, (2, 1))
    lru = ExpertCache(3, "lru", p)
    tail = np.zeros((2, 10), dtype=bool)
    tail[:, 7:] = True
    lru.after(tail)
    assert lru.resident[:, 7:].all() and lru.resident.sum() == 6
    assert lru.prefill(np.array([5.0, 4.6])).tolist() == [5.0, 5.0]  # 4.6 rounds to 5
    assert lru.resident[:, :3].all() and lru.resident.sum() == 6
    static = ExpertCache(3, "static", p)
    before = static.resident.copy()
    assert static.prefill(np.array([5.0, 2.0])).tolist() == [2.0, 0.0]
    assert (static.resident == before).all()


def test_a_swapping_runtime_sends_each_miss_both_ways():
    """Mixtral-offloading swaps: a miss copies the expert in and the evicted one back out on
    the same stream, so the link carries two transfers per miss (bytes and copy latency)."""
    one, two = _model(), _model(transfers_per_miss=2)
    assert two.copy_s == pytest.approx(2 * (50e6 / 25e9 + 6e-6), rel=1e-12)
    union = np.array([3.0, 4.0, 2.0, 5.0])
    assert two.price(1e-3, union, union, 2).copy_s == pytest.approx(
        2 * one.price(1e-3, union, union, 2).copy_s, rel=1e-12
    )


def test_only_a_full_cache_of_a_swapping_runtime_swaps():
    """The released Mixtral-offloading cache swaps evicted experts back; no cache (a staging
    buffer), CPU misses, and the eager runtime as Table 2 measured it (hf-eager) do not."""
    from simspec.config.load import load_scenario
    from simspec.sim.setup import swapping

    base = ['offload.experts="host_pinned"', "hardware.gpu=rtx-4090"]
    release = 'offload.framework="mixtral-offloading-release"'
    lru = [*base, release, "offload.cache_experts_per_layer=8"]
    assert swapping(load_scenario(overrides=lru))
    eager = [*base, 'offload.framework="hf-eager"', "offload.cache_experts_per_layer=8"]
    assert not swapping(load_scenario(overrides=eager))
    assert not swapping(load_scenario(overrides=[*base, "offload.cache_experts_per_layer=8"]))
    assert not swapping(load_scenario(overrides=[*lru[:-1], 'offload.cache_policy="none"']))
    assert not swapping(load_scenario(overrides=[*lru, 'offload.miss="cpu"']))


# -- per-request working sets ----------------------------------------------------------------


def _working_set_replay(n, k, concentration, keep, tokens, requests, capacities, seed=0):
    """An exact per-layer LRU replayed on routing with working sets: each request draws its own
    popularity ~ Dirichlet(concentration per expert) and each token keeps every expert of the
    previous token with probability ``keep``, the rest drawn from that popularity without
    replacement (Gumbel top-k). Returns the lag-1 and within-8 reuse and the hit rates."""
    rng = np.random.default_rng(seed)
    hits = {c: [0, 0] for c in capacities}
    reuse = {1: [0, 0], 8: [0, 0]}
    for _ in range(requests):
        pi = rng.dirichlet(np.full(n, concentration))
        caches = {c: [] for c in capacities}
        history: list[set] = []
        previous: list[int] = []
        for t in range(tokens):
            kept = [e for e in previous if rng.random() < keep]
            weights = pi.copy()
            weights[kept] = 0.0
            keys = np.log(weights / weights.sum() + 1e-300) - np.log(-np.log(rng.random(n)))
            now = kept + [int(e) for e in np.argsort(-keys)[: k - len(kept)]]
            if t >= 32:  # warm
                for lag, count in reuse.items():
                    seen = set().union(*history[-lag:])
                    count[0] += sum(e in seen for e in now)
                    count[1] += k
                for c, stack in caches.items():
                    hits[c][0] += sum(e in stack for e in now)
                    hits[c][1] += k
            for c, stack in caches.items():
                for e in now:
                    if e in stack:
                        stack.remove(e)
                    stack.append(e)
                del stack[: max(len(stack) - c, 0)]
            history.append(set(now))
            previous = now
    return (
        {lag: a / b for lag, (a, b) in reuse.items()},
        {c: a / b for c, (a, b) in hits.items()},
    )


def test_working_sets_give_the_published_reuse_of_qwen3_30b():
    """The shipped concentration (0.2, validation/offload.toml) with 0.3 persistence gives the
    reuse imp PR #1359 measured on Qwen3-30B-A3B (128 experts, top-8): 45 % of a token's
    experts at the next token, 80 % within eight."""
    reuse, _ = _working_set_replay(128, 8, 0.2, 0.3, 320, 4, [])
    assert reuse[1] == pytest.approx(0.45, abs=0.04)
    assert reuse[8] == pytest.approx(0.80, abs=0.04)


@pytest.mark.parametrize(("n", "k", "capacities"), [(128, 8, [8, 24, 48]), (256, 10, [32, 96])])
def test_working_set_hit_rate_agrees_with_an_lru_replay(n, k, capacities):
    """The analytic working-set hit rate (Che with one-step memory, averaged over drawn
    popularities) against an exact LRU replay of routing with working sets, its lag-1 reuse
    measured on the replay."""
    reuse, replayed = _working_set_replay(n, k, 0.2, 0.3, 320, 4, capacities, seed=1)
    p = np.full((1, n), k / n)
    for c in capacities:
        analytic = hit_fractions(p, np.full(1, float(k)), c, "lru", reuse[1], 0.2, 1)
        assert analytic[0] == pytest.approx(replayed[c], abs=0.05), c


def test_working_sets_raise_lru_hits_and_leave_static_alone():
    n, k, capacity = 128, 8, 24
    p = np.full((2, n), k / n)
    union = np.full(2, float(k))
    plain = hit_fractions(p, union, capacity, "lru", 0.38)
    tight = hit_fractions(p, union, capacity, "lru", 0.38, working_set=0.2)
    loose = hit_fractions(p, union, capacity, "lru", 0.38, working_set=1000.0)
    assert (tight > plain + 0.1).all()
    assert loose == pytest.approx(plain, abs=0.01)  # a wide working set is the layer's popularity
    static = hit_fractions(p, union, capacity, "static", 0.38, working_set=0.2)
    assert static == pytest.approx(hit_fractions(p, union, capacity, "static", 0.38))
    # Requests sharing a pass bring their own working sets: fewer hits than one request alone.
    many = hit_fractions(p, np.full(2, 30.0), capacity, "lru", 0.38, working_set=0.2, requests=4)
    assert (many < tight).all()
