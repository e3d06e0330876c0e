"""The paper's Table 1 claims, judged on a results dict of ``runner.run``.

Every verdict is one of:

* ``holds`` / ``does not hold``: decided by the criterion below, on runs that no artefact decides;
* ``undecided``: the criterion's interval straddles its threshold (seed spread, the snapshot resolution of
  t_half, or the error bound of an exact population: truncation and rounding; the AND integral's quadrature
  estimate where it is used);
* ``refused``: the verdict would rest on an artefact, and each reason is given: a chosen step size at an
  untried edge of its grid, a diverged or unstable run (ending above its start), a run that did not converge within the budget, a row whose
  capacity ceiling is far from the task's best value ("not representable"), or a row with no ceiling.

Criteria.  *Matches*: plan P matches plan Q when the excess mean held-out risk of P over Q is at most
max(3 standard errors of the difference, MATCH_SHARE x the attention effect), the attention effect being the
output-only risk minus the joint-GD risk; *falls short* is its negation.  *Lags*: under joint GD, per measure
(``lag``), the ratio t_half(attention) / t_half(output) over seeds: holds when its mean minus 3 standard errors
is above 1 and t_half(attention) - t_half(output) exceeds the measure's resolution (the spacing of the
recorded steps around the crossings); does not hold when its mean plus 3 standard errors is below 1 and
t_half(output) - t_half(attention) exceeds the resolution; undecided otherwise (a single run has no standard
error: the resolution alone decides).
"""
from __future__ import annotations

import math

MATCH_SHARE = 0.1
REPRESENTABLE_SHARE = 0.05
"""A row is representable when the best risk its model class reaches is within REPRESENTABLE_SHARE x its
starting risk of the task's best value (``capacity``)."""
MEASURES = ("displacement", "function", "alignment")
PAPER_MATCH = ("occurrence", "OR", "ICL", "SLR", "even_pairs")
"""Tasks on which the paper reports that three-phase matches joint GD (every task except AND)."""


def _se(s: dict) -> float:
    return s["std"] / math.sqrt(s["n"]) if s["n"] > 1 else 0.0


def capacity(row: dict) -> tuple[bool | None, str]:
    """(representable?, why) from the row's ceiling, whose [lower, upper] brackets the best risk the model
    class reaches: representable when upper - best <= tol, not when lower - best > tol, else None (undecided),
    with tol = REPRESENTABLE_SHARE x the row's starting risk.  None also when the row has no ceiling."""
    c = row.get("ceiling")
    if not c or "error" in c:
        return None, "no capacity ceiling computed" + (f" ({c['error']})" if c else "")
    start = _start_risk(row)
    if start is None:
        return None, "no starting risk to scale the capacity tolerance"
    tol = REPRESENTABLE_SHARE * start
    what = (f"ceiling risk in [{c['lower']:.3g}, {c['upper']:.3g}] against the task's best {c['best_risk']:.3g} "
            f"(tolerance {tol:.2g}; {c.get('kind', '')})")
    if c["upper"] - c["best_risk"] <= tol:
        return True, what
    if c["lower"] - c["best_risk"] > tol:
        return False, "not representable: " + what
    return None, "capacity undecided: " + what


def _start_risk(row: dict) -> float | None:
    for pr in row["plans"].values():
        for r in pr["seeds"]:
            if r["curve"]["risk"] and r["curve"]["risk"][0] is not None:
                return r["curve"]["risk"][0]
    return None


