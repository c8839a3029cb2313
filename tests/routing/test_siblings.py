"""Draft-tree siblings in the analytic union (simspec.routing.siblings)."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.overlap import pair_probability
from simspec.routing.popularity import inclusion_probabilities
from simspec.routing.predictor import UniqueExpertPredictor
from simspec.routing.siblings import independent_sibling_overlap, sibling_share
from tests.reference import tree_router

#: Root; three children; two grandchildren under the first, one under the second; one below.
TREE = (0, 0, 0, 1, 1, 2, 4)
WIDE = (0,) * 6 + (1,) * 4 + (2,) * 3  # two levels, ten siblings under the root


def zipf_p(n: int, k: int, exponent: float) -> np.ndarray:
    ranks = np.arange(1, n + 1, dtype=float) ** -exponent
    return inclusion_probabilities(np.random.default_rng(3).permutation(ranks)[None], k)


@pytest.mark.parametrize("parents", [TREE, WIDE, (0, 1, 2)])
def test_independent_siblings_are_the_chain(parents):
    """At s = s_0 (c = 0) a tree has the chain's union, whatever its shape."""
    p = zipf_p(64, 8, 0.8)
    rho = 0.5
    chain = UniqueExpertPredictor(p, [rho])
    floor = independent_sibling_overlap(p, pair_probability(p, chain._lam_draft[:, :1]))
    tree = UniqueExpertPredictor(p, [rho], sibling_overlap=floor)
    assert tree.sibling_share == pytest.approx(0.0, abs=1e-6)
    n = len(parents) + 1
    for a in (1, 3):
        got = tree.expected_unique([n, n], [a, a], trees=[parents, parents])
        assert got == pytest.approx(chain.expected_unique([n, n], [a, a]), rel=1e-6)


@pytest.mark.parametrize("parents", [TREE, WIDE])
@pytest.mark.parametrize(("exponent", "rho", "sibling"), [(0.0, 0.38, 0.8), (1.0, 0.5, 0.7)])
def test_tree_union_matches_sampled_trees(parents, exponent, rho, sibling):
    p = zipf_p(128, 8, exponent)
    predictor = UniqueExpertPredictor(p, [rho], sibling_overlap=sibling)
    q = pair_probability(p, predictor._lam_draft[:, :1])[0]
    rng = np.random.default_rng([len(parents), int(10 * exponent)])
    sets = tree_router.sample_trees(rng, p[0], q, parents, predictor.sibling_share, 20_000)
    assert tree_router.sibling_overlap(sets, parents) == pytest.approx(sibling, abs=0.01)
    n = len(parents) + 1
    for batch in (1, 4):
        unions = sets[: (len(sets) // batch) * batch].any(axis=1)
        unions = unions.reshape(-1, batch, p.shape[1]).any(axis=1).sum(axis=1)
        mean, error = unions.mean(), unions.std() / np.sqrt(len(unions))
        got = predictor.expected_unique([n] * batch, trees=[parents] * batch)[0]
        assert abs(got - mean) <= 4.5 * error, (batch, got, mean, error)


def test_more_sibling_overlap_fewer_experts():
    p = np.full((2, 128), 8 / 128)
    values = [
        UniqueExpertPredictor(p, [0.38], sibling_overlap=s).expected_unique([14], trees=[WIDE])
        for s in (0.2, 0.38, 0.6, 0.8, 1.0)
    ]
    means = [float(v.mean()) for v in values]
    assert means == sorted(means, reverse=True)
    # s = 1: each depth's nodes route as one token; a chain of the root and two depths.
    chain = UniqueExpertPredictor(p, [0.38]).expected_unique([3])
    assert values[-1] == pytest.approx(chain, rel=1e-9)


def test_default_is_the_lag_one_overlap_and_bounds_are_checked():
    p = np.full(128, 8 / 128)
    q = p * 0.38
    assert sibling_share(p, q, None) == pytest.approx(sibling_share(p, q, 0.38))
    assert sibling_share(p, p * p, None) == 0.0  # independent routing: independent siblings
    floor = independent_sibling_overlap(p, q)
    with pytest.raises(ValueError, match="sibling overlap"):
        sibling_share(p, q, floor - 0.01)


def test_a_sibling_overlap_below_independence_names_its_key():
    from simspec.config.load import read_scenario_data, scenario_from_dict
    from simspec.errors import InputError

    data, _ = read_scenario_data(None)
    data["routing"] = {**data["routing"], "mode": "analytic", "sibling_overlap": 0.05}
    with pytest.raises(InputError, match=r"routing\.sibling_overlap.*independent continuations"):
        scenario_from_dict(data, "test")
