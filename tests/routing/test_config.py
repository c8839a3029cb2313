"""The [routing] table: overlap profiles, which sampler, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.routing.config import RoutingConfig


def test_profiles_and_which_sampler():
    assert RoutingConfig().true_profile == ()
    assert RoutingConfig(overlap=0.4).true_profile == (0.4,)
    cfg = RoutingConfig(overlap=0.4, overlaps=(0.4, 0.3), draft_overlap=0.2)
    assert cfg.true_profile == (0.4, 0.3) and cfg.draft_profile == (0.2,)
    assert cfg.rejected_overlap == 0.2
    assert RoutingConfig(overlap=0.4).uses_reuse_sampler()
    assert not cfg.uses_reuse_sampler()  # two lags
    assert not RoutingConfig(overlap=0.4, popularity="zipf").uses_reuse_sampler()
    scaled = RoutingConfig(overlaps=(0.4, 0.2), layer_overlap_scale=(0.5, 1.5))
    true, draft = scaled.layer_profiles(3)
    assert draft is None
    assert true == pytest.approx(np.array([[0.2, 0.1], [0.4, 0.2], [0.6, 0.3]]))


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [
        (("routing.overlaps=[0.4, 0.3]",), "routing.overlaps", "first entry equals overlap"),
        (("routing.overlaps=[]",), "routing.overlaps", "1 to 12"),
        (("routing.overlaps=[0.38, 1.5]",), "routing.overlaps[1]", "<= 1"),
        (("routing.overlaps=[" + ", ".join(["0.3"] * 13) + "]",), "routing.overlaps", "1 to 12"),
        (
            ("routing.draft_overlaps=[0.3, 0.2]", "routing.draft_overlap=0.2"),
            "routing.draft_ov",
            "",
        ),
        (("routing.layer_overlap_scale=[1.0, 3.0]",), "routing.layer_overlap_scale", "<= 1"),
        (('routing.mode="fast"',), "routing.mode", "analytic"),
    ],
)
def test_bad_routing_keys_are_scenario_errors(overrides, key, fragment):
    from simspec.errors import ScenarioError
    from tests.helpers import tiny

    with pytest.raises(ScenarioError) as err:
        tiny(*overrides)
    assert err.value.key_path.startswith(key)
    assert fragment in str(err.value)


def test_draft_keys_need_a_true_profile():
    from simspec.errors import FieldError

    with pytest.raises(FieldError, match="only together with overlap"):
        RoutingConfig(draft_overlaps=(0.3,))
    with pytest.raises(FieldError, match="only together with overlap"):
        RoutingConfig(layer_overlap_scale=(1.0,))


def test_working_sets_are_analytic_only_and_keep_the_digest_when_unset():
    from simspec.config.load import load_scenario
    from simspec.errors import ScenarioError

    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={"routing.working_set": 0.2})  # the default is monte_carlo
    assert err.value.key_path == "routing.working_set"
    plain = load_scenario(overrides={"routing.mode": "analytic"})
    assert "working_set" not in plain.to_dict()["routing"]
    sets = load_scenario(overrides={"routing.mode": "analytic", "routing.working_set": 0.2})
    assert sets.to_dict()["routing"]["working_set"] == 0.2
    assert sets.digest() != plain.digest()
