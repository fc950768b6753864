"""Knowledge about one Keras class lives in its catalogue entry: code outside modelgraph/catalogue/
must not key a table or a branch by a class name.

The scan (AST, no imports of the scanned code) finds, outside the catalogue:

* ``branch``: a comparison (``==``, ``!=``, ``in``, ``not in``) with a class-name literal, or a
  collection of them (``layer.class_name == "Dense"``, ``key in ("LSTM", "GRU")``);
* ``table``: a dict literal with a class name among its keys, or a set/frozenset/tuple/list
  literal holding two class names or more (``KERAS3_LAYERS``, ``{"Conv1D": 3, ...}``).

Class names are the catalogue's keys and aliases (and ``tf:`` functions with a dot in them).
Attaching an implementation to an entry (``@register("Dense")``, ``@shape_rule``, ``@weight_rule``,
``@mac_rule``, ``register_ranks``, ``catalogue.provides``) is how the catalogue is meant to be
extended, and is not counted.

Today's offenders are listed in tests/data/class_name_tables.txt, one ``path scope kind count``
per line. The list may only shrink: a new offender fails (move the knowledge into the catalogue
entry), and so does an entry that no longer offends (delete its line: the count went down).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from modelgraph import catalogue

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "modelgraph"
ALLOW_LIST = Path(__file__).resolve().parent / "data" / "class_name_tables.txt"
ATTACHING = {"register", "shape_rule", "weight_rule", "mac_rule", "register_ranks", "provides", "attach"}
# Local decorators of the kernel and ONNX op modules that call ``register`` with their keys.
ATTACHING |= {"_op_with_config", "_op", "_tf"}


def class_names() -> set[str]:
    """Every class name the catalogue knows (keys without their prefix, and aliases)."""
    names: set[str] = set()
    for spec in catalogue.declared():
        if spec.key.startswith("tf:"):
            if "." in spec.class_name:
                names.add(spec.class_name)
        else:
            names.add(spec.class_name)
        names.update(alias.name for alias in spec.aliases)
    return names


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("frozenset", "set")
    ):
        return [s for arg in node.args for s in _strings(arg)]
    return []


def _attaching(node: ast.AST) -> bool:
    """A call (or decorator) that attaches an implementation to catalogue entries: ``register(...)``."""
    func = node.func if isinstance(node, ast.Call) else None
    while isinstance(func, ast.Call):  # register(*keys)(factory)
        func = func.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ATTACHING


class _Scanner(ast.NodeVisitor):
    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.scope: list[str] = []
        self.found: Counter[tuple[str, str]] = Counter()
        self._skip: set[int] = set()

    def _where(self) -> str:
        return ".".join(self.scope) or "<module>"

    def _scoped(self, name: str, node: ast.AST) -> None:
        self.scope.append(name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for deco in node.decorator_list:
            self._skip_attaching(deco)
            # A decorator that files the function under class names builds a table of its own.
            named = isinstance(deco, ast.Call) and any(
                s in self.names for a in deco.args for s in _strings(a)
            )
            if named and not _attaching(deco):
                self.found[(node.name, "table")] += 1
        self._scoped(node.name, node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node.name, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if not self.scope and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self._scoped(node.targets[0].id, node)
        else:
            self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not self.scope and isinstance(node.target, ast.Name):
            self._scoped(node.target.id, node)
        else:
            self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        """``for names, fn in [(("Add", "Subtract"), ...)]: register(...)`` attaches: not a table."""
        if any(isinstance(sub, ast.Call) and _attaching(sub) for stmt in node.body for sub in ast.walk(stmt)):
            for sub in ast.walk(node.iter):
                self._skip.add(id(sub))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        self._skip_attaching(node)
        self.generic_visit(node)

    def _skip_attaching(self, node: ast.AST) -> None:
        if _attaching(node):
            for sub in ast.walk(node):
                self._skip.add(id(sub))

    def visit_Compare(self, node: ast.Compare) -> None:
        if id(node) not in self._skip:
            for side in (node.left, *node.comparators):
                if any(s in self.names for s in _strings(side)):
                    self.found[(self._where(), "branch")] += 1
                    break
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        if id(node) not in self._skip:
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if any(k in self.names for k in keys):
                self.found[(self._where(), "table")] += 1
        self.generic_visit(node)

    def _collection(self, node: ast.AST) -> None:
        if id(node) not in self._skip and sum(s in self.names for s in _strings(node)) >= 2:
            self.found[(self._where(), "table")] += 1
            for sub in ast.walk(node):  # its elements are not branches of their own
                self._skip.add(id(sub))
        self.generic_visit(node)

    visit_Set = visit_Tuple = visit_List = _collection  # type: ignore[assignment]


def scan(source: str, names: set[str]) -> Counter[tuple[str, str]]:
    """``(scope, kind) -> count`` for one module's source."""
    scanner = _Scanner(names)
    tree = ast.parse(source)
    # A collection compared against (``in ("LSTM", "GRU")``) is the branch's operand, not a table.
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Tuple | ast.List | ast.Set):
                    scanner._skip.add(id(side))
    scanner.visit(tree)
    return scanner.found


