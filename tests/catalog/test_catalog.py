"""Catalogs: every file loads strictly; derived sizes match the reference tables."""

from __future__ import annotations

import pytest

from simspec import catalog
from simspec.physics.models import ModelShape

MOE_MODELS = [
    "qwen3-30b-a3b",
    "qwen3-coder-30b-a3b",
    "qwen3-235b-a22b",
    "qwen3-coder-480b-a35b",
    "qwen3-next-80b-a3b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "kimi-k2",
    "glm-4.5",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "llama-4-scout-17b-16e",
    "llama-4-maverick-17b-128e",
    "olmoe-1b-7b-0924",
    "qwen2-57b-a14b",
    "qwen1.5-moe-a2.7b",
    "glm-4.6",
    "minimax-m2",
    "deepseek-v2-lite",
    "phi-3.5-moe",
    "qwen3.5-35b-a3b",
    "qwen3.5-122b-a10b",
    "qwen3.5-397b-a17b",
]


def test_all_reference_models_present():
    names = catalog.model_names()
    for name in MOE_MODELS:
        assert name in names
        assert catalog.get_model(name).is_moe
    assert not catalog.get_model("llama-3.1-8b").is_moe


@pytest.mark.parametrize("name", [*MOE_MODELS, "llama-3.1-8b", "qwen3-8b"])
def test_parameter_count_matches_headline(name):
    """Weights in bf16-equivalent bytes / bytes-per-param ~ the vendor's total, within 3%."""
    m = catalog.get_model(name)
    s: ModelShape = m.shape
    params = s.embedding_bytes / m.weight_bytes
    if not m.tie_word_embeddings:
        params += s.lm_head_bytes / m.weight_bytes
    for g in s.groups:
        params += g.count * (g.attention_weight_bytes + g.ffn_weight_bytes) / m.weight_bytes
        if g.is_moe:
            params += g.count * (
                (s.shared_expert_bytes + s.router_bytes) / m.weight_bytes
                + s.num_experts * s.expert_params
            )
    assert params / 1e9 == pytest.approx(m.total_params_b, rel=0.03)


# Published headline counts (billions) from the model cards and reports each entry cites, and
# whether the vendor's activated count includes the input embedding table (Qwen's does: its
# Qwen3-30B-A3B "3.3B activated" is 3.35B with the embedding, 3.04B without). The active
# tolerance covers headlines rounded to the unit (Qwen3.5-35B-A3B's "3B" is 3.37B counted
# with the embedding, as the vendor counts) and the parts the catalog leaves out (biases, the
# gated attention's wider query projection).
PUBLISHED = {
    # name: (total_b, active_b, active counts the embedding, active rel. tolerance)
    "glm-4.6": (355.0, 32.0, False, 0.05),  # zai-org/GLM-4.6 card (GLM-4.5's 355B-A32B)
    "minimax-m2": (230.0, 10.0, False, 0.05),  # MiniMax-M2 card, transformers docs
    "deepseek-v2-lite": (15.7, 2.4, False, 0.05),  # DeepSeek-V2-Lite card, arXiv 2405.04434
    "phi-3.5-moe": (42.0, 6.6, False, 0.05),  # Phi-3.5-MoE card, arXiv 2404.14219
    "qwen3.5-35b-a3b": (35.0, 3.0, True, 0.15),  # Qwen3.5-35B-A3B card ("3B", rounded)
    "qwen3.5-122b-a10b": (122.0, 10.0, True, 0.06),  # Qwen3.5-122B-A10B card
    "qwen3.5-397b-a17b": (397.0, 17.0, True, 0.05),  # Qwen3.5-397B-A17B card
}


def _counted_params_b(name: str) -> tuple[float, float, float]:
    """(total, active, embedding) parameters in billions, counted from the entry's shapes: the
    active ones leave out the routed experts a token does not use."""
    m = catalog.get_model(name)
    s = m.shape
    per_param = m.weight_bytes
    total = s.embedding_bytes / per_param
    if not m.tie_word_embeddings:
        total += s.lm_head_bytes / per_param
    idle = 0.0
    for g in s.groups:
        total += g.count * (g.attention_weight_bytes + g.ffn_weight_bytes) / per_param
        if g.is_moe:
            always = (s.shared_expert_bytes + s.router_bytes) / per_param
            total += g.count * (always + s.num_experts * s.expert_params)
            idle += g.count * (s.num_experts - s.experts_per_token) * s.expert_params
    return total / 1e9, (total - idle) / 1e9, s.embedding_bytes / per_param / 1e9


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_counts_from_the_shapes_match_the_published_totals_and_active(name):
    """Total within 3 % and activated within the stated tolerance of the published headline,
    counted from the transcribed shapes (not from the entry's own headline fields)."""
    total_b, active_b, with_embedding, tolerance = PUBLISHED[name]
    total, active, embedding = _counted_params_b(name)
    if not with_embedding:
        active -= embedding
    assert total == pytest.approx(total_b, rel=0.03)
    assert active == pytest.approx(active_b, rel=tolerance)
    m = catalog.get_model(name)  # the entry states the same headline
    assert (m.total_params_b, m.active_params_b) == (total_b, active_b)


def test_qwens_activated_count_includes_the_embedding():
    """The convention PUBLISHED takes for Qwen, on a Qwen model already checked: Qwen3-30B-A3B's
    published 3.3B activated is met with the embedding counted (3.35B), not without (3.04B)."""
    _, active, embedding = _counted_params_b("qwen3-30b-a3b")
    assert active == pytest.approx(3.3, rel=0.03)
    assert active - embedding != pytest.approx(3.3, rel=0.05)


