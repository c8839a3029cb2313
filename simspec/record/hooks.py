"""Router hooks: which experts a Hugging Face MoE model's routers choose, token by token.

Every MoE family of ``transformers`` keeps its router as a submodule of the decoder layer's
sparse block: ``mlp.gate`` (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V2/V3) or
``mlp.router`` (gpt-oss); older releases named Mixtral's ``block_sparse_moe.gate``. A forward
hook on each router sees what the router returned for the tokens of that forward pass. Since
``transformers`` 5 a router returns ``(logits, weights, indices)``: the hook keeps the integer
tensor, the router's own top-k, so family-specific rules (DeepSeek's group-limited top-k and
score-correction bias, gpt-oss's top-k before the softmax) are recorded exactly as the model
applies them. A router that returns only logits (a plain ``nn.Linear`` gate, ``transformers``
4) is read as softmax top-k, i.e. top-k of the logits — exact for the families whose router is
a plain softmax top-k (Mixtral, Qwen-MoE, OLMoE), and refused for the grouped ones.

:class:`RouterRecorder` is the hook set; :func:`tiny_model` builds a small randomly initialised
model of a family from its config class (tests and the shipped example trace: no weights can be
downloaded here). torch and transformers are imported lazily, inside the functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Attribute paths of a decoder layer's router, tried in order.
ROUTER_PATHS = ("mlp.gate", "mlp.router", "block_sparse_moe.gate")


@dataclass(frozen=True, slots=True)
class Family:
    """A MoE family of ``transformers``: its config/model classes and a tiny config."""

    config_class: str
    model_class: str
    grouped: bool  # top-k needs more than the logits (group limits, bias): router output only
    tiny: dict[str, Any] = field(default_factory=dict)


_ATTENTION = {"num_attention_heads": 4, "num_key_value_heads": 2}
_MLA = {  # DeepSeek's multi-head latent attention: as many KV heads as query heads
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
}
_DEEPSEEK = {"n_group": 2, "topk_group": 1, "first_k_dense_replace": 0, "n_shared_experts": 1}

#: The families :func:`tiny_model` can build, by a short name.
FAMILIES: dict[str, Family] = {
    "mixtral": Family("MixtralConfig", "MixtralForCausalLM", False, _ATTENTION),
    "qwen2_moe": Family(
        "Qwen2MoeConfig",
        "Qwen2MoeForCausalLM",
        False,
        {**_ATTENTION, "shared_expert_intermediate_size": 16, "decoder_sparse_step": 1},
    ),
    "qwen3_moe": Family(
        "Qwen3MoeConfig",
        "Qwen3MoeForCausalLM",
        False,
        {**_ATTENTION, "head_dim": 8, "decoder_sparse_step": 1},
    ),
    "olmoe": Family("OlmoeConfig", "OlmoeForCausalLM", False, _ATTENTION),
    "deepseek_v2": Family(
        "DeepseekV2Config",
        "DeepseekV2ForCausalLM",
        True,
        {**_MLA, **_DEEPSEEK, "topk_method": "group_limited_greedy"},
    ),
    "deepseek_v3": Family("DeepseekV3Config", "DeepseekV3ForCausalLM", True, {**_MLA, **_DEEPSEEK}),
    "gpt_oss": Family(
        "GptOssConfig",
        "GptOssForCausalLM",
        True,
        {**_ATTENTION, "head_dim": 8, "sliding_window": 16},
    ),
}


def available_families() -> tuple[list[str], dict[str, str]]:
    """(families the installed ``transformers`` has, {missing family: why})."""
    import transformers

    have, missing = [], {}
    for name, family in FAMILIES.items():
        if hasattr(transformers, family.config_class) and hasattr(transformers, family.model_class):
            have.append(name)
        else:
            missing[name] = f"transformers {transformers.__version__} has no {family.config_class}"
    return have, missing


def tiny_model(
    family: str,
    *,
    layers: int = 2,
    experts: int = 8,
    top_k: int = 2,
    hidden: int = 32,
    vocab: int = 64,
    seed: int = 0,
) -> Any:
    """A small randomly initialised causal LM of ``family`` (eval mode, float32, CPU).

    The initialisation draws from a forked torch generator seeded with ``seed``, so the model
    is the same on every call and the caller's torch random state is untouched.
    """
    import torch
    import transformers

    spec = FAMILIES[family]
    kwargs = {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": hidden,
        "moe_intermediate_size": max(hidden // 2, 4),
        "num_hidden_layers": layers,
        "max_position_embeddings": 1024,
        "num_experts_per_tok": top_k,
        # each family reads its own name for the routed-expert count
        "num_experts": experts,
        "num_local_experts": experts,
        "n_routed_experts": experts,
        "tie_word_embeddings": False,
        **spec.tiny,
    }
    if family == "deepseek_v2" and experts % spec.tiny["n_group"]:
        raise ValueError(f"deepseek_v2 needs experts divisible by n_group = {spec.tiny['n_group']}")
    config = getattr(transformers, spec.config_class)(**kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(transformers, spec.model_class)(config)
    return model.eval()


def early_exit_drafter(target: Any, family: str, drafter_layers: int, **sizes: Any) -> Any:
    """A drafter made of ``target``'s embeddings, first ``drafter_layers`` layers and LM head.

    ``sizes`` are the :func:`tiny_model` arguments ``target`` was built with.

    Exiting early from the target's own stack is a drafter that needs no training (LayerSkip;
    Elhoushi et al. 2024, arXiv 2404.16710): for a tiny random model it gives drafts that
    agree with the target often but not always, as a trained drafter does.
    """
    drafter = tiny_model(family, **{**sizes, "layers": drafter_layers})
    own = drafter.state_dict()
    drafter.load_state_dict({k: v for k, v in target.state_dict().items() if k in own})
    return drafter.eval()


def router_modules(model: Any) -> list[tuple[int, Any]]:
    """(decoder layer index, router module) of every MoE layer of ``model``, in depth order."""
    decoder = getattr(model, "model", model)
    found = []
    for index, layer in enumerate(getattr(decoder, "layers", [])):
        for path in ROUTER_PATHS:
            module: Any = layer
            for part in path.split("."):
                module = getattr(module, part, None)
                if module is None:
                    break
            if module is not None:  # dense layers have ``mlp.gate_proj``, no ``mlp.gate``
                found.append((index, module))
                break
    return found


def experts_per_token(model: Any) -> int:
    """k_e from the model's config."""
    return int(model.config.num_experts_per_tok)


