"""MkDocs hook: the Tools page, generated at build time from the registered tools.

It starts the real harness with every plugin this repository declares (each
``pyproject.toml``'s ``dsh.plugins`` entry points, imported from this checkout's ``src``
folders, so the page documents the tree being built rather than whatever happens to be
installed), reads ``h.tool_schemas()`` — exactly what the MCP server lists — and renders
each tool: its name, the plugin and distribution that register it, its description, a
table of its arguments and the top-level fields of its output schema. The harness is
closed before the page is written, so no process outlives the hook.
"""

from __future__ import annotations

import asyncio
import html
import importlib
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

PAGE = "tools.md"
ENTRY_POINT_GROUP = "dsh.plugins"

# Distributions in the order the page lists their tools (the README's layer order).
PROJECTS = (
    "dsh_terminal_core",
    "dsh_terminal_bash",
    "dsh_tool_terminal",
    "dsh_pty_session",
    "consumers/ssh",
    "consumers/gdb_mi",
)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = Path(config.config_file_path).parent
    files.append(File.generated(config, PAGE, content=render_page(root)))
    return files


# -- collecting ------------------------------------------------------------------------


def repository_plugins(root: Path) -> list[tuple[str, str, str]]:
    """``(distribution, plugin name, module)`` for every plugin the repository declares."""
    found = []
    for project in PROJECTS:
        pyproject = tomllib.loads((root / project / "pyproject.toml").read_text())
        distribution = pyproject["project"]["name"]
        entry_points = pyproject["project"].get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
        for name, module in entry_points.items():
            found.append((distribution, name, module))
    return found


def _import_from_checkout(root: Path, modules: list[str]) -> list[object]:
    for src in reversed([root / project / "src" for project in PROJECTS]):
        if str(src) not in sys.path:
            sys.path.insert(0, str(src))
    return [importlib.import_module(module) for module in modules]


async def _collect(plugins: list[object]) -> list[tuple[dict[str, Any], str | None]]:
    from dsh_terminal_core.kernel.harness import Harness

    async with Harness(plugins=plugins) as h:
        return [(schema, h.ctx.tools.get(schema["name"]).plugin) for schema in h.tool_schemas()]


def registered_tools(root: Path) -> list[tuple[dict[str, Any], str]]:
    """Every tool schema the harness lists, with the distribution whose plugin registers it,
    in :data:`PROJECTS` order."""
    declared = repository_plugins(root)
    plugins = _import_from_checkout(root, [module for _, _, module in declared])
    distribution_of = {name: distribution for distribution, name, _ in declared}
    order = [name for _, name, _ in declared]
    tools = asyncio.run(_collect(plugins))
    tools.sort(key=lambda tool: order.index(tool[1]) if tool[1] in order else len(order))
    return [(schema, distribution_of.get(plugin or "", "?")) for schema, plugin in tools]


# -- rendering -------------------------------------------------------------------------

# The end of a description's first sentence (not the dot of an "e.g." or "i.e.").
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=\S)")
_MARKDOWN_SPECIALS = re.compile(r"([\\*_\[\]{}|#])")


_CODE_SPAN = re.compile(r"(`[^`]+`)")


def text(value: str) -> str:
    """A description made safe for Markdown, in a paragraph or a table cell: the text
    between `code spans` is escaped, the spans are kept as code."""
    parts = _CODE_SPAN.split(" ".join(value.split()))
    return "".join(
        part if index % 2 else _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(part, quote=False))
        for index, part in enumerate(parts)
    )


def _bounds(schema: dict[str, Any]) -> str:
    pairs = (
        ("minLength", "maxLength", " chars"),
        ("minimum", "maximum", ""),
        ("minItems", "maxItems", " items"),
    )
    for low_key, high_key, unit in pairs:
        low, high = schema.get(low_key), schema.get(high_key)
        if low is not None and high is not None:
            return f"{low}–{high}{unit}"
        if low is not None:
            return f"≥ {low}{unit}"
        if high is not None:
            return f"≤ {high}{unit}"
    return ""


