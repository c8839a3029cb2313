"""Every shipped scenario file validates, and every sweep in one expands to valid points."""

from __future__ import annotations

from pathlib import Path

import pytest

from simspec.config.load import load_scenario, read_scenario_data
from simspec.sweep.spec import expand, read_spec

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "scenarios").rglob("*.toml"))


def test_there_are_scenarios():
    assert len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_scenario_file_is_valid(path):
    scenario = load_scenario(path)
    assert scenario.policies
    data, source = read_scenario_data(path)
    if "sweep" in data:
        points = expand(data, source, read_spec(data, source))
        assert len({p.digest for p in points}) == len(points)
