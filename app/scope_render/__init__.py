"""Presentation of the studies of ``occ-companion scope``: one module per study (``app.scope_render.NAME``,
with ``markdown(summary) -> str`` and ``figure(summary, path)``), and the helpers they share."""
from __future__ import annotations

import math


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
