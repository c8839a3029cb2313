"""A small strict registry: names -> frozen-dataclass implementations.

An implementation module registers itself with one decorator (``@POLICIES.register("fixed")``);
:meth:`Registry.create` builds an instance from a name and keyword parameters, and its errors
list the valid names or the valid parameters, so a typo in a scenario file explains itself.

A registry made with ``package="simspec.policies"`` imports every module of that package the
first time it is asked for a name, so adding an implementation is one new module with the
decorator: no list to update, and no import cycle through a package ``__init__``.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Map registry names to dataclass types of one family (policies, cost models, ...)."""

    def __init__(self, family: str, *, package: str | None = None):
        self.family = family
        self.package = package
        self._types: dict[str, type[T]] = {}
        self._discovered = package is None

    def _discover(self) -> None:
        """Import every module of ``package`` once, so their decorators run."""
        if self._discovered:
            return
        self._discovered = True
        root = importlib.import_module(self.package or "")
        for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
            importlib.import_module(f"{self.package}.{info.name}")

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator adding ``cls`` under ``name``; a duplicate name raises."""

        def decorator(cls: type[T]) -> type[T]:
            if name in self._types:
                raise ValueError(f"{self.family} {name!r} is registered twice")
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"{self.family} {name!r} must be a dataclass")
            self._types[name] = cls
            return cls

        return decorator

    def names(self) -> list[str]:
        """Registered names, sorted."""
        self._discover()
        return sorted(self._types)

    def get(self, name: str) -> type[T]:
        """The type registered under ``name``; KeyError lists the valid names."""
        self._discover()
        try:
            return self._types[name]
        except KeyError:
            raise KeyError(
                f"unknown {self.family} {name!r}; valid names: {', '.join(self.names())}"
            ) from None

    def parameters(self, name: str) -> list[str]:
        """The parameter names of the implementation registered under ``name``."""
        return [f.name for f in dataclasses.fields(self.get(name)) if f.init]  # type: ignore[arg-type]

    def create(self, name: str, **params: object) -> T:
        """Build the implementation ``name`` with ``params``; unknown parameters raise."""
        cls = self.get(name)
        valid = self.parameters(name)
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise TypeError(
                f"{self.family} {name!r} has no parameter {', '.join(map(repr, unknown))}; "
                f"valid parameters: {', '.join(valid)}"
            )
        return cls(**params)

    def items(self) -> Mapping[str, type[T]]:
        """A read-only view of name -> type."""
        self._discover()
        return dict(sorted(self._types.items()))
