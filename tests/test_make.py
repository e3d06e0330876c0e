"""The two commands of a fresh clone (Makefile, README's quick start): ``make run`` and ``make test`` set up
the virtual environment .venv when it is missing and run the main job and the README's test command in it.

The slow test clones this repository, sets it up (``make setup``: .venv from requirements.lock, then this
checkout installed into it without re-resolving), runs ``make run`` at a small d, and checks that
``make test`` would run the README's test command (``make -n``: the whole suite is not run again here)."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command(readme: str) -> str:
    """The test command of README's quick-start table (its row ``| tests | `COMMAND` |``)."""
    match = re.search(r"^\| tests \| `([^`]+)` \|$", readme, re.MULTILINE)
    assert match, "README's quick-start table has no `| tests | `...` |` row"
    return match.group(1)


def _make(clone: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(clone), *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_readme_test_command_is_read_from_its_row():
    assert readme_test_command("| x | y |\n| tests | `python3 -m pytest -q tests` |\n") == "python3 -m pytest -q tests"
    with pytest.raises(AssertionError):
        readme_test_command("| test | `python3 -m pytest` |\n")


def test_readme_leads_with_the_two_make_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):]
    quick = quick[:quick.index("\n## ", 1)]
    assert "make run" in quick and "make test" in quick
    assert quick.index("make run") < quick.index("| environment |")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None, reason="needs make and git")
def test_make_run_and_test_from_a_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    # the Makefile and README of this working tree, committed or not (the clone has the committed ones)
    for name in ("Makefile", "README.md"):
        shutil.copy(ROOT / name, clone / name)
    assert not (clone / ".venv").exists()

    setup = _make(clone, "setup", f"PYTHON={sys.executable}")
    assert setup.returncode == 0, setup.stderr
    venv_python = clone / ".venv" / "bin" / "python3"
    # this clone's code is what the environment imports (from outside the clone: no current-directory path)
    where = subprocess.run([str(venv_python), "-c", "import app; print(app.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    assert Path(where).resolve().is_relative_to(clone.resolve())
    assert (clone / ".venv" / "bin" / "occ-companion").exists()

    # set up once: a second make finds nothing missing and runs only the command
    out = tmp_path / "results"
    assert _make(clone, "-n", "run", f"ARGS=--d 3 --no-plot --out {out}").stdout.splitlines() == \
        [f"occ-companion run --d 3 --no-plot --out {out}"]
    run = _make(clone, "run", f"ARGS=--d 3 --no-plot --quiet --out {out}")
    assert run.returncode == 0, run.stderr
    assert "three-phase reaches risk <= epsilon = 0.001: yes" in run.stdout
    summary = json.loads((out / "summary.json").read_text())
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert summary["run"]["git_commit"] == head and summary["setting"]["d"] == 3

    # `make test` runs exactly the README's test command (in .venv: the Makefile puts .venv/bin first on PATH)
    dry = _make(clone, "-n", "test")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [readme_test_command((clone / "README.md").read_text())]

    # a changed lock makes the next command set up again before it runs
    (clone / "requirements.lock").touch()
    assert _make(clone, "-n", "test").stdout.splitlines()[-2:] == \
        ["touch .venv/.occ-setup", readme_test_command((clone / "README.md").read_text())]
