"""`recommend` in an engine's flags: per batch size, the best draft shape, its CI, the runners-up.

An SGLang user chooses (steps, topk, num_draft_tokens), a vLLM user ``num_speculative_tokens``
(and a token tree): :mod:`simspec.analysis.shapes` spells them and builds the grid. Running
every shape of the grid under R replications costs one simulated policy per shape and
replication; the search cuts that in three steps, the first two exact:

1. **the grid** holds only shapes the engine runs differently (tree sizes within
   [steps + 1, capacity + 1]);
2. **dominance**: a shape verifying the same tree as a cheaper one is dropped
   (:func:`~simspec.analysis.shapes.prune`);
3. **screen, then finals** (coarse to fine in fidelity; a grid of at most
   :data:`SCREEN_ABOVE` shapes skips the screen): every remaining shape runs once, under
   the scenario's seed on a shortened workload (:func:`screen_scenario`, about
   1/:data:`SCREEN_FRACTION` of its output tokens, sampled routing priced analytically);
   the screen's best :data:`FINALISTS` shapes, any other within :data:`SCREEN_MARGIN` of its
   best (up to :data:`MAX_FINALISTS`) and the best screened chain run under all R
   replications on the full workload, in the scenario's own routing. The finals
   alone decide: the best shape has the highest mean speedup (fewest verified tokens, then
   fewest steps, on ties); a runner-up is a finalist whose paired 95 % interval of the
   speedup difference to the best contains 0 (:class:`~simspec.analysis.recommend.Candidate`).
   A test checks the screen against the brute-force grid on small scenarios.

Shapes sharing (topk, num_draft_tokens) run together, as the fixed-k policies of one scenario.
Every run of one replication sees the same reference sequences, rank paths and k = 0 baseline
(common random numbers), so differences between shapes of different runs are paired too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simspec.analysis import experiment
from simspec.analysis.experiment import Progress
from simspec.analysis.guardrails import (
    PRESET_RANGE,
    PUBLISHED_MISS,
    acceptance_warning,
    best_shape_at_edge,
    within_error_warning,
)
from simspec.analysis.recommend import Candidate, batch_scenario
from simspec.analysis.replications import Interval, Replicated, replication_scenario
from simspec.analysis.results import RunResult
from simspec.analysis.shapes import (
    TOPKS,
    TREE_SIZES,
    DraftShape,
    TreeOf,
    chain,
    flags,
    grid,
    prune,
    tree_builder,
)
from simspec.config.load import with_overrides
from simspec.config.scenario import Scenario
from simspec.sim.setup import reference_set
from simspec.text.tree import tree_capacity

#: The screen simulates about 1/SCREEN_FRACTION of the scenario's output tokens.
SCREEN_FRACTION = 8
#: ... with at least this many output tokens per request (the last steps of a request are capped).
SCREEN_MIN_OUTPUT = 64
#: Finalists: the screen's best FINALISTS shapes, and any other whose screened speedup is
#: within SCREEN_MARGIN of the best, up to MAX_FINALISTS (the best screened chain comes on top).
FINALISTS = 6
SCREEN_MARGIN = 0.03
MAX_FINALISTS = 10
#: A grid of at most this many shapes (after dominance) is not screened: all are finalists.
SCREEN_ABOVE = 12


@dataclass(frozen=True, slots=True)
class ShapeGrid:
    """What `recommend` searches: the engine, the largest steps, the topks and tree sizes."""

    engine: str
    max_steps: int
    topks: tuple[int, ...] = TOPKS
    sizes: tuple[int, ...] = TREE_SIZES

    def shapes(self, scenario: Scenario) -> list[DraftShape]:
        """The grid's shapes for ``scenario``: every SGLang shape, or vLLM's chains and, when
        the scenario configures a tree, that tree's family at each depth; an n-gram drafter's
        chains alone (:func:`~simspec.analysis.shapes.ngram_flags`)."""
        if scenario.drafter.kind == "ngram":
            return [chain(s) for s in range(1, self.max_steps + 1)]
        if self.engine == "sglang":
            return grid(self.max_steps, self.topks, self.sizes)
        shapes = [chain(s) for s in range(1, self.max_steps + 1)]
        spec = scenario.speculation
        if spec.topk > 1:
            for s in range(1, self.max_steps + 1):
                full = tree_capacity(s, spec.topk) + 1
                n = full if spec.num_draft_tokens <= 0 else min(spec.num_draft_tokens, full)
                if n >= s + 1:
                    shapes.append(DraftShape(s, spec.topk, n))
        return shapes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "engine": self.engine,
            "steps": list(range(1, self.max_steps + 1)),
            "topk": list(self.topks) if self.engine == "sglang" else None,
            "num_draft_tokens": list(self.sizes) if self.engine == "sglang" else None,
        }


@dataclass(frozen=True, slots=True)
class Finalist:
    """One shape of the finals: its flags and its candidate (speedup, paired difference)."""

    shape: DraftShape
    flags: str
    candidate: Candidate

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        c = self.candidate
        return {
            "flags": self.flags,
            "steps": self.shape.steps,
            "topk": self.shape.topk,
            "num_draft_tokens": self.shape.num_draft_tokens,
            **c.speedup.to_dict("speedup_vs_no_spec"),
            **c.diff_vs_best.to_dict("speedup_diff_vs_best"),
            "within_noise": c.within_noise,
        }


@dataclass(frozen=True, slots=True)
class ShapeRecommendation:
    """The answer for one batch size in an engine's flags (module docstring)."""

    batch: int
    replications: int
    finalists: tuple[Finalist, ...]  # best mean speedup first
    shapes_in_grid: int
    shapes_screened: int  # after dominance
    warnings: tuple[str, ...] = ()

    @property
    def best(self) -> Finalist:
        """The recommended shape."""
        return self.finalists[0]

    @property
    def expected_speedup(self) -> Interval:
        """The speedup of running the best shape (mean and 95 % interval)."""
        return self.best.candidate.speedup

    @property
    def runners_up(self) -> tuple[Finalist, ...]:
        """The other finalists within noise of the best, best mean first."""
        return tuple(f for f in self.finalists[1:] if f.candidate.within_noise)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the best flags, the runners-up and every finalist."""
        best = self.best
        return {
            "batch": self.batch,
            "replications": self.replications,
            "flags": best.flags,
            "steps": best.shape.steps,
            "topk": best.shape.topk,
            "num_draft_tokens": best.shape.num_draft_tokens,
            **self.expected_speedup.to_dict("expected_speedup"),
            "within_noise": [f.flags for f in self.runners_up],
            "shapes_in_grid": self.shapes_in_grid,
            "shapes_screened": self.shapes_screened,
            "finalists": [f.to_dict() for f in self.finalists],
            "warnings": list(self.warnings),
        }


def screen_scenario(scenario: Scenario) -> Scenario:
    """``scenario`` (at its batch size) on about 1/:data:`SCREEN_FRACTION` of its output tokens:
    fewer requests (at least one full batch), then shorter ones (at least
    :data:`SCREEN_MIN_OUTPUT` tokens); the requests kept are the scenario's first ones. Sampled
    routing (``monte_carlo``) is screened in ``analytic`` mode, on the expected unique experts
    of the same routing statistics: the ranking the screen needs without the draws, which
    are most of a sampled run's time (the finals run the scenario's own mode)."""
    w = scenario.workload
    batch = w.concurrency if w.loop == "closed" else w.max_batch_size
    requests = min(w.num_requests, max(batch, math.ceil(w.num_requests / SCREEN_FRACTION)))
    budget = w.num_requests * w.output_tokens / SCREEN_FRACTION
    output = min(w.output_tokens, max(SCREEN_MIN_OUTPUT, math.ceil(budget / requests)))
    changes: dict[str, Any] = {"workload.num_requests": requests, "workload.output_tokens": output}
    if scenario.routing.mode == "monte_carlo":
        changes["routing.mode"] = "analytic"
    return with_overrides(scenario, changes)


def _groups(shapes: Sequence[DraftShape]) -> dict[tuple[int, int], list[DraftShape]]:
    """Shapes by the [speculation] table that runs them."""
    out: dict[tuple[int, int], list[DraftShape]] = {}
    for shape in shapes:
        spec = shape.speculation()
        key = (spec["speculation.topk"], spec["speculation.num_draft_tokens"])
        out.setdefault(key, []).append(shape)
    return out


def _group_scenario(scenario: Scenario, shapes: Sequence[DraftShape]) -> Scenario:
    """``scenario`` running ``shapes`` (one [speculation] table) as fixed-k policies."""
    policies = [{"name": "fixed", "draft_tokens": k} for k in [0, *(s.steps for s in shapes)]]
    return with_overrides(scenario, {**shapes[0].speculation(), "policies": policies})


def _speedups(
    scenario: Scenario, shapes: Sequence[DraftShape], replications: int
) -> tuple[dict[DraftShape, np.ndarray], tuple[str, ...]]:
    """Each shape's speedup over k = 0 in each replication, and the runs' preset warnings.

    The groups' scenarios differ in draft shapes and policies alone, so one replication's runs
    read one text: they share one reference set (:func:`~simspec.sim.setup.reference_set`),
    and the rejected drafts' experts, most of a Monte-Carlo run's time, are drawn once per
    replication rather than once per group, with the same ids. A replication's set is let go
    before the next one is drawn."""
    groups = list(_groups(shapes).values())
    scenarios = [_group_scenario(scenario, group) for group in groups]
    trees = any(s.speculation.is_tree for s in scenarios)
    runs: list[list[RunResult]] = [[] for _ in groups]
    for r in range(replications):
        seeded = [replication_scenario(s, r) for s in scenarios]
        shared = reference_set(seeded[0], every_k=True, trees=trees)
        for group_runs, s in zip(runs, seeded, strict=True):
            # Looked up at call time: the one driver, also when a test substitutes it.
            group_runs.append(experiment.run_experiment(s, references=shared))
        del shared
    out: dict[DraftShape, np.ndarray] = {}
    warnings: list[str] = []
    for group, group_runs in zip(groups, runs, strict=True):
        replicated = Replicated(tuple(group_runs))
        warnings += [w for w in replicated.warnings if w.startswith((PRESET_RANGE, PUBLISHED_MISS))]
        for shape in group:
            out[shape] = replicated.values(f"fixed-{shape.steps}")
    return out, tuple(dict.fromkeys(warnings))


def _order(speedup: dict[DraftShape, float]) -> list[DraftShape]:
    """Highest speedup first; on ties fewer verified tokens, then fewer steps, smaller topk."""
    return sorted(speedup, key=lambda s: (-speedup[s], s.num_draft_tokens, s.steps, s.topk))


def finalists_of(screened: dict[DraftShape, float]) -> list[DraftShape]:
    """The screen's finalists (module docstring): its best :data:`FINALISTS`, any other within
    :data:`SCREEN_MARGIN` of the best (at most :data:`MAX_FINALISTS` in all), and the best
    chain."""
    order = _order(screened)
    top = screened[order[0]]
    near = [s for s in order if screened[s] >= top - SCREEN_MARGIN * abs(top)]
    keep = order[: max(FINALISTS, min(len(near), MAX_FINALISTS))]
    chains = [s for s in order if s.is_chain]
    if chains and chains[0] not in keep:
        keep.append(chains[0])
    return keep


def search(
    scenario: Scenario,
    batch: int,
    replications: int,
    shape_grid: ShapeGrid,
    progress: Progress | None = None,
) -> ShapeRecommendation:
    """The recommendation for ``batch`` in ``shape_grid``'s engine flags (module docstring)."""
    at_batch = batch_scenario(scenario, batch, 0, [])
    tree_of = _tree_of(scenario)
    shapes = shape_grid.shapes(scenario)
    kept = prune(shapes, tree_of)
    if progress is not None:
        progress(0, 2)
    if len(kept) <= SCREEN_ABOVE:
        finals = kept
    else:
        screened, _ = _speedups(screen_scenario(at_batch), kept, 1)
        finals = finalists_of({s: float(v[0]) for s, v in screened.items()})
    if progress is not None:
        progress(1, 2)
    values, warnings = _speedups(at_batch, finals, replications)
    means = {s: float(v.mean()) for s, v in values.items()}
    order = _order(means)
    best = order[0]
    finalists = tuple(
        Finalist(
            s,
            flags(shape_grid.engine, s, tree_of, scenario.drafter),
            Candidate(s.text, Interval.of(values[s]), Interval.of(values[s] - values[best])),
        )
        for s in order
    )
    edge = best_shape_at_edge(
        best.steps,
        best.topk,
        best.num_draft_tokens,
        (
            list(range(1, shape_grid.max_steps + 1)),
            shape_grid.topks if shape_grid.engine == "sglang" else [1],
            shape_grid.sizes if shape_grid.engine == "sglang" else [],
        ),
        scenario.drafter.max_draft_tokens,
    )
    extrapolated = acceptance_warning(scenario, best.steps)
    unsettled = within_error_warning(scenario, best.text, means[best], batch)
    if progress is not None:
        progress(2, 2)
    return ShapeRecommendation(
        batch=batch,
        replications=replications,
        finalists=finalists,
        shapes_in_grid=len(shapes),
        shapes_screened=len(kept),
        warnings=(*warnings, *(w for w in (edge, extrapolated, unsettled) if w)),
    )


