"""[hardware] tensor_parallel / expert_parallel: validated, and priced by the cost model."""

from __future__ import annotations

import pytest

from simspec.config.load import load_scenario
from simspec.errors import ScenarioError
from simspec.sim.setup import build_setup


def test_defaults_and_divisors_are_accepted():
    s = load_scenario()
    assert (s.hardware.tensor_parallel, s.hardware.expert_parallel) == (0, 1)
    s = load_scenario(
        overrides={
            "hardware.num_gpus": 8,
            "hardware.tensor_parallel": 4,
            "hardware.expert_parallel": 8,
        }
    )
    assert (s.hardware.tensor_parallel, s.hardware.expert_parallel) == (4, 8)


@pytest.mark.parametrize(
    ("key", "value", "gpus"),
    [
        ("hardware.tensor_parallel", 3, 8),
        ("hardware.expert_parallel", 16, 8),
        ("hardware.expert_parallel", 0, 8),
        ("hardware.tensor_parallel", -1, 1),
    ],
)
def test_non_divisors_name_the_key(key, value, gpus):
    with pytest.raises(ScenarioError) as err:
        load_scenario(overrides={"hardware.num_gpus": gpus, key: value})
    assert err.value.key_path == key


def test_degrees_change_the_cost_model():
    """TP2 and TP1 x EP2 on the same two GPUs price the same pass differently (costs.parallel)."""
    import numpy as np

    base = {"hardware.num_gpus": 2}
    plain = build_setup(load_scenario(overrides=base)).cost_model
    split = build_setup(
        load_scenario(
            overrides={**base, "hardware.tensor_parallel": 1, "hardware.expert_parallel": 2}
        )
    ).cost_model
    args = (np.array([1, 1]), np.array([100, 100]), np.full(48, 16.0))
    assert plain.verify_pass(*args).total_s != split.verify_pass(*args).total_s


def test_validate_names_the_data_parallel_attention_groups(tmp_path, capsys):
    from simspec.cli import main

    path = tmp_path / "s.toml"
    path.write_text('name = "dp"\n[hardware]\nnum_gpus = 4\n', encoding="utf-8")
    split = ["--set", "hardware.tensor_parallel=2", "--set", "hardware.expert_parallel=4"]
    assert main(["validate", str(path), *split]) == 0
    out = capsys.readouterr().out
    assert "data-parallel attention, 2 groups of TP 2" in out and "EP 4" in out
    assert main(["validate", str(path)]) == 0
    assert "data-parallel" not in capsys.readouterr().out
    replicas = ["--set", "hardware.tensor_parallel=2"]
    assert main(["validate", str(path), *replicas]) == 0
    assert "2 data-parallel replicas of TP 2 are not modelled" in capsys.readouterr().out
