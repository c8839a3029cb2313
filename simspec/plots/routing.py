"""Unique experts per layer against tokens per sequence, U(T): predictions and measurements.

Lines are predictions (independent routing, the max-entropy Markov chain from rho_1, the
multi-lag IPF from rho_1..rho_D; :mod:`simspec.routing.predictor`), markers are measured curves (a
routing trace, or the Monte-Carlo sampler). The y axis is in units of k_e, so U(1) = 1 and the
independent curve of a k_e/N = 1/16 model passes 3.64 at T = 4 (MoESD's formula).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from simspec.plots import new_figure, save

if TYPE_CHECKING:
    from simspec.sweep.points import PointResult


def unique_experts_figure(
    tokens: np.ndarray,
    predicted: Mapping[str, np.ndarray],
    experts_per_token: int,
    *,
    measured: Mapping[str, np.ndarray] | None = None,
    title: str = "",
    num_experts: int = 0,
) -> Any:
    """Figure of U(T) / k_e: one line per ``predicted`` curve, markers per ``measured`` one.

    Parameters
    ----------
    tokens : array (n,)
        The T values.
    predicted, measured : mapping label -> array (n,)
        Unique experts per layer (not divided by k_e) at each T.
    experts_per_token : int
        k_e, the unit of the y axis.
    title : str
        Figure title (say which popularity and overlaps the curves are for).
    num_experts : int
        N; when given and within the axis, a dashed line marks N / k_e (every expert loaded).
    """
    fig, ax = new_figure(7.6, 4.0)
    for label, values in predicted.items():
        ax.plot(tokens, np.asarray(values) / experts_per_token, label=label, linewidth=1.8)
    for label, values in (measured or {}).items():
        ax.plot(
            tokens,
            np.asarray(values) / experts_per_token,
            linestyle="none",
            marker="o",
            markersize=4,
            label=label,
        )
    curves = [*predicted.values(), *(measured or {}).values()]
    top = max((float(np.max(v)) for v in curves), default=experts_per_token) / experts_per_token
    ceiling = num_experts / experts_per_token
    if not (num_experts and ceiling <= 1.15 * top):
        ceiling = 0.0
    else:
        ax.axhline(
            ceiling, color="black", linestyle=":", linewidth=1.0, label=f"all {num_experts} experts"
        )
    ax.set_xlabel("tokens per sequence T")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # T counts tokens: no half ticks
    ax.set_ylabel("unique experts per layer / k_e")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.08 * max(top, ceiling, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    # right of the axes: inside, it would cover the rising curves or the line of all experts
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


def describe_routing(routing: Any) -> str:
    """The routing statistics a U(T) figure shows, in words: popularity and overlap profile.

    ``routing`` is a :class:`simspec.routing.config.RoutingConfig`.
    """
    law = routing.popularity
    if law == "zipf":
        law = f"Zipf popularity (s = {routing.zipf_exponent:g})"
    elif law == "dirichlet":
        law = f"Dirichlet popularity (concentration {routing.dirichlet_concentration:g})"
    else:
        law = f"{law} popularity"
    profile = routing.true_profile
    if not profile:
        overlap = "independent routing (no overlap)"
    elif len(profile) == 1:
        overlap = f"overlap rho_1 = {profile[0]:g}"
    else:
        overlap = "overlaps rho_1..rho_{} = {}".format(
            len(profile), ", ".join(f"{v:g}" for v in profile)
        )
    if routing.layer_overlap_scale is not None:
        overlap += " (scaled per layer)"
    return f"{law}, {overlap}"


def unique_experts_of_sweep(
    points: Sequence[PointResult], path: Path, *, samples: int = 200
) -> list[Path]:
    """U(T) of the sweep's most fine-grained case: independent vs overlap predictions vs
    sampled.

    The case whose target has the most routed experts (the first such case on ties), where the
    union of experts matters most; drawn for the first replication of its point with the
    smallest axis values (by their JSON text), so the figure does not depend on the order of
    the grid; the title names the case, the model's router, the popularity and overlaps drawn,
    and, with several cases, why this one.
    """
    fig = unique_experts_of_sweep_figure(points, samples=samples)
    return [] if fig is None else save(fig, path, svg=True)


def unique_experts_of_sweep_figure(points: Sequence[PointResult], *, samples: int = 200) -> Any:
    """The figure of :func:`unique_experts_of_sweep` (None when no point has MoE routing)."""
    from simspec import rng
    from simspec.config.load import scenario_from_dict
    from simspec.routing.maxent import sampled_unique_curve
    from simspec.routing.popularity import draw_inclusion_probabilities
    from simspec.routing.predictor import unique_curves

    firsts = [p for p in points if p.replication == 0]
    if not firsts:
        return None
    case_names = list(dict.fromkeys(p.case for p in firsts))
    chosen_by_case = {
        c: min(
            (p for p in firsts if p.case == c),
            key=lambda p: json.dumps(dict(p.values), sort_keys=True),
        )
        for c in case_names
    }
    scenarios = {
        c: scenario_from_dict(p.result.scenario, str(p.folder)) for c, p in chosen_by_case.items()
    }
    case = max(case_names, key=lambda c: scenarios[c].target.shape.num_experts)
    chosen, scenario = chosen_by_case[case], scenarios[case]
    shape = scenario.target.shape
    if not shape.num_moe_layers or not shape.num_experts:
        return None
    tokens = 12
    layers, n, k = shape.num_moe_layers, shape.num_experts, shape.experts_per_token
    # The inclusion probabilities the simulation drew (same stream), not a fresh draw.
    inclusion = draw_inclusion_probabilities(
        scenario.routing, layers, n, k, rng.stream(scenario.seed, "popularity")
    )
    true, _ = scenario.routing.layer_profiles(layers)
    predicted = unique_curves(inclusion, true, tokens)
    sampled = sampled_unique_curve(
        inclusion, true, tokens, 1, samples, rng.stream(scenario.seed, "routing", 10**6)
    )
    name = chosen.case or scenario.model.target
    why = f" (most experts of {len(case_names)} cases)" if len(case_names) > 1 else ""
    title = (
        f"{name}{why}: top-{k} of {n} experts, {layers} MoE layers, one sequence\n"
        f"{describe_routing(scenario.routing)}"
    )
    return unique_experts_figure(
        np.arange(1, tokens + 1),
        predicted,
        k,
        measured={f"sampled ({samples} sequences)": sampled},
        title=title,
        num_experts=n,
    )
