"""What a process pays before its work: ``import simspec`` loads no simulator, a sweep process
loads only what its points run, and a new sweep hashes no scenario before its points start.

Every process of ``simspec`` (a CLI command, each sweep's parent) pays for its imports before
doing anything, and with ``PYTHONDONTWRITEBYTECODE`` it compiles every module it imports, so an
import that a run never uses is pure start-up time. The import checks run in a fresh
interpreter. A sweep's parent does its start-up alone, before its workers start: work it does
there (or twice) is serial time the workers cannot share.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import simspec

ROOT = Path(__file__).resolve().parents[1]


def _imported(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after ``statement``."""
    code = f"import sys; {statement}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_import_simspec_loads_neither_the_simulator_nor_numpy():
    heavy = ("numpy", "simpy", "simspec.sim.engine", "simspec.config.scenario")
    assert _imported("import simspec", heavy) == []


def test_a_sweep_without_oracle_loads_no_oracle_and_no_profile_parser():
    unused = (
        "simspec.analysis.oracle",
        "simspec.analysis.delta",
        "simspec.profile.parse",
        "simspec.physics.hf_config",
    )
    statement = "import simspec.sweep.run; from simspec.sweep.spec import load_sweep"
    assert _imported(statement, unused) == []


@pytest.mark.parametrize("name", simspec.__all__)
def test_every_public_name_resolves(name):
    assert getattr(simspec, name) is not None
    assert name in dir(simspec)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        simspec.nothing_here  # noqa: B018


def test_lazy_profile_names_are_the_parser_s():
    from simspec.profile import load_profile
    from simspec.profile.parse import load_profile as parsed

    assert load_profile is parsed


def test_a_sweep_hashes_each_scenario_once(tmp_path, monkeypatch):
    """Each point's run hashes its scenario for its results; the parent of a new sweep adopts
    that digest (it hashes nothing itself), and a resumed one hashes only to find its points."""
    from simspec.config.scenario import Scenario
    from simspec.sweep.run import run_sweep
    from simspec.sweep.spec import load_sweep

    def small():
        return load_sweep(
            ROOT / "scenarios/qwen3-30b-h100-batch32.toml",
            grid={"workload.concurrency": [1, 2]},
            overrides={"workload.num_requests": 2, "workload.output_tokens": 8},
        )[1]

    points = small()
    calls: list[int] = []
    real = Scenario.digest
    monkeypatch.setattr(Scenario, "digest", lambda self: calls.append(1) or real(self))
    finished = run_sweep(points, tmp_path / "s", workers=1)
    assert len(calls) == len(points)  # one per run: its results' scenario_digest
    assert [p.digest for p in points] == [f.result.scenario_digest for f in finished]
    assert [p.digest for p in points] == [real(p.scenario) for p in points]
    again = small()
    calls.clear()
    resumed = run_sweep(again, tmp_path / "s", workers=1, resume=True)
    assert len(calls) == len(again)  # which points are saved; nothing runs again
    assert [f.result for f in resumed] == [f.result for f in finished]
