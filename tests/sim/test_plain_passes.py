"""The k = 0 passes the engine prices in bulk: each total equals the pass priced alone."""

from __future__ import annotations

import numpy as np

from simspec import catalog
from simspec.costs.roofline import RooflineCostModel
from simspec.sim.engine import PlainPasses


def test_bulk_totals_equal_single_passes_across_chunks_and_batch_sizes(monkeypatch):
    model = RooflineCostModel(
        target=catalog.get_model("qwen3-30b-a3b"),
        drafter=catalog.get_drafter("eagle3-qwen3-30b-a3b"),
        gpu=catalog.get_gpu("h100-sxm"),
    )
    monkeypatch.setattr(PlainPasses, "CHUNK", 3)  # flushes mid-way, and a remainder at the end
    passes = PlainPasses(model)
    rng = np.random.default_rng(7)
    layers = model.target.shape.num_moe_layers
    want = {}
    for step in range(11):
        batch = (4, 5, 1)[step % 3]
        contexts = rng.integers(1, 5000, size=batch)
        unique = rng.uniform(8, 100, size=layers)
        ones = np.ones(batch, dtype=np.int64)
        want[step * 2] = model.verify_pass(ones, contexts, unique).total_s
        passes.add(step * 2, contexts, unique)
    got = passes.totals()
    assert got == want  # every step, bit for bit
    assert passes.totals() == want  # asking again prices nothing twice
