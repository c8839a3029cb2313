"""Writing a calibration profile: the JSON text ``simspec calibrate`` writes.

The text is ``json.dumps(data, indent=1)`` plus a newline, so the shipped analytic profiles
under ``calibration/`` are byte for byte what the command writes (a test checks it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def profile_json(data: Mapping[str, Any]) -> str:
    """Profile data as JSON text (NaN is refused: a profile never holds one)."""
    return json.dumps(data, indent=1, allow_nan=False) + "\n"
