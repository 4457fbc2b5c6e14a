"""The docs site (SPEC §20) builds with ``mkdocs build --strict``: no warning, a Tools page
generated from every registered tool, and an API reference rendered from the docstrings.
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]

# The tools every plugin of this repository registers; the live list is checked too.
EXPECTED_TOOLS = {
    "job_output",
    "job_kill",
    "terminal_open",
    "terminal_send",
    "terminal_read",
    "terminal_signal",
    "terminal_close",
    "terminal_list",
    "terminal_resize",
    "terminal_watch",
    "terminal_ask_human",
    "pty_open",
    "pty_send",
    "pty_tail",
    "pty_close",
    "ssh_open",
    "ssh_run",
    "ssh_interrupt",
    "ssh_close",
    "gdb_mi",
}

_MISSING = [
    name
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers")
    if importlib.util.find_spec(name) is None
]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"the docs toolchain is not installed ({', '.join(_MISSING)}); "
    "pip install -r requirements-dev.txt",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{log}"
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert warnings == [], "\n".join(warnings)
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


async def _live_tool_names() -> set[str]:
    from dsh_terminal_core.kernel.harness import Harness

    async with Harness() as h:
        return {schema["name"] for schema in h.tool_schemas()}


async def test_the_tools_page_lists_every_registered_tool(site: Path) -> None:
    page = (site / "tools" / "index.html").read_text()
    headings = set(re.findall(r'<h2 id="([a-z_]+)"', page))
    live = await _live_tool_names()  # what the installed entry points register
    assert headings >= EXPECTED_TOOLS | live, f"missing: {(EXPECTED_TOOLS | live) - headings}"
    text = _text(site / "tools" / "index.html")
    # Each tool carries its arguments and output tables, taken from the live schema.
    assert text.count("Arguments") >= len(headings)
    assert "waitFor" in text and "stdin_read" in text and "exitCode" in text


def test_the_api_reference_renders_the_docstrings(site: Path) -> None:
    core = _text(site / "api" / "core" / "index.html")
    assert "A running set of plugins with their services, agents and tools." in core
    assert "Harness" in core and "ErrorCode" in core
    pty = _text(site / "api" / "pty_session" / "index.html")
    assert "PtySessionService" in pty


def test_links_out_of_docs_point_at_the_repository(site: Path) -> None:
    readiness = (site / "readiness" / "index.html").read_text()
    assert "https://github.com/dsh-terminal/dsh-terminal-python/blob/main/README.md" in readiness
    assert 'href="../README.md"' not in readiness