def offenders() -> Counter[tuple[str, str, str]]:
    names = class_names()
    found: Counter[tuple[str, str, str]] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("modelgraph/catalogue/"):
            continue
        for (scope, kind), count in scan(path.read_text(encoding="utf-8"), names).items():
            found[(rel, scope, kind)] += count
    return found


def allowed() -> Counter[tuple[str, str, str]]:
    out: Counter[tuple[str, str, str]] = Counter()
    for line in ALLOW_LIST.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            path, scope, kind, count = line.split()
            out[(path, scope, kind)] = int(count)
    return out


def render(found: Counter[tuple[str, str, str]]) -> str:
    """The allow-list file for ``found`` (to regenerate it after moving tables into the catalogue)."""
    head = [
        "# Code outside modelgraph/catalogue/ that keys a table or a branch by a Keras class name.",
        "# Generated by tests/test_class_name_tables.py (render(offenders())); it may only shrink.",
        f"# {sum(found.values())} offences in {len({p for p, _, _ in found})} modules.",
        "# path scope kind count",
    ]
    return "\n".join([*head, *(f"{p} {s} {k} {c}" for (p, s, k), c in sorted(found.items()))]) + "\n"


def test_no_new_class_name_tables_or_branches() -> None:
    found, allow = offenders(), allowed()
    new = {k: c for k, c in found.items() if c > allow.get(k, 0)}
    assert not new, (
        "code outside the catalogue keys a table or a branch by a class name; move it into the class's "
        f"catalogue entry (modelgraph/catalogue/): {sorted(new.items())}"
    )


def test_allow_list_only_shrinks() -> None:
    found, allow = offenders(), allowed()
    stale = {k: (c, found.get(k, 0)) for k, c in allow.items() if found.get(k, 0) < c}
    assert not stale, (
        "fewer offences than tests/data/class_name_tables.txt allows: lower or delete these lines "
        f"(allowed, found): {sorted(stale.items())}"
    )


def test_the_scan_finds_what_it_should() -> None:
    """The scanner on a few lines: it counts a branch, a table and a list, and not an attachment."""
    source = """
KNOWN = frozenset({"Dense", "Conv2D"})
TABLE = {"LSTM": 1}
def f(layer):
    if layer.class_name == "Dense":
        return 1
    return layer.class_name in ("GRU", "LSTM")
@register("Dense")
def kernel(spec):
    return spec
for names in [("Add", "Subtract"), ("Maximum", "Minimum")]:
    register(*names)(kernel)
@upgrade("Dense")
def upgrade_dense(config):
    return config
NOT_CLASSES = ("same", "valid")
"""
    assert dict(scan(source, class_names())) == {
        ("KNOWN", "table"): 1,
        ("TABLE", "table"): 1,
        ("f", "branch"): 2,
        ("upgrade_dense", "table"): 1,
    }