def type_of(schema: dict[str, Any], *, drop_null: bool = False) -> str:
    """A short type for a JSON schema: ``string (1–64 chars)``, ``array of string``,
    ``"a" or "b"``; with ``drop_null`` an optional argument's ``null`` branch is left out
    (every optional argument is published nullable)."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            branches = [type_of(branch) for branch in schema[key]]
            if drop_null:
                branches = [branch for branch in branches if branch != "null"] or ["null"]
            return " or ".join(dict.fromkeys(branches))
    if "enum" in schema:
        return " or ".join(
            f'"{value}"' if isinstance(value, str) else str(value) for value in schema["enum"]
        )
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kinds = [k for k in kind if not (drop_null and k == "null")] or ["null"]
        kind = " or ".join(kinds)
    bounds = f" ({_bounds(schema)})" if _bounds(schema) else ""
    if kind == "array" and "items" in schema:
        return f"array{bounds} of {type_of(schema['items'])}"
    return f"{kind}{bounds}"


def _cell(value: str) -> str:
    return text(value) if value else ""


def arguments_table(parameters: dict[str, Any]) -> list[str]:
    properties = parameters.get("properties", {})
    if not properties:
        return ["No arguments."]
    required = set(parameters.get("required", []))
    rows = ["| argument | type | required | description |", "|---|---|---|---|"]
    for name, schema in properties.items():
        description = schema.get("description", "")
        if "default" in schema and "default" not in description.lower():
            description = f"{description} (default: {schema['default']!r})".strip()
        rows.append(
            f"| `{name}` | {_cell(type_of(schema, drop_null=True))} | "
            f"{'yes' if name in required else 'no'} | {_cell(description)} |"
        )
    return rows


def output_table(output: dict[str, Any] | None) -> list[str]:
    if not output:
        return ["No output schema is declared."]
    lines = [text(output["description"]), ""] if output.get("description") else []
    required = set(output.get("required", []))
    # A result with alternative forms lists each form's required fields under anyOf/oneOf.
    forms = [set(form.get("required", [])) for form in output.get("anyOf", output.get("oneOf", []))]
    lines += ["| field | type | always present | description |", "|---|---|---|---|"]
    for name, schema in output.get("properties", {}).items():
        if name in required:
            present = "yes"
        elif any(name in form for form in forms):
            present = "in one form"
        else:
            present = "no"
        lines.append(
            f"| `{name}` | {_cell(type_of(schema))} | {present} | "
            f"{_cell(schema.get('description', ''))} |"
        )
    return lines


def render_page(root: Path) -> str:
    tools = registered_tools(root)
    out = [
        "# Tools",
        "",
        "Every tool the harness registers with all of this repository's plugins loaded, as",
        "an MCP client is offered it (`h.tool_schemas()`, what `dsh-terminal mcp` lists).",
        "This page is generated at build time from the live schemas (`docs/hooks/tools_page.py`);",
        "optional arguments are published nullable, and every result also carries `notices`.",
        "",
        "| tool | summary | distribution |",
        "|---|---|---|",
    ]
    for schema, distribution in tools:
        summary = _SENTENCE_END.split(schema["description"], maxsplit=1)[0].rstrip(".") + "."
        link = f"[{text(schema['name'])}](#{schema['name']})"
        out.append(f"| {link} | {text(summary)} | {distribution} |")
    for schema, distribution in tools:
        out += [
            "",
            f"## `{schema['name']}` {{ #{schema['name']} }}",
            "",
            f"Registered by `{distribution}`.",
            "",
            text(schema["description"]),
            "",
            "**Arguments**",
            "",
            *arguments_table(schema["parameters"]),
            "",
            "**Output**",
            "",
            *output_table(schema.get("outputSchema")),
        ]
    return "\n".join(out) + "\n"
