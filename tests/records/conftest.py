"""Every records test discovers this checkout's core plugins, ``recording`` and ``audit`` too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .support import entry_points_dir


@pytest.fixture(autouse=True)
def checkout_plugins(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Discovery (in this process and in subprocesses) finds this checkout's core plugins."""
    where = entry_points_dir(tmp_path_factory.mktemp("entry-points"))
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(where), os.environ.get("PYTHONPATH", "")])
    )
    return where
