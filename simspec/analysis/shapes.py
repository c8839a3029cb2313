"""Speculation as the engines spell it: draft shapes, the grid `recommend` searches, the flags.

SGLang runs a speculative step as ``--speculative-num-steps`` (draft steps: the tree's depth,
simspec's fixed k), ``--speculative-eagle-topk`` (candidates kept per step, ``[speculation]
topk``) and ``--speculative-num-draft-tokens`` (tokens verified, the root included,
``[speculation] num_draft_tokens``); with topk = 1 it is a chain and SGLang aligns the last to
steps + 1. vLLM runs a chain of ``num_speculative_tokens`` drafts, or a tree given as
``speculative_token_tree``, the verified nodes as 0-based rank paths (``num_speculative_tokens``
is then their number). Sources: docs.sglang.ai/advanced_features/server_arguments.html,
docs.vllm.ai/en/latest/api/vllm/config/speculative/.

An n-gram drafter (:mod:`simspec.physics.drafters`) drafts chains only, spelled as each engine
names prompt lookup: vLLM ``{"method": "ngram", "num_speculative_tokens": k,
"prompt_lookup_min": .., "prompt_lookup_max": ..}`` (the drafter's windows), SGLang
``--speculative-algorithm NGRAM --speculative-num-draft-tokens k + 1`` with a trie walk one
node wide (``--speculative-ngram-max-bfs-breadth 1``; SGLang's NGRAM takes no step count:
its tree's depth is the draft tokens it verifies), python/sglang/srt/server_args.py.

**The grid** (:func:`grid`): steps 1..S (the drafter's ``max_draft_tokens`` unless limited),
topk in T (default 1, 2, 4, 8); a chain verifies steps + 1 tokens, a tree (topk > 1) each size
of N (default :data:`TREE_SIZES`) from steps + 1 to the tree's capacity + 1,
topk + (steps − 1)·topk² nodes and the root. Sizes outside that range are no new shapes: a
larger one is clamped to the full tree (a duplicate), a smaller one never verifies the deepest
steps it drafts (the tree of n − 1 steps verifies the same nodes with less drafting).

**Dominance** (:func:`prune`, exact): two shapes with the same verified tree verify the same
tokens and accept the same ones on the same reference sequences (the rank of the target's token
is drawn once per position whatever topk: :func:`simspec.text.tree.draw_rank_paths`); the one
with fewer draft steps, or with a smaller topk (fewer draft rows at every later step), spends
less. A shape whose verified tree is that of (steps − 1, topk, n) or of (steps, topk', n) with
topk' < topk is dropped. Trees are built from the acceptance process's nominal per-depth alphas,
as the engine builds them (:class:`simspec.sim.tree.TreeSpeculation`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from simspec.physics.drafters import DrafterSpec
from simspec.text.tree import ROOT, build_tree, tree_capacity

#: topk searched by default (SGLang's --speculative-eagle-topk choices).
TOPKS = (1, 2, 4, 8)
#: Tree sizes (num_draft_tokens, root included) searched by default.
TREE_SIZES = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: The engines whose flags `recommend` prints.
ENGINES = ("sglang", "vllm")

SGLANG_FLAGS = (
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)


@dataclass(frozen=True, order=True, slots=True)
class DraftShape:
    """One speculative step as SGLang's three flags (module docstring)."""

    steps: int
    topk: int
    num_draft_tokens: int

    @property
    def is_chain(self) -> bool:
        """One candidate per step: the chain of ``steps`` drafts."""
        return self.topk == 1

    @property
    def text(self) -> str:
        """``(steps, topk, num_draft_tokens)``, as papers and issues write SGLang settings."""
        return f"({self.steps}, {self.topk}, {self.num_draft_tokens})"

    def speculation(self) -> dict[str, int]:
        """The ``[speculation]`` keys that run this shape (a chain: simspec's plain chain)."""
        if self.is_chain:
            return {"speculation.topk": 1, "speculation.num_draft_tokens": 0}
        return {
            "speculation.topk": self.topk,
            "speculation.num_draft_tokens": self.num_draft_tokens,
        }


def chain(steps: int) -> DraftShape:
    """The chain of ``steps`` drafts: (steps, 1, steps + 1)."""
    return DraftShape(steps, 1, steps + 1)


def grid(
    max_steps: int, topks: Sequence[int] = TOPKS, sizes: Sequence[int] = TREE_SIZES
) -> list[DraftShape]:
    """Every shape of the grid (module docstring), by topk, then size, then steps."""
    out = []
    for topk in sorted(set(topks)):
        for steps in range(1, max_steps + 1):
            if topk == 1:
                out.append(chain(steps))
                continue
            top = tree_capacity(steps, topk) + 1
            out += [DraftShape(steps, topk, n) for n in sorted(set(sizes)) if steps + 1 <= n <= top]
    return sorted(out, key=lambda s: (s.topk, s.num_draft_tokens, s.steps))


#: A shape's verified tree as its set of nodes (rank paths, 1-based ranks).
TreeOf = Callable[[DraftShape], frozenset[tuple[int, ...]]]


