"""The package's version: one literal, which pyproject.toml reads at build time
(``[tool.setuptools.dynamic]``), so importing it costs nothing (``importlib.metadata`` would
read the installed metadata at every CLI start and in every sweep worker)."""

__version__ = "0.2.0"
