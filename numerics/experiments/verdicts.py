"""The paper's Table 1 claims, judged on a results dict of ``runner.run``.

Every verdict is one of:

* ``holds`` / ``does not hold``: decided by the criterion below, on runs that no artefact decides;
* ``undecided``: the criterion's interval straddles its threshold (seed spread, the snapshot resolution of
  t_half, or the error bound of an exact population: truncation and rounding; the AND integral's quadrature
  estimate where it is used);
* ``refused``: the verdict would rest on an artefact, and each reason is given: a chosen step size at an
  untried edge of its grid, a diverged or unstable run (ending above its start), a run that did not converge
  within the budget, a row whose capacity ceiling is far from the task's best value ("not representable"), or
  a row with no ceiling; a comparison checks every plan it reads, the margin's output-only and joint GD
  as well as the two compared, and is refused when one of them has an artefact or no held-out risk;
* ``not testable``: the row's model class cannot express what the claim is about (``testable``), so the run
  says nothing about the claim either way;
* ``depends on tuning``: repeated tuning draws (``results["tuning_draws"]``) give different verdicts.

The rules are fixed before any run (the constants below) and recorded beside every result (``rules``).  A
confidence bound is mean +- Z standard errors over seeds (one run has no standard error), widened by the
population error slack where one is recorded.

Criteria.  *Matches* (three-phase vs joint GD; attention-only vs three-phase) is a non-inferiority test: the
excess e = mean risk(plan) - mean risk(reference) against the margin MATCH_SHARE x |the attention effect|
(output-only risk minus joint-GD risk), a share of the effect the claim is about, not of the seed spread.
The margin is estimated from the same seeds, so it carries an interval of its own (``margin_interval``):
MATCH_SHARE x (|effect| -+ (Z SE + slack)), SE the standard error of the difference of the output-only and
joint-GD means and slack their population error bounds, the lower end floored at 0 (|effect| is never
negative).  *Matches* holds when the excess's upper bound e + Z SE + slack is at most the margin's lower
bound, does not hold when the excess's lower bound e - Z SE - slack is above the margin's upper bound, and is
undecided when the two intervals overlap; a wide seed spread of either the compared plans or of the plans
that set the margin therefore makes the verdict undecided, never easier.  The test is one-sided: a plan
clearly better than its reference (e far below 0) matches.  *Falls short* (three-phase vs joint GD on AND) is
the superiority test on the same intervals: it holds when the excess's lower bound is above the margin's upper
bound (three-phase is worse by more than a share of the effect that nobody would call a shortfall), does not
hold when the excess's upper bound is at most the margin's lower bound (non-inferiority shown), and is
undecided otherwise; so on one row exactly one of the two claims holds whenever either is decided.  Each
comparison prints its per-seed count: the plan's seeds whose risk is within the point margin of the
reference's mean ("3/5 seeds within margin"), and flags a plan whose seeds the run records as bimodal.

*Lags*: under joint GD, per measure (``lag``), the ratio t_half(attention) / t_half(output) over seeds, with
the interval mean +- (Z SE + w), w = resolution x (1 + mean) / t_half(output) the snapshot resolution carried to
the ratio.  Against the practical band LAG_BAND = [0.8, 1.25], fixed in advance, the outcome is "attention
lags" (interval entirely above 1.25), "no appreciable lag" (interval inside the band, ends included),
"attention leads" (interval entirely below 0.8), else undecided; the claim "attention lags output" holds on
the first, does not hold on the second and third (the outcome is recorded under "outcome").  *Almost as
fast* (even pairs) is the equivalence test on the same interval: holds inside the band, does not hold when the
interval lies entirely outside it, undecided otherwise.  *Least lag on even pairs*: even pairs' ratio interval
(mean +- Z SE) below every other usable row's.
"""
from __future__ import annotations

import math
from collections import Counter

from numerics.experiments import tasks

