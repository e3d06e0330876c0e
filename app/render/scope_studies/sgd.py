"""Study 3 (stochastic gradients): its section of docs/scope.md and its figure."""
from __future__ import annotations

import pathlib

from app.render.plotting import ordered_colours
from app.render.scope_studies import figure as _figure
from app.render.scope_studies import num, save, table
from app.render.scope_studies.kqv import PLAN_NAMES


def verdict_paragraph(v: dict, scan: list[dict]) -> str:
    sb = v["smallest_batch"]
    text = (f"At d = {v['d']} and epsilon = {num(v['epsilon'])} the population three-phase plan ends at exact risk "
            f"{num(v['population_three_phase'])}. With mini-batches, ")
    text += "; ".join(f"b = {s['batch']}: {s['reached']}/{s['seeds']} seeds reach epsilon (Wilson 95% "
                      f"[{num(s['rate_low'], 2)}, {num(s['rate_high'], 2)}])" for s in scan) + ". "
    if sb["censored"] == "above":
        text += (f"No batch size up to {sb['b_below']} reaches epsilon in {num(v['rate'])} of the seeds: the "
                 "smallest such b is not estimated here (it is above the scanned grid).")
    elif sb["censored"] == "below":
        text += (f"Every scanned batch size reaches epsilon in {num(v['rate'])} of the seeds: the smallest such b "
                 f"is at most {sb['b']} (the grid's lowest).")
    else:
        lo, hi = sb["rate_interval"]
        text += (f"Estimate: the smallest batch size at which the three-phase plan reaches epsilon with "
                 f"probability {num(v['rate'])} lies in ({sb['b_below']}, {sb['b']}] on this grid, at b = {sb['b']} "
                 f"{sb['reached']}/{v['seeds']} seeds reached it (Wilson 95% interval of the probability "
                 f"[{num(lo, 2)}, {num(hi, 2)}], so the probability 0.9 itself is not certain there).")
    return text


def markdown(summary: dict) -> str:
    rows = [[PLAN_NAMES[r["plan"]], str(r["batch"]), num(r["population_risk"]),
             "n/a" if not r["final_risk"]["n"] else
             f"{num(r['final_risk']['median'])} [{num(r['final_risk']['q10'])}, {num(r['final_risk']['q90'])}]",
             f"{r['reached']}/{r['seeds']}", str(r["diverged"])] for r in summary["table"]]
    head = ["plan", "batch b", "population risk", "SGD held-out risk: median [10%, 90%] over seeds",
            "reached epsilon", "diverged"]
    lines = ["Final risk of each plan with mini-batch gradients (held-out estimate) against its exact population "
             "value; a seed reaches epsilon when its held-out risk + 3 standard errors is at most epsilon.", ""]
    return "\n".join(lines + table(head, rows) + ["", verdict_paragraph(summary["verdict"], summary["scan"]), ""])


def figure(summary: dict, path: pathlib.Path) -> None:
    fig, (left, right) = _figure(2)
    pop = summary["population"]
    left.plot([s + 1 for s in pop["steps"]], pop["risk"], color="black", label="population (exact)")
    for (b, band), colour in zip(summary["bands"].items(), ordered_colours(len(summary["bands"]))):
        x = [s + 1 for s in band["steps"]]
        (line,) = left.plot(x, band["median"], label=f"b = {b}, median", color=colour)
        left.fill_between(x, band["q10"], band["q90"], color=line.get_color(), alpha=0.2)
    left.axhline(summary["verdict"]["epsilon"], color="grey", ls="--", label="epsilon")
    left.set(xscale="log", yscale="log", xlabel="step + 1", ylabel="risk (held-out for SGD)",
             title="three-phase plan: 10%-90% band over seeds")
    left.legend(fontsize=7)
    scan = summary["scan"]
    bs = [s["batch"] for s in scan]
    rate = [s["reached"] / s["seeds"] for s in scan]
    right.errorbar(bs, rate, yerr=[[r - s["rate_low"] for r, s in zip(rate, scan)],
                                   [s["rate_high"] - r for r, s in zip(rate, scan)]], marker="o", capsize=3)
    right.axhline(summary["verdict"]["rate"], color="grey", ls=":", label="target probability")
    right.set(xscale="log", ylim=(-0.05, 1.05), xlabel="batch size b",
              ylabel="fraction of seeds reaching epsilon (Wilson 95%)", title="three-phase plan")
    right.legend(fontsize=7)
    save(fig, path)
