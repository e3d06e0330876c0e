"""The regime study's figure: one tick notation per axis, certified corners that do not stack."""
from __future__ import annotations

import re

from app.render.scope_studies import regime


def test_axis_labels_use_one_notation():
    # the eta_2 ticks of the d = 50 map once read "3.67e+03" beside "917"
    labels = regime.axis_labels([229.0, 458.0, 917.0, 1830.0, 3670.0])
    assert all(re.fullmatch(r"\d\.\d\de\d+", t) for t in labels), labels
    assert regime.axis_labels([44.1, 705.0]) == ["44.1", "705"]


def test_corner_marks_do_not_stack():
    # two neighbouring cells share corners, and a succeeding and a failing corner can meet at one grid point
    corner = lambda e1, e2, status: {"eta_1": e1, "eta_2": e2, "status": status}  # noqa: E731
    per = {"eta1_max": 10.0, "certified": [
        {"corners": [corner(3.0, 100.0, "PASS"), corner(3.0, 110.0, "FAIL"), corner(4.0, 100.0, "PASS")]},
        {"corners": [corner(3.0, 100.0, "PASS"), corner(3.0, 110.0, "PASS"), corner(4.0, 110.0, "FAIL")]}]}
    marks = regime.corner_marks(per, [0.3, 0.4], [100.0, 110.0])
    points = list(marks.values())
    assert len(points) == len(set(points)) == 5
    assert marks[(0, 1, "PASS")][0] < 0 < marks[(0, 1, "FAIL")][0]


def _regime_summary(ratios: dict) -> dict:
    """The committed regime summary with its smallest succeeding eta_2 / eta2_min replaced by ``ratios``."""
    import copy
    import json
    from pathlib import Path

    record = json.loads((Path(__file__).resolve().parents[2] / "docs" / "scope_full" / "scope.json").read_text())
    summary = copy.deepcopy(record["studies"]["regime"]["summary"])
    summary["verdict"]["ratios_T"] = ratios
    return summary


def test_the_verdict_states_how_tight_the_reconstruction_is():
    """"tight within about X %" with X = 100 (1 - mean ratio) from the page's own ratios, the range of the
    ratios below eta2_min, and eta2_min named as the suite's reconstruction, never "the theorem's region"."""
    md = regime.markdown(_regime_summary({"10": 0.801, "50": 0.834, "200": 0.857}))
    assert "tight within about 17 % in eta_2" in md and "14 to 20 % below eta2_min" in md
    assert "suite's reconstruction of the regime" in md
    assert "conservative" not in md and "theorem's sufficient region" not in md and "theorem's plan" not in md
    md = regime.markdown(_regime_summary({"10": 0.5, "50": 0.6, "200": 0.7}))
    assert "tight within about 40 % in eta_2" in md and "30 to 50 % below eta2_min" in md
