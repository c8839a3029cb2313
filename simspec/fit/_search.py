"""One-dimensional searches and the log-error objective of the calibration fit.

Every fitted constant is found by a one-dimensional search with the others held (coordinate
descent in :mod:`.tables`, nested searches in :mod:`.moe`): a coarse scan, so a far local
minimum cannot capture it, refined by Brent's bounded method. The objective is the sum of
squared log errors, so a 10 µs kernel counts as much as a 10 ms one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize

from simspec.params import EFFICIENCY_MIN

#: Efficiencies are searched between the lowest a scenario may state and 1.
EFFICIENCY_RANGE = (EFFICIENCY_MIN, 1.0)
#: Absolute tolerance of the bounded searches, in log space (relative error of the argmin).
LOG_XATOL = 1e-12


def grid_then_bounded(
    f: Callable[[float], float], lo: float, hi: float, *, grid: int = 41
) -> float:
    """Argmin of ``f`` on [lo, hi]: the best of a ``grid``-point scan, refined by Brent's method.

    The scan keeps the search away from far local minima; the refinement is
    ``scipy.optimize.minimize_scalar(method="bounded")`` between the best point's neighbours.

    >>> round(grid_then_bounded(lambda x: (x - 0.3) ** 2, 0.0, 1.0), 6)
    0.3
    """
    xs = np.linspace(lo, hi, grid)
    values = [f(float(x)) for x in xs]
    best = int(np.argmin(values))
    center = float(xs[best])
    a = float(xs[max(best - 1, 0)]) - center
    b = float(xs[min(best + 1, grid - 1)]) - center
    # Search the offset from the best grid point: Brent's tolerance has a relative term
    # (sqrt(eps)·|x|), which is then tiny, so ``LOG_XATOL`` sets the precision.
    result = optimize.minimize_scalar(
        lambda d: f(center + d),
        bounds=(a, b),
        method="bounded",
        options={"xatol": LOG_XATOL, "maxiter": 500},
    )
    x = center + float(result.x)
    return x if f(x) <= values[best] else center


def log_efficiency_search(f: Callable[[float], float]) -> float:
    """Minimise ``f(eta)`` over eta in EFFICIENCY_RANGE, searching log(eta).

    >>> round(log_efficiency_search(lambda e: math.log(e / 0.37) ** 2), 9)
    0.37
    """
    lo, hi = (math.log(v) for v in EFFICIENCY_RANGE)
    return math.exp(grid_then_bounded(lambda x: f(math.exp(x)), lo, hi))


def sse(predicted: np.ndarray, measured: np.ndarray, weight: np.ndarray | None = None) -> float:
    """Sum of (weighted) squared log errors of ``predicted`` against ``measured``."""
    r = np.log(predicted) - np.log(measured)
    return float(np.sum(r * r if weight is None else weight * r * r))
