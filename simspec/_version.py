"""The installed package's version (the source tree's placeholder when not installed)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("simspec")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"
