"""The generic registry: duplicates refused, errors that list the valid names and parameters."""

from __future__ import annotations


def test_registry_rejects_duplicates_and_lists_names():
    import pytest

    from simspec.policies import POLICIES
    from simspec.registry import Registry

    reg: Registry[object] = Registry("thing")
    with pytest.raises(ValueError, match="twice"):
        reg.register("fixed")(POLICIES.get("fixed"))
        reg.register("fixed")(POLICIES.get("fixed"))
    with pytest.raises(KeyError, match="valid names: fixed"):
        reg.get("nope")
    with pytest.raises(TypeError, match="valid parameters: draft_tokens"):
        POLICIES.create("fixed", tau=0.5)