MATCH_SHARE = 0.1
"""The non-inferiority margin of *matches* and *falls short*: this share of the attention effect (output-only
risk minus joint-GD risk)."""
Z = 3.0
"""Confidence bounds are mean +- Z standard errors over seeds."""
LAG_BAND = (0.8, 1.25)
"""The practical band of the lag ratio t_half(attention) / t_half(output): inside it, no appreciable lag."""
REPRESENTABLE_SHARE = 0.05
"""A row is representable when the best risk its model class reaches is within REPRESENTABLE_SHARE x its
starting risk of the task's best value (``capacity``)."""
ATTENTION_ONLY_READOUT_MIN = 0.1
"""AND's "attention-only is competitive" is testable only when attention-only trains with a fixed readout of at
least this scale (``testable``); a readout of scale 0.01 keeps its risk near the start by construction."""
MEASURES = ("displacement", "function", "alignment")
PAPER_MATCH = ("occurrence", "OR", "ICL", "SLR", "even_pairs")
"""Tasks on which the paper reports that three-phase matches joint GD (every task except AND)."""
DECIDED = ("holds", "does not hold")
MATCHES = "three-phase matches joint GD"
FALLS_SHORT = "three-phase falls short of joint GD"
COMPETITIVE = "attention-only is competitive (matches three-phase)"
NEAR_ONE = "attention grows almost as fast as the output under joint GD"
LEAST = "the lag is least on even pairs"


def rules() -> dict:
    """The decision rules of this module, as recorded in every result (``results["decision_rules"]``)."""
    return {"z": Z, "match_share": MATCH_SHARE, "lag_band": list(LAG_BAND),
            "representable_share": REPRESENTABLE_SHARE, "attention_only_readout_min": ATTENTION_ONLY_READOUT_MIN,
            "margin": "match_share x |effect|, effect = output-only minus joint-GD risk, with its interval "
                      "match_share x (|effect| -+ (z SE + slack)) over the output-only and joint-GD seeds, "
                      "floored at 0",
            "matches": "non-inferiority: holds when excess + z SE + slack <= the margin's lower bound, does not "
                       "hold when excess - z SE - slack > the margin's upper bound, else undecided",
            "falls_short": "superiority: holds when excess - z SE - slack > the margin's upper bound, does not "
                           "hold when excess + z SE + slack <= the margin's lower bound, else undecided",
            "lags": "ratio interval mean +- (z SE + resolution slack): attention lags above the band, no "
                    "appreciable lag inside it, attention leads below it, else undecided",
            "almost_as_fast": "equivalence: holds when the ratio interval is inside the band, does not hold when "
                              "it is entirely outside, else undecided",
            "tuning_draws": "decided only when every tuning draw gives the same verdict, else depends on tuning"}


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
    """Why a verdict on these plans of the row would rest on an artefact (empty: it would not); a plan the row
    does not hold is one such reason, so a verdict that reads it is refused rather than computed without it."""
    out = []
    ok, why = capacity(row)
    if not ok:
        out.append(why)
    for p in plans:
        name = p.replace("_", " ")
        pr = row["plans"].get(p)
        if pr is None:
            out.append(f"{name}: not run (the row holds no results for it)")
            continue
        s = pr["search"]
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


SLACK_KEYS = ("truncation_bound", "rounding_bound", "quadrature_estimate")
"""A plan's population error bounds (truncation and rounding, where recorded) and the AND integral's quadrature
estimate (where it is used): each widens an interval on that plan's mean risk."""


def _slack(row: dict, plans: tuple[str, ...]) -> float:
    return sum(row["plans"][q].get(key) or 0.0 for q in plans for key in SLACK_KEYS)


def _difference(row: dict, a: str, b: str) -> tuple[float, float, float]:
    """(mean risk of plan ``a`` minus plan ``b``'s, the standard error of that difference, the half-width
    Z SE + slack of its interval, slack the two plans' population error bounds)."""
    ra, rb = row["plans"][a]["risk"], row["plans"][b]["risk"]
    se = math.sqrt(_se(ra) ** 2 + _se(rb) ** 2)
    return ra["mean"] - rb["mean"], se, Z * se + _slack(row, (a, b))


def excess(row: dict, plan: str, reference: str) -> tuple[float, float, float]:
    """(excess mean risk of plan over reference, margin MATCH_SHARE x |attention effect|, slack: the two plans'
    population error bounds, truncation and rounding, where recorded, and the AND integral's quadrature
    estimate where it is used)."""
    plans = row["plans"]
    a, b = plans[plan]["risk"], plans[reference]["risk"]
    effect = plans["output_only"]["risk"]["mean"] - plans["joint"]["risk"]["mean"]
    return a["mean"] - b["mean"], MATCH_SHARE * abs(effect), _slack(row, (plan, reference))


