"""The ssh page's example (docs/ssh.md) runs as written, against the throwaway server."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from .sshd import Sshd

ROOT = Path(__file__).resolve().parents[2]


def _example_source() -> str:
    page = (ROOT / "docs" / "ssh.md").read_text()
    return page.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_ssh_example_runs(
    sshd: Sshd,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # The example uses the default known-hosts file; keep this throwaway key out of ours.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    module = types.ModuleType("readme_ssh_example")
    exec(compile(_example_source(), "docs/ssh.md", "exec"), module.__dict__)
    await module.main(sshd.host, sshd.port, "root", str(sshd.client_key))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("{'output': 'Linux\\n', 'exitCode': 0, 'waitReason': 'stdin_read'")
    assert printed[1:] == ["timeout", "{'delivered': True, 'exitCode': 130}", "/tmp", ""]
    assert (
        (tmp_path / "dsh-ssh" / "known_hosts").read_text().startswith(f"{sshd.known_hosts_name} ")
    )
