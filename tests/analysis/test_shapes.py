"""Draft shapes as engines spell them: the grid, dominance, the flags and their parse-back."""

from __future__ import annotations

import shlex

import pytest

from simspec.analysis.guardrails import K_AT_EDGE, best_shape_at_edge
from simspec.analysis.shapes import (
    DraftShape,
    chain,
    dominated_by,
    grid,
    parse_sglang,
    parse_vllm,
    prune,
    sglang_flags,
    token_tree,
    tree_builder,
    vllm_flags,
)
from simspec.config.aliases import expand_aliases
from simspec.text.tree import tree_capacity
from tests.helpers import tiny

TREE_OF = tree_builder([0.7] * 8, 0.65)
GRID = grid(8)


def test_the_grid_holds_only_shapes_the_engine_runs_differently():
    assert len(set(GRID)) == len(GRID)
    for s in GRID:
        if s.is_chain:
            assert s == chain(s.steps)
        else:
            assert s.steps + 1 <= s.num_draft_tokens <= tree_capacity(s.steps, s.topk) + 1
    assert [s for s in GRID if s.is_chain] == [chain(k) for k in range(1, 9)]


@pytest.mark.parametrize("shape", GRID, ids=[s.text for s in GRID])
def test_sglang_flags_parse_back_into_the_same_shape(shape):
    text = sglang_flags(shape)
    assert parse_sglang(text) == shape
    # ... and through simspec's own reader of the engine's names (--set aliases)
    words = shlex.split(text)
    pairs = [(words[i].removeprefix("--"), int(words[i + 1])) for i in range(0, len(words), 2)]
    keys = dict(expand_aliases(pairs))
    assert keys["policies"] == [{"name": "fixed", "draft_tokens": shape.steps}]
    assert keys["speculation.topk"] == shape.topk
    assert keys["speculation.num_draft_tokens"] == shape.num_draft_tokens


@pytest.mark.parametrize("shape", GRID[::5], ids=[s.text for s in GRID[::5]])
def test_vllm_flags_parse_back_into_the_same_tree(shape):
    count, paths = parse_vllm(vllm_flags(shape, TREE_OF))
    if shape.is_chain:
        assert (count, paths) == (shape.steps, None)
        return
    assert paths is not None and count == len(paths) == shape.num_draft_tokens - 1
    nodes = {tuple(r + 1 for r in p) for p in paths}
    assert nodes == set(TREE_OF(shape)) - {()}
    assert list(paths) == token_tree(TREE_OF(shape))
    assert all(p[:-1] in {*paths, ()} for p in paths)  # every parent is verified


def test_a_dominated_shape_verifies_its_dominators_tree():
    pruned = prune(GRID, TREE_OF)
    assert chain(3) in pruned and len(pruned) < len(GRID)
    for shape in set(GRID) - set(pruned):
        cheaper = dominated_by(shape, TREE_OF, GRID)
        assert cheaper is not None and cheaper in GRID
        assert TREE_OF(cheaper) == TREE_OF(shape)
        assert (cheaper.steps, cheaper.topk) < (shape.steps, shape.topk)


def test_dominated_shapes_are_never_faster_in_the_engine():
    """Same tree, fewer steps or a smaller topk: the same acceptance at no more cost."""
    from simspec.analysis.shape_search import _tree_of

    scenario = tiny("routing.mode='analytic'")
    small = grid(4, (1, 2, 4), (3, 4, 6, 8, 12))
    tree_of = _tree_of(scenario)
    pairs = [(s, dominated_by(s, tree_of, small)) for s in small]
    pairs = [(s, c) for s, c in pairs if c is not None]
    assert pairs
    from simspec.analysis.shape_search import _speedups

    values, _ = _speedups(scenario, sorted({x for p in pairs for x in p}), 1)
    for shape, cheaper in pairs:
        assert values[shape][0] <= values[cheaper][0] + 1e-12, (shape, cheaper)


SEARCHED = ([1, 2, 3, 4], [1, 2, 4], [3, 4, 6, 8])


@pytest.mark.parametrize("steps", SEARCHED[0])
@pytest.mark.parametrize("topk", SEARCHED[1])
@pytest.mark.parametrize("size", SEARCHED[2])
def test_the_edge_warning_fires_exactly_on_the_edge(steps, topk, size):
    warning = best_shape_at_edge(steps, topk, size, SEARCHED, limit=8)
    on_edge = steps == 4 or topk == 4 or (topk > 1 and size == 8)
    assert (warning is not None) == on_edge
    if warning is not None:
        assert warning.startswith(f"{K_AT_EDGE}: the best shape ({steps}, {topk}, {size})")
        assert ("--max-k 8" in warning) == (steps == 4)
        assert ("--topk 1,2,4,8" in warning) == (topk == 4)
        assert ("--num-draft-tokens 3,4,6,8,16" in warning) == (topk > 1 and size == 8)


def test_at_the_drafters_limit_no_larger_depth_is_offered():
    warning = best_shape_at_edge(8, 2, 6, ([*range(1, 9)], [1, 2, 4], [6, 8]), limit=8)
    assert warning is not None and "max_draft_tokens = 8" in warning and "--max-k" not in warning


def test_shape_text_and_speculation_keys():
    assert DraftShape(3, 4, 16).text == "(3, 4, 16)"
    assert chain(3).speculation() == {"speculation.topk": 1, "speculation.num_draft_tokens": 0}
    assert DraftShape(3, 4, 16).speculation()["speculation.num_draft_tokens"] == 16


@pytest.mark.parametrize("k", [1, 3, 8])
def test_an_ngram_chain_in_each_engines_prompt_lookup_flags(k):
    import json

    from simspec import catalog
    from simspec.analysis.shapes import flags

    drafter = catalog.get_drafter("ngram")
    text = flags("vllm", chain(k), TREE_OF, drafter)
    assert parse_vllm(text) == (k, None)
    config = json.loads(shlex.split(text)[1])
    assert config == {
        "method": "ngram",
        "num_speculative_tokens": k,
        "prompt_lookup_min": drafter.prompt_lookup_min,
        "prompt_lookup_max": drafter.prompt_lookup_max,
    }
    words = shlex.split(flags("sglang", chain(k), TREE_OF, drafter))
    assert words[words.index("--speculative-algorithm") + 1] == "NGRAM"
    assert int(words[words.index("--speculative-num-draft-tokens") + 1]) == k + 1  # root too
    assert words[words.index("--speculative-ngram-max-bfs-breadth") + 1] == "1"
    with pytest.raises(ValueError, match="chains"):
        flags("sglang", DraftShape(3, 2, 6), TREE_OF, drafter)
    # Any other drafter keeps the EAGLE spelling.
    head = catalog.get_drafter("eagle3-qwen3-30b-a3b")
    assert flags("vllm", chain(k), TREE_OF, head) == vllm_flags(chain(k), TREE_OF)
