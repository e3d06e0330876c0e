"""occ-companion lag and the lag map's part of docs/lag.md: the sections and figures rendered from a record,
the page that occ-companion docs renders from the committed record, and the quick command end to end (the
map on a LocalCluster, its record, figures and page; a second run reuses every stored cell)."""
from __future__ import annotations

import json

import pytest

from app.cli import main
from app.render import lag as lag_render


@pytest.fixture
def cheap_page(monkeypatch):
    """The page without its certified tables (computed by numerics.theorem.lag, tested in checks/)."""
    for name in ("certified_table", "crossover_section", "long_budget_table", "value_table"):
        monkeypatch.setattr(lag_render, name, lambda: ["(table)"])
    lag_render._page.cache_clear()
    yield
    lag_render._page.cache_clear()


def _cell(mean, low, high, side):
    return {"mean": mean, "low": low, "high": high, "side": side, "n": 1}


def _record():
    cells = [_cell(3.0, 2.5, 3.5, "lags"), _cell(1.4, 1.2, 1.6, "lags"), _cell(0.8, 0.7, 0.9, "leads")]
    measure = {"ratio": cells, "shared": "lags", "risk_optimal": {"rho": 4.0, "risk": 0.01, "side": "leads"},
               "crossover": {"bracketed": True, "rho_star": 2.0, "bracket": [1.0, 4.0], "direction": "lags to leads",
                             "crossings": [{"bracket": [1.0, 4.0], "rho_star": 2.0, "direction": "lags to leads"}]}}
    flat = {**measure, "crossover": {"bracketed": False, "rho_star": None, "bracket": None, "direction": "lags",
                                     "crossings": []}}
    scale = {"risk": [0.1, 0.05, 0.01], "remainder": [0.01, 0.02, None], "chosen": [1.0, 1.0, 0.5], "edge": [[], [], []], "missing": [],
             "diverged": [], "measures": {"displacement": measure, "function": flat}}
    return {"config": {"d": 8, "seeds": 2, "reading": {"grid_ratio": 4.0, "max_steps": 150}},
            "rhos": [0.25, 1.0, 4.0], "start_scales": [0.0, 0.1], "quick": True, "cells": 6, "units_cpu_s": 60.0,
            "failed": {}, "rows": {"AND (H=2)": {"task": "AND", "heads": 2, "exact": False,
                                                 "scales": {"0.0": scale, "0.1": scale}}}}


def test_map_sections_state_the_crossover_and_the_conventions():
    text = "\n".join(lag_render.map_sections(_record(), "lag_map"))
    assert "| AND (H=2) | displacement | 1.4 [1.2, 1.6] | lags | 2 in [1, 4], lags to leads | 4 | leads |" in text
    assert "not bracketed (every decided point lags)" in text
    assert "| AND (H=2) | 0.1; eta_out 1 | 0.05; eta_out 1 | 0.01; eta_out 0.5 |" in text
    assert ("under one shared rate the attention lags by 2 of the 2 measures (displacement, function); at the "
            "risk-optimal ratio rho = 4 (the grid's edge: the optimum may lie beyond it) it lags by 0 (none) and "
            "leads by 2") in text
    assert ("under one shared rate the attention lags in 2, leads in 0 and is undecided in 0; at the risk-optimal "
            "ratio it lags in 0, leads in 2 and is undecided in 0. The ratio crosses 1 within the grid in 1 pairs "
            "(1 of them from lagging at small rho to leading at large rho), at rho* between 2 and 2.") in text
    assert "and, in brackets, the largest: AND (H=2) 0.02 (0.02)." in text
    assert "![AND (H=2): " in text and "(lag_map/lag_AND_H2.png)" in text
    assert "a quick run" in text


@pytest.mark.slow
def test_page_reads_the_committed_record(tmp_path, cheap_page):
    assert "## The lag map" not in lag_render.page(tmp_path)
    (tmp_path / lag_render.MAP_DIR).mkdir(parents=True)
    text = json.dumps(_record())
    (tmp_path / lag_render.MAP_RECORD).write_text(text)
    page = lag_render.page(tmp_path)
    assert "## The lag map on every Table 1 row" in page and page == lag_render.page_with_record(text)
    assert page.index("## The paper's claim") < page.index("## The mechanism") < page.index("## The lag map")


@pytest.mark.slow
def test_figure_is_written(tmp_path):
    path = tmp_path / "f.png"
    lag_render.figure(_record(), "AND (H=2)", path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_quick_command_writes_the_map_and_resumes(tmp_path, capsys, cheap_page):
    root = tmp_path / "checkout"
    (root / "docs").mkdir(parents=True)
    args = ["lag", "--quick", "--tasks", "occurrence,even_pairs", "--root", str(root), "--store",
            str(tmp_path / "store"), "--workers", "1", "--quiet"]
    assert main(args) == 0, capsys.readouterr().err
    record = json.loads((root / lag_render.MAP_RECORD).read_text())
    assert list(record["rows"]) == ["occurrence", "even_pairs"] and record["trained"] == record["cells"] == 16
    assert 1.0 in record["rhos"]
    occ = record["rows"]["occurrence"]["scales"]["0.0"]["measures"]
    assert set(occ) == {"displacement", "function", "alignment", "attribution"}
    for name in record["rows"]:
        assert (root / lag_render.MAP_DIR / lag_render.figure_name(name)).is_file()
    page = (root / lag_render.PAGE).read_text()
    assert page == lag_render.page(root)          # occ-companion docs renders the same page from the record
    capsys.readouterr()
    assert main(args) == 0
    again = json.loads((root / lag_render.MAP_RECORD).read_text())
    assert again["trained"] == 0 and again["reused"] == 16 and again["rows"] == record["rows"]
