"""docs/sweep/ re-rendered from its committed tables (``occ-companion sweep --from-tables``), without the
results store: the same pages, and pages that follow the tables' numbers."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from app import exitcodes
from app.render import sweep as sweep_render
from app.render import table1 as table1_render
from numerics.experiments import runner

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sweep"
CELL = ("k2=1/shared/gd/plateau", 25)
"""A cell of the committed sweep (the first reading at d = 25) whose numbers the tests change."""


class _Staged:
    """A transaction that keeps what ``sweep_render.write`` stages, the figures left undrawn."""

    def __init__(self):
        self.files: dict[str, bytes] = {}

    def write_text(self, name, text):
        self.files[name] = text.encode()
        return Path(name)

    def write(self, name, fill):
        if not name.endswith(".png"):
            buf = io.BytesIO()
            fill(buf)
            self.files[name] = buf.getvalue()
        return Path(name)


def _copy_tables(where: Path) -> Path:
    for name in ("sweep.json", "tidy.csv"):
        shutil.copy(DOCS / name, where / name)
    return where


def _plan_line(page: str, d: int, row: str, plan: str) -> list[str]:
    section = page.split(f"## d = {d}\n")[1].split("\n## d = ")[0]
    line = next(ln for ln in section.splitlines() if ln.startswith(f"| {row} | {plan} |"))
    return [c.strip() for c in line.split("|")[1:-1]]


def test_committed_sweep_rerenders_from_its_tables():
    """Every reading page, sweep.md, sweep.json and the two CSV tables of docs/sweep/ are what its committed
    tables render, byte for byte."""
    summary = sweep_render.from_tables(DOCS)
    staged = _Staged()
    sweep_render.write(summary, staged)
    pages = [n for n in staged.files if n.endswith(".md")]
    assert len(pages) == 1 + len({c["reading"] for c in summary["cells"]})
    assert sorted(pages) == sorted(p.name for p in DOCS.glob("*.md"))
    for name, data in staged.files.items():
        assert data == (DOCS / name).read_bytes(), name


def test_a_changed_number_in_the_tidy_table_changes_the_page(tmp_path):
    """The reading page's plan table follows the tidy table (each seed's risk, accuracy and steps) and
    sweep.json's record of the step-size search (step-insensitive): change them and the line changes to the
    changed numbers."""
    import pandas as pd

    where = _copy_tables(tmp_path)
    reading, d = CELL
    before = _plan_line(sweep_render.reading_page(sweep_render.from_tables(where), reading), d, "AND (H=2)",
                        "output_only")
    tidy = pd.read_csv(where / "tidy.csv", keep_default_na=False, na_values=[""])
    at = (tidy.reading == reading) & (tidy.d == d) & (tidy.row == "AND (H=2)") & (tidy.plan == "output_only")
    assert at.sum() == 5
    tidy.loc[at, "test_acc"] = [0.5, 0.6, 0.7, 0.8, 0.9]
    tidy.loc[at.idxmax(), "test_risk"] = 0.125
    tidy.loc[at.idxmax(), "steps"] = 40
    tidy.to_csv(where / "tidy.csv", index=False)
    summary = json.loads((where / "sweep.json").read_text())
    cell = next(c for c in summary["cells"] if (c["reading"], c["d"]) == CELL)
    assert cell["plans"]["AND (H=2)"]["output_only"]["insensitive"] is False
    cell["plans"]["AND (H=2)"]["output_only"]["insensitive"] = True
    (where / "sweep.json").write_text(json.dumps(summary, indent=1))

    after = _plan_line(sweep_render.reading_page(sweep_render.from_tables(where), reading), d, "AND (H=2)",
                       "output_only")
    risks = list(tidy.loc[at, "test_risk"])
    steps = list(tidy.loc[at, "steps"])
    assert after[2] == table1_render.fmt(runner.stats(risks)) != before[2]
    assert after[3] == table1_render.fmt(runner.stats([0.5, 0.6, 0.7, 0.8, 0.9])) == "0.70 ± 0.16" != before[3]
    assert after[4] == table1_render.fmt(runner.stats(steps), 4) != before[4]
    assert after[5] == "step-insensitive" and before[5] == "converged"
    assert after[6] == before[6]


def test_a_sweep_json_without_its_searches_is_refused(tmp_path):
    where = _copy_tables(tmp_path)
    summary = json.loads((where / "sweep.json").read_text())
    del summary["cells"][0]["plans"]
    (where / "sweep.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match="no step-size searches"):
        sweep_render.from_tables(where)


@pytest.mark.parametrize("extra", [["--d", "25"], ["--no-train"], ["--quick"], ["--workers", "1"]])
def test_from_tables_refuses_the_flags_it_would_ignore(extra, tmp_path, capsys):
    from app.cli import main

    assert main(["sweep", "--from-tables", str(DOCS), "--out", str(tmp_path / "out"), *extra]) == exitcodes.USAGE
    assert extra[0] in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
