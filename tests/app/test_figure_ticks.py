"""Tick labels of the figures: one notation on every tick of one axis."""
from __future__ import annotations

import re

import pytest

import app.render.plotting as plotting


def _notations(labels):
    """The notations used by non-empty tick labels: "exp" for 1e{k}, "plain" for integers >= 10."""
    kinds = set()
    for text in labels:
        if re.fullmatch(r"1e-?\d+", text):
            kinds.add("exp")
        elif re.fullmatch(r"\d+", text) and int(text) >= 10:
            kinds.add("plain")
    return kinds


@pytest.mark.parametrize("top", [1e4, 2e4, 1e6, 5e3])
def test_step_axis_uses_one_notation(top):
    # risk_curves.png's step axis at --d 10000 reaches 1e4: its ticks once read "1000" then "1e4"
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([0, top], [1, 2])
    ax.set_xscale("symlog", linthresh=2)
    ax.set_xlim(0, top)
    plotting.step_ticks(ax.xaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(_notations(labels)) == 1, labels
