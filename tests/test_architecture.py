"""The layout's rules (design §2), checked on the source: small modules, no import cycle,
dependencies pointing down the layers, and a light ``import simspec``."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "simspec"
MAX_LINES = 600

#: Layers, lowest first: a module may import its own layer and the layers below it only. The
#: README's Layout table lists the same packages in the same order.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_version", "errors", "inputs", "registry", "rng", "schema"),
    ("physics",),
    ("params",),
    ("routing",),
    ("text",),
    ("catalog",),
    ("profile",),
    ("costs",),
    ("policies",),
    ("config",),
    ("sim",),
    ("analysis", "io"),
    ("record",),
    ("validation",),
    ("fit",),
    ("calibrate",),
    ("sweep",),
    ("plots",),
    ("commands", "cli", "__main__", "__init__"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _target(name: str) -> str | None:
    """The simspec module an imported dotted name refers to (a module, else its package)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path, *, module_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes: list[ast.AST] = []
    if module_level_only:
        for node in tree.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue  # type-only imports never run
            nodes.extend(ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node])
    else:
        nodes = list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith("simspec"):
                target = _target(name)
                if target:
                    out.add(target)
    return out


def _top(module: str) -> str:
    return module.split(".")[1] if "." in module else "__init__"


def _layer(module: str) -> int:
    top = _top(module)
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise AssertionError(f"{module}: not in any layer of the architecture test")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_is_small(module):
    lines = len(MODULES[module].read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{module} has {lines} lines (at most {MAX_LINES})"


def test_no_import_cycle():
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for target in _imports(path, module_level_only=True):
            if target != module:
                graph.add_edge(module, target)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_package_level_cycle():
    """Two subpackages never import each other, even through lazy imports."""
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        if module == "simspec":
            continue
        for target in _imports(path, module_level_only=False):
            if target != "simspec" and _top(target) != _top(module):
                graph.add_edge(_top(module), _top(target))
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"package-level import cycles: {cycles[:5]}"


def test_every_package_has_a_layer():
    tops = {_top(module) for module in MODULES if module != "simspec"}
    listed = {name for layer in LAYERS for name in layer}
    assert tops <= listed, f"packages missing from LAYERS: {sorted(tops - listed)}"
    assert len(listed) == sum(len(layer) for layer in LAYERS), "a package sits in two layers"


def test_the_readme_lists_the_layers():
    """README's Layout table names the same packages in the same order as LAYERS."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    listed = tuple(tuple(re.findall(r"`([^`]+)`", row.split("|")[1])) for row in rows)
    assert listed == LAYERS


def test_dependencies_point_down_the_layers():
    upward = []
    for module, path in MODULES.items():
        if module == "simspec":
            continue  # the package root re-exports the public API
        for target in _imports(path, module_level_only=False):  # lazy imports count too
            if target != "simspec" and _layer(target) > _layer(module):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports against the layering:\n" + "\n".join(sorted(upward))


def test_the_rules_can_fail():
    """The checks above see what they claim to see."""
    cli = _imports(MODULES["simspec.cli"], module_level_only=False)
    assert "simspec.errors" in cli
    assert _layer("simspec.sweep.run") > _layer("simspec.sim.engine")
    assert _target("simspec.costs.base.COST_MODELS") == "simspec.costs.base"


def test_import_does_not_pull_heavy_modules():
    code = (
        "import sys, simspec, simspec.cli, simspec.analysis.experiment, simspec.sweep.run;"
        "bad = [m for m in ('torch', 'matplotlib', 'numba') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