def margin_interval(row: dict) -> dict:
    """The margin MATCH_SHARE x |effect| (effect = output-only minus joint-GD mean risk) with its interval:
    ``lower`` and ``upper`` = MATCH_SHARE x (|effect| -+ (Z SE + slack)), SE the standard error of the difference
    of the two means and slack the two plans' population error bounds (as for the excess), the lower end floored
    at 0: the interval of |effect| is the absolute value of the effect's interval.  ``se`` and ``slack`` are
    those of the effect, before the share is taken."""
    effect, se, half = _difference(row, "output_only", "joint")
    size, slack = abs(effect), _slack(row, ("output_only", "joint"))
    return {"margin": MATCH_SHARE * size, "se": se, "slack": slack,
            "lower": MATCH_SHARE * max(size - half, 0.0), "upper": MATCH_SHARE * (size + half)}


def excess_interval(row: dict, plan: str, reference: str) -> dict:
    """The excess of ``excess`` with its confidence interval: ``lower`` and ``upper`` = excess -+ (Z SE +
    slack), SE the standard error of the difference of the two means; and the margin with its interval
    (``margin_interval``: ``margin_lower``, ``margin_upper``)."""
    e, se, half = _difference(row, plan, reference)
    m = margin_interval(row)
    return {"excess": e, "se": se, "margin": m["margin"], "slack": _slack(row, (plan, reference)),
            "lower": e - half, "upper": e + half,
            "margin_lower": m["lower"], "margin_upper": m["upper"]}


def non_inferior(lower: float, upper: float, margin_lower: float, margin_upper: float) -> bool | None:
    """True when the excess interval [lower, upper] is at most the margin's interval [margin_lower,
    margin_upper] (upper <= margin_lower), False when it is entirely above it (lower > margin_upper), None when
    the two overlap."""
    if upper <= margin_lower:
        return True
    if lower > margin_upper:
        return False
    return None


def seed_values(pr: dict) -> list[float]:
    """The per-seed held-out risks of a plan (its ``risk["values"]``, else its seeds' ``test_risk``)."""
    vals = pr["risk"].get("values")
    if vals is None:
        vals = [r.get("test_risk") for r in pr.get("seeds", [])]
    return [v for v in vals if v is not None]


def seeds_within(row: dict, plan: str, reference: str, margin: float) -> tuple[int, int] | None:
    """(seeds of ``plan`` whose risk is within ``margin`` of the reference's mean risk, seeds), None when the
    row records no per-seed risk."""
    vals = seed_values(row["plans"][plan])
    if not vals:
        return None
    ref = row["plans"][reference]["risk"]["mean"]
    return sum(v - ref <= margin for v in vals), len(vals)


ONE_SEED = "one seed of a row trained on samples: no spread over seeds to judge it by"


def one_sampled_seed(row: dict, plans: tuple[str, ...]) -> bool:
    """Whether a row trained on samples (``row["exact"]`` False) has fewer than two seeds in one of ``plans``:
    its standard error would be 0 and its interval as narrow as an exact row's, so it decides nothing.  Exact
    rows give every seed the same population, and one seed is all they have."""
    return row.get("exact") is False and any(row["plans"][p]["risk"]["n"] < 2 for p in plans)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _compare(row: dict, plan: str, reference: str, want_match: bool, claim: str) -> dict:
    """A *matches* (``want_match``) or *falls short* claim of ``plan`` against ``reference`` (module doc).  Every
    plan the verdict reads (the two compared and the margin's output-only and joint GD) is checked alike: an
    artefact on any of them, or a missing held-out risk, refuses the verdict with a reason naming that plan."""
    read = tuple(dict.fromkeys((plan, reference, "output_only", "joint")))  # the margin's plans as well
    reasons = artefacts(row, read)
    out = {"row": row["name"], "claim": claim, "plans": [plan, reference]}
    reasons += [f"{p.replace('_', ' ')}: no finite held-out risk" for p in read
                if p in row["plans"] and not _finite(row["plans"][p]["risk"]["mean"])]
    if reasons:
        return out | {"verdict": "refused", "reasons": reasons, "evidence": ""}
    iv = excess_interval(row, plan, reference)
    count = seeds_within(row, plan, reference, iv["margin"])
    bimodal = [p.replace("_", " ") for p in (plan, reference) if row["plans"][p].get("bimodal")]
    ev = (f"{plan.replace('_', ' ')} {row['plans'][plan]['risk']['mean']:.3g} vs {reference.replace('_', ' ')} "
          f"{row['plans'][reference]['risk']['mean']:.3g}: excess {iv['excess']:.3g} in [{iv['lower']:.3g}, "
          f"{iv['upper']:.3g}] (±{Z:g} SE" + (f" + slack {iv['slack']:.2g}" if iv["slack"] else "")
          + f"), margin {iv['margin']:.3g} in [{iv['margin_lower']:.3g}, {iv['margin_upper']:.3g}]")
    if count is not None:
        ev += f"; {count[0]}/{count[1]} seeds within margin"
    if bimodal:
        ev += f"; bimodal seeds: {', '.join(bimodal)}"
    match = non_inferior(iv["lower"], iv["upper"], iv["margin_lower"], iv["margin_upper"])
    if one_sampled_seed(row, read):
        match = None
    rec = out | {"evidence": ev, "excess": iv["excess"], "margin": iv["margin"], "interval": [iv["lower"], iv["upper"]],
                 "margin_interval": [iv["margin_lower"], iv["margin_upper"]],
                 "seeds_within": list(count) if count is not None else None}
    if match is None:
        why = ONE_SEED if one_sampled_seed(row, read) else "the excess interval overlaps the margin's interval"
        return rec | {"verdict": "undecided", "reasons": [why]}
    return rec | {"verdict": "holds" if match == want_match else "does not hold", "reasons": []}


