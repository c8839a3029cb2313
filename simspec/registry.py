"""A small strict registry: names -> frozen-dataclass implementations.

An implementation module registers itself with one decorator (``@POLICIES.register("fixed")``);
:meth:`Registry.create` builds an instance from a name and keyword parameters, and its errors
list the valid names or the valid parameters, so a typo in a scenario file explains itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Map registry names to dataclass types of one family (policies, cost models, ...)."""

    def __init__(self, family: str):
        self.family = family
        self._types: dict[str, type[T]] = {}

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
        return sorted(self._types)

    def get(self, name: str) -> type[T]:
        """The type registered under ``name``; KeyError lists the valid names."""
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
        return dict(sorted(self._types.items()))
