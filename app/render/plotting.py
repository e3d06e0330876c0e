"""The main job's figure (matplotlib, headless): risk by training plan, and joint GD's gaps.

Drawn cheaply: a bare ``matplotlib.figure.Figure`` on the Agg canvas (no pyplot, no GUI state), a
fixed layout instead of ``tight_layout`` (which lays the figure out twice), plain-text tick labels
and legends instead of mathtext (whose parser costs more than the lines), and few minor ticks (each
tick is a set of artists).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, BinaryIO, Mapping

if TYPE_CHECKING:
    from numerics.theorem.training import Trajectory


def _power_of_ten(x: float, _pos=None) -> str:
    """Tick label of a log axis as plain text: 1e-3 at powers of ten, "" elsewhere.

    >>> _power_of_ten(0.001), _power_of_ten(1.0), _power_of_ten(0.002)
    ('1e-3', '1', '')
    """
    if x <= 0:
        return ""
    k = round(math.log10(x))
    if abs(math.log10(x) - k) > 1e-9:
        return ""
    return "1" if k == 0 else f"1e{k}"


def plain_log_ticks(axis) -> None:
    """Ticks of a log axis (``ax.xaxis`` or ``ax.yaxis``) drawn cheaply: plain-text labels at powers of ten
    (``_power_of_ten``) and unlabelled minor ticks at 2 and 5 only (each tick is a set of artists).  An axis
    that spans at most a decade (where matplotlib's log locator falls back to linear ticks, and may hold no
    power of ten) labels every tick in plain text instead (``_narrow_label``)."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    def label(minor):
        def fmt(x, _pos=None):
            lo, hi = sorted(axis.get_view_interval())
            if lo > 0 and hi <= 10 * lo:
                return _narrow_label(x)
            return "" if minor else _power_of_ten(x)
        return FuncFormatter(fmt)

    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(label(False))
    axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))
    axis.set_minor_formatter(label(True))


def _narrow_label(x: float) -> str:
    """Tick label on a log axis spanning at most a decade: three significant digits, plain text.

    >>> _narrow_label(0.45), _narrow_label(0.3), _narrow_label(2e-5)
    ('0.45', '0.3', '2e-05')
    """
    return f"{x:.3g}"


def _step_label(x: float, _pos=None, *, top: float = 0.0) -> str:
    """Tick label of the step axis (symlog), one notation per axis: integers on an axis that stays
    below 1e4, and 10^k as 1e{k} for every tick from 10 on when the axis reaches 1e4 (``top`` is the
    axis's upper end), so that "1000" never stands next to "1e4".

    >>> _step_label(0.0), _step_label(100.0), _step_label(1000.0, top=5e3)
    ('0', '100', '1000')
    >>> _step_label(1000.0, top=2e4), _step_label(1e4, top=2e4), _step_label(1.0, top=2e4)
    ('1e3', '1e4', '1')
    """
    if top >= 1e4 and x >= 10:
        return _power_of_ten(x)
    return f"{x:.0f}"


def step_ticks(axis) -> None:
    """Label the step axis (``ax.xaxis``, symlog) with ``_step_label``, reading the axis's upper end at
    draw time so that every tick of one axis shares a notation."""
    from matplotlib.ticker import FuncFormatter

    def fmt(x, _pos=None):
        return _step_label(x, top=max(axis.get_view_interval()))
    axis.set_major_formatter(FuncFormatter(fmt))


def first_crossing(xs: list[int], lead: list[float], lag: list[float]) -> int | None:
    """The first x at which ``lag`` reaches ``lead`` after having been below it (None if never).

    >>> first_crossing([0, 1, 2, 3], [0.0, 1.0, 2.0, 3.0], [0.0, 0.5, 2.5, 4.0])
    2
    """
    below = False
    for x, a, b in zip(xs, lead, lag):
        if b < a:
            below = True
        elif below and b >= a:
            return x
    return None


OKABE_ITO = {"black": "#000000", "orange": "#e69f00", "sky blue": "#56b4e9", "bluish green": "#009e73",
             "yellow": "#f0e442", "blue": "#0072b2", "vermillion": "#d55e00", "reddish purple": "#cc79a7"}
"""The Okabe-Ito palette: colours that stay apart under red-green colour blindness (deuteranopia and
protanopia), from which every figure's categorical colours are taken."""
PLAN_COLOURS = {"three-phase": OKABE_ITO["blue"], "output-only": OKABE_ITO["orange"],
                "attention-only": OKABE_ITO["bluish green"], "attention-then-output": OKABE_ITO["sky blue"],
                "joint": OKABE_ITO["black"]}
