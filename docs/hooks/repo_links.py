"""MkDocs hook: links from a docs page to a repository file outside ``docs/`` work on the site.

The pages are written for GitHub, where ``[README](../README.md)`` or
``[bench/run.py](../bench/run.py)`` resolves in the repository. The site holds only
``docs/``, so such a link would be broken there (and a warning under ``--strict``). This
hook points each one at the file in the repository on GitHub (``repo_url``) while the
page is built; the Markdown files keep their relative links. A link whose target does
not exist in the checkout is left alone, so MkDocs still reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

BRANCH = "main"

# An inline link or image target: ](target) or ](target#anchor), no scheme, not absolute.
_LINK = re.compile(r"(\]\()(?![a-z][a-z0-9+.-]*:|/|#)([^)\s#]+)(#[^)\s]*)?(\))", re.I)
_FENCE = re.compile(r"^(```|~~~)")


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    repo_url = (config.repo_url or "").rstrip("/")
    if not repo_url:
        return markdown
    docs = Path(config.docs_dir).resolve()
    root = Path(config.config_file_path).parent.resolve()
    here = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match[str]) -> str:
        target = match.group(2)
        path = (docs / here / target).resolve()
        if path.is_relative_to(docs) or not path.is_relative_to(root) or not path.exists():
            return match.group(0)
        kind = "tree" if path.is_dir() else "blob"
        url = f"{repo_url}/{kind}/{BRANCH}/{path.relative_to(root).as_posix()}"
        return f"{match.group(1)}{url}{match.group(3) or ''}{match.group(4)}"

    out, fenced = [], False
    for line in markdown.splitlines(keepends=True):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        out.append(line if fenced else _LINK.sub(rewrite, line))
    return "".join(out)
