"""Run an autosp console script (`autosp-opt`, ...) from the source tree this file lives in.

    python test/lit/tools/from_source.py autosp-opt [args...]

The lit suite tests the working tree it belongs to, not whatever `autosp` the interpreter has
installed: an editable install made from another checkout would otherwise be tested silently.
The package -> directory mapping and the entry points are read from pyproject.toml, so this stays
in sync with the packaging. Only the dependencies (torch, torch-mlir) must be installed.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _pyproject() -> tuple[dict[str, str], dict[str, str]]:
    """(package -> directory, script -> 'module:function') from pyproject.toml."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            cfg = tomllib.load(f)
        return cfg["tool"]["setuptools"]["package-dir"], cfg["project"]["scripts"]
    except ImportError:  # Python 3.10: the two tables are flat `"key" = "value"` lines
        text = open(path).read()

        def table(name: str) -> dict[str, str]:
            m = re.search(r"^\[" + re.escape(name) + r"\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
            return dict(re.findall(r'^"?([\w.-]+)"?\s*=\s*"([^"]+)"', m.group(1), re.M)) if m else {}
        return table("tool.setuptools.package-dir"), table("project.scripts")


PACKAGE_DIRS, SCRIPTS = _pyproject()


class _SourceTree(importlib.abc.MetaPathFinder):
    """Resolve the mapped packages (autosp, autosp.passes, ...) to this tree, before any installed
    copy; their submodules are then found through the package's __path__ as usual."""

    def find_spec(self, name, path=None, target=None):
        if name not in PACKAGE_DIRS:
            return None
        pkg = os.path.join(ROOT, PACKAGE_DIRS[name])
        return importlib.util.spec_from_file_location(
            name, os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg])


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in SCRIPTS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(SCRIPTS)}}} [args...]")
    sys.meta_path.insert(0, _SourceTree())
    module, _, func = SCRIPTS[sys.argv[1]].partition(":")
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    return getattr(importlib.import_module(module), func)()


if __name__ == "__main__":
    sys.exit(main())
