"""The package's version: one literal, which pyproject.toml reads at build time
(``[tool.setuptools.dynamic]``), so importing it costs nothing (``importlib.metadata`` costs
~35 ms per process, paid by every CLI start and sweep)."""

__version__ = "0.1.0"
