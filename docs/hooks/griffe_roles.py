"""Griffe extension for the API reference: Sphinx roles in docstrings read as code.

The docstrings use reST inline roles (:class:`Harness`, :meth:`~.Agent.dispose`,
:mod:`.kernel`) that Markdown would print with their role prefix. This turns each into a
code span of the name as Sphinx shows it (a leading ``~`` keeps only the last part), so
``:class:`PluginInfo``` renders as ``PluginInfo``. Loaded by mkdocstrings
(``extensions:`` in mkdocs.yml); the source docstrings are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj|const):`(~?)([^`]+)`")


def _code(match: re.Match[str]) -> str:
    name = match.group(2)
    if match.group(1):
        name = name.rsplit(".", 1)[-1]
    return f"`{name}`"


def _rewrite(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)


class SphinxRolesAsCode(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        _rewrite(obj)

    def on_module(self, *, mod: griffe.Module, **kwargs: Any) -> None:
        _rewrite(mod)  # a package's own docstring is not passed to on_object
