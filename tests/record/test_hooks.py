"""Recording traces: the router hooks record the router's own top-k, for every MoE family.

The family tests build tiny randomly initialised models from each family's config class
(``transformers``, the ``record`` extra), capture every router's input with a second hook, and
recompute the top-k independently from the gate weights with the family's published rule; they
are slow (model construction and the ``transformers`` import take seconds).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from simspec.record.hooks import RouterRecorder, router_modules  # noqa: E402


class _Router(nn.Module):
    """A transformers-5-style router: returns (logits, weights, indices)."""

    def __init__(self, hidden: int, experts: int, k: int, indices: bool):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(experts, hidden, generator=_GEN))
        self.k, self.indices = k, indices

    def forward(self, x):
        logits = x.reshape(-1, x.shape[-1]) @ self.weight.T
        if not self.indices:
            return logits  # a transformers-4-style nn.Linear gate
        weights, ids = torch.topk(torch.softmax(logits, -1), self.k, dim=-1)
        return logits, weights, ids


_GEN = torch.Generator().manual_seed(0)


class _Block(nn.Module):
    def __init__(self, hidden, experts, k, indices, dense=False):
        super().__init__()
        self.mlp = nn.Module()
        if dense:
            self.mlp.gate_proj = nn.Linear(hidden, hidden)
        else:
            self.mlp.gate = _Router(hidden, experts, k, indices)

    def forward(self, x):
        if hasattr(self.mlp, "gate"):
            self.mlp.gate(x)
        return x + 0.1 * torch.tanh(x)


class _Fake(nn.Module):
    """A decoder stack with one dense layer between two MoE layers."""

    def __init__(self, indices=True):
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(
            [
                _Block(16, 6, 2, indices),
                _Block(16, 6, 2, indices, dense=True),
                _Block(16, 6, 2, indices),
            ]
        )
        self.config = type("Config", (), {"num_experts_per_tok": 2, "num_experts": 6})()

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return x


def _expected(model, x):
    """Top-2 of the softmax of each MoE layer's logits, recomputed by hand."""
    out = []
    for layer in model.model.layers:
        if hasattr(layer.mlp, "gate"):
            logits = (x.reshape(-1, 16) @ layer.mlp.gate.weight.T).detach().numpy()
            out.append(np.sort(np.argsort(-logits, axis=1)[:, :2], axis=1))
        x = layer(x)
    return np.stack(out, axis=1)


@pytest.mark.parametrize("indices", [True, False], ids=["router-indices", "logits-only"])
def test_hooks_record_each_moe_layers_top_k(indices):
    model = _Fake(indices)
    assert [i for i, _ in router_modules(model)] == [0, 2]  # the dense layer has no gate
    x = torch.randn(1, 5, 16, generator=_GEN)
    with torch.no_grad(), RouterRecorder(model) as recorder:
        model(x)
        ids = recorder.take()
        assert recorder.layers.tolist() == [0, 2]
    assert ids.shape == (5, 2, 2)
    assert np.array_equal(np.sort(ids, axis=2), _expected(model, x))
    with torch.no_grad():
        model(x)  # hooks removed on exit: nothing more is recorded
    assert not any(recorder._calls[0])


def test_grouped_families_refuse_logits_only_routers():
    model = _Fake(indices=False)
    with (
        torch.no_grad(),
        RouterRecorder(model, grouped=True),
        pytest.raises(ValueError, match="grouped"),
    ):
        model(torch.randn(1, 3, 16))


def test_a_model_without_routers_is_refused():
    dense = nn.Module()
    dense.model = nn.Module()
    dense.model.layers = nn.ModuleList([_Block(16, 6, 2, True, dense=True)])
    with pytest.raises(ValueError, match="no MoE router"):
        RouterRecorder(dense)
