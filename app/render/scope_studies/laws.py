"""Study 4 (laws): the output-only floor per length law, the three-phase plan, the logistic loss."""
from __future__ import annotations

import pathlib

from app.render.scope_studies import num, table


def _floor(r: dict) -> str:
    digits = 6 if r["floor_bound"] < 1e-9 else 4
    return num(r["floor"], digits)


def markdown(summary: dict) -> str:
    v = summary["verdict"]
    rows = []
    for r in summary["rows"]:
        if "floor" not in r:
            continue
        rows.append([r["d"], r["law"], num(r["parameter"], 4), num(r["inverse_moment"], 5), r["how"], _floor(r),
                     f"{num(r['floor_mc'], 4)} ± {num(r['floor_mc_se'], 2)} (z = {num(r['mc_z'], 2)})",
                     "yes" if r["reaches"] else "no", num(r["smallest_eta2"], 3), num(r["eta2_ratio"], 3),
                     num(r.get("logistic_output_only"), 3), num(r.get("logistic_three_phase"), 3)])
    steps = next((r["logistic_steps"] for r in summary["rows"] if "logistic_steps" in r), None)
    lines = ["Laws at their balancing parameter (P(marked symbol absent) = 1/2): geometric (p), discretised Lomax "
             "with tail (sigma / (sigma + N))^2 (sigma; heavy-tailed: finite mean, infinite variance) and "
             "1 + Poisson (lam; light-tailed). The floor is c = (1 - 1/((d - 1) E[1/n]))/2 (derived by SymPy from "
             "the moments; Monte Carlo at the minimising weights beside it, mean ± standard error). The three-phase "
             f"plan is the theorem's (eta_1 = eta1_max / 2, one attention step, T output steps of size 1) with the "
             f"smallest eta_2 reaching epsilon = {num(v['epsilon'])} (bisection; an estimate), also as a multiple of "
             f"the geometric law's eta2_min. Logistic columns: risk after {steps} steps of output-only GD and of "
             "the three-phase plan (best of three attention steps), exact population gradients.", "",
             *table(["d", "law", "parameter", "E[1/n]", "E[1/n] from", "floor c (squared)", "Monte Carlo",
                     "three-phase reaches epsilon", "smallest eta_2", "/ geometric eta2_min",
                     "logistic: output-only", "logistic: three-phase"], rows), ""]
    reached = all(v["reaches"].values())
    lines.append(
        "**Verdict.** " + ("Under the squared loss the output-only floor stays positive for every law tested: "
                           if v["floors_positive"] else "The output-only floor is NOT positive for some law: ")
        + "c = (1 - 1/((d - 1) E[1/n]))/2 holds for any length law on {1, 2, ...} at balance, and the laws differ "
        "only through E[1/n] (closed form for the geometric and Poisson laws, an exact series for the Lomax law); "
        + ("the series moments agree with it and Monte Carlo agrees within 4 standard errors. "
           if v["mc_agree"] and v["series_agree"] else "the series or Monte Carlo check does NOT agree (see the "
           "table). ")
        + ("The three-phase plan still reaches epsilon under every law, " if reached else
           "The three-phase plan does NOT reach epsilon under " + ", ".join(k for k, ok in v["reaches"].items()
                                                                          if not ok) + ", ")
        + "with a phase-2 step of the order of the geometric law's eta2_min (column '/ geometric eta2_min'). Under "
        "the logistic loss the output-only infimum is 0 for every law (proved in numerics/scope/laws.py: not "
        "attained, approached only as the weights grow), so the floor that separates the plans under the squared "
        "loss does not exist there; after the same number of steps the risks of output-only GD and of the "
        "three-phase plan are in the table.")
    return "\n".join(lines) + "\n"


def figure(summary: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in summary["rows"] if "floor" in r]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [f"{r['law']}\nd={r['d']}" for r in rows]
    x = np.arange(len(rows))
    ax1.bar(x - 0.2, [r["floor"] for r in rows], 0.4, label="formula (SymPy)")
    ax1.errorbar(x + 0.2, [r["floor_mc"] for r in rows], yerr=[2 * r["floor_mc_se"] for r in rows], fmt="o",
                 color="k", label="Monte Carlo ± 2 SE")
    ax1.set_xticks(x, labels, fontsize=8)
    ax1.set_ylabel("output-only floor c (squared loss)")
    ax1.set_title("Output-only floor by length law", fontsize=10)
    ax1.legend(fontsize=8)
    lg = [r for r in summary["rows"] if "logistic_output_only" in r]
    xl = np.arange(len(lg))
    ax2.bar(xl - 0.2, [r["logistic_output_only"] for r in lg], 0.4, label="output-only")
    ax2.bar(xl + 0.2, [r["logistic_three_phase"] or np.nan for r in lg], 0.4, label="three-phase")
    ax2.set_xticks(xl, [f"{r['law']}\nd={r['d']}" for r in lg], fontsize=8)
    ax2.set_yscale("log")
    ax2.set_ylabel(f"logistic risk after {lg[0]['logistic_steps'] if lg else '?'} steps")
    ax2.set_title("Logistic loss: exact population GD", fontsize=10)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
