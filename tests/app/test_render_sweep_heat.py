"""The sweep's heat maps: verdict colours told apart under red-green colour blindness, the default reading
marked."""
from __future__ import annotations

import io
import itertools

import pytest

from app.render import sweep

# Vienot, Brettel and Mollon (1999): protanopia and deuteranopia as 3x3 maps of linear RGB
DICHROMACY = {
    "protanopia": ((0.11238, 0.88762, 0.0), (0.11238, 0.88762, 0.0), (0.00401, -0.00401, 1.0)),
    "deuteranopia": ((0.29275, 0.70725, 0.0), (0.29275, 0.70725, 0.0), (-0.02234, 0.02234, 1.0)),
}


def _linear(hex_colour: str) -> tuple[float, ...]:
    out = []
    for k in (1, 3, 5):
        c = int(hex_colour[k:k + 2], 16) / 255
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return tuple(out)


def _seen(hex_colour: str, matrix) -> tuple[float, ...]:
    rgb = _linear(hex_colour)
    return tuple(sum(m * c for m, c in zip(row, rgb)) for row in matrix)


@pytest.mark.parametrize("kind", sorted(DICHROMACY))
def test_verdict_colours_stay_apart_under_colour_blindness(kind):
    # the maps once drew "holds" green against "does not hold" red, which deuteranopia brings within 0.12
    for a, b in itertools.combinations(sweep.VERDICTS, 2):
        pa, pb = _seen(sweep.COLOURS[a], DICHROMACY[kind]), _seen(sweep.COLOURS[b], DICHROMACY[kind])
        assert sum((x - y) ** 2 for x, y in zip(pa, pb)) ** 0.5 > 0.2, (a, b)


def _summary(default):
    cells = [{"reading": r, "d": 5, "verdicts": [{"row": "occurrence", "claim": "lag", "verdict": v}]}
             for r, v in (("a", "holds"), ("b", "does not hold"))]
    return {"cells": cells, "readings_file": {"axes": ["x"]}, "default_reading": default}


def test_default_reading_column_is_marked():
    assert sweep.column_labels(_summary("b"), ["a", "b"]) == ["a", "b (default)"]
    assert sweep.column_labels(_summary(None), ["a", "b"]) == ["a", "b"]
    for default in ("b", None):
        fh = io.BytesIO()
        sweep.heat_map(_summary(default), 5, fh)
        assert fh.getvalue().startswith(b"\x89PNG")
