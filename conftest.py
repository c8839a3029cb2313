"""pytest configuration shared by the tests and the doctests of the package."""

import importlib.util

# The calibration benchmarks import torch (the optional `calibrate` extra); without it, their
# doctests cannot be collected. Everything else runs without torch.
collect_ignore_glob = (
    []
    if importlib.util.find_spec("torch")
    else [
        f"simspec/calibrate/{name}.py"
        for name in ("attention", "common", "floors", "gemm", "moe", "run", "stack", "timing")
    ]
)