def ratio_interval(ratio_mean: float, ratio_se: float, resolution: float, t_half_out: float | None) -> tuple[float, float]:
    """The lag ratio's interval: mean -+ (Z SE + w), w = resolution x (1 + mean) / t_half(output), the snapshot
    resolution of both t_half carried to their ratio (t_half(output) below 1, or missing, counts as 1)."""
    w = resolution * (1 + abs(ratio_mean)) / max(t_half_out or 1.0, 1.0)
    half = Z * ratio_se + w
    return ratio_mean - half, ratio_mean + half


def lag_outcome(lower: float, upper: float) -> str:
    """The lag ratio interval [lower, upper] against LAG_BAND: "attention lags", "no appreciable lag",
    "attention leads" or "undecided"."""
    lo, hi = LAG_BAND
    if lower > hi:
        return "attention lags"
    if upper < lo:
        return "attention leads"
    if lower >= lo and upper <= hi:
        return "no appreciable lag"
    return "undecided"


LAG_VERDICT = {"attention lags": "holds", "no appreciable lag": "does not hold", "attention leads": "does not hold",
               "undecided": "undecided"}


def ratio_call(ratio: dict, resolution: float, t_half_out: float | None) -> dict:
    """The lag rule on a ratio t_half(attention) / t_half(output) over seeds (``ratio``: mean, std, n, n >= 1):
    its standard error, its interval (``ratio_interval``), the band it is read against, the outcome
    (``lag_outcome``) and the verdict of "attention lags output" (``LAG_VERDICT``).  Table 1 and the scope
    studies call their lags by this one rule."""
    se = _se(ratio)
    lo, hi = ratio_interval(ratio["mean"], se, resolution, t_half_out)
    outcome = lag_outcome(lo, hi)
    return {"ratio_se": se, "interval": [lo, hi], "band": list(LAG_BAND), "outcome": outcome,
            "verdict": LAG_VERDICT[outcome]}


def _band(x: float) -> str:
    return f"[{x[0]:.3g}, {x[1]:.3g}]"


def lag_verdict(row: dict, measure: str) -> dict:
    """'attention lags output under joint GD' under one measure, with its three-way outcome."""
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
    call = ratio_call(rs, m["resolution"], tb["mean"])
    se, (lo, hi), outcome = call["ratio_se"], call["interval"], call["outcome"]
    ev = (f"t_half(attention) {_fmt(ta)}, t_half(output) {_fmt(tb)}, ratio {_fmt(rs)} in {_band((lo, hi))} "
          f"(±{Z:g} SE + resolution {m['resolution']} steps; band {_band(LAG_BAND)}): {outcome}")
    v = call["verdict"]
    why = "the ratio interval straddles an edge of the band"
    if one_sampled_seed(row, ("joint",)):
        v, why = "undecided", ONE_SEED
    return out | {"verdict": v, "outcome": outcome,
                  "reasons": [] if v != "undecided" else [why],
                  "evidence": ev, "ratio": rs["mean"], "ratio_se": se, "interval": [lo, hi]}


def _fmt(s: dict) -> str:
    if s["mean"] is None:
        return "n/a"
    return f"{s['mean']:.3g}" if s["n"] <= 1 else f"{s['mean']:.3g} ± {s['std']:.2g}"


