"""Weights must fit the GPUs: pooled over every GPU and on each GPU of the serving group."""

from __future__ import annotations

import dataclasses
import re

import pytest

from simspec.config._memory import kv_capacity_bytes, weight_bytes_per_gpu
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


def test_when_fp8_would_not_fit_either_the_hint_says_how_many_gpus_it_needs():
    """The count the FP8 hint gives holds the FP8 weights, and one GPU fewer (of a count that
    splits the heads) does not: the hint is a working answer, not a guess."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(None, ["model.target=deepseek-v3", "hardware.num_gpus=2"])
    text = str(err.value)
    assert "would fit" not in text and 'precision = "fp8"' in text
    need = int(re.search(r"at least (\d+) GPUs with tensor_parallel = 0", text).group(1))
    fp8 = ["model.target=deepseek-v3", 'model.precision="fp8"']
    load_scenario(None, [*fp8, f"hardware.num_gpus={need}"])
    fewer = [n for n in range(1, need) if 128 % n == 0]  # DeepSeek-V3: 128 attention heads
    with pytest.raises(ScenarioError):
        load_scenario(None, [*fp8, f"hardware.num_gpus={max(fewer)}"])


def test_bf16_whole_model_on_one_of_eight_gpus_names_the_split_and_fp8():
    """Issue 30, 5: DeepSeek-V3 in bf16 on 8 GPUs with tensor_parallel = 1 puts the whole model
    on one GPU: the split is what fails (more GPUs would not help), and FP8 is suggested."""
    with pytest.raises(ScenarioError) as err:
        load_scenario(None, [*DSV3, "hardware.tensor_parallel=1"])
    assert err.value.key_path == "hardware.tensor_parallel"
    s = load_scenario(None, [*DSV3, 'model.precision="fp8"'])
    bf16_total = 2 * s.target.shape.total_weight_bytes  # fp8 halves every linear weight
    share = float(re.search(r"([\d.]+) GB on each GPU", str(err.value)).group(1)) * 1e9
    assert share >= 0.95 * bf16_total  # the whole model (plus the drafter), on one GPU
    assert 'precision = "fp8"' in str(err.value)


@pytest.mark.parametrize(("tp", "ep"), [(1, 1), (8, 1), (8, 8), (2, 8), (4, 2)])
def test_each_gpu_holds_its_share(tp, ep):
    # t-way split dense weights, routed experts over max(t, e) GPUs (e ranks x t/e shards);
    # MLA's latent down-projections (hidden x (q_lora + kv_lora + rope) per layer) and each MoE
    # layer's router (hidden x experts) whole on each
    s = load_scenario(None, [*DSV3, 'model.precision="fp8"'])
    shape, a = s.target.shape, s.target.attention
    routed = shape.num_moe_layers * shape.num_experts * shape.expert_bytes
    rest = s.weight_bytes - routed
    latent = s.target.num_layers * s.target.hidden_size * (a.q_lora_rank + a.kv_lora_rank + 64)
    assert a.qk_rope_head_dim == 64  # DeepSeek-V3's config.json
    hardware = dataclasses.replace(s.hardware, tensor_parallel=tp, expert_parallel=ep)
    split = dataclasses.replace(s, hardware=hardware)
    fp8 = 1.0  # byte per attention parameter
    router = shape.num_moe_layers * s.target.hidden_size * shape.num_experts * 2.0  # bf16 gate
    whole = latent * fp8 + router
    expected = rest / tp + whole * (tp - 1) / tp + routed / max(tp, ep)
    assert weight_bytes_per_gpu(split) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_the_kv_cache_gets_what_the_weights_leave_with_one_replicated_copy_per_rank(tp):
    # a t-way group holds t copies of MLA's latent down-projections and of the routers, so the
    # pooled memory left for the KV cache is the usable memory less the weights less t - 1
    # further copies of those (by hand from DeepSeek-V3's config, as above)
    s = load_scenario(None, [*DSV3, 'model.precision="fp8"'])
    a, shape = s.target.attention, s.target.shape
    latent = s.target.num_layers * s.target.hidden_size * (a.q_lora_rank + a.kv_lora_rank + 64)
    router = shape.num_moe_layers * s.target.hidden_size * shape.num_experts * 2.0
    hardware = dataclasses.replace(s.hardware, tensor_parallel=tp)
    split = dataclasses.replace(s, hardware=hardware)
    expected = s.usable_memory_bytes - s.weight_bytes - (latent + router) * (tp - 1)
    assert kv_capacity_bytes(split) == pytest.approx(expected, rel=1e-12)
    assert kv_capacity_bytes(split) <= s.usable_memory_bytes - s.weight_bytes
