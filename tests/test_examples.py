"""Each example script prints exactly its golden output (examples/NAME.out).

The scripts run in this interpreter (as ``__main__``, the way ``python examples/NAME.py`` runs
them), so that each does not pay for importing numpy, scipy and simspec again.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_example_output_matches_golden(script, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", [str(script)])
    monkeypatch.syspath_prepend(str(script.parent))
    capsys.readouterr()
    runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().out == script.with_suffix(".out").read_text()


def test_there_are_three_examples():
    assert len(list(EXAMPLES.glob("*.py"))) >= 3
