"""Import the scripts under ``bench/`` (not a package) as modules, once per test session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` as module ``name`` (cached in ``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(BENCH))  # the bench scripts import their siblings
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
