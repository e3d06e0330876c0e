"""The import rule of docs/architecture.md, read from the code's own import statements.

Rooms, from the bottom up: ``theory`` (the symbolic setting), the shared core of ``numerics`` (its top-level
modules), the two domains ``numerics.theorem`` and ``numerics.experiments``, the studies that span both
(``numerics.scope``, ``numerics.bench``), and ``app`` on top.  A room imports only rooms below it, the two
domains never import each other, and nothing below ``app`` imports ``app`` or ``argparse``.  Imports inside
functions count as much as those at the top of a module.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ROOMS = ("theory", "core", "theorem", "experiments", "scope", "bench", "app")
MAY_IMPORT = {
    "theory": {"theory"},
    "core": {"theory", "core"},
    "theorem": {"theory", "core", "theorem"},
    "experiments": {"theory", "core", "experiments"},
    "scope": {"theory", "core", "theorem", "experiments", "scope"},
    "bench": {"theory", "core", "theorem", "experiments", "bench"},
    "app": set(ROOMS),
}
"""Which rooms each room may import (docs/architecture.md, "Who may import whom")."""
PRESENTATION_ONLY = ("argparse",)
"""Modules that only ``app`` may import: flag parsing is presentation."""


def room(module: str) -> str | None:
    """The room of a dotted module name of this project, or None for a third-party or standard module."""
    parts = module.split(".")
    if parts[0] in ("theory", "app"):
        return parts[0]
    if parts[0] != "numerics":
        return None
    if len(parts) > 1 and parts[1] in ("theorem", "experiments", "scope", "bench"):
        return parts[1]
    return "core"


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in the file, relative imports resolved, names of
    ``from package import module`` included as ``package.module``."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{alias.name}") for alias in node.names]
    return out


def violations(root: Path) -> list[str]:
    """Every import that breaks the rule, as 'file:line: room imports module (room)'."""
    found = []
    for top in ("theory", "numerics", "app"):
        for path in sorted((root / top).rglob("*.py")):
            here = room(module_name(path, root))
            for line, mod in imports_of(path, root):
                there = room(mod)
                where = f"{path.relative_to(root)}:{line}"
                if there is not None and there not in MAY_IMPORT[here]:
                    found.append(f"{where}: {here} imports {mod} ({there})")
                if here != "app" and mod.split(".")[0] in PRESENTATION_ONLY:
                    found.append(f"{where}: {here} imports {mod} (presentation)")
    return sorted(set(found))


def test_the_library_keeps_the_import_rule():
    assert violations(ROOT) == []


@pytest.mark.parametrize("where,source,expected", [
    ("numerics/theorem/x.py", "from numerics.experiments import engine\n", "theorem imports numerics.experiments"),
    ("numerics/experiments/x.py", "def f():\n    from numerics.theorem import series\n",
     "experiments imports numerics.theorem.series"),
    ("numerics/x.py", "from app.render import plotting\n", "core imports app.render"),
    ("theory/x.py", "from numerics import model\n", "theory imports numerics.model"),
    ("numerics/bench/x.py", "from ..scope import kqv\n", "bench imports numerics.scope.kqv"),
    ("numerics/scope/x.py", "import argparse\n", "scope imports argparse (presentation)"),
])
def test_each_kind_of_breach_is_found(tmp_path, where, source, expected):
    for pkg in ("theory", "numerics", "numerics/theorem", "numerics/experiments", "numerics/bench",
                "numerics/scope", "app", "app/render"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / where).write_text(source)
    found = violations(tmp_path)
    assert len(found) >= 1 and all(f.startswith(where) for f in found)
    assert any(expected in f for f in found), found


def test_allowed_imports_are_not_flagged(tmp_path):
    for pkg in ("theory", "numerics", "numerics/scope", "app"):
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "numerics/scope/x.py").write_text(
        "from numerics.theorem import training\nfrom numerics.experiments import lag\nfrom numerics import model\n")
    (tmp_path / "app/x.py").write_text("import argparse\nfrom numerics.theorem import job\n")
    assert violations(tmp_path) == []
