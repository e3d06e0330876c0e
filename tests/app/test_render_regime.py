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
