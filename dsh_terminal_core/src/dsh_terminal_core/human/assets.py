"""The browser's terminal and player: xterm.js and asciinema-player, from npm (SPEC §31).

The repository holds no copy of them. ``python -m dsh_terminal_core.human.assets``
(run by ``scripts/install.sh``) fetches the pinned versions of :data:`PACKAGES` from the
npm registry with ``npm``, and copies the few files the pages load, each package's
licence and a manifest (``assets.json``) into the assets directory. At run time the
pages find that directory in this order: the ``human`` plugin's ``assets_dir``, the
environment variable ``DSH_WEB_ASSETS``, then ``<sys.prefix>/share/dsh-terminal/web``
(inside the virtual environment that install.sh makes). Without it a watch page falls
back to the text view and says so, and a recording page says how to install them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs

__all__ = ["FILES", "PACKAGES", "WebAssets", "default_dir", "install", "load"]

PACKAGES = {"@xterm/xterm": "6.0.0", "asciinema-player": "3.18.0"}
"""The npm packages the pages use, pinned."""

FILES = {
    "xterm.js": ("@xterm/xterm", "lib/xterm.js"),
    "xterm.css": ("@xterm/xterm", "css/xterm.css"),
    "asciinema-player.js": ("asciinema-player", "dist/bundle/asciinema-player.min.js"),
    "asciinema-player.css": ("asciinema-player", "dist/bundle/asciinema-player.css"),
}
"""What the pages load (``/watch/<token>/asset/<name>``): the name, its package and path."""

MANIFEST = "assets.json"
ENV = "DSH_WEB_ASSETS"
_TYPES = {".js": b"text/javascript; charset=utf-8", ".css": b"text/css; charset=utf-8"}


def default_dir() -> Path:
    """Where install.sh puts the assets: ``DSH_WEB_ASSETS``, else inside ``sys.prefix``."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    return Path(sys.prefix) / "share" / "dsh-terminal" / "web"


@attrs.define
class WebAssets:
    """An installed assets directory; files are read once and kept."""

    directory: Path
    versions: dict[str, str]
    _cache: dict[str, bytes] = attrs.field(factory=dict)

    def read(self, name: str) -> tuple[bytes, bytes] | None:
        """``(body, content type)`` of a served file; None for any other name."""
        if name not in FILES:
            return None
        body = self._cache.get(name)
        if body is None:
            try:
                body = (self.directory / name).read_bytes()
            except OSError:
                return None
            self._cache[name] = body
        return body, _TYPES[Path(name).suffix]


def load(directory: str | Path | None = None) -> WebAssets | None:
    """The assets in ``directory`` (default :func:`default_dir`), or None when incomplete."""
    where = Path(directory) if directory is not None else default_dir()
    try:
        manifest = json.loads((where / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or not all((where / name).is_file() for name in FILES):
        return None
    versions = manifest.get("packages")
    return WebAssets(where, dict(versions) if isinstance(versions, dict) else {})


def install(directory: str | Path, npm: str = "npm") -> WebAssets:
    """Fetch :data:`PACKAGES` with ``npm`` and put the pages' files in ``directory``.

    Raises ``RuntimeError`` saying what failed (no npm, no registry).
    """
    where = Path(directory)
    found = shutil.which(npm)
    if found is None:
        raise RuntimeError(f"{npm} is not on PATH: install Node.js and npm")
    with tempfile.TemporaryDirectory(prefix="dsh-web-assets-") as scratch:
        specs = [f"{name}@{version}" for name, version in PACKAGES.items()]
        run = subprocess.run(
            [
                found,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--no-package-lock",
                "--prefix",
                scratch,
                *specs,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if run.returncode != 0:
            raise RuntimeError(f"npm install {' '.join(specs)} failed: {run.stderr.strip()}")
        modules = Path(scratch) / "node_modules"
        where.mkdir(parents=True, exist_ok=True)
        for name, (package, path) in FILES.items():
            shutil.copyfile(modules / package / path, where / name)
        for package in PACKAGES:
            licence = modules / package / "LICENSE"
            if licence.is_file():
                shutil.copyfile(licence, where / f"LICENSE.{package.replace('/', '-').lstrip('@')}")
    (where / MANIFEST).write_text(json.dumps({"packages": PACKAGES, "files": sorted(FILES)}))
    loaded = load(where)
    assert loaded is not None
    return loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dsh_terminal_core.human.assets",
        description="Fetch the watch and recording pages' browser files from npm.",
    )
    parser.add_argument("directory", nargs="?", help=f"where to put them (default {default_dir()})")
    parser.add_argument("--check", action="store_true", help="only say whether they are there")
    args = parser.parse_args(argv)
    where = Path(args.directory) if args.directory else default_dir()
    present = load(where)
    if args.check or (present is not None and present.versions == PACKAGES):
        if present is None:
            print(f"no browser assets in {where}")
            return 1
        print(f"browser assets in {where}: {present.versions}")
        return 0
    try:
        installed = install(where)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"could not fetch the browser assets: {exc}", file=sys.stderr)
        return 1
    print(f"browser assets in {where}: {installed.versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
