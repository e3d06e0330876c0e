"""Study 2 (key-query-value parameterisation): its section of docs/scope.md and its figure."""
from __future__ import annotations

import pathlib

from app.render.plotting import PLAN_COLOURS, ordered_colours
from app.render.scope_studies import figure as _figure
from app.render.scope_studies import num, save, table

PLAN_NAMES = {"three_phase": "three-phase", "output_only": "output-only", "attention_only": "attention-only",
              "attention_then_output": "attention-first", "joint": "joint GD"}


def _risk(p: dict) -> str:
    r = p["risk"]
    if r["n"] == 0:
        return "diverged"
    return f"{num(r['mean'])} [{num(r['min'])}, {num(r['max'])}]"


def _lag(x: dict) -> str:
    r = x["ratio"]
    if r["n"] == 0:
        return "n/a (refused)"
    lo, hi = (_end(e, x["band"]) for e in x["interval"])
    return f"{num(r['mean'])} ± {num(r['std'], 2)} in [{lo}, {hi}]: {x['call']}"


def _end(x: float, band: list[float]) -> str:
    """An end of a ratio interval to 3 significant digits, or more where 3 would print it as an edge of the band
    it is not (1.2533 against 1.25), so the printed interval reads as the call that was made."""
    digits = 3
    while digits < 9 and any(x != edge and num(x, digits) == num(float(edge), digits) for edge in band):
        digits += 1
    return num(x, digits)


def lag_sentence(v: dict) -> str:
    """The lag calls of every measure, and the rule (Table 1's) they follow."""
    rule = v["lag_rule"]
    band = f"[{num(rule['band'][0])}, {num(rule['band'][1])}]"
    text = (f"Under joint GD each (m, scale) cell's lag is called by the rule of Table 1: the ratio's interval, "
            f"mean ± ({num(rule['z'])} SE over seeds + the snapshot resolution carried to the ratio), against the "
            f"practical band {band} fixed in advance; attention lags when the interval lies above the band, shows "
            f"no appreciable lag when it lies inside it, leads when it lies below, and the call is undecided when "
            f"the interval straddles an edge. ")
    if rule["from_recorded_summary"]:
        text += ("These calls were made from the ratio statistics this run recorded (mean, standard deviation, "
                 "number of seeds, resolution, t_half(output)), without recomputing a unit. ")
    for meas, calls in v["lag_calls"].items():
        text += (f"By the {meas} measure: attention lags in {calls['attention lags']} of {sum(calls.values())} "
                 f"cells, no appreciable lag in {calls['no appreciable lag']}, attention leads in "
                 f"{calls['attention leads']}, undecided in {calls['undecided']}, refused in {calls['refused']}. ")
    return text


def verdict_paragraph(v: dict) -> str:
    reg, tp, st = v["regime"], v["three_phase_risk"], v["stall"]
    n = v["units"]
    text = (f"At d = {v['d']} and epsilon = {num(v['epsilon'])}, over {n} runs (every m, initialisation scale "
            f"and seed), the three-phase plan at the (alpha, beta) regime's step sizes (eta_1 = {num(reg['eta_1'])}, "
            f"eta_2 = {num(reg['eta_2'])}, eta_3 = {num(reg['eta_3'])}, T = T_min = {reg['T_min']}) reached epsilon "
            f"in {v['three_phase_reached']} of {n} runs (Wilson 95% interval of the rate "
            f"[{num(v['three_phase_rate_interval'][0], 2)}, {num(v['three_phase_rate_interval'][1], 2)}]; "
            f"{v['three_phase_diverged']} diverged; final risk from "
            f"{num(tp['min'])} to {num(tp['max'])}). ")
    if v["three_phase_reached"] < n:
        text += ("So, as an estimate over these runs, the three-phase plan does not carry over to the KQV "
                 "parameterisation unchanged: its regime is stated for (alpha, beta) from zero, and here one step "
                 "moves the products K^T q and V^T v by amounts that depend on the size of the factors. ")
    else:
        text += "So the three-phase plan still succeeds in every run. "
    for key, label in (("output_only", "Output-only"), ("attention_then_output", "Attention-first")):
        s = st[key]
        dev = s["final_minus_c"]
        text += (f"{label} ended at c(d) + [{num(dev['min'])}, {num(dev['max'])}] (c(d) = {num(v['c_d'])}) and "
                 f"reached epsilon in {s['reached']} of {s['runs']} runs ({s['diverged']} diverged). ")
    text += ("The deviation from c(d) is the floor at the attention the output phase trains on, which a random "
             "start moves off zero. ")
    return (text + lag_sentence(v)).strip()


def markdown(summary: dict) -> str:
    rows = []
    for r in summary["table"]:
        p = r["plans"]
        rows.append([str(r["m"]), num(r["scale"]), _risk(p["three_phase"]),
                     f"{p['three_phase']['reached']}/{p['three_phase']['risk']['n'] + p['three_phase']['diverged']}",
                     _risk(p["output_only"]), _risk(p["attention_then_output"]), _risk(p["joint"]),
                     _lag(r["lag"]["displacement"]), _lag(r["lag"]["function"])])
    head = ["m", "init scale", "three-phase risk mean [min, max]", "reached", "output-only", "attention-first",
            "joint GD", "lag ratio, displacement", "lag ratio, function"]
    lines = ["Final exact population risk over seeds (mean [min, max]); lag ratio t_half(attention) / "
             "t_half(output) under joint GD (mean ± standard deviation over seeds, the interval the call reads against "
             "the band, and the call).", ""]
    return "\n".join(lines + table(head, rows) + ["", verdict_paragraph(summary["verdict"]), ""])


def figure(summary: dict, path: pathlib.Path) -> None:
    fig, (left, right) = _figure(2)
    name, curves = next(iter(summary["curves"].items()))
    for plan, c in curves.items():
        left.plot([s + 1 for s in c["steps"]], c["risk"], label=PLAN_NAMES[plan],
                  color=PLAN_COLOURS[plan.replace("_", "-")])
    left.axhline(summary["verdict"]["c_d"], color="grey", ls=":", label="c(d)")
    left.axhline(summary["verdict"]["epsilon"], color="grey", ls="--", label="epsilon")
    left.set(xscale="log", yscale="log", xlabel="step + 1", ylabel="exact population risk", title=f"KQV, {name}")
    left.legend(fontsize=7)
    ms = sorted({r["m"] for r in summary["table"]})
    for m, colour in zip(ms, ordered_colours(len(ms))):
        rows = [r for r in summary["table"] if r["m"] == m and r["lag"]["function"]["ratio"]["n"]]
        means = [r["lag"]["function"]["ratio"]["mean"] for r in rows]
        low = [mu - r["lag"]["function"]["interval"][0] for mu, r in zip(means, rows)]
        high = [r["lag"]["function"]["interval"][1] - mu for mu, r in zip(means, rows)]
        right.errorbar([r["scale"] for r in rows], means, yerr=[low, high], marker="o", capsize=3, label=f"m = {m}",
                       color=colour)
    band = summary["verdict"]["lag_rule"]["band"]
    right.axhspan(*band, color="grey", alpha=0.15, label=f"no appreciable lag [{num(band[0])}, {num(band[1])}]")
    right.axhline(1.0, color="grey", ls=":")
    right.set_yscale("symlog", linthresh=2.0)  # linear around the band, logarithmic in the long tails
    right.set(xscale="log", xlabel="initialisation scale", ylabel="lag ratio t_half(att) / t_half(out), function\n(bars: the call's interval)",
              title="attention lag under joint GD")
    right.legend(fontsize=7)
    save(fig, path)
