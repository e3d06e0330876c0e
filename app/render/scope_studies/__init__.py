"""Presentation of the studies of ``occ-companion scope``: one module per study (``app.render.scope_studies.NAME``,
with ``markdown(summary) -> str`` and ``figure(summary, path)``), and the helpers they share."""
from __future__ import annotations

import math
import pathlib


def num(x, digits: int = 3) -> str:
    """A number to ``digits`` significant digits ("–" for None, "nan"/"inf" as such)."""
    if x is None:
        return "–"
    if isinstance(x, bool) or isinstance(x, int):
        return str(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table: the header, its rule and one line per row (cells as given, str() of each)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def figure(ncols: int, width: float = 5.0, height: float = 4.0):
    """(Figure, axes list) of one row of ``ncols`` panels, headless."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def save(fig, path: pathlib.Path) -> None:
    """Write the figure as PNG to ``path``."""
    fig.savefig(pathlib.Path(path), format="png", dpi=110)
