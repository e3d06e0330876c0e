"""Study 1 (regime): the success maps with the suite's reconstruction of the regime, the smallest succeeding
eta_2, the certified cells."""
from __future__ import annotations

import pathlib

from app.render.scope_studies import num, table


def _certified_line(per: dict) -> str:
    cells = [c for u in per["certified"] for c in u["cells"]]
    if not cells:
        return "–"
    counts = {}
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    return "; ".join(f"{s}: {n}" for s, n in sorted(counts.items()))


def _beyond(beyond: dict) -> str:
    """The sentence on the rows with eta_1 >= eta1_max (outside the reconstructed regime)."""
    rows = [(d, f, e2) for d, per in sorted(beyond.items(), key=lambda kv: int(kv[0]))
            for f, e2 in sorted(per.items(), key=lambda kv: float(kv[0]))]
    if not rows:
        return ""
    won = [(d, f) for d, f, e2 in rows if e2 is not None]
    if not won:
        return "No eta_2 on the grid succeeds at eta_1 >= eta1_max. "
    return ("Outside the reconstructed regime (eta_1 >= eta1_max), the plan also succeeds at eta_1 >= eta1_max for some eta_2 on the "
            "grid (" + ", ".join(f"d = {d}, eta_1 = {f} eta1_max" for d, f in won) + "). ")


def tightness(ratios: list[float]) -> float:
    """How far above the smallest succeeding eta_2 the reconstructed eta2_min lies, in percent of eta2_min, on
    average over d: 100 (1 - mean of smallest / eta2_min).

    >>> round(tightness([0.801, 0.834, 0.857]), 1)
    16.9
    """
    return 100 * (1 - sum(ratios) / len(ratios))


def _by_d(per_d: dict) -> list[dict]:
    """The per-d summaries in increasing d (scope.json keeps them under string keys, sorted as text)."""
    return sorted(per_d.values(), key=lambda per: per["d"])


def markdown(summary: dict) -> str:
    v = summary["verdict"]
    rows = []
    for per in _by_d(summary["per_d"]):
        h = per["at_half"]
        rows.append([per["d"], per["T"], num(per["eta1_max"]), num(h["eta2_min"], 4), num(h["smallest_T"], 3),
                     num(h["ratio_T"], 3), num(h["smallest_inf"], 3), num(h["ratio_inf"], 3),
                     f"{per['theorem_cells'] - len(per['theorem_cells_failing'])} / {per['theorem_cells']}",
                     _certified_line(per)])
    lines = [f"Three-phase plan (one output step eta_1, one attention step eta_2, T output steps eta_3 = 1) at "
             f"epsilon = {num(v['epsilon'])}, exact population evaluation on a grid of (eta_1, eta_2) per d. "
             "eta1_max, eta2_min and T are the suite's reconstruction of the regime (numerics/theorem/regime.py), "
             "not figures the paper states: T is the phase-3 length of the reconstructed plan at eta_1 = "
             "eta1_max / 2, eta_2 = eta2_min. The smallest succeeding eta_2 is at eta_1 = eta1_max / 2, found by "
             "bisection (relative width 1e-4; an estimate that assumes one crossing along eta_2).", "",
             *table(["d", "T", "eta1_max", "eta2_min", "smallest eta_2 (T steps)", "/ eta2_min",
                     "smallest eta_2 (T -> inf)", "/ eta2_min", "cells of the reconstructed regime that succeed",
                     "cells certified at their corners"], rows), ""]
    s = summary["scaling"]
    contained = all(v["contains"].values())
    ratios = [r for r in v["ratios_T"].values() if r is not None]
    c = v["certified_counts"]
    lines.append(
        "**Verdict.** " + (
            f"At every d tested ({', '.join(sorted(v['contains'], key=int))}) the success map contains the "
            "suite's reconstruction of the regime: every grid cell with eta_1 < eta1_max and eta_2 >= eta2_min "
            "reaches the target. "
            if contained else
            "The success map does NOT contain the suite's reconstruction of the regime at d = "
            + ", ".join(k for k, ok in sorted(v["contains"].items(), key=lambda kv: int(kv[0])) if not ok)
            + " (cells of the region that miss the "
            "target are listed in scope.json). ")
        + (f"The reconstruction is tight within about {tightness(ratios):.0f} % in eta_2: the smallest "
           f"succeeding eta_2 is {num(min(ratios), 2)} to {num(max(ratios), 2)} times eta2_min at eta_1 = "
           f"eta1_max / 2 (with the same T), {100 * (1 - max(ratios)):.0f} to {100 * (1 - min(ratios)):.0f} % "
           "below eta2_min, "
           if ratios and max(ratios) < 1 else
           f"The smallest succeeding eta_2 is {num(min(ratios), 2)} to {num(max(ratios), 2)} times eta2_min, "
           if ratios else "No eta_2 on the grid succeeded, ")
        + f"and both grow like d to the power {num(s['slope_eta2_min'], 2)} (eta2_min) and "
        f"{num(s['slope_smallest_T'], 2)} (smallest succeeding; least-squares slopes of log eta_2 on log d over "
        f"{len(s['d'])} values of d, estimates). " + _beyond(v["beyond_eta1_max"]) + "Certified in arb at the four corners of cells "
        f"around the boundary: {c['succeeds at every corner']} cells succeed at every corner, "
        f"{c['fails at every corner']} fail at every corner (after the T steps), {c['straddles the boundary']} "
        f"straddle it and {c['undecided']} are undecided; the corners are certified, the points between them "
        "are not (no monotonicity in (eta_1, eta_2) is proved here).")
    return "\n".join(lines) + "\n"


