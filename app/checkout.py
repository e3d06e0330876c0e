"""Where the suite's checkout is: the repository root (parent of the ``app`` package), its docs and
README, and the git commit of the code that ran."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository root when the package runs from a checkout (an editable install or ``python -m``)."""


class NotInCheckout(Exception):
    """The package is installed outside a checkout, so there are no docs/ or README.md to write."""


def checkout_root() -> Path:
    """The repository root; raises NotInCheckout when ``app`` is not inside a checkout."""
    if (ROOT / "pyproject.toml").is_file() and (ROOT / "theory").is_dir() and (ROOT / "docs").is_dir():
        return ROOT
    raise NotInCheckout(f"the occurrence-companion package at {ROOT} is not in a checkout of the repository "
                        "(no pyproject.toml and docs/ beside it); clone the repository and install it with "
                        "`python3 -m pip install -e .` to regenerate or check the docs")


def git_commit() -> tuple[str | None, bool | None]:
    """(commit hash, working tree has uncommitted changes) of the checkout, or (None, None) without git."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None, None
        status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head.stdout.strip(), bool(status.stdout.strip()) if status.returncode == 0 else None
