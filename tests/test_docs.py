"""Every hook and every error code the code can raise is documented in docs/reference.md."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from dsh_terminal_core import hookspecs

ROOT = Path(__file__).parents[1]
REFERENCE = (ROOT / "docs" / "reference.md").read_text()

_CODE_ATTRIBUTE = re.compile(r'code\s*=\s*"([A-Z][A-Z_]+)"')
_CODE_ARGUMENT = re.compile(r'(?:Error|__init__)\((?:[^()]|\([^()]*\))*?,\s*"([A-Z][A-Z_]+)"\s*,?\s*\)', re.S)


def _codes_in_source() -> set[str]:
    codes: set[str] = set()
    for path in ROOT.glob("dsh_*/src/**/*.py"):
        text = path.read_text()
        codes |= set(_CODE_ATTRIBUTE.findall(text)) | set(_CODE_ARGUMENT.findall(text))
    return codes


def test_every_error_code_is_documented() -> None:
    codes = _codes_in_source()
    assert {"FOREIGN_SESSION", "SEND_ACTIVE", "INVALID_ARGUMENT"} <= codes  # the scan works
    missing = sorted(code for code in codes if f"`{code}`" not in REFERENCE)
    assert missing == [], f"undocumented error codes: {missing}"


def test_every_hook_is_documented_with_its_signature() -> None:
    hooks = [name for name in dir(hookspecs) if name.startswith("dsh_")]
    assert hooks == ["dsh_apply", "dsh_plugin_info"]
    for name in hooks:
        signature = str(inspect.signature(getattr(hookspecs, name))).replace("'", "")
        assert f"### `{name}{signature}`" in REFERENCE, name
