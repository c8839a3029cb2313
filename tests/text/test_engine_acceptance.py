"""Acceptance as engines report it (issue 28, item 2): fits recover known processes."""

from __future__ import annotations

import math

import pytest

from simspec.errors import FieldError
from simspec.text.acceptance import AcceptanceConfig
from simspec.text.engine_acceptance import (
    conditional_rates,
    decaying_alphas,
    fit_engine_acceptance,
)
from simspec.text.tree import expected_acceptance_length


def _chain_length(alpha: float, steps: int) -> float:
    """Leviathan et al.: a chain of k drafts commits sum_{i=0..k} alpha^i tokens per verify."""
    return sum(alpha**i for i in range(steps + 1))


@pytest.mark.parametrize("alpha", [0.2, 0.55, 0.8, 0.95])
@pytest.mark.parametrize("steps", [1, 3, 6])
def test_a_chain_acceptance_length_gives_back_its_alpha(alpha, steps):
    config = AcceptanceConfig(acceptance_length=_chain_length(alpha, steps))
    fitted, fit = fit_engine_acceptance(config, (steps, 1, steps + 1), 0.65)
    assert fitted.process == "iid"
    assert fitted.alpha == pytest.approx(alpha, abs=1e-9)
    assert fit is not None and fit.fitted_length == pytest.approx(fit.given_length, abs=1e-9)


def test_the_chain_setting_defaults_its_verified_tokens():
    config = AcceptanceConfig(acceptance_length=_chain_length(0.7, 3))
    fitted, fit = fit_engine_acceptance(config, (3, 1, 0), 0.65)  # 0 = every node: k + 1
    assert fitted.alpha == pytest.approx(0.7, abs=1e-9) and fit.setting == (3, 1, 4)


def test_a_tree_acceptance_length_gives_back_its_alpha():
    setting, rho = (3, 4, 8), 0.6
    al = expected_acceptance_length(0.6, *setting, rho)
    fitted, _ = fit_engine_acceptance(AcceptanceConfig(acceptance_length=al), setting, rho)
    assert fitted.alpha == pytest.approx(0.6, abs=1e-9)


def test_position_rates_give_back_per_slot_alphas():
    alphas = (0.9, 0.7, 0.5, 0.4)
    rates = tuple(math.prod(alphas[: j + 1]) for j in range(len(alphas)))
    fitted, fit = fit_engine_acceptance(
        AcceptanceConfig(position_acceptance=rates), (4, 1, 5), 0.65
    )
    assert fitted.process == "per_position"
    assert fitted.alphas == pytest.approx(alphas, abs=1e-12)
    assert fit.fitted_length == pytest.approx(1 + sum(rates), abs=1e-12)  # E[AL] = 1 + sum r_j


def test_given_length_and_rates_are_compared():
    rates = (0.8, 0.5, 0.3)
    config = AcceptanceConfig(acceptance_length=2.4, position_acceptance=rates)
    _, fit = fit_engine_acceptance(config, (3, 1, 4), 0.65)
    assert fit.given_length == 2.4 and fit.fitted_length == pytest.approx(2.6)
    assert "given AL 2.400, fitted AL 2.600" in fit.describe()


def test_nothing_given_is_nothing_fitted():
    config = AcceptanceConfig(alpha=0.6)
    assert fit_engine_acceptance(config, (3, 1, 4), 0.65) == (config, None)


@pytest.mark.parametrize(
    ("kwargs", "setting", "key"),
    [
        ({"acceptance_length": 4.5}, (3, 1, 4), "acceptance_length"),  # > steps + 1
        ({"acceptance_length": 2.01}, (1, 1, 2), "acceptance_length"),
        ({"position_acceptance": (0.5, 0.6)}, (2, 1, 3), "position_acceptance"),
    ],
)
def test_impossible_numbers_name_their_key(kwargs, setting, key):
    with pytest.raises(FieldError) as err:
        fit_engine_acceptance(AcceptanceConfig(**kwargs), setting, 0.65)
    assert err.value.key == key


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"acceptance_length": 0.5}, "acceptance_length"),
        ({"acceptance_length": 2.0, "acceptance_setting": (3, 1)}, "acceptance_setting"),
        ({"acceptance_length": 2.0, "acceptance_setting": (3, 1, 1)}, "acceptance_setting"),
        ({"acceptance_setting": (3, 1, 4)}, "acceptance_setting"),
    ],
)
def test_bad_keys_are_refused_by_the_table(kwargs, key):
    with pytest.raises(FieldError) as err:
        AcceptanceConfig(**kwargs)
    assert err.value.key == key


def test_conditional_rates_after_a_zero():
    assert conditional_rates((0.5, 0.0, 0.0)) == (0.5, 0.0, 0.0)


def _decayed_chain_length(a: float, d: float, steps: int) -> float:
    """A chain whose draft j (from 0) is accepted with a·d^j after all before it: 1 + the sum
    over depths of the product of the per-step rates (closed form, written out)."""
    total, reach = 1.0, 1.0
    for j in range(steps):
        reach *= a * d**j
        total += reach
    return total


@pytest.mark.parametrize(("a", "d"), [(0.85, 0.6), (0.7, 0.9), (0.95, 0.3)])
def test_two_chain_lengths_give_back_a_decaying_acceptance(a, d):
    first = ((1, 1, 2), _decayed_chain_length(a, d, 1))
    deep = ((4, 1, 5), _decayed_chain_length(a, d, 4))
    alphas, decay = decaying_alphas(first, deep, 0.65, 6)
    assert decay == pytest.approx(d, abs=1e-7)
    assert alphas == pytest.approx([a * d**j for j in range(6)], abs=1e-7)
    config = AcceptanceConfig(acceptance_length=first[1])
    fitted, fit = fit_engine_acceptance(config, first[0], 0.65, deep=deep, slots=6)
    assert fitted.process == "per_position" and len(fitted.alphas) == 6
    assert fit is not None and fit.deep_setting == deep[0]
    assert fit.deep_fitted_length == pytest.approx(deep[1], abs=1e-7)
    assert fit.fitted_length == pytest.approx(first[1], abs=1e-7)


def test_a_deep_length_on_the_iid_extension_keeps_the_acceptance_flat():
    alpha = 0.75
    first, deep = ((2, 1, 3), _chain_length(alpha, 2)), ((5, 1, 6), _chain_length(alpha, 5))
    alphas, decay = decaying_alphas(first, deep, 0.65, 5)
    assert decay == pytest.approx(1.0, abs=1e-7)
    assert max(alphas) - min(alphas) == pytest.approx(0.0, abs=1e-7)


@pytest.mark.parametrize(
    ("deep", "why"),
    [
        (((3, 1, 4), _chain_length(0.8, 3) + 0.01), "above the i.i.d. extension"),
        (((3, 1, 4), 1.79), "below nothing accepted past the first depth"),
        (((1, 1, 2), 1.9), "not deeper"),
    ],
)
def test_an_impossible_deep_length_is_refused(deep, why):
    first = ((1, 1, 2), 1.8)
    with pytest.raises(ValueError):
        decaying_alphas(first, deep, 0.65, 4)
    if deep[0][0] > 1:
        config = AcceptanceConfig(acceptance_length=first[1])
        with pytest.raises(FieldError) as err:
            fit_engine_acceptance(config, first[0], 0.65, deep=deep, slots=4)
        assert err.value.key == "deep_acceptance_length", why