def testable(row: dict, claim: str) -> tuple[bool, str]:
    """(can the row's model class test the claim?, why not): AND's "attention-only is competitive" needs an
    attention-only plan with a fixed readout of order one (``model_class["attention_only_readout"]`` "fixed"
    and its scale at least ATTENTION_ONLY_READOUT_MIN; a row that records none trained it from its start
    readout); the even-pairs lag claims ("least lag", "almost as fast") need a model where no single token
    carries the label (``model_class["label_in_single_token"]`` False; ``assess_draw`` fills it in from the
    run's configured embedding for rows recorded before rows carried their model class)."""
    mc = row.get("model_class") or {}
    if claim.startswith("attention-only is competitive") and row["task"] == "AND":
        scale = mc.get("attention_only_readout_scale")
        if scale is None:  # recorded before the model class: one head starts at zero, more at init_scale 0.01
            scale = 0.01 if row.get("heads", 2) > 1 else 0.0
        if mc.get("attention_only_readout", "small") != "fixed":
            return False, (f"attention-only trains from the row's start readout (scale {scale:g}), which it never "
                           "changes: a readout it keeps must be fixed, of order one, for its risk to leave the "
                           "neighbourhood of its start")
        if scale < ATTENTION_ONLY_READOUT_MIN:
            return False, (f"attention-only trains with a readout of scale {scale:g} that it never changes, too "
                           f"small for its risk to leave the neighbourhood of its start (a fixed readout of scale "
                           f"at least {ATTENTION_ONLY_READOUT_MIN:g} is needed)")
    if row["task"] == "even_pairs" and claim.startswith((LEAST, NEAR_ONE)):
        if mc.get("label_in_single_token") is not False:
            why = ("the row does not record a model where no single token carries the label; under the 'query' "
                   "embedding the first token alone carries it, so the row is first-token retrieval"
                   if "label_in_single_token" not in mc else "a single token carries the label")
            return False, why
    return True, ""


def _not_testable(rec: dict, why: str) -> dict:
    return rec | {"verdict": "not testable", "reasons": [why]}


def _even_pairs(row: dict, rows: dict, m: str) -> list[dict]:
    """The even-pairs claims under measure ``m``: almost as fast (equivalence) and least lag."""
    base = lag_verdict(row, m)
    out = []
    near = f"{NEAR_ONE} ({m}: ratio interval inside {_band(LAG_BAND)})"
    least = f"{LEAST} ({m}: smallest t_half ratio of all rows)"
    for claim in (near, least):
        ok, why = testable(row, claim)
        if not ok:
            out.append(_not_testable({k: v for k, v in base.items() if k != "outcome"} | {"claim": claim}, why))
        elif base["verdict"] == "refused":
            out.append(base | {"claim": claim})
        elif claim == near:
            lo, hi = base["interval"]
            if LAG_BAND[0] <= lo and hi <= LAG_BAND[1]:
                v = "holds"
            elif lo > LAG_BAND[1] or hi < LAG_BAND[0]:
                v = "does not hold"
            else:
                v = "undecided"
            out.append({k: x for k, x in base.items() if k != "outcome"} | {
                "claim": claim, "verdict": v,
                "reasons": ["the ratio interval straddles an edge of the band"] if v == "undecided" else []})
        else:
            out.append(_least(row, rows, m, base, claim))
    return out


def _least(row: dict, rows: dict, m: str, base: dict, claim: str) -> dict:
    lm = row["lag"][m]
    others = {r["name"]: lag_verdict(r, m) for r in rows.values() if r is not row}
    usable = {k: v for k, v in others.items() if v["verdict"] != "refused"}
    base = {k: v for k, v in base.items() if k != "outcome"}
    if not usable:
        return base | {"claim": claim, "verdict": "refused", "reasons": ["no other row has a usable ratio"]}
    se = _se(lm["ratio"])
    lo_ep, hi_ep = lm["ratio"]["mean"] - Z * se, lm["ratio"]["mean"] + Z * se
    bounds = {k: (v["ratio"] - Z * v["ratio_se"], v["ratio"] + Z * v["ratio_se"]) for k, v in usable.items()}
    if all(hi_ep < lo for lo, _ in bounds.values()):
        v = "holds"
    elif any(hi < lo_ep for _, hi in bounds.values()):
        v = "does not hold"
    else:
        v = "undecided"
    ev = "ratios " + ", ".join(f"{k} {u['ratio']:.3g}" for k, u in usable.items()) + \
         f", even pairs {lm['ratio']['mean']:.3g}"
    skipped = sorted(set(others) - set(usable))
    return base | {"claim": claim, "verdict": v, "evidence": ev,
                   "reasons": [f"rows refused and left out: {', '.join(skipped)}"] if skipped else []}


