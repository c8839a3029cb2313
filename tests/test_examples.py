"""Each example script prints exactly its golden output (examples/NAME.out)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("script", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.stem)
def test_example_output_matches_golden(script):
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert out.stdout == script.with_suffix(".out").read_text()


def test_there_are_three_examples():
    assert len(list(EXAMPLES.glob("*.py"))) >= 3