def test_qwen3_30b_derived_numbers_match_hand_arithmetic():
    """From config.json by hand: 9.4 MB per expert, 98 KB of KV per token, 1.81 GB attention."""
    s = catalog.get_model("qwen3-30b-a3b").shape
    assert s.expert_bytes / 1e6 == pytest.approx(9.44, abs=0.01)
    assert s.kv_bytes_per_token == 48 * 2 * 4 * 128 * 2
    (group,) = s.groups
    assert group.count * group.attention_weight_bytes / 1e9 == pytest.approx(1.81, abs=0.01)
    assert s.lm_head_bytes / 1e9 == pytest.approx(0.62, abs=0.01)


def test_layer_patterns():
    ds = catalog.get_model("deepseek-v3").shape
    assert ds.num_moe_layers == 58
    mav = catalog.get_model("llama-4-maverick-17b-128e").shape
    assert mav.num_moe_layers == 24
    gpt = catalog.get_model("gpt-oss-120b").shape
    windows = sorted((g.window_tokens, g.count) for g in gpt.groups)
    assert windows == [(128.0, 18), (float("inf"), 18)]
    nxt = catalog.get_model("qwen3-next-80b-a3b").shape
    linear = [g for g in nxt.groups if g.kv_bytes_per_token == 0]
    assert sum(g.count for g in linear) == 36 and all(g.state_bytes > 0 for g in linear)


def test_gpus():
    h100, h200 = catalog.get_gpu("h100-sxm"), catalog.get_gpu("h200")
    assert h100.hbm_bytes_per_s == 3.35e12 and h200.hbm_bytes_per_s == 4.8e12
    assert h100.bf16_flops_per_s == h200.bf16_flops_per_s == 989e12
    assert h100.ridge_flops_per_byte == pytest.approx(295, abs=1)


def test_drafters_reference_known_models():
    for name in catalog.drafter_names():
        d = catalog.get_drafter(name)
        for target in d.targets:
            assert target in catalog.model_names()
        if d.kind == "dense":
            assert not catalog.get_model(d.model).is_moe
        elif d.kind == "mtp":  # the target's own modules: it must have them
            for target in d.targets:
                assert catalog.get_model(target).mtp_layers >= d.num_layers >= 1
        elif d.kind == "ngram":  # no weights, every target
            assert d.head_weight_bytes() == 0 and not d.targets and not d.model
            assert all(d.serves(m) for m in catalog.model_names())
        else:  # one layer and a draft-vocabulary LM head: SpecForge's DeepSeek-V3 head, the
            # largest published, is 2.9 GB; a head stays a few % of its target at most
            for target in d.targets:
                target_bytes = catalog.get_model(target).shape.total_weight_bytes
                assert 0.05e9 < d.head_weight_bytes() < min(4e9, 0.05 * target_bytes)


def test_every_drafter_documents_its_acceptance_or_says_it_has_none():
    """A default acceptance rests on two independent sources; a drafter without one says so,
    that the table's assumed alpha applies, and what to enter instead."""
    from simspec.text.acceptance import AcceptanceConfig

    assumed = f"assumed alpha ({AcceptanceConfig().alpha:g})"
    for name in catalog.drafter_names():
        d = catalog.get_drafter(name)
        if d.default_acceptance_length:
            sources = [s for s in d.default_acceptance_source.split(";") if s.strip()]
            assert len(sources) >= 2, name
            assert len(d.default_acceptance_setting) == 3, name
            if d.deep_acceptance_length:  # a deeper measurement rests on two sources too
                deep = [s for s in d.deep_acceptance_source.split(";") if s.strip()]
                assert len(deep) >= 2, name
                assert d.deep_acceptance_setting[0] > d.default_acceptance_setting[0], name
            continue
        assert "No default acceptance" in d.notes, name
        assert assumed in d.notes, name
        for key in ("acceptance_length", "acceptance_setting", "position_acceptance"):
            assert key in d.notes, (name, key)


def test_unknown_name_raises_keyerror():
    with pytest.raises(KeyError):
        catalog.get_model("no-such-model")


@pytest.mark.parametrize("kind", ["models", "drafters", "gpus", "engines"])
def test_names_are_the_sorted_file_names_and_every_entry_names_itself(kind):
    from importlib import resources

    folder = resources.files("simspec.catalog").joinpath(kind)
    stems = sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))
    names = {
        "models": catalog.model_names,
        "drafters": catalog.drafter_names,
        "gpus": catalog.gpu_names,
        "engines": catalog.engine_names,
    }[kind]()
    assert names == stems and len(names) >= 4
    for name in names:  # each parses strictly (on first use) and repeats its file name
        assert catalog._get(kind, name).name == name


def test_an_entry_is_parsed_on_first_use_and_a_broken_one_spoils_only_itself(tmp_path, monkeypatch):
    from simspec.errors import InputError

    source = catalog._files("gpus")["h100-sxm"].read_text(encoding="utf-8")
    (tmp_path / "good.toml").write_text(source.replace('"h100-sxm"', '"good"', 1))
    (tmp_path / "misnamed.toml").write_text(source)  # says "h100-sxm"
    files = {"good": tmp_path / "good.toml", "misnamed": tmp_path / "misnamed.toml"}
    monkeypatch.setattr(catalog, "_files", lambda kind: files)
    catalog._entry.cache_clear()
    try:
        assert catalog.gpu_names() == ["good", "misnamed"]  # listing parses nothing
        assert catalog._entry.cache_info().currsize == 0
        assert catalog.get_gpu("good").name == "good"
        with pytest.raises(InputError, match=r"misnamed\.toml"):
            catalog.get_gpu("misnamed")
        with pytest.raises(KeyError):
            catalog.get_gpu("absent")
    finally:
        catalog._entry.cache_clear()
