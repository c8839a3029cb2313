"""Close the figures a test drew (the figure functions return them open, for inspection)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    from simspec.plots import pyplot

    pyplot().close("all")
