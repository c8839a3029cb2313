"""The routing package's public face: every listed name resolves, lazily, to its module's."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import simspec.routing as routing


@pytest.mark.parametrize("name", routing.__all__)
def test_every_public_name_is_its_modules(name):
    module = importlib.import_module(f"simspec.routing.{routing._PUBLIC[name]}")
    assert getattr(routing, name) is getattr(module, name)


def test_an_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError):
        routing.no_such_name  # noqa: B018


def test_importing_a_submodule_does_not_import_the_others():
    code = (
        "import sys, simspec.routing.config;"
        "print(any(m in sys.modules for m in ('simspec.routing.model', 'simspec.routing.maxent')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
