"""The main job's figure (matplotlib, headless): risk by training plan, and joint GD's gaps."""
from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Mapping

import matplotlib
import matplotlib.pyplot as plt

matplotlib.use("Agg")  # headless: switching after the pyplot import is allowed while no figure exists

if TYPE_CHECKING:
    from numerics.training import Trajectory


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


def plot_plans(plans: Mapping[str, Trajectory], fh: BinaryIO, *, floor_c: float | None, risk_floor: float | None,
               target: float | None, phase_ends: tuple[int, ...] | None, title: str = "") -> None:
    """Draw ``risk_curves.png`` into the binary file ``fh``.

    Left: population risk of every plan (log scale; x on a symlog scale so phases 1 and 2 of the
    three-phase plan, one step each, stay visible), with the output-only floor c(d), the risk floor
    (nonnegative-length variant) and the target.  Right: joint GD's attention gap alpha_a - alpha_b
    and output gap beta_a - beta_b, with the step where the attention gap overtakes marked.
    """
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.2))
    for name, traj in plans.items():
        steps = [pt.step for pt in traj.points]
        style = "--" if name == "attention-then-output" else "-"
        left.plot(steps, traj.risks(), style, label=name, marker="o" if len(steps) < 40 else None, ms=3)
    if floor_c is not None:
        left.axhline(floor_c, color="k", ls="--", lw=1, label=f"output-only floor c(d) = {floor_c:.3g}")
    if risk_floor:
        left.axhline(risk_floor, color="tab:red", ls="-.", lw=1,
                     label=f"risk floor (empty string) = {risk_floor:.3g}")
    if target is not None:
        left.axhline(target, color="g", ls=":", lw=1.2, label=f"three-phase target = {target:.3g}")
    if phase_ends:
        for i, x in enumerate(phase_ends):
            left.axvline(x, color="0.5", lw=0.8, ls=":",
                         label="three-phase plan: end of phase " + ", ".join(str(k + 1) for k in range(len(phase_ends)))
                         + f" (steps {', '.join(map(str, phase_ends))})" if i == 0 else None)
    left.set_yscale("log")
    left.set_xscale("symlog", linthresh=2)
    left.set_xlim(left=0)
    left.set_xlabel("gradient step (linear up to 2, then log)")
    left.set_ylabel("population risk (exact series)")
    left.set_title("risk by training plan")
    left.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)

    joint = plans.get("joint")
    if joint is not None:
        steps = [pt.step for pt in joint.points]
        att = [pt.alpha_a - pt.alpha_b for pt in joint.points]
        out = [pt.beta_a - pt.beta_b for pt in joint.points]
        right.plot(steps, att, label=r"attention gap $\alpha_a-\alpha_b$")
        right.plot(steps, out, label=r"output gap $\beta_a-\beta_b$")
        cross = first_crossing(steps, out, att)
        if cross is not None:
            right.axvline(cross, color="0.5", ls=":", lw=1, label=f"attention gap overtakes at step {cross}")
        right.set_xlabel("joint GD step")
        right.set_ylabel("weight on a minus weight on each other symbol")
        right.set_title("joint GD: attention gap and output gap")
        right.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    else:
        right.set_axis_off()
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(fh, format="png", dpi=110)
    plt.close(fig)