MARKERS = {"PASS": "^", "FAIL": "v", "UNDECIDED": "o"}


def axis_labels(values) -> list[str]:
    """Tick labels of one axis in one notation: three significant digits in plain text when every value
    prints without an exponent that way, else every value as m.mm e{k} (``917`` never stands next to
    ``3.67e+03``).

    >>> axis_labels([44.1, 88.2, 705.0])
    ['44.1', '88.2', '705']
    >>> axis_labels([917.3, 3670.0])
    ['9.17e2', '3.67e3']
    """
    plain = [f"{v:.3g}" for v in values]
    if not any("e" in t for t in plain):
        return plain
    out = []
    for v in values:
        m, k = f"{v:.2e}".split("e")
        out.append(f"{m}e{int(k)}")
    return out


def corner_marks(per: dict, fr: list, e2) -> dict[tuple[int, int, str], tuple[float, float]]:
    """The certified corners of one d in grid coordinates, one mark per (column, row, status): corners
    shared by neighbouring cells are drawn once, and a succeeding corner sits a third of a column left of
    its grid point and a failing one a third right, so that the two kinds never stack on one point."""
    import numpy as np

    shift = {"PASS": -1 / 3, "FAIL": 1 / 3, "UNDECIDED": 0.0}
    marks = {}
    for u in per["certified"]:
        for c in u["corners"]:
            f = round(c["eta_1"] / per["eta1_max"], 6)
            i = fr.index(f) if f in fr else int(np.argmin([abs(g * per["eta1_max"] - c["eta_1"]) for g in fr]))
            j = int(np.argmin(np.abs(np.asarray(e2) - c["eta_2"])))
            marks[(i, j, c["status"])] = (i + shift[c["status"]], j)
    return marks


SUCCEEDS, FAILS = "#56b4e9", "#e69f00"
"""Okabe-Ito sky blue and orange: a grid point that succeeds and one that fails stay apart under red-green
colour blindness (they differ on the blue-yellow axis and in lightness), as the sweep's heat maps do."""


def figure(summary: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    per_ds = _by_d(summary["per_d"])
    fig, axes = plt.subplots(1, len(per_ds), figsize=(4.6 * len(per_ds), 4.0), squeeze=False)
    for ax, per in zip(axes[0], per_ds):
        fr = [r["eta1_frac"] for r in per["rows"]]
        e2 = np.array(per["eta2_grid"])
        ok = np.array([r["succeeds"] for r in per["rows"]], dtype=float)
        ax.pcolormesh(np.arange(len(fr) + 1) - 0.5, np.arange(len(e2) + 1) - 0.5, ok.T,
                      cmap=ListedColormap([FAILS, SUCCEEDS]), vmin=0, vmax=1, shading="flat")
        ax.set_xticks(range(len(fr)), [num(f, 2) for f in fr], rotation=90, fontsize=7)
        ticks = list(range(0, len(e2), max(1, len(e2) // 8)))
        ax.set_yticks(ticks, axis_labels([e2[t] for t in ticks]), fontsize=7)
        # the reconstructed regime: eta_1 < eta1_max and eta_2 >= eta2_min(eta_1), in grid coordinates
        xs, ys = [], []
        for i, r in enumerate(per["rows"]):
            if r["eta2_min"] is not None:
                xs.append(i)
                ys.append(np.interp(np.log(r["eta2_min"]), np.log(e2), np.arange(len(e2)), left=-0.5,
                                    right=len(e2) - 0.5))
        ax.step(xs, ys, where="mid", color="navy", lw=2, label="eta2_min (the suite's reconstruction of the regime above)")
        edge = sum(f < 1 for f in fr) - 0.5
        ax.axvline(edge, color="navy", ls="--", lw=1.5, label="eta1_max")
        for (_, _, status), (x, y) in corner_marks(per, fr, e2).items():
            ax.plot(x, y, marker=MARKERS[status], color="k", ms=3.5, alpha=0.8, ls="none")
        ax.set_xlabel("eta_1 / eta1_max")
        ax.set_ylabel("eta_2 (attention step)")
        ax.set_title(f"d = {per['d']}: success after T = {per['T']} steps", fontsize=9)
    handles = [Patch(color=SUCCEEDS, label="grid point succeeds"), Patch(color=FAILS, label="grid point fails"),
               *axes[0][0].get_legend_handles_labels()[0],
               Line2D([], [], marker="^", color="k", ls="none", ms=4, label="corner certified: succeeds"),
               Line2D([], [], marker="v", color="k", ls="none", ms=4, label="corner certified: fails")]
    if any(c["status"] == "UNDECIDED" for per in per_ds for u in per["certified"] for c in u["corners"]):
        handles.append(Line2D([], [], marker="o", color="k", ls="none", ms=4, label="corner undecided"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=7.5, frameon=False)
    fig.suptitle("Three-phase success map (exact population risk; markers: corners certified in arb)", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
