"""Speculative rows drafted by the model's own MTP module (issue 28, item 3) or by prompt lookup."""

from __future__ import annotations

import pytest

from simspec.config.load import scenario_from_dict
from simspec.errors import InputError
from simspec.validation.cases import load_cases
from simspec.validation.predictions import scenario_data

ROW = """
[sources.s]
url = "https://example.org"
title = "t"

[[cases]]
id = "mtp-row"
category = "speculative"
model = "{model}"
gpu = "h200"
num_gpus = 8
tp = 8
ep = 1
engine = "SGLang"
precision = "fp8"
batch = 1
prompt_tokens = 512
output_tokens = 256
method = "{method}"
steps = 3
topk = 1
draft_tokens = 4
acceptance_length = 2.4
quantity = "tokens_per_s_per_user"
unit = "tok/s"
value = 1.5
baseline_value = 1.0
source = "s"
reporter = "s"
role = "test"
"""


def _case(tmp_path, model: str, method: str):
    path = tmp_path / "cases.toml"
    path.write_text(ROW.format(model=model, method=method))
    return load_cases(path).cases[0]


@pytest.mark.parametrize("method", ["mtp", "nextn", "deepseek_mtp"])
def test_an_mtp_row_drafts_with_the_models_mtp_module(tmp_path, method):
    case = _case(tmp_path, "deepseek-v3", method)
    s = scenario_from_dict(scenario_data(case))
    assert s.drafter.name == "mtp-deepseek-v3" and s.draft_model is not None
    assert s.acceptance_fit is None  # the row's AL sets alpha, not the drafter's default


def test_an_eagle_row_keeps_the_default_drafter(tmp_path):
    case = _case(tmp_path, "deepseek-v3", "eagle3")
    assert scenario_from_dict(scenario_data(case)).drafter.name == "eagle3-deepseek-v3"


def test_an_mtp_row_on_a_model_without_an_mtp_drafter_is_refused(tmp_path):
    with pytest.raises(InputError) as err:
        _case(tmp_path, "qwen3-235b-a22b", "mtp")
    assert err.value.key_path.endswith(".method")


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-4-scout-17b-16e"])
def test_an_ngram_row_drafts_by_prompt_lookup_on_any_model(tmp_path, model):
    case = _case(tmp_path, model, "ngram")
    s = scenario_from_dict(scenario_data(case))
    assert s.drafter.name == "ngram" and s.draft_model is None
    assert s.weight_bytes == s.target.shape.total_weight_bytes  # no drafter weights
