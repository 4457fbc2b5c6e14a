"""Messages for a partial install name exactly what is missing and who can add it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_pty_session import plugin as pty_plugin
from dsh_terminal_bash import plugin as bash_plugin
from dsh_terminal_core.cli.demo import missing_advice
from dsh_terminal_core.kernel import jobs_plugin as jobs
from dsh_terminal_core.kernel.errors import SandboxUnavailable
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider import plugin as subprocess_local
from dsh_terminal_core.registry import plugin as terminals
from dsh_terminal_core.sandbox import (
    bwrap_plugin as sandbox_bwrap,
)
from dsh_terminal_core.sandbox import (
    policy_plugin as sandbox_policy,
)
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox
from dsh_terminal_core.sandbox.policy import Policy, SandboxMode
from dsh_tool_terminal import plugin as tool_plugin
from tests.helpers import full_access

CORE = [subprocess_local, terminals, sandbox_policy, sandbox_bwrap, jobs]


async def test_facade_without_the_bash_backend_names_its_distribution() -> None:
    async with Harness(plugins=[*CORE, pty_plugin], config=full_access()) as h:
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "pty_open", {"command": "echo hi"})
        assert result.is_error
        assert result.text.startswith("error [NO_BACKEND]")
        assert "(registered types: none)" in result.text
        assert "pip install dsh-terminal-bash" in result.text
        assert h.ctx.terminals.list(agent) == []


async def test_an_unknown_backend_type_names_no_distribution() -> None:
    async with Harness(plugins=[*CORE, bash_plugin, tool_plugin], config=full_access()) as h:
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "terminal_open", {"type": "gdb"})
        assert result.text.startswith("error [NO_BACKEND]")
        assert "registered types: shell" in result.text
        assert "pip install" not in result.text


@pytest.mark.parametrize(
    ("plugins", "named", "not_named"),
    [
        pytest.param(
            [*CORE, pty_plugin],
            ["dsh-terminal-bash", "dsh-tool-terminal"],
            ["dsh-pty-session", "dsh-terminal-core"],
            id="facade-only",
        ),
        pytest.param(
            [*CORE, bash_plugin, tool_plugin],
            ["dsh-pty-session"],
            ["dsh-terminal-bash", "dsh-tool-terminal", "dsh-terminal-core"],
            id="no-facade",
        ),
        pytest.param(
            [*CORE, bash_plugin, pty_plugin],
            ["dsh-tool-terminal"],
            ["dsh-terminal-bash", "dsh-pty-session", "dsh-terminal-core"],
            id="no-tools",
        ),
    ],
)
async def test_demo_advice_names_only_what_is_absent(
    plugins: list[object], named: list[str], not_named: list[str]
) -> None:
    async with Harness(plugins=plugins, config=full_access()) as h:
        advice = missing_advice(h)
    assert advice is not None
    install = advice.split("pip install ", 1)[1].split()
    assert sorted(install) == sorted(named)
    for distribution in not_named:
        assert distribution not in advice


async def test_demo_advice_is_silent_when_everything_is_there() -> None:
    async with Harness(
        plugins=[*CORE, bash_plugin, tool_plugin, pty_plugin], config=full_access()
    ) as h:
        assert missing_advice(h) is None


def _refusing_bwrap(tmp_path: Path) -> Path:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_installed_but_refused_bwrap_advises_namespaces_not_installing(tmp_path: Path) -> None:
    box = BwrapSandbox(BwrapConfig(bwrap_path=str(_refusing_bwrap(tmp_path))))
    with pytest.raises(SandboxUnavailable) as caught:
        box.confine(["bash"], Policy(SandboxMode.WORKSPACE_WRITE, str(tmp_path)))
    message = str(caught.value)
    assert "is installed but cannot create the namespaces" in message
    assert "user namespaces" in message
    assert "install bubblewrap" not in message
    assert "no tool call can change" in message and "the operator must" in message
    assert "'danger-full-access' explicitly" in message


def test_missing_bwrap_advises_installing_it(tmp_path: Path) -> None:
    box = BwrapSandbox(BwrapConfig(bwrap_path=str(tmp_path / "absent")))
    assert box.remedy == "install bubblewrap (e.g. apt-get install bubblewrap)"
    with pytest.raises(SandboxUnavailable) as caught:
        box.confine(["bash"], Policy(SandboxMode.READ_ONLY, str(tmp_path)))
    assert "the operator must install bubblewrap" in str(caught.value)


async def test_the_model_is_told_the_operator_must_act(tmp_path: Path) -> None:
    config = {
        "sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)},
        "sandbox-bwrap": {"bwrap_path": str(_refusing_bwrap(tmp_path))},
    }
    async with Harness(plugins=[*CORE, bash_plugin, tool_plugin], config=config) as h:
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        assert result.text.startswith("error [SANDBOX_UNAVAILABLE]")
        assert "no tool call can change" in result.text
        assert "the operator must allow unprivileged user namespaces" in result.text
        assert h.ctx.terminals.list(agent) == []
