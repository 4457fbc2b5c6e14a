"""Each distribution declares exactly what its code imports (the guide: "Each distribution
declares only what it imports").

A dependency reached only through another package breaks the day that package drops it;
a declared one that nothing imports makes every install heavier for nothing. The check
reads each ``pyproject.toml`` (dependencies and extras together) and every third-party
top-level import under its ``src/`` (deferred imports inside functions included, guarded
``try: import`` included), and maps imports to distributions with the installed
metadata (``importlib.metadata.packages_distributions``).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = sorted(p.parent for p in [*ROOT.glob("*/pyproject.toml"), *ROOT.glob("consumers/*/pyproject.toml")])


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(project: Path) -> set[str]:
    table = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    requirements = list(table.get("dependencies", []))
    for extra in table.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    return {_normalized(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in requirements}


def _imported(project: Path) -> set[str]:
    own = {p.name for p in (project / "src").iterdir() if p.is_dir()}
    modules: set[str] = set()
    for source in (project / "src").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    third_party = modules - own - set(sys.stdlib_module_names) - {"__future__"}
    owners = packages_distributions()
    distributions: set[str] = set()
    for module in third_party:
        found = owners.get(module)
        assert found, f"{project.name}: nothing installed provides the module {module!r}"
        distributions.update(_normalized(d) for d in found)
    return distributions


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_a_distribution_declares_exactly_what_it_imports(project: Path) -> None:
    declared, imported = _declared(project), _imported(project)
    assert imported - declared == set(), f"{project.name} imports but does not declare"
    assert declared - imported == set(), f"{project.name} declares but never imports"
