"""Every hook and every error code is documented in docs/reference.md.

The lists are the live ones: the members of :class:`ErrorCode` and the hook specs a
plugin manager dispatches, so adding either without documenting it fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pluggy

from dsh_terminal_core import ErrorCode
from dsh_terminal_core.kernel import hookspecs

ROOT = Path(__file__).parents[1]
REFERENCE = (ROOT / "docs" / "reference.md").read_text()
SOURCES = [*ROOT.glob("dsh_*/src/**/*.py"), *ROOT.glob("consumers/*/src/**/*.py")]

# A code written as a literal: ``code = "X"`` or a string argument that ends an error's
# argument list, however deeply the message before it nests parentheses.
_CODE_ATTRIBUTE = re.compile(r'\bcode\s*[:=]\s*(?:str\s*=\s*)?"([A-Z][A-Z_]+)"')
_CODE_ARGUMENT = re.compile(r',\s*"([A-Z][A-Z_]+)"\s*,?\s*\)')
_CODE_MEMBER = re.compile(r"\bErrorCode\.([A-Z][A-Z_]+)\b")
# Upper-case string arguments that are not error codes.
_NOT_CODES = {"SIGINT", "SIGTERM", "SIGKILL", "SIGTSTP", "SIGHUP", "PATH", "TERM"}


def _codes_in_source() -> set[str]:
    codes: set[str] = set()
    for path in SOURCES:
        text = path.read_text()
        for pattern in (_CODE_ATTRIBUTE, _CODE_ARGUMENT, _CODE_MEMBER):
            codes |= set(pattern.findall(text))
    return codes - _NOT_CODES


def test_the_source_scan_finds_codes_at_any_nesting() -> None:
    codes = _codes_in_source()
    # UNSUPPORTED follows a message with nested parentheses; GDB_MI lives in a consumer.
    assert {"FOREIGN_SESSION", "SEND_ACTIVE", "INVALID_ARGUMENT", "UNSUPPORTED", "GDB_MI"} <= codes


def test_every_code_raised_is_an_error_code_member() -> None:
    unknown = sorted(code for code in _codes_in_source() if code not in ErrorCode.__members__)
    assert unknown == [], f"codes raised but missing from ErrorCode: {unknown}"


def test_every_error_code_is_documented() -> None:
    missing = sorted(code.value for code in ErrorCode if f"| `{code.value}` |" not in REFERENCE)
    assert missing == [], f"undocumented error codes: {missing}"


def _live_hooks() -> dict[str, pluggy.HookCaller]:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return {
        name: caller
        for name, caller in vars(manager.hook).items()
        if isinstance(caller, pluggy.HookCaller) and caller.spec is not None
    }


def test_every_hook_is_documented_with_its_signature() -> None:
    hooks = _live_hooks()
    assert "dsh_apply" in hooks and "dsh_plugin_info" in hooks  # the walk works
    for name, caller in sorted(hooks.items()):
        assert caller.spec is not None
        signature = str(inspect.signature(caller.spec.function)).replace("'", "")
        assert f"### `{name}{signature}`" in REFERENCE, f"hook {name} is not documented"


def _readme_plugin_source() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Writing a plugin", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_plugin_the_readme_teaches_loads_and_dispatches() -> None:
    import types

    from dsh_terminal_core.kernel.harness import Harness
    from dsh_terminal_core.provider import plugin as subprocess_local
    from dsh_terminal_core.registry import plugin as terminals
    from dsh_terminal_core.sandbox import policy_plugin as sandbox_policy

    module = types.ModuleType("readme_plugin")
    exec(compile(_readme_plugin_source(), "README.md", "exec"), module.__dict__)
    plugins = [subprocess_local, terminals, sandbox_policy, module]
    async with Harness(plugins=plugins) as h:
        assert h.pm.get_plugin("session-count") is module
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "session_count", {})
        assert (result.value, result.is_error) == ({"open": 0}, False)
        assert h.ctx.tools.get("session_count").plugin == "session-count"


def test_the_readme_stays_a_five_minute_read_and_its_links_resolve() -> None:
    """SPEC §20: the README is at most 20,000 bytes; topic detail lives in docs/."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 20_000
    links = re.findall(r"\]\(((?:docs|consumers)/[^)#]+)\)", readme)
    assert links, "the README links its docs pages"
    assert [link for link in links if not (ROOT / link).is_file()] == []
