"""Study 1 (``scope --studies regime``): how conservative the three-phase step-size regime is.

The three-phase plan (one output step eta_1, one attention step eta_2, then T output steps eta_3 = 1) is
evaluated exactly in population on a grid of (eta_1, eta_2) at each d: phases 1 and 2 are the closed forms
(``ClosedForms.phase1_beta``, ``phase2_alpha``, as ``occ-companion run`` uses them), phase 3 is gradient descent
on the exact quadratic of the output layer at the attention reached, solved in closed form
(``training.output_descent`` on the series moments), so its cost does not depend on T.  A cell *succeeds* when
the risk after T phase-3 steps is at most floor + epsilon; T is the phase-3 length of the theorem's own plan at
eta_1 = eta1_max / 2, eta_2 = eta2_min (``regime.regime_plan``), the same T for every cell of that d.  The limit
T -> infinity (risk -> inf over beta at that attention) is mapped beside it.

The theorem's sufficient region is eta_1 < eta1_max and eta_2 >= eta2_min(epsilon, eta_1).  Per d the study
reports whether the success map contains it, the smallest succeeding eta_2 (bisection on eta_2 at fixed eta_1,
an estimate to the bisection's relative width, assuming one crossing) against eta2_min, and how both scale
with d.

Certification: for a few cells on each side of the boundary (between two adjacent eta_1 rows and two adjacent
eta_2 grid points), each of the four corners is certified in arb: the closed forms of phases 1 and 2 as balls
(``certify.ArbClosedForms``), the phase-3 moments M, m as balls (``integral.IntegralEvaluator``), and phase 3
as exact output GD on the quadratic, beta_T - beta* = (I - eta_3 D M)^T (beta^(1) - beta*) with beta* = M^-1 m
(a 2 x 2 ball matrix power), so that R_T = inf_beta R + (beta_T - beta*)^T M (beta_T - beta*) / 2 is enclosed
at that corner; the corner succeeds (PASS) or fails (FAIL) when the ball lies below or above floor + epsilon.
Between the corners nothing is certified: the cell's status rests on the corners alone, which is said wherever
it is reported.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

TITLE = "How conservative the step-size regime is"
EPSILON = 1e-3


def config(quick: bool) -> dict:
    """Every parameter of the study (``quick``: the CI size)."""
    return {"d": [10, 50, 200], "epsilon": EPSILON, "eta_3": 1.0, "series_tol": 1e-13,
            "eta1_fracs": [0.1, 0.5, 0.9, 1.2] if quick else
            [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.05, 1.2, 1.5],
            "eta2_factors": np.geomspace(0.25, 4.0, 9 if quick else 33).round(6).tolist(),
            "eta2_reference": "eta2_min(epsilon, eta1_max / 2)", "T": "T_min of the theorem's plan at "
            "eta_1 = eta1_max / 2, eta_2 = eta2_min", "bisection_rel": 1e-4,
            "certify": {"cells_each_side": 1 if quick else 2, "rows": [0.5] if quick else [0.3, 0.5, 0.8],
                        "prec_bits": 128}}


def units(cfg: dict) -> dict[str, dict]:
    """One unit per (d, eta_1 row) of the map, one per (d, certified row pair)."""
    out = {}
    common = {k: cfg[k] for k in ("epsilon", "eta_3", "series_tol", "eta2_factors", "bisection_rel")}
    fracs = cfg["eta1_fracs"]
    for d in cfg["d"]:
        for f in fracs:
            out[f"row d={d} eta1={f}"] = {"kind": "row", "d": d, "eta1_frac": f, **common}
        for f in cfg["certify"]["rows"]:
            i = fracs.index(f) if f in fracs else min(range(len(fracs)), key=lambda k: abs(fracs[k] - f))
            j = min(i + 1, len(fracs) - 1) if i + 1 < len(fracs) else i - 1
            pair = sorted((fracs[i], fracs[j]))
            out[f"certify d={d} eta1={pair[0]}-{pair[1]}"] = {
                "kind": "certify", "d": d, "eta1_fracs": pair, **common,
                "cells_each_side": cfg["certify"]["cells_each_side"], "prec_bits": cfg["certify"]["prec_bits"]}
    return out


# ------------------------------------------------------------------------------------------------
# the float map


@lru_cache(maxsize=8)
def _setting(d: int, tol: float):
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.theorem.evaluators import population_evaluator
    from theory.setting import Setting

    s = Setting(d)
    return s, ClosedForms(s, dps=30), population_evaluator(s, tol=tol)


@lru_cache(maxsize=8)
def reference(d: int, epsilon: float, tol: float) -> dict:
    """The theorem's plan at eta_1 = eta1_max / 2, eta_2 = eta2_min: its eta_2 (the grid's unit) and T."""
    from numerics.theorem.regime import regime_plan

    s, _, ev = _setting(d, tol)
    reg = regime_plan(s, epsilon, evaluator=ev)
    return {"eta_1": reg.eta_1, "eta1_max": reg.eta1_max, "eta2_min": reg.eta2_min, "T": reg.T_min,
            "floor": reg.floor}


def _phase3(d: int, tol: float, eta_1: float, eta_2: float, eta_3: float, T: int) -> tuple[float, float, float]:
    """(risk after T phase-3 steps, inf over beta of the risk at that attention, attention gap) in float."""
    from numerics.theorem.training import output_descent

    _, cf, ev = _setting(d, tol)
    b1 = [float(x) for x in cf.phase1_beta(eta_1)]
    a2a, a2b = (float(x) for x in cf.phase2_alpha(eta_1, eta_2))
    mo = ev.quadratic_moments(a2a, a2b)
    M = np.array([[float(x) for x in row] for row in mo.M])
    m = np.array([float(x) for x in mo.m])
    beta = output_descent(M, m, np.array([1.0, 1.0 / (d - 1)]), eta_3, b1, [T])[0]
    risk_T = float(0.5 * beta @ M @ beta - m @ beta + 0.5)
    risk_inf = float(0.5 - 0.5 * m @ np.linalg.solve(M, m))
    return risk_T, risk_inf, a2a - a2b


def _smallest(succeeds, lo: float, hi: float, rel: float) -> float | None:
    """The smallest eta_2 in [lo, hi] where ``succeeds`` turns true, by bisection on log eta_2 (one crossing
    assumed); None when hi fails, lo when lo already succeeds."""
    if not succeeds(hi):
        return None
    if succeeds(lo):
        return lo
    while hi / lo > 1 + rel:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if succeeds(mid) else (mid, hi)
    return hi


def _row(args: dict) -> dict:
    d, eps, tol, eta3 = args["d"], args["epsilon"], args["series_tol"], args["eta_3"]
    ref = reference(d, eps, tol)
    _, cf, _ = _setting(d, tol)
    eta_1 = args["eta1_frac"] * ref["eta1_max"]
    kappa = float(cf.kappa(eta_1))
    eta2_min = float(cf.eta2_min(eps, eta_1)) if eta_1 < ref["eta1_max"] and kappa > 0 else None
    target = ref["floor"] + eps
    eta2s = [f * ref["eta2_min"] for f in args["eta2_factors"]]
    cells = []
    for eta_2 in eta2s:
        r_T, r_inf, gap = _phase3(d, tol, eta_1, eta_2, eta3, ref["T"])
        cells.append({"eta_2": eta_2, "risk_T": r_T, "risk_inf": r_inf, "gap": gap, "succeeds": r_T <= target,
                      "succeeds_inf": r_inf <= target,
                      "theorem": eta2_min is not None and eta_2 >= eta2_min})
    smallest = {}
    for which, pos in (("T", 0), ("inf", 1)):
        smallest[which] = _smallest(lambda e2: _phase3(d, tol, eta_1, e2, eta3, ref["T"])[pos] <= target,
                                    eta2s[0], eta2s[-1], args["bisection_rel"])
    return {"d": d, "eta_1": eta_1, "eta1_frac": args["eta1_frac"], "kappa": kappa, "eta2_min": eta2_min,
            "reference": ref, "cells": cells, "smallest_eta2": smallest}


# ------------------------------------------------------------------------------------------------
# certification at the corners


def certify_corner(d: int, epsilon: float, eta_1: float, eta_2: float, eta_3: float, T: int,
                   prec_bits: int) -> dict:
    """Three-valued certificate that the three-phase plan at (eta_1, eta_2, eta_3, T) ends at risk <= floor +
    epsilon (PASS) or above it (FAIL), from an arb enclosure of R_T (see the module docstring)."""
    from flint import arb_mat, ctx

    from numerics.theorem.certify import ArbClosedForms, below
    from numerics.theorem.integral import IntegralEvaluator
    from theory.arb_forms import arb_of
    from theory.setting import Setting

    s = Setting(d)
    cfa = ArbClosedForms(s, prec_bits)
    with ctx.workprec(prec_bits):
        b1 = cfa.phase1_beta(arb_of(eta_1))
        a2 = cfa.phase2_alpha(arb_of(eta_1), arb_of(eta_2))
        mo = IntegralEvaluator(s, prec_bits=prec_bits).quadratic_moments(a2[0], a2[1])
        (M00, M01), (_, M11) = mo.M
        M = arb_mat([[M00, M01], [M01, M11]])
        star = M.solve(arb_mat([[mo.m[0]], [mo.m[1]]]))
        r_inf = (1 - (arb_mat([[mo.m[0], mo.m[1]]]) * star)[0, 0]) / 2
        step = arb_mat([[1, 0], [0, 1]]) - arb_of(eta_3) * arb_mat([[1, 0], [0, arb_of(1) / (d - 1)]]) * M
        e0 = arb_mat([[b1[0]], [b1[1]]]) - star
        eT = (step ** T) * e0
        r_T = r_inf + (eT.transpose() * M * eT)[0, 0] / 2
        status = below(r_T, cfa.risk_floor() + arb_of(epsilon))
    return {"eta_1": eta_1, "eta_2": eta_2, "status": status, "risk_T": [float(r_T.lower()), float(r_T.upper())],
            "risk_inf": [float(r_inf.lower()), float(r_inf.upper())]}


def _certify(args: dict) -> dict:
    d, eps, tol, eta3 = args["d"], args["epsilon"], args["series_tol"], args["eta_3"]
    ref = reference(d, eps, tol)
    target = ref["floor"] + eps
    eta1s = [f * ref["eta1_max"] for f in args["eta1_fracs"]]
    eta2s = [f * ref["eta2_min"] for f in args["eta2_factors"]]
    ok = np.array([[_phase3(d, tol, e1, e2, eta3, ref["T"])[0] <= target for e2 in eta2s] for e1 in eta1s])
    first = [int(np.argmax(r)) if r.any() else len(eta2s) for r in ok]   # first succeeding grid point per row
    k = args["cells_each_side"]
    # cells j (between grid points j and j + 1) straddling the float boundary, and k more on each side
    lo, hi = max(0, min(first) - 1 - k), min(len(eta2s) - 2, max(first) - 1 + k)
    cells, corners = [], {}
    for j in range(lo, hi + 1):
        statuses = []
        for e1 in eta1s:
            for e2 in (eta2s[j], eta2s[j + 1]):
                if (e1, e2) not in corners:
                    corners[(e1, e2)] = certify_corner(d, eps, e1, e2, eta3, ref["T"], args["prec_bits"])
                statuses.append(corners[(e1, e2)]["status"])
        float_side = [bool(ok[i, jj]) for i in range(2) for jj in (j, j + 1)]
        cells.append({"eta_1": eta1s, "eta_2": [eta2s[j], eta2s[j + 1]], "corners": statuses,
                      "float_corners": float_side,
                      "status": ("succeeds at every corner" if all(x == "PASS" for x in statuses) else
                                 "fails at every corner" if all(x == "FAIL" for x in statuses) else
                                 "straddles the boundary" if set(statuses) == {"PASS", "FAIL"} else "undecided")})
    return {"d": d, "eta1_fracs": args["eta1_fracs"], "T": ref["T"], "cells": cells,
            "corners": list(corners.values())}


def unit(args: dict) -> dict:
    """One unit: a map row ("row") or the certified cells of a pair of rows ("certify")."""
    return _row(args) if args["kind"] == "row" else _certify(args)


# ------------------------------------------------------------------------------------------------


def _slope(ds: list, values: list) -> float | None:
    """Least-squares slope of log(value) on log(d) (None with fewer than two positive values)."""
    pts = [(math.log(d), math.log(v)) for d, v in zip(ds, values) if v is not None and v > 0]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def summarise(cfg: dict, results: dict[str, dict]) -> dict:
    """The maps, the containment of the theorem's region, the smallest succeeding eta_2 against eta2_min and
    their scaling with d, and the certified cells; a unit missing from ``results`` leaves its part out."""
    per_d = {}
    for d in cfg["d"]:
        rows = [results[n] for n, a in units(cfg).items() if a["kind"] == "row" and a["d"] == d and n in results]
        if not rows:
            continue
        rows.sort(key=lambda r: r["eta1_frac"])
        theorem_cells = [c for r in rows for c in r["cells"] if c["theorem"]]
        outside = [{"eta1_frac": r["eta1_frac"], "eta_2": c["eta_2"], "risk_T": c["risk_T"]}
                   for r in rows for c in r["cells"] if c["theorem"] and not c["succeeds"]]
        mid = min(rows, key=lambda r: abs(r["eta1_frac"] - 0.5))
        ref = mid["reference"]
        per_d[str(d)] = {
            "d": d, "T": ref["T"], "eta1_max": ref["eta1_max"], "eta2_reference": ref["eta2_min"],
            "rows": [{"eta1_frac": r["eta1_frac"], "eta_1": r["eta_1"], "kappa": r["kappa"], "eta2_min": r["eta2_min"],
                      "smallest_eta2_T": r["smallest_eta2"]["T"], "smallest_eta2_inf": r["smallest_eta2"]["inf"],
                      "succeeds": [c["succeeds"] for c in r["cells"]],
                      "succeeds_inf": [c["succeeds_inf"] for c in r["cells"]],
                      "theorem": [c["theorem"] for c in r["cells"]],
                      "risk_T": [c["risk_T"] for c in r["cells"]]} for r in rows],
            "eta2_grid": [c["eta_2"] for c in rows[0]["cells"]],
            "theorem_cells": len(theorem_cells), "theorem_cells_failing": outside,
            "contains_theorem_region": bool(theorem_cells) and not outside,
            "beyond_eta1_max": {str(r["eta1_frac"]): r["smallest_eta2"]["T"] for r in rows if r["eta1_frac"] >= 1},
            "at_half": {"eta1_frac": mid["eta1_frac"], "eta2_min": mid["eta2_min"],
                        "smallest_T": mid["smallest_eta2"]["T"], "smallest_inf": mid["smallest_eta2"]["inf"],
                        "ratio_T": None if mid["smallest_eta2"]["T"] is None or not mid["eta2_min"] else
                        mid["smallest_eta2"]["T"] / mid["eta2_min"],
                        "ratio_inf": None if mid["smallest_eta2"]["inf"] is None or not mid["eta2_min"] else
                        mid["smallest_eta2"]["inf"] / mid["eta2_min"]},
            "certified": [results[n] for n, a in units(cfg).items()
                          if a["kind"] == "certify" and a["d"] == d and n in results]}
    ds = [per_d[k]["d"] for k in per_d]
    half = [per_d[k]["at_half"] for k in per_d]
    scaling = {"d": ds, "eta2_min": [h["eta2_min"] for h in half], "smallest_T": [h["smallest_T"] for h in half],
               "smallest_inf": [h["smallest_inf"] for h in half],
               "slope_eta2_min": _slope(ds, [h["eta2_min"] for h in half]),
               "slope_smallest_T": _slope(ds, [h["smallest_T"] for h in half]),
               "slope_smallest_inf": _slope(ds, [h["smallest_inf"] for h in half])}
    certified = [c for k in per_d for u in per_d[k]["certified"] for c in u["cells"]]
    counts = {s: sum(c["status"] == s for c in certified) for s in
              ("succeeds at every corner", "fails at every corner", "straddles the boundary", "undecided")}
    verdict = {"contains": {k: per_d[k]["contains_theorem_region"] for k in per_d},
               "ratios_T": {k: per_d[k]["at_half"]["ratio_T"] for k in per_d},
               "ratios_inf": {k: per_d[k]["at_half"]["ratio_inf"] for k in per_d},
               "slopes": {k: scaling[k] for k in ("slope_eta2_min", "slope_smallest_T", "slope_smallest_inf")},
               "certified_counts": counts, "epsilon": cfg["epsilon"],
               "beyond_eta1_max": {k: per_d[k]["beyond_eta1_max"] for k in per_d}}
    return {"title": TITLE, "per_d": per_d, "scaling": scaling, "verdict": verdict}
