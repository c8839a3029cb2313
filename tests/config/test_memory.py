"""Weights must fit the GPUs: pooled over every GPU and on each GPU of the serving group."""

from __future__ import annotations

import dataclasses

import pytest

from simspec.config._memory import weight_bytes_per_gpu
from simspec.config.load import load_scenario
from simspec.errors import ScenarioError

DSV3 = ["model.target=deepseek-v3", "hardware.num_gpus=8", "hardware.gpu=h200"]


def test_a_whole_model_on_one_of_eight_gpus_is_refused():
    with pytest.raises(ScenarioError) as err:
        load_scenario(None, [*DSV3, 'model.precision="fp8"', "hardware.tensor_parallel=1"])
    assert err.value.key_path == "hardware.tensor_parallel"
    assert "GB on each GPU" in str(err.value)


def test_bf16_that_would_fit_in_fp8_says_so():
    with pytest.raises(ScenarioError) as err:
        load_scenario(None, DSV3)
    assert 'precision = "fp8"' in str(err.value)
    load_scenario(None, [*DSV3, 'model.precision="fp8"'])  # and it does fit


def test_no_fp8_hint_when_fp8_would_not_fit_either():
    with pytest.raises(ScenarioError) as err:
        load_scenario(None, ["model.target=deepseek-v3", "hardware.num_gpus=2"])
    assert "fp8" not in str(err.value)


@pytest.mark.parametrize(("tp", "ep"), [(1, 1), (8, 1), (8, 8), (2, 8), (4, 2)])
def test_each_gpu_holds_its_share(tp, ep):
    # t-way split dense weights, routed experts over max(t, e) GPUs (e ranks x t/e shards)
    s = load_scenario(None, [*DSV3, 'model.precision="fp8"'])
    shape = s.target.shape
    routed = shape.num_moe_layers * shape.num_experts * shape.expert_bytes
    rest = s.weight_bytes - routed
    hardware = dataclasses.replace(s.hardware, tensor_parallel=tp, expert_parallel=ep)
    split = dataclasses.replace(s, hardware=hardware)
    expected = rest / tp + routed / max(tp, ep)
    assert weight_bytes_per_gpu(split) == pytest.approx(expected, rel=1e-12)
