"""Packaging traps: every package folder is listed in pyproject.toml, and CI runs the README's test command."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared_packages() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def _package_folders() -> set[str]:
    found = set()
    roots = {
        "modelgraph": ROOT / "modelgraph",
        "modelgraph.cli": ROOT / "cli",
        "modelgraph.schemas": ROOT / "schemas",
    }
    for prefix, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            parts = [p for p in rel.parts if p]
            found.add(".".join([prefix, *parts]))
    return found


def test_every_package_folder_is_declared() -> None:
    missing = _package_folders() - _declared_packages()
    assert not missing, f"packages missing from [tool.setuptools] packages: {sorted(missing)}"


def test_every_declared_package_exists() -> None:
    stale = _declared_packages() - _package_folders()
    assert not stale, f"declared packages with no folder: {sorted(stale)}"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    test_commands = [b.strip() for b in blocks if re.search(r"&& \.venv/bin/pytest( [^\n]*)?$", b.strip())]
    assert len(test_commands) == 1, "the README must show exactly one set-up-and-test command"
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_commands[0] in ci_lines


def test_installed_package_is_not_the_source_tree_shadow() -> None:
    import modelgraph.cli
    import modelgraph.schemas

    assert Path(modelgraph.cli.__file__).parent.name in ("cli",)
    assert Path(modelgraph.schemas.__file__).parent.name in ("schemas",)
