"""The checkout passes ``ruff check`` under the configuration in pyproject.toml (CONTRIBUTING.md, "Linter"),
and that configuration holds the rules CONTRIBUTING.md names: a linter run that read another configuration,
or none, would pass code this one refuses."""
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    """The ruff command: the executable on PATH, else the one the ``ruff`` package installed."""
    found = shutil.which("ruff")
    if found:
        return [found]
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (it is in the test extra and requirements.lock)")
    return [sys.executable, "-m", "ruff"]


def _check(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    # from the checkout, so ruff reads its pyproject.toml; --no-cache leaves no .ruff_cache behind
    return subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", *args], cwd=ROOT,
                          input=stdin, capture_output=True, text=True, timeout=120)


def test_checkout_passes_ruff():
    result = _check(".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("source, code", [
    ("import os\n", "F401"),                                  # ruff's defaults
    ("from . import model\n", "TID252"),                      # absolute imports only, even from a sibling
    ("x = 1 \n", "W291"),                                     # trailing whitespace
    ("try:\n    pass\nexcept Exception:\n    pass\n", "BLE001"),
    ("import numpy as np\nnp.random.seed(0)\n", "NPY002"),    # the legacy global random state
    ("x = '" + "a" * 200 + "'\n", "E501"),                    # over the hard line limit
])
def test_configuration_refuses(source, code):
    result = _check("--stdin-filename", "numerics/lint_probe.py", "-", stdin=source)
    assert result.returncode == 1 and code in result.stdout, result.stdout + result.stderr

