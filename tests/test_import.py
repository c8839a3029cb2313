"""`import simspec` stays light: no torch, no matplotlib."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_pull_heavy_modules():
    code = (
        "import sys, simspec, simspec.cli, simspec.simulate;"
        "bad = [m for m in ('torch', 'matplotlib') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


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