def artefacts(row: dict, plans: tuple[str, ...]) -> list[str]:
    """Why a verdict on these plans of the row would rest on an artefact (empty: it would not)."""
    out = []
    ok, why = capacity(row)
    if not ok:
        out.append(why)
    for p in plans:
        pr = row["plans"][p]
        s = pr["search"]
        name = p.replace("_", " ")
        if s["all_diverged"]:
            out.append(f"{name}: every step size diverged on the tuning seeds")
            continue
        if s["edge"]:
            out.append(f"{name}: chosen step at an untried grid edge ({', '.join(s['edge'])})")
        refused = pr.get("integral_refused") or []
        diverged = [s for s in pr["diverged"] if s not in refused]
        if diverged:
            out.append(f"{name}: diverged on seeds {diverged}")
        if refused:
            out.append(f"{name}: the AND integral refused seeds {refused} (a head's scores spread beyond its limit, "
                       "or its sums overflowed)")
        if pr.get("unstable"):
            out.append(f"{name}: ended above its starting risk (unstable) on seeds {pr['unstable']}")
        nc = [x for x in pr["not_converged"] if x not in pr["diverged"]]
        if nc:
            out.append(f"{name}: not converged within the budget on seeds {nc}")
    return out


def excess(row: dict, plan: str, reference: str) -> tuple[float, float, float]:
    """(excess mean risk of plan over reference, margin, slack: the two plans' population error bounds, truncation
    and rounding, where recorded, and the AND integral's quadrature estimate where it is used)."""
    plans = row["plans"]
    a, b = plans[plan]["risk"], plans[reference]["risk"]
    se = math.sqrt(_se(a) ** 2 + _se(b) ** 2)
    effect = plans["output_only"]["risk"]["mean"] - plans["joint"]["risk"]["mean"]
    slack = sum(plans[q].get(key) or 0.0 for q in (plan, reference)
                for key in ("truncation_bound", "rounding_bound", "quadrature_estimate"))
    return a["mean"] - b["mean"], max(3 * se, MATCH_SHARE * abs(effect)), slack


def _compare(row: dict, plan: str, reference: str, want_match: bool, claim: str) -> dict:
    reasons = artefacts(row, (plan, reference, "output_only"))
    out = {"row": row["name"], "claim": claim, "plans": [plan, reference]}
    if any(row["plans"][p]["risk"]["mean"] is None for p in (plan, reference, "output_only")):
        reasons.append("a plan has no finite held-out risk")
    if reasons:
        return out | {"verdict": "refused", "reasons": reasons, "evidence": ""}
    e, margin, slack = excess(row, plan, reference)
    ev = (f"{plan.replace('_', ' ')} {row['plans'][plan]['risk']['mean']:.3g} vs {reference.replace('_', ' ')} "
          f"{row['plans'][reference]['risk']['mean']:.3g}: excess {e:.3g}, margin {margin:.3g}")
    if abs(e - margin) <= slack:
        return out | {"verdict": "undecided", "reasons": [f"within the population error allowance {slack:.2g}"],
                      "evidence": ev}
    match = e <= margin
    return out | {"verdict": "holds" if match == want_match else "does not hold", "reasons": [], "evidence": ev,
                  "excess": e, "margin": margin}


def lag_call(ratio_mean: float, ratio_se: float, diff: float, resolution: float) -> str:
    """The *lags* criterion on a ratio t_half(attention) / t_half(output) (mean and standard error over seeds)
    and the difference ``diff`` of the mean t_half of attention and of output: "holds", "does not hold" or
    "undecided"."""
    if ratio_mean - 3 * ratio_se > 1 and diff > resolution:
        return "holds"
    if ratio_mean + 3 * ratio_se < 1 and diff < -resolution:
        return "does not hold"
    return "undecided"


def lag_verdict(row: dict, measure: str) -> dict:
    """'attention lags output under joint GD' under one measure."""
    claim = f"attention lags output under joint GD ({measure})"
    out = {"row": row["name"], "claim": claim, "measure": measure, "plans": ["joint"]}
    reasons = artefacts(row, ("joint",))
    m = row["lag"].get(measure)
    if measure == "alignment" and row["task"] == "AND":  # AND has no alignment measure; a results file may hold one
        m = None
    if m is None:
        return out | {"verdict": "refused", "reasons": reasons + [f"no {measure} measure for this task"], "evidence": ""}
    if reasons:
        return out | {"verdict": "refused", "reasons": reasons, "evidence": ""}
    rs, ta, tb = m["ratio"], m["t_half_att"], m["t_half_out"]
    if rs["n"] == 0:
        return out | {"verdict": "refused", "reasons": ["t_half undefined (a block never moves)"], "evidence": ""}
    se = _se(rs)
    diff = ta["mean"] - tb["mean"]
    ev = (f"t_half(attention) {_fmt(ta)}, t_half(output) {_fmt(tb)}, ratio {_fmt(rs)} "
          f"(resolution {m['resolution']} steps)")
    v = lag_call(rs["mean"], se, diff, m["resolution"])
    return out | {"verdict": v, "reasons": [] if v != "undecided" else ["ratio within its uncertainty of 1"],
                  "evidence": ev, "ratio": rs["mean"], "ratio_se": se}


