"""Module boundaries inside modelgraph/, read from the source (AST, nothing imported):

* no module imports another package's private names: a name or module starting with ``_`` belongs to
  the package that holds it, and only modules of that package (or its subpackages) may import it
  (``from modelgraph.runner.kernels.ops import _axis`` in the ONNX lowerings was such an import: the
  shared helpers are public now, in modelgraph/layer_params.py);
* no import circles: the graph of imports between modules (deferred imports inside functions
  included, ``if TYPE_CHECKING:`` blocks not) has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from modelgraph.topology import find_cycles

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "modelgraph"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(path: Path) -> list[ast.ImportFrom | ast.Import]:
    """The import statements of a module, deferred ones included, ``if TYPE_CHECKING:`` left out."""
    found: list[ast.ImportFrom | ast.Import] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return found


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_offences() -> list[str]:
    """``importer: from X import name`` for every private name or module used outside its package."""
    mods = modules()
    offences = []
    for name, path in mods.items():
        here = package_of(name, path)
        for node in imports(path):
            if (
                not isinstance(node, ast.ImportFrom)
                or node.level
                or not (node.module or "").startswith("modelgraph")
            ):
                continue
            dotted = [*node.module.split("."), ""]
            targets = [(node.module, alias.name) for alias in node.names]
            # A private module on the way (modelgraph.shape_rules._base) belongs to the package before it.
            targets += [(".".join(dotted[:i]), part) for i, part in enumerate(dotted[:-1]) if i]
            for owner_path, part in targets:
                if not _private(part):
                    continue
                owner = (
                    owner_path
                    if owner_path in mods and mods[owner_path].name == "__init__.py"
                    else (owner_path.rpartition(".")[0] if owner_path in mods else owner_path)
                )
                if here != owner and not here.startswith(owner + "."):
                    offences.append(f"{name}: from {node.module} import {part}")
    return sorted(set(offences))


def test_no_module_imports_another_packages_private_names() -> None:
    assert private_offences() == []


def import_graph() -> dict[str, set[str]]:
    """Module -> the modelgraph modules it imports (``from a.b import c`` names ``a.b.c`` when that is
    a module, else ``a.b``)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets: set[str] = set()
        for node in imports(path):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in mods)
            elif node.module and not node.level and node.module in mods:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    targets.add(full if full in mods else node.module)
        graph[name] = targets - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, each sorted (the project's own
    cycle finder, the one ``topology`` uses for layer graphs)."""
    return sorted(sorted(c) for c in find_cycles({v: sorted(ws) for v, ws in graph.items()}))


def test_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# Deferred imports that still close a circle, each with the reason; the list may only shrink (a test
# fails when an edge is gone, so delete its line). It goes when the weight-name functions are
# registered in the catalogue like a plugin's (issue 28, item 1), as the built-in activations are.
KNOWN_EDGES = {
    # The catalogue's entries name the weight-name functions; their lookups read the entries back.
    ("modelgraph.weight_names", "modelgraph.catalogue"),
}


def test_no_import_circles() -> None:
    graph = import_graph()
    assert all(dst in graph[src] for src, dst in KNOWN_EDGES), "an allowed edge is gone: delete it"
    for src, dst in KNOWN_EDGES:
        graph[src].discard(dst)
    assert cycles(graph) == []