def tree_builder(alphas: Sequence[float], rank_decay: float) -> TreeOf:
    """The verified tree of a shape under per-depth ``alphas`` (memoised)."""
    memo: dict[DraftShape, frozenset[tuple[int, ...]]] = {}

    def nodes(shape: DraftShape) -> frozenset[tuple[int, ...]]:
        if shape not in memo:
            per_depth = [float(a) for a in alphas[: shape.steps]]
            n = shape.num_draft_tokens
            tree = build_tree(per_depth, shape.steps, shape.topk, n, rank_decay)
            memo[shape] = frozenset(tree.graph.nodes)
        return memo[shape]

    return nodes


def dominated_by(
    shape: DraftShape, tree_of: TreeOf, among: Iterable[DraftShape]
) -> DraftShape | None:
    """A cheaper shape of ``among`` verifying the same tree (module docstring), or None."""
    mine = tree_of(shape)
    cheaper = [
        other
        for other in among
        if other.num_draft_tokens == shape.num_draft_tokens
        and (
            (other.topk == shape.topk and other.steps == shape.steps - 1)
            or (other.steps == shape.steps and other.topk < shape.topk)
        )
    ]
    return next((c for c in sorted(cheaper) if tree_of(c) == mine), None)


def prune(shapes: Sequence[DraftShape], tree_of: TreeOf) -> list[DraftShape]:
    """``shapes`` without those another of them dominates, in order."""
    return [s for s in shapes if dominated_by(s, tree_of, shapes) is None]


# -- flags -----------------------------------------------------------------------------------------
def token_tree(nodes: Iterable[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """vLLM's ``speculative_token_tree``: the draft nodes as 0-based rank paths, by depth."""
    paths = [tuple(r - 1 for r in v) for v in nodes if v != ROOT]
    return sorted(paths, key=lambda p: (len(p), p))


def sglang_flags(shape: DraftShape) -> str:
    """The SGLang server arguments of ``shape``."""
    values = (shape.steps, shape.topk, shape.num_draft_tokens)
    return " ".join(f"{flag} {v}" for flag, v in zip(SGLANG_FLAGS, values, strict=True))


def vllm_config(shape: DraftShape, tree_of: TreeOf) -> dict[str, object]:
    """vLLM's ``speculative_config`` entries of ``shape``: a chain's length, or the tree."""
    if shape.is_chain:
        return {"num_speculative_tokens": shape.steps}
    paths = token_tree(tree_of(shape))
    text = "[" + ", ".join(str(p) for p in paths) + "]"
    return {"num_speculative_tokens": len(paths), "speculative_token_tree": text}


def vllm_flags(shape: DraftShape, tree_of: TreeOf) -> str:
    """``--speculative-config '{...}'`` for ``shape`` (merge method and model into it)."""
    return "--speculative-config " + shlex.quote(json.dumps(vllm_config(shape, tree_of)))


def ngram_flags(engine: str, shape: DraftShape, drafter: DrafterSpec) -> str:
    """The flags ``engine`` runs the n-gram chain ``shape`` with (module docstring)."""
    if not shape.is_chain:
        raise ValueError(f"an n-gram drafter drafts chains, not {shape.text}")
    if engine == "sglang":
        return (
            f"--speculative-algorithm NGRAM --speculative-num-draft-tokens {shape.steps + 1} "
            "--speculative-ngram-max-bfs-breadth 1"
        )
    config: dict[str, object] = {"method": "ngram", "num_speculative_tokens": shape.steps}
    if drafter.prompt_lookup_max:
        config["prompt_lookup_min"] = drafter.prompt_lookup_min or drafter.prompt_lookup_max
        config["prompt_lookup_max"] = drafter.prompt_lookup_max
    return "--speculative-config " + shlex.quote(json.dumps(config))


def flags(
    engine: str, shape: DraftShape, tree_of: TreeOf, drafter: DrafterSpec | None = None
) -> str:
    """The flags ``engine`` (one of :data:`ENGINES`) runs ``shape`` with; an n-gram
    ``drafter``'s in its engine's spelling (:func:`ngram_flags`)."""
    if engine in ENGINES and drafter is not None and drafter.kind == "ngram":
        return ngram_flags(engine, shape, drafter)
    if engine == "sglang":
        return sglang_flags(shape)
    if engine == "vllm":
        return vllm_flags(shape, tree_of)
    raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")


def parse_sglang(text: str) -> DraftShape:
    """The shape of SGLang flags (:func:`sglang_flags`'s inverse)."""
    words = shlex.split(text)
    values = {flag: int(words[words.index(flag) + 1]) for flag in SGLANG_FLAGS}
    return DraftShape(*(values[flag] for flag in SGLANG_FLAGS))


def parse_vllm(text: str) -> tuple[int, tuple[tuple[int, ...], ...] | None]:
    """``num_speculative_tokens`` and the token tree (None: a chain) of vLLM flags."""
    import ast

    words = shlex.split(text)
    config = json.loads(words[words.index("--speculative-config") + 1])
    tree = config.get("speculative_token_tree")
    paths = None if tree is None else tuple(tuple(p) for p in ast.literal_eval(tree))
    return int(config["num_speculative_tokens"]), paths
