"""The package's house: one folder per layer, arrows only downwards, old paths kept.

The import contracts live in ``dsh_terminal_core/pyproject.toml`` and are checked by
import-linter over the real import graph; the rest of the layout rules (about ten
entries at the top, each layer saying what it owns and may import, no module over 800
lines) are checked here, so a change that breaks one fails the suite.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "dsh_terminal_core"
PACKAGE = CORE / "src" / "dsh_terminal_core"
LAYERS = (
    "kernel",
    "provider",
    "sandbox",
    "registry",
    "secrets",
    "worlds",
    "records",
    "human",
    "mcp",
    "cli",
)
SOURCES = [
    ROOT / "dsh_terminal_core/src",
    ROOT / "dsh_terminal_bash/src",
    ROOT / "dsh_tool_terminal/src",
    ROOT / "dsh_pty_session/src",
    *sorted((ROOT / "consumers").glob("*/src")),
]
MAX_MODULE_LINES = 800


def test_import_contracts_are_kept() -> None:
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert linter, "import-linter is a test need (requirements-dev.txt)"
    run = subprocess.run(
        [linter, str(CORE / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


def test_the_top_level_is_the_layers_and_little_else() -> None:
    # One folder per layer; besides them only the package's face, its type marker and
    # the test doubles plugin authors import.
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert entries - set(LAYERS) == {"__init__.py", "py.typed", "testing.py"}, entries
    assert set(LAYERS) <= entries


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_says_what_it_owns_and_may_import(layer: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text()))
    assert doc, f"{layer}/__init__.py has no docstring"
    assert "may import" in doc.lower(), f"{layer}/__init__.py does not say what it may import"


def test_no_source_module_is_over_800_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for src in SOURCES
        for path in src.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


OLD_PATHS = {
    "dsh_terminal_core.errors": "dsh_terminal_core.kernel.errors",
    "dsh_terminal_core.harness": "dsh_terminal_core.kernel.harness",
    "dsh_terminal_core.jobs": "dsh_terminal_core.kernel.jobs",
    "dsh_terminal_core.hookspecs": "dsh_terminal_core.kernel.hookspecs",
    "dsh_terminal_core.tools": "dsh_terminal_core.kernel.tools",
    "dsh_terminal_core.toolschema": "dsh_terminal_core.kernel.toolschema",
    "dsh_terminal_core.agents": "dsh_terminal_core.kernel.agents",
    "dsh_terminal_core.terminals": "dsh_terminal_core.registry",
    "dsh_terminal_core.terminals.types": "dsh_terminal_core.registry.types",
    "dsh_terminal_core.linematch": "dsh_terminal_core.registry.linematch",
    "dsh_terminal_core.mcp_notify": "dsh_terminal_core.mcp.notify",
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_is_the_same_module_as_its_new_home(old: str) -> None:
    # A fresh interpreter, importing the old path first: the order a plugin written
    # against the flat layout meets it in.
    new = OLD_PATHS[old]
    probe = (
        f"import importlib, sys\n"
        f"old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        f"assert old is new, (old, new)\n"
        f"assert sys.modules[{old!r}] is new\n"
        f"copies = [n for n, m in sys.modules.items() if m is not new and "
        f"getattr(m, '__file__', None) and m.__file__ == new.__file__]\n"
        f"assert not copies, copies\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def test_every_moved_path_imports() -> None:
    from dsh_terminal_core.kernel.legacy_paths import MOVED

    names = [f"dsh_terminal_core.{old}" for old in MOVED]
    probe = "import importlib\n" + "".join(f"importlib.import_module({n!r})\n" for n in names)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr


def test_a_path_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("dsh_terminal_core.terminals.no_such_module")


#: What the repository's top level holds: the distributions, their tooling and docs. A
#: file landing here by mistake (an empty ``oom`` once did, from a shell redirection) is
#: caught by this list rather than by a reader.
REPOSITORY_TOP = {
    ".ci", ".dockerignore", ".gitignore", "LICENSE", "README.md", "bench", "consumers",
    "deploy", "docs", "mkdocs.yml", "pyproject.toml", "requirements-dev.txt", "scripts",
    "tests",
}  # fmt: skip


def test_the_repository_top_level_holds_only_known_entries() -> None:
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    listed = subprocess.run(
        [git, "ls-files"], capture_output=True, text=True, cwd=ROOT, timeout=60, check=True
    )
    top = {line.split("/", 1)[0] for line in listed.stdout.splitlines() if line}
    distributions = {name for name in top if name.startswith("dsh_")}
    assert top - distributions - REPOSITORY_TOP == set(), "unexpected at the top level"
