"""Figures read under red-green colour blindness: the colours that tell verdicts, outcomes and plans apart stay
apart under simulated protanopia and deuteranopia, and no figure code names a red-green colormap."""
from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from app.render import plotting
from app.render import sweep as sweep_render
from app.render.scope_studies import regime
from app.render.scope_studies import samples

RENDER = Path(__file__).resolve().parents[2] / "app" / "render"

# Machado, Oliveira and Fernandes (2009), severity 1, on linear RGB
DICHROMACY = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]])}
RED_GREEN_MAPS = ("RdYlGn", "RdGn", "Spectral", "jet", "rainbow", "gist_rainbow", "hsv", "brg", "nipy_spectral",
                  "gist_ncar", "prism")
"""Colormaps whose ends or steps are told apart by red against green (matplotlib's names)."""
BINARY_DELTA_E = 40.0
"""Two colours that carry a decision (succeeds or fails, holds or does not hold) differ by at least this CIELAB
distance under each simulation: RdYlGn's pair of the regime map came to under 20."""
CATEGORY_DELTA_E = 20.0
"""Line colours of distinct plans or measures (which also differ by label, and some by line style)."""


def _linear(c):
    c = np.asarray(c, float)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear):
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def seen_apart(a, b) -> float:
    """The smallest CIELAB distance between colours ``a`` and ``b`` as a protanope and a deuteranope see them."""
    la, lb = _linear(to_rgb(a)), _linear(to_rgb(b))
    return min(float(np.linalg.norm(_lab(np.clip(m @ la, 0, 1)) - _lab(np.clip(m @ lb, 0, 1))))
               for m in DICHROMACY.values())


def test_the_simulation_separates_what_it_should():
    """The criterion can fail: RdYlGn's success and failure colours (as the regime map drew them) and
    matplotlib's green against red fall under it, while blue against orange clears it."""
    import matplotlib

    cmap = matplotlib.colormaps["RdYlGn"]
    assert seen_apart(cmap(1.3 / 1.6), cmap(0.3 / 1.6)) < BINARY_DELTA_E
    assert seen_apart("tab:green", "tab:red") < CATEGORY_DELTA_E
    assert seen_apart("#0072b2", "#e69f00") > BINARY_DELTA_E


def test_outcome_colours_stay_apart():
    assert seen_apart(regime.SUCCEEDS, regime.FAILS) >= BINARY_DELTA_E
    assert seen_apart(sweep_render.COLOURS["holds"], sweep_render.COLOURS["does not hold"]) >= BINARY_DELTA_E


@pytest.mark.parametrize("palette", ["PLAN_COLOURS", "MEASURE_COLOURS", "SHAPE_COLOURS"])
def test_line_colours_stay_apart(palette):
    colours = getattr(samples if palette == "SHAPE_COLOURS" else plotting, palette)
    for (p, a), (q, b) in itertools.combinations(colours.items(), 2):
        assert seen_apart(a, b) >= CATEGORY_DELTA_E, (p, q)


def test_no_figure_code_names_a_red_green_colormap():
    names = re.compile(r"[\"'](?:" + "|".join(RED_GREEN_MAPS) + r")(?:_r)?[\"']")
    hits = [f"{path.relative_to(RENDER)}: {line.strip()}" for path in RENDER.rglob("*.py")
            for line in path.read_text().splitlines() if names.search(line)]
    assert not hits
    assert names.search('cmap="RdYlGn"') and names.search("colormaps['jet_r']")  # the pattern bites


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ordered_colours_rise_in_lightness_as_everyone_sees_them(n):
    """An ordered variable's colours (batch sizes, m) read in order by lightness alone, in normal vision and
    under both simulations, each step at least 5 CIELAB units of lightness."""
    colours = [to_rgb(c) for c in plotting.ordered_colours(n)]
    for m in (np.eye(3), *DICHROMACY.values()):
        lightness = [_lab(np.clip(m @ _linear(c), 0, 1))[0] for c in colours]
        assert all(b - a >= 5 for a, b in zip(lightness, lightness[1:])), lightness
