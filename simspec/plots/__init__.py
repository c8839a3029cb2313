"""Figures (matplotlib, imported lazily: ``import simspec`` never imports matplotlib).

One module per family of figures. Every figure uses :func:`new_figure` and :func:`save`, so all
share the colour-blind-safe palette (Okabe & Ito, 2008), labelled axes with units, and the same
output handling: PNG (and SVG when asked), written atomically, on a non-interactive backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simspec.io import write_atomic

#: Okabe-Ito colour-blind-safe palette.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def new_figure(width_in: float = 6.4, height_in: float = 4.0) -> tuple[Any, Any]:
    """A (figure, axes) pair on the Agg backend with the project's style."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(width_in, height_in), dpi=120)
    ax.set_prop_cycle(color=list(PALETTE))
    ax.grid(True, alpha=0.3)
    return fig, ax


def save(fig: Any, path: str | Path, *, svg: bool = False) -> list[Path]:
    """Write ``fig`` to ``path`` (PNG; plus the same name with .svg when ``svg``), atomically.

    The figure is closed afterwards, also when writing fails.
    """
    import matplotlib.pyplot as plt

    target = Path(path)
    suffixes = [".png", ".svg"] if svg else [".png"]
    try:
        return [
            write_atomic(
                target.with_suffix(suffix), lambda tmp: fig.savefig(tmp, bbox_inches="tight")
            )
            for suffix in suffixes
        ]
    finally:
        plt.close(fig)