def planned_runs(
    scenario: Scenario, shape_grid: ShapeGrid, replications: int, *, screen: bool = True
) -> int:
    """Simulated policies :func:`search` runs at most for one batch size (for the work guard):
    the screen (about 1/:data:`SCREEN_FRACTION` of a full run per shape and per k = 0 baseline
    of each group), then each finalist and its group's baseline under every replication.
    ``screen=False`` leaves out the screen's runs: those the scenario's own routing mode
    prices (the screen of a sampled scenario runs in analytic mode, :func:`screen_scenario`)."""
    kept = prune(shape_grid.shapes(scenario), _tree_of(scenario))
    if len(kept) <= SCREEN_ABOVE:
        return (len(kept) + len(_groups(kept))) * replications
    screened = math.ceil((len(kept) + len(_groups(kept))) / SCREEN_FRACTION) if screen else 0
    return screened + 2 * (MAX_FINALISTS + 1) * replications


def _tree_of(scenario: Scenario) -> TreeOf:
    """Verified trees as the engine builds them for ``scenario`` (nominal per-depth alphas)."""
    from simspec.sim.tree import nominal_slot_alphas

    depth = scenario.drafter.max_draft_tokens
    alphas = nominal_slot_alphas(scenario.acceptance, max(depth, 1), scenario.seed)
    return tree_builder([float(a) for a in alphas], scenario.speculation.rank_decay)


