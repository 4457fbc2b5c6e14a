"""Module paths of the flat layout, kept for plugins written against it.

Before the layers became folders, ``dsh_terminal_core.errors``,
``dsh_terminal_core.terminals``, ``dsh_terminal_core.harness`` and their siblings were
modules of the package itself, and the README and docs showed them. Each still imports
— as the very module object of its new home, so classes, ``isinstance`` checks and
module state are shared, never loaded twice. The finder sits first on ``sys.meta_path``
because ``dsh_terminal_core.terminals.types`` must not be found a second time through
the registry package's ``__path__`` under its old name.

New code imports from the layer folders (``dsh_terminal_core.kernel.errors``,
``dsh_terminal_core.registry``) or from ``dsh_terminal_core`` itself; type checkers see
only those.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

_KERNEL = (
    "agents", "cancel", "config", "context", "errors", "harness", "heapfreeze", "hookspecs",
    "jobs", "job_tools", "plugins", "prompt", "resultcap", "schemacheck", "signals",
    "textbounds", "tools", "toolschema", "turns", "wiring",
)
_MCP = ("asks", "http", "identities", "notify", "server", "stdio", "tokens", "wake")

MOVED: Mapping[str, str] = {
    **{name: f"kernel.{name}" for name in _KERNEL},
    "terminals": "registry",
    "linematch": "registry.linematch",
    "overstrike": "registry.overstrike",
    "demo": "cli.demo",
    **{f"mcp_{name}": f"mcp.{name}" for name in _MCP},
    "mcp_secrets": "mcp.secret_page",
}
"""Old path under the package -> new path under the package; a moved package's
submodules follow it (``terminals.types`` -> ``registry.types``)."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the module already at its new one."""

    def __init__(self, package: str, moved: Mapping[str, str]) -> None:
        self._prefix = package + "."
        self._package = package
        self._moved = moved

    def new_name(self, fullname: str) -> str | None:
        if not fullname.startswith(self._prefix):
            return None
        old = fullname[len(self._prefix) :]
        head, _, rest = old.partition(".")
        if old in self._moved:
            return f"{self._package}.{self._moved[old]}"
        if rest and head in self._moved:
            return f"{self._package}.{self._moved[head]}.{rest}"
        return None

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = self.new_name(fullname)
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, is_package=found.submodule_search_locations is not None
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self.new_name(spec.name)
        assert new is not None  # find_spec only hands out specs it can answer
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module ran once, under its new name."""


def install(package: str) -> None:
    """Put the finder first on ``sys.meta_path``, once per interpreter."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules(package, MOVED))
