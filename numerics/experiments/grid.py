"""The extending step-size grid: a search over integer offsets on log-spaced axes.

A point is a tuple of integer offsets, one per axis (the learning rate of an axis is centre x ratio^offset).
The search starts from the ``grid_points`` offsets per axis around 0, scores them (lower is better; None for a
diverged point, which is never chosen), and, while the best point sits at an edge of what has been tried,
adds the face of points one step beyond that edge, up to ``max_extensions`` times per side of each axis.  An
edge needs no extension when the best point's inner neighbour scores within ``flat`` of it (the scores are
flat there: a further point cannot be told apart), or when the point beyond it has been tried (then it was
worse, or diverged, and the best is interior).  Edges that remain after the extensions run out are reported:
a choice there is an artefact of the grid, and a verdict resting on it is refused.  When every point ties
(to TIE_RTOL), the plan does not depend on its step size: it is 'insensitive' and takes offset 0.
"""
from __future__ import annotations

TIE_RTOL = 1e-9


class GridSearch:
    """The search of one plan (see module doc): ``pending`` -> score them -> ``record`` -> until done."""

    def __init__(self, n_axes: int, grid_points: int, max_extensions: int, flat: float = 0.0):
        half = (grid_points - 1) // 2
        offsets = range(-half, grid_points - half)
        pts = [()]
        for _ in range(n_axes):
            pts = [p + (o,) for p in pts for o in offsets]
        self.n_axes = n_axes
        self.max_extensions = max_extensions
        self.flat = flat
        self.tried: dict[tuple, float | None] = {}
        self.pending: list[tuple] = sorted(pts)
        self.extensions = {(i, s): 0 for i in range(n_axes) for s in (-1, 1)}

    def record(self, scores: dict) -> None:
        """Scores of the pending points (None: diverged); queues the next extension, if any."""
        for p in self.pending:
            v = scores[p]
            self.tried[p] = None if v is None or v != v else float(v)
        self.pending = []
        best = self.best()
        if self.insensitive():
            return
        nxt = set()
        if best is None:  # every point failed: smaller steps, on every axis
            for i in range(self.n_axes):
                if self.extensions[(i, -1)] >= self.max_extensions:
                    continue
                self.extensions[(i, -1)] += 1
                lo = min(p[i] for p in self.tried)
                nxt |= {p[:i] + (lo - 1,) + p[i + 1:] for p in self.tried if p[i] == lo}
            self.pending = sorted(q for q in nxt if q not in self.tried)
            return
        for i in range(self.n_axes):
            for side in (-1, 1):
                if not self._open_edge(best, i, side) or self.extensions[(i, side)] >= self.max_extensions:
                    continue
                self.extensions[(i, side)] += 1
                for p in self.tried:
                    if p[i] == best[i]:
                        q = p[:i] + (best[i] + side,) + p[i + 1:]
                        if q not in self.tried:
                            nxt.add(q)
        self.pending = sorted(nxt)

    def best(self) -> tuple | None:
        ok = {p: v for p, v in self.tried.items() if v is not None}
        if not ok:
            return None
        if self.insensitive():
            return tuple(0 for _ in range(self.n_axes))
        return min(ok, key=lambda p: (ok[p], sum(abs(x) for x in p)))

    def insensitive(self) -> bool:
        ok = [v for v in self.tried.values() if v is not None]
        return (len(ok) == len(self.tried) and len(ok) > 1
                and max(ok) - min(ok) <= TIE_RTOL * max(abs(max(ok)), 1e-300))

    def _open_edge(self, best: tuple, axis: int, side: int) -> bool:
        beyond = best[:axis] + (best[axis] + side,) + best[axis + 1:]
        if beyond in self.tried:
            return False
        inner = best[:axis] + (best[axis] - side,) + best[axis + 1:]
        v = self.tried.get(inner)
        return not (v is not None and abs(v - self.tried[best]) <= self.flat)

    def edges(self) -> list[tuple[int, int]]:
        """(axis, side) of every edge the chosen point still sits at (empty for an insensitive plan)."""
        best = self.best()
        if best is None or self.insensitive():
            return []
        return [(i, s) for i in range(self.n_axes) for s in (-1, 1) if self._open_edge(best, i, s)]

    @property
    def done(self) -> bool:
        return not self.pending
