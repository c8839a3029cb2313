"""A drafter entry's documented acceptance: a second, deeper length needs a first and a deeper
setting (the deeper one sets how the per-step acceptance decays)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from simspec import catalog
from simspec.errors import FieldError


def _mtp(**changes):
    entry = catalog.get_drafter("mtp-deepseek-v3")
    return dataclasses.replace(entry, **changes)


def test_the_shipped_deep_length_lies_deeper_than_the_default():
    entry = _mtp()
    assert entry.deep_acceptance_length > entry.default_acceptance_length
    assert entry.deep_acceptance_setting[0] > entry.default_acceptance_setting[0]


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"default_acceptance_length": 0.0}, "deep_acceptance_length"),
        ({"deep_acceptance_setting": (1, 1, 2)}, "deep_acceptance_setting"),
        ({"deep_acceptance_setting": (3, 1)}, "deep_acceptance_setting"),
    ],
)
def test_a_deep_length_without_a_first_or_a_deeper_setting_is_refused(changes, key):
    with pytest.raises(FieldError) as err:
        _mtp(**changes)
    assert err.value.key == key


def test_deepseeks_mtp_default_decays_with_depth_through_both_lengths():
    """The scenario's acceptance reproduces both documented lengths and accepts less per step
    deeper, so a deeper chain gains less than the i.i.d. extension of the first length."""
    from simspec.config.load import scenario_from_dict
    from simspec.text.tree import expected_acceptance_length

    data = {
        "name": "dsv3-mtp",
        "model": {"target": "deepseek-v3", "drafter": "mtp-deepseek-v3", "precision": "fp8"},
        "hardware": {"gpu": "h200", "num_gpus": 8},
    }
    scenario = scenario_from_dict(data, "dsv3-mtp.toml")
    entry, fit = scenario.drafter, scenario.acceptance_fit
    assert fit is not None and fit.default_of == entry.name and fit.decay < 1
    alphas = scenario.acceptance.alphas
    assert all(later < earlier for earlier, later in itertools.pairwise(alphas))
    for (steps, topk, drafts), length in (
        (entry.default_acceptance_setting, entry.default_acceptance_length),
        (entry.deep_acceptance_setting, entry.deep_acceptance_length),
    ):
        assert expected_acceptance_length(alphas[:steps], steps, topk, drafts, 0.0) == (
            pytest.approx(length, abs=1e-9)
        )
    from simspec.analysis.guardrails import acceptance_warning

    assert acceptance_warning(scenario, entry.deep_acceptance_setting[0]) is None
    beyond = acceptance_warning(scenario, entry.deep_acceptance_setting[0] + 1)
    assert beyond is not None and "fitted decay" in beyond
