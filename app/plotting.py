"""Plots of training trajectories (matplotlib, headless)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_plans(plans: dict, c_d: float, target: float, path, title: str = ""):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    ax = axes[0]
    for name, traj in plans.items():
        steps = [pt.step for pt in traj.points]
        style = "--" if name == "attention-then-output" else "-"
        ax.plot(steps, traj.risks(), style, label=name, marker="o" if len(steps) < 40 else None, ms=3)
    ax.axhline(c_d, color="k", ls="--", lw=1, label=f"output-only floor c(d) = {c_d:.3g}")
    ax.axhline(target, color="g", ls=":", lw=1, label=f"target {target:.3g}")
    ax.set_yscale("log")
    ax.set_xlabel("gradient step")
    ax.set_ylabel("population risk (exact series)")
    ax.set_title("risk by training plan")
    ax.legend(fontsize=8)
    ax = axes[1]
    j = plans.get("joint")
    if j is not None:
        steps = [pt.step for pt in j.points]
        ax.plot(steps, [pt.alpha_a - pt.alpha_b for pt in j.points], label=r"attention gap $\alpha_a-\alpha_b$")
        ax.plot(steps, [pt.beta_a - pt.beta_b for pt in j.points], label=r"output gap $\beta_a-\beta_b$")
        ax.set_xlabel("joint GD step")
        ax.set_title("joint GD: attention lags the output layer")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
