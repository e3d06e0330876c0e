"""What the renderers of studies 2, 3 and 5 share: a Markdown table, numbers as estimates, and a bare
matplotlib figure on the Agg canvas written to a path."""
from __future__ import annotations

import pathlib


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Markdown table lines."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def num(x, digits: int = 3) -> str:
    """A number to ``digits`` significant digits ("n/a" for None)."""
    return "n/a" if x is None else f"{x:.{digits}g}"


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