"""One colour per plan, whatever plans a run draws, so figures of different runs compare (Table 1's plans
by the same names with underscores)."""
def ordered_colours(n: int) -> list:
    """``n`` colours for the values of an ordered variable (batch sizes, head counts), from dark to light
    along cividis, whose lightness rises steadily and reads the same under red-green colour blindness (the
    lightest tenth is left out: it fades on white)."""
    import matplotlib

    cmap = matplotlib.colormaps["cividis"]
    return [cmap(0.9 * i / max(n - 1, 1)) for i in range(n)]


MEASURE_COLOURS = {"displacement": OKABE_ITO["blue"], "function": OKABE_ITO["vermillion"],
                   "alignment": OKABE_ITO["bluish green"]}
"""One colour per lag measure on the Table 1 figures (attention solid, output dashed)."""
EVALUATOR_LABELS = {"series": "exact series", "integral": "integral representation"}


def plot_plans(plans: Mapping[str, Trajectory], fh: BinaryIO, *, floor_c: float | None, risk_floor: float | None,
               target: float | None, phase_ends: tuple[int, ...] | None, title: str = "",
               evaluator: str = "series", diverged: tuple[str, ...] = ()) -> None:
    """Draw ``risk_curves.png`` into the binary file ``fh``.

    Left: population risk of every plan (log scale; x on a symlog scale so phases 1 and 2 of the
    three-phase plan, one step each, stay visible), with the output-only floor c(d), the risk floor
    (nonnegative-length variant) and the target.  Right: joint GD's attention gap alpha_a - alpha_b
    and output gap beta_a - beta_b, with the step where the attention gap overtakes marked.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    fig = Figure(figsize=(12, 5.2))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.07, right=0.98, top=0.88, bottom=0.27, wspace=0.22)
    for name, traj in plans.items():
        steps = [pt.step for pt in traj.points]
        style = "--" if name == "attention-then-output" else "-"
        left.plot(steps, traj.risks(), style, label=name, marker="o" if len(steps) < 40 else None, ms=3,
                  color=PLAN_COLOURS.get(name))
    for name in diverged:
        left.plot([], [], " ", label=f"{name}: diverged (not drawn)")
    if floor_c is not None:
        left.axhline(floor_c, color="k", ls="--", lw=1, label=f"output-only floor c(d) = {floor_c:.3g}")
    if risk_floor:
        left.axhline(risk_floor, color=OKABE_ITO["vermillion"], ls="-.", lw=1,
                     label=f"risk floor (empty string) = {risk_floor:.3g}")
    if target is not None:
        left.axhline(target, color=OKABE_ITO["bluish green"], ls=":", lw=1.2, label=f"three-phase target = {target:.3g}")
    if phase_ends:
        for i, x in enumerate(phase_ends):
            left.axvline(x, color="0.5", lw=0.8, ls=":",
                         label="three-phase plan: end of phase " + ", ".join(str(k + 1) for k in range(len(phase_ends)))
                         + f" (steps {', '.join(map(str, phase_ends))})" if i == 0 else None)
    left.set_yscale("log")
    plain_log_ticks(left.yaxis)
    left.set_xscale("symlog", linthresh=2)
    left.xaxis.set_minor_locator(NullLocator())
    left.set_xlim(left=0)
    step_ticks(left.xaxis)
    left.set_xlabel("gradient step (linear up to 2, then log)")
    left.set_ylabel(f"population risk ({EVALUATOR_LABELS.get(evaluator, evaluator)})")
    left.set_title("risk by training plan")
    left.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)

    joint = plans.get("joint")
    if joint is not None:
        steps = [pt.step for pt in joint.points]
        att = [pt.alpha_a - pt.alpha_b for pt in joint.points]
        out = [pt.beta_a - pt.beta_b for pt in joint.points]
        right.plot(steps, att, label="attention gap α_a − α_b")
        right.plot(steps, out, label="output gap β_a − β_b")
        cross = first_crossing(steps, out, att)
        if cross is not None:
            right.axvline(cross, color="0.5", ls=":", lw=1, label=f"attention gap overtakes at step {cross}")
        else:
            right.plot([], [], " ", label=f"the attention gap does not overtake within {steps[-1]} steps")
        if steps[-1] > 1000:  # a linear axis would squash the early crossing against the left edge
            right.set_xscale("symlog", linthresh=10)
            right.set_xlim(left=0)
        right.set_xlabel("joint GD step" + (" (linear up to 10, then log)" if steps[-1] > 1000 else ""))
        right.set_ylabel("weight on a minus weight on each other symbol")
        right.set_title("joint GD: attention gap and output gap")
        right.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    else:
        right.set_axis_off()
    fig.suptitle(title, fontsize=9)
    fig.savefig(fh, format="png", dpi=110)