def num_routed_experts(model: Any) -> int:
    """N from the model's config (families name it differently)."""
    config = model.config
    for key in ("n_routed_experts", "num_local_experts", "num_experts"):
        value = getattr(config, key, None)
        if value:
            return int(value)
    raise ValueError("the model's config names no routed-expert count")


class RouterRecorder:
    """Forward hooks on every router of a model, collecting each call's top-k expert ids.

    Use as a context manager; after a forward pass, :meth:`take` returns the ids of that pass's
    tokens, (tokens, MoE layers, k_e), in the order the router saw them (batch-major).
    """

    def __init__(self, model: Any, *, grouped: bool = False):
        self.model = model
        self.routers = router_modules(model)
        if not self.routers:
            raise ValueError("no MoE router found (looked for " + ", ".join(ROUTER_PATHS) + ")")
        self.k = experts_per_token(model)
        self.grouped = grouped
        self._calls: list[list[np.ndarray]] = [[] for _ in self.routers]
        self._handles: list[Any] = []

    @property
    def layers(self) -> np.ndarray:
        """Decoder layer index of each MoE layer."""
        return np.array([index for index, _ in self.routers], dtype=np.int64)

    def _hook(self, slot: int) -> Any:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            self._calls[slot].append(self._top_k(output))

        return hook

    def _top_k(self, output: Any) -> np.ndarray:
        import torch

        parts = output if isinstance(output, tuple | list) else (output,)
        ids = [p for p in parts if torch.is_tensor(p) and not p.is_floating_point()]
        if ids:
            return ids[0].detach().reshape(-1, ids[0].shape[-1]).cpu().numpy().astype(np.int64)
        if self.grouped:
            raise ValueError(
                "this router returns only logits, and its family's top-k is grouped or biased: "
                "record with transformers >= 5, whose routers return their own indices"
            )
        logits = parts[0].detach().reshape(-1, parts[0].shape[-1])
        return torch.topk(logits.float(), self.k, dim=-1).indices.cpu().numpy().astype(np.int64)

    def __enter__(self) -> RouterRecorder:
        self._handles = [
            m.register_forward_hook(self._hook(i)) for i, (_, m) in enumerate(self.routers)
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def take(self) -> np.ndarray:
        """Ids of the calls since the last take, (tokens, layers, k_e); clears them."""
        per_layer = [np.concatenate(calls) if calls else None for calls in self._calls]
        self._calls = [[] for _ in self.routers]
        if any(ids is None for ids in per_layer):
            raise ValueError("a router was not called during the forward pass")
        return np.stack(per_layer, axis=1)  # type: ignore[arg-type]


@contextlib.contextmanager
def recording(model: Any, *, grouped: bool = False) -> Iterator[RouterRecorder]:
    """``with recording(model) as rec:`` — hooks on while the block runs."""
    with RouterRecorder(model, grouped=grouped) as recorder:
        yield recorder