def search_batches(
    scenarios: Sequence[tuple[int, Scenario]],
    replications: int,
    shape_grid: ShapeGrid,
    progress: Progress | None = None,
) -> list[ShapeRecommendation]:
    """:func:`search` for each ``(batch, scenario)``."""
    out = []
    for i, (batch, scenario) in enumerate(scenarios):

        def step(done: int, total: int, offset: int = i) -> None:
            if progress is not None:
                progress(offset * total + done, len(scenarios) * total)

        out.append(search(scenario, batch, replications, shape_grid, step))
    return out


def markdown_table(recommendations: Sequence[ShapeRecommendation]) -> str:
    """One row per batch size: the flags, the expected speedup (95 % CI), the runners-up."""
    lines = [
        "| batch | flags | (steps, topk, draft tokens) | expected speedup (95 % CI) "
        "| also within noise | shapes screened |",
        "|---:|---|---|---|---|---:|",
    ]
    for rec in recommendations:
        s = rec.expected_speedup
        ci = (
            f"{s.mean:.3f}"
            if math.isnan(s.half_width)
            else f"{s.mean:.3f} [{s.low:.3f}, {s.high:.3f}]"
        )
        ties = ", ".join(f.shape.text for f in rec.runners_up) or "none"
        lines.append(
            f"| {rec.batch} | `{rec.best.flags}` | {rec.best.shape.text} | {ci} | {ties} "
            f"| {rec.shapes_screened} of {rec.shapes_in_grid} |"
        )
    return "\n".join(lines) + "\n"
