"""Unique experts per layer against tokens per sequence, U(T): predictions and measurements.

Lines are predictions (independent routing, the max-entropy Markov chain from rho_1, the
multi-lag IPF from rho_1..rho_D; :mod:`simspec.routing.predictor`), markers are measured curves (a
routing trace, or the Monte-Carlo sampler). The y axis is in units of k_e, so U(1) = 1 and the
independent curve of a k_e/N = 1/16 model passes 3.64 at T = 4 (MoESD's formula).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from simspec.plots import new_figure, save


def unique_experts_figure(
    tokens: np.ndarray,
    predicted: Mapping[str, np.ndarray],
    experts_per_token: int,
    *,
    measured: Mapping[str, np.ndarray] | None = None,
    title: str = "",
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
        Figure title.
    """
    fig, ax = new_figure()
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
    ax.set_xlabel("tokens per sequence T")
    ax.set_ylabel("unique experts per layer / k_e")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return fig


def plot_unique_experts(
    path: str | Path,
    tokens: np.ndarray,
    predicted: Mapping[str, np.ndarray],
    experts_per_token: int,
    *,
    measured: Mapping[str, np.ndarray] | None = None,
    title: str = "",
    svg: bool = False,
) -> list[Path]:
    """Write :func:`unique_experts_figure` to ``path`` (PNG, plus SVG when ``svg``)."""
    fig = unique_experts_figure(
        tokens, predicted, experts_per_token, measured=measured, title=title
    )
    return save(fig, path, svg=svg)
