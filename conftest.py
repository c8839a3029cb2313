"""pytest configuration shared by the tests and the doctests of the package."""

import importlib.util
import os

import pytest

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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """A plain ``pytest`` (no test named) runs the suite on one worker per CPU.

    Most of the suite is CPU-bound simulation, so on a 2-core machine two pytest-xdist workers
    halve its wall time. This applies only when pytest-xdist is loaded (the ``dev`` extra), no
    ``-n``/``--numprocesses`` was given and the run collects the configured test paths; a run
    that names tests, ``-n 0`` or ``-p no:xdist`` stays in one process. Set before xdist's own
    hook turns ``numprocesses`` into workers.
    """
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return  # no xdist, or this process is one of its workers
    if config.option.numprocesses is not None or config.option.dist != "no":
        return  # the command line chose
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        return  # tests named on the command line: quicker to start in this process
    if config.getoption("collectonly") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    config.option.numprocesses = "logical"