def _fmt(s: dict) -> str:
    if s["mean"] is None:
        return "n/a"
    return f"{s['mean']:.3g}" if s["n"] <= 1 else f"{s['mean']:.3g} ± {s['std']:.2g}"


def assess(results: dict) -> list[dict]:
    """Every claim of the paper that the results speak to, with its verdict."""
    rows = results["rows"]
    out = []
    for row in rows.values():
        task = row["task"]
        if task in PAPER_MATCH:
            out.append(_compare(row, "three_phase", "joint", True, "three-phase matches joint GD"))
        if task == "AND":
            out.append(_compare(row, "three_phase", "joint", False, "three-phase falls short of joint GD"))
            out.append(_compare(row, "attention_only", "three_phase", True,
                                "attention-only is competitive (matches three-phase)"))
        for m in MEASURES:
            if m != "alignment" or (m in row["lag"] and task != "AND"):
                out.append(lag_verdict(row, m))
    ep = [r for r in rows.values() if r["task"] == "even_pairs"]
    for row in ep:
        for m in ("displacement", "function"):
            base = lag_verdict(row, m)
            claim = f"attention grows almost as fast as the output under joint GD ({m}: ratio within 3 SE of 1)"
            if base["verdict"] == "refused":
                out.append(base | {"claim": claim})
                continue
            lm = row["lag"][m]
            se = _se(lm["ratio"])
            near = abs(lm["ratio"]["mean"] - 1) <= max(3 * se, lm["resolution"] / max(lm["t_half_out"]["mean"] or 1, 1))
            out.append(base | {"claim": claim, "verdict": "holds" if near else "does not hold", "reasons": []})
            others = {r["name"]: lag_verdict(r, m) for r in rows.values() if r is not row}
            usable = {k: v for k, v in others.items() if v["verdict"] != "refused"}
            claim = f"the lag is least on even pairs ({m}: smallest t_half ratio of all rows)"
            if not usable:
                out.append(base | {"claim": claim, "verdict": "refused", "reasons": ["no other row has a usable ratio"]})
                continue
            lo_ep, hi_ep = lm["ratio"]["mean"] - 3 * se, lm["ratio"]["mean"] + 3 * se
            bounds = {k: (v["ratio"] - 3 * v["ratio_se"], v["ratio"] + 3 * v["ratio_se"]) for k, v in usable.items()}
            if all(hi_ep < lo for lo, _ in bounds.values()):
                v = "holds"
            elif any(hi < lo_ep for _, hi in bounds.values()):
                v = "does not hold"
            else:
                v = "undecided"
            ev = "ratios " + ", ".join(f"{k} {u['ratio']:.3g}" for k, u in usable.items()) + \
                 f", even pairs {lm['ratio']['mean']:.3g}"
            skipped = sorted(set(others) - set(usable))
            out.append(base | {"claim": claim, "verdict": v, "evidence": ev,
                               "reasons": [f"rows refused and left out: {', '.join(skipped)}"] if skipped else []})
    return out


def exit_status(verdicts: list[dict]) -> str:
    """'done' when every verdict was decided, else 'undecided' (some verdict refused or undecided)."""
    return "done" if all(v["verdict"] in ("holds", "does not hold") for v in verdicts) else "undecided"