def with_model_class(row: dict, config: dict) -> dict:
    """The row, with the even-pairs part of its model class filled in from the run's configuration where the
    row predates ``model_class``: the embedding it was trained under ('query' when the run names none) and
    whether a single token carries the label under it (``tasks.label_in_single_token``)."""
    if row["task"] != "even_pairs" or "label_in_single_token" in (row.get("model_class") or {}):
        return row
    embedding = config.get("even_pairs_embedding", "query")
    mc = {**(row.get("model_class") or {}), "even_pairs_embedding": embedding,
          "label_in_single_token": tasks.label_in_single_token(embedding)}
    return {**row, "model_class": mc}


def assess_draw(results: dict) -> list[dict]:
    """Every claim of the paper that one draw's results (its ``rows``) speak to, with its verdict."""
    rows = {name: with_model_class(row, results.get("config") or {}) for name, row in results["rows"].items()}
    out = []
    for row in rows.values():
        task = row["task"]
        if task in PAPER_MATCH:
            out.append(_compare(row, "three_phase", "joint", True, MATCHES))
        if task == "AND":
            out.append(_compare(row, "three_phase", "joint", False, FALLS_SHORT))
            rec = _compare(row, "attention_only", "three_phase", True, COMPETITIVE)
            ok, why = testable(row, COMPETITIVE)
            out.append(rec if ok else _not_testable(rec, why))
        for m in MEASURES:
            if m != "alignment" or (m in row["lag"] and task != "AND"):
                out.append(lag_verdict(row, m))
    for row in rows.values():
        if row["task"] == "even_pairs":
            for m in ("displacement", "function"):
                out += _even_pairs(row, rows, m)
    return out


NOT_RUN = "not run"
"""A draw's call on a claim whose row the draw does not hold: never counted as agreeing with another draw."""


def combine(draws: list[list[dict]]) -> list[dict]:
    """One verdict per claim from the verdicts of several tuning draws (the first is the reported one): a
    claim's verdict is the draws' common verdict when they all give the same, else "depends on tuning" with
    every draw's verdict in the evidence; each records ``draws_agreeing`` ("k/n": the draws giving the
    reported draw's verdict) and ``draw_verdicts``."""
    n = len(draws)
    keyed = [{(v["row"], v["claim"]): v for v in d} for d in draws]
    out = []
    for v in draws[0]:
        key = (v["row"], v["claim"])
        got = [k.get(key) for k in keyed]
        calls = [g["verdict"] if g is not None else NOT_RUN for g in got]
        rec = dict(v)
        rec["draw_verdicts"] = calls
        rec["draws_agreeing"] = f"{calls.count(v['verdict'])}/{n}"
        if NOT_RUN in calls:
            missing = [f"draw {i + 1}" for i, c in enumerate(calls) if c == NOT_RUN]
            rec["verdict"] = "refused"
            rec["reasons"] = [f"the row was not run on {', '.join(missing)}: the draws cannot be compared"]
        elif len(set(calls)) > 1:
            listed = ", ".join(f"draw {i + 1} {c}" for i, c in enumerate(calls))
            why = [f"draw {i + 1}: " + "; ".join(g["reasons"])
                   for i, (g, c) in enumerate(zip(got, calls)) if c == "refused"]
            rec["verdict"] = "depends on tuning"
            rec["evidence"] = (v["evidence"] + "; " if v["evidence"] else "") + f"tuning draws: {listed}"
            rec["reasons"] = [f"the tuning draws disagree ({dict(Counter(calls))})"] + why
        out.append(rec)
    return out


def assess(results: dict) -> list[dict]:
    """Every claim of the paper that the results speak to, with its verdict, judged on the reported draw and on
    each of ``results["tuning_draws"]`` (further results from disjoint tuning seeds, when recorded) and
    combined (``combine``); results without tuning draws are one draw."""
    draws = [results] + list(results.get("tuning_draws") or [])
    return combine([assess_draw(d) for d in draws])


def exit_status(verdicts: list[dict]) -> str:
    """'done' when every verdict was decided, else 'undecided' (some verdict refused, undecided, not testable
    or dependent on tuning)."""
    return "done" if all(v["verdict"] in DECIDED for v in verdicts) else "undecided"
