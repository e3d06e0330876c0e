"""Study 4 (``scope --studies laws``): other length laws, and the logistic loss.

Beside the paper's geometric law, two laws of the same ``theory.setting.DiscreteLaw`` interface (support, pmf,
tail, sampler), so that the series evaluator and the Monte Carlo take them unchanged:

* heavy-tailed: the discretised Lomax law, P(n > N) = (sigma / (sigma + N))^2 on {1, 2, ...} (a power law,
  P(n) ~ n^-3: finite mean, infinite variance);
* light-tailed: n = 1 + Poisson(lam);

each at its balancing parameter, P(marked symbol absent) = E[(1 - 1/d)^n] = 1/2 (lam in closed form by SymPy,
sigma by a root of the exact series).

**Output-only floor, squared loss.**  At alpha = 0 the attention is uniform, f = a + b g with g = c / n the
marked fraction, and the floor is the least-squares residual of y on g (SymPy below, from the moments
E[g] = 1/d, E[g^2] = (d-1)/d^2 E[1/n] + 1/d^2, E[y g] = 1/d, E[y] = 1 - 2 P0):

    c = 2 P0 (1 - P0 - P0 / ((d - 1) E[1/n])),   = (1 - 1 / ((d - 1) E[1/n])) / 2 at P0 = 1/2,

for every law on {1, 2, ...}; it is positive (Cauchy-Schwarz: y is not affine in g as soon as the law puts
mass on some n >= 2), and E[1/n] is in closed form where SymPy finds one (geometric: ln(d-1)/(d-2), the paper's
c(d); Poisson: (1 - e^-lam)/lam), an exact series with a bounded tail otherwise (Lomax).  The floor is checked
against the series evaluator's quadratic moments and against Monte Carlo at the minimising weights.

**Logistic loss.**  The output-only infimum is 0 for every law (proof: for M > 0 take N with P(n > N) <= 1/M^2
and f = -M + 2 M N g; strings without the marked symbol and marked strings with n <= N lose at most
log(1 + e^-M), the others at most M + log 2, in all at most log(1 + e^-M) + (M + log 2)/M^2 -> 0); it is not
attained, and output-only gradient descent approaches it slowly.  The study runs output-only GD and the
three-phase plan under the logistic loss for the same number of steps (exact population gradients, step 4 on
the output layer: the logistic Hessian is at most 1/4 of the squared one) and reports the risks reached.

Three-phase plan, squared loss: eta_1 = eta1_max / 2 with eta1_max = 1 / (largest output coordinate of -grad R
at zero) (max beta^(1) < 1 below it, as in the theorem), one attention step eta_2, then T output steps eta_3 = 1
with T as in study 1 (the geometric plan's T at that d); the smallest eta_2 reaching floor 0 + epsilon is found
by bisection (an estimate, one crossing assumed), and reported against the geometric law's.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

TITLE = "Other length laws and the logistic loss"
LAWS = ("geometric", "lomax", "poisson")
LOMAX_SHAPE = 2.0


def config(quick: bool) -> dict:
    """Every parameter of the study (``quick``: the CI size)."""
    return {"d": [10] if quick else [10, 20], "laws": list(LAWS), "lomax_shape": LOMAX_SHAPE, "epsilon": 1e-3,
            "series_tol": 1e-5, "mc_size": 100_000 if quick else 400_000, "mc_seed": 0,
            "logistic_steps": 20 if quick else 200, "logistic_eta_out": 4.0, "logistic_gap_factors": [1.0, 2.0, 4.0],
            "eta2_search": [0.01, 100.0], "bisection_rel": 1e-3}


def units(cfg: dict) -> dict[str, dict]:
    """One unit per (d, law, loss)."""
    keep = ("lomax_shape", "epsilon", "series_tol", "mc_size", "mc_seed", "logistic_steps", "logistic_eta_out",
            "logistic_gap_factors", "eta2_search", "bisection_rel")
    return {f"{law} {loss} d={d}": {"d": d, "law": law, "loss": loss, **{k: cfg[k] for k in keep}}
            for d in cfg["d"] for law in cfg["laws"] for loss in ("squared", "logistic")}


# ------------------------------------------------------------------------------------------------
# SymPy: the floor from the moments, and the laws' closed forms


@lru_cache(maxsize=1)
def floor_expression():
    """(d, m, P0, c): the output-only floor c as a SymPy expression of d, m = E[1/n] and P0 = P(c = 0)."""
    import sympy as sp

    d, m, P0 = sp.symbols("d m P0", positive=True)
    a, b = sp.symbols("a b", real=True)
    Eg, Egg, Ey, Eyg = 1 / d, (d - 1) / d**2 * m + 1 / d**2, 1 - 2 * P0, 1 / d
    R = (1 - 2 * a * Ey - 2 * b * Eyg + a**2 + 2 * a * b * Eg + b**2 * Egg) / 2   # E[(y - a - b g)^2] / 2
    sol = sp.solve([sp.diff(R, a), sp.diff(R, b)], [a, b], dict=True)[0]
    return d, m, P0, sp.factor(sp.simplify(R.subs(sol))), sol, (a, b)


@lru_cache(maxsize=1)
def poisson_forms():
    """SymPy: (lam, x, E[1/n], E[x^n], the balancing lam as a function of d) for n = 1 + Poisson(lam)."""
    import sympy as sp

    lam, x, d = sp.symbols("lam x d", positive=True)
    k = sp.symbols("k", integer=True, nonnegative=True)
    pk = sp.exp(-lam) * lam**k / sp.factorial(k)
    inv = sp.simplify(sp.summation(pk / (k + 1), (k, 0, sp.oo)))
    gen = sp.simplify(sp.summation(pk * x ** (k + 1), (k, 0, sp.oo)))
    balance = sp.solve(sp.Eq(gen.subs(x, 1 - 1 / d), sp.Rational(1, 2)), lam)
    return lam, x, d, inv, gen, sp.simplify(balance[0])


@lru_cache(maxsize=1)
def geometric_inverse_moment():
    """SymPy: E[1/n] for n ~ Geometric(p) on {1, 2, ...}, at the balancing p = 1/(d-1)."""
    import sympy as sp

    p, d = sp.symbols("p d", positive=True)
    n = sp.symbols("n", integer=True, positive=True)
    s = sp.summation(p * (1 - p) ** (n - 1) / n, (n, 1, sp.oo))
    s = sp.piecewise_fold(s.subs(p, 1 / (d - 1)))
    s = s.args[0][0] if isinstance(s, sp.Piecewise) else s  # the branch |1 - p| <= 1, which p in (0, 1) meets
    return d, sp.simplify(s)


def lomax_balance_gap(sigma, d: int, shape: float, dps: int = 20):
    """E[(1 - 1/d)^n] - 1/2 for the discretised Lomax law, by summation by parts,
    E[x^n] = x - (1 - x) sum_{k >= 1} x^k P(n > k), summed in mpmath until the terms drop below 10^-dps
    (geometric convergence: the rest is below term / (1 - x))."""
    import mpmath

    with mpmath.workdps(dps):
        sigma, shape = mpmath.mpf(sigma), mpmath.mpf(shape)
        x = 1 - mpmath.mpf(1) / d
        total, k, term = mpmath.mpf(0), 1, mpmath.mpf(1)
        while term > mpmath.mpf(10) ** -dps:
            term = x**k * (sigma / (sigma + k)) ** shape
            total += term
            k += 1
        return x - (1 - x) * total - mpmath.mpf(1) / 2


def lomax_inverse_moment(law, N: int = 1_000_000) -> tuple[float, float]:
    """(E[1/n], bound) of a discretised Lomax law: the exact series summed to N in double (math.fsum of
    positive terms), the rest bounded by P(n > N) / (N + 1)."""
    n = np.arange(1, N + 1, dtype=float)
    tail = (law.sigma / (law.sigma + n)) ** law.shape
    pmf = np.concatenate([[1.0], tail[:-1]]) - tail
    return math.fsum((pmf / n).tolist()), float(tail[-1] / (N + 1)) + 1e-15


@lru_cache(maxsize=8)
def law_of(name: str, d: int, shape: float = LOMAX_SHAPE):
    """(the law at its balancing parameter, the parameter, E[1/n], its error bound, how E[1/n] is known)."""
    import mpmath
    import sympy as sp

    from theory.setting import LomaxLaw, ShiftedPoissonLaw, balanced_p_exact

    if name == "geometric":
        dd, m = geometric_inverse_moment()
        return None, float(balanced_p_exact(d)), float(m.subs(dd, d)), 0.0, f"closed form (SymPy): {sp.sstr(m)}"
    if name == "poisson":
        lam, _, dd, inv, _, balance = poisson_forms()
        lam_d = float(balance.subs(dd, d))
        return (ShiftedPoissonLaw(lam_d), lam_d, float(inv.subs(lam, lam_d)), 0.0,
                f"closed form (SymPy): E[1/n] = {sp.sstr(inv)}, lam = {sp.sstr(balance)}")
    if name == "lomax":
        sigma = float(mpmath.findroot(lambda s: lomax_balance_gap(s, d, shape), (0.5 * d, 2.0 * d),
                                      solver="anderson"))
        law = LomaxLaw(shape, sigma)
        inv, bound = lomax_inverse_moment(law)
        return (law, sigma, inv, bound,
                "exact series (no closed form sought: the pmf is a difference of powers)")
    raise ValueError(f"unknown law {name!r}")


def setting_of(name: str, d: int, loss: str, shape: float = LOMAX_SHAPE):
    from theory.setting import Setting

    law = law_of(name, d, shape)[0]
    return Setting(d, loss=loss, length_law=law)


# ------------------------------------------------------------------------------------------------
# the units


def _floor(args: dict) -> dict:
    """The squared-loss output-only floor three ways: the formula, the series moments, Monte Carlo."""
    from numerics.theorem import montecarlo
    from numerics.theorem.series import SeriesEvaluator

    d = args["d"]
    law, param, m, m_bound, how = law_of(args["law"], d, args["lomax_shape"])
    s = setting_of(args["law"], d, "squared", args["lomax_shape"])
    dd, mm, P0, c_expr, sol, (a, b) = floor_expression()
    subs = {dd: d, mm: m, P0: 0.5}
    c = float(c_expr.subs(subs))
    # the floor moves by |dc/dm| m_bound at most over the series' tail
    c_bound = float(abs(c_expr.diff(mm).subs(subs))) * m_bound
    ev = SeriesEvaluator(s, tol=args["series_tol"])
    zero = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0)
    p0 = float(zero.risk)  # at beta = 0 every string loses 1/2: a check of the weights, not of P0
    mo = ev.quadratic_moments(0.0, 0.0)
    M = np.array([[float(x) for x in row] for row in mo.M])
    mv = np.array([float(x) for x in mo.m])
    beta = np.linalg.solve(M, mv)
    c_series = float(0.5 - 0.5 * mv @ beta)
    aa, bb = float(sol[a].subs(subs)), float(sol[b].subs(subs))
    beta_formula = [aa + bb, aa]                       # f = a + b g: beta_a = a + b, beta_b = a
    est = montecarlo.estimate(s, [0.0] * d, [beta_formula[0]] + [beta_formula[1]] * (d - 1), size=args["mc_size"],
                      seed=args["mc_seed"])
    counts_n = s.law.sample(np.random.default_rng(args["mc_seed"] + 1), args["mc_size"])
    p0_mc = float(np.mean((1 - 1 / d) ** counts_n))
    return {"parameter": param, "inverse_moment": m, "inverse_moment_bound": m_bound, "inverse_moment_how": how,
            "floor": c, "floor_bound": c_bound, "floor_series": c_series,
            "floor_series_bound": mo.bound * (1 + float(np.abs(beta).sum())) ** 2,
            "risk_at_zero": p0, "beta_star": beta_formula, "beta_star_series": beta.tolist(),
            "floor_mc": est.risk, "floor_mc_se": est.risk_se, "p_absent_mc": p0_mc,
            "omitted_mass": zero.omitted_mass, "terms": zero.terms}


def _three_phase_squared(args: dict) -> dict:
    from numerics.scope import regime
    from numerics.theorem.series import SeriesEvaluator
    from numerics.theorem.training import output_descent

    d, eps = args["d"], args["epsilon"]
    s = setting_of(args["law"], d, "squared", args["lomax_shape"])
    ev = SeriesEvaluator(s, tol=args["series_tol"])
    ref = regime.reference(d, eps, 1e-13)               # the geometric plan's T and eta2_min at this d
    g0 = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0).grad_beta
    eta1_max = 1.0 / max(-float(g0[0]), -float(g0[1]))
    eta_1 = eta1_max / 2
    ba, bb = -eta_1 * float(g0[0]), -eta_1 * float(g0[1])
    g1 = ev.evaluate_symmetric(0.0, 0.0, ba, bb).grad_alpha
    kappa = float(g1[1]) - float(g1[0])             # d(alpha_a - alpha_b) / d eta_2

    def phase3(eta_2):
        aa, ab = -eta_2 * float(g1[0]), -eta_2 * float(g1[1])
        mo = ev.quadratic_moments(aa, ab)
        M = np.array([[float(x) for x in row] for row in mo.M])
        m = np.array([float(x) for x in mo.m])
        beta = output_descent(M, m, np.array([1.0, 1.0 / (d - 1)]), 1.0, [ba, bb], [ref["T"]])[0]
        return float(0.5 * beta @ M @ beta - m @ beta + 0.5), float(0.5 - 0.5 * m @ np.linalg.solve(M, m)), mo.bound

    lo, hi = (f * ref["eta2_min"] for f in args["eta2_search"])
    star = regime._smallest(lambda e2: phase3(e2)[0] <= eps, lo, hi, args["bisection_rel"])
    at_star = phase3(star) if star is not None else None
    return {"eta1_max": eta1_max, "eta_1": eta_1, "kappa": kappa, "T": ref["T"], "eta2_search": [lo, hi],
            "smallest_eta2": star, "gap_at_smallest": None if star is None else star * kappa,
            "risk_T_at_smallest": None if at_star is None else at_star[0],
            "risk_bound": None if at_star is None else at_star[2], "reaches": star is not None,
            "geometric_eta2_min": ref["eta2_min"]}


def _logistic(args: dict) -> dict:
    """Output-only GD and the three-phase plan under the logistic loss, the same number of steps."""
    from numerics.theorem import training
    from numerics.theorem.series import SeriesEvaluator

    d, T = args["d"], args["logistic_steps"]
    s = setting_of(args["law"], d, "logistic", args["lomax_shape"])
    ev = SeriesEvaluator(s, tol=args["series_tol"])
    trainer = training.Trainer(ev, record_every=None)
    eta = args["logistic_eta_out"]
    out_only = trainer.run(training.output_only(eta, T)).final
    squared = _three_phase_squared(args)
    g0 = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0).grad_beta
    eta_1 = 0.5 / max(-float(g0[0]), -float(g0[1]))
    ba, bb = -eta_1 * float(g0[0]), -eta_1 * float(g0[1])
    g1 = ev.evaluate_symmetric(0.0, 0.0, ba, bb).grad_alpha
    kappa = float(g1[1]) - float(g1[0])
    plans = []
    for f in args["logistic_gap_factors"]:
        gap = f * (squared["gap_at_smallest"] or 0.0)
        eta_2 = gap / kappa if kappa > 0 else None
        if eta_2 is None or gap <= 0:
            plans.append({"gap_factor": f, "eta_2": None, "risk": None, "risk_bound": None})
            continue
        end = trainer.run(training.three_phase(eta_1, eta_2, eta, T - 2)).final
        plans.append({"gap_factor": f, "eta_2": eta_2, "gap": gap, "risk": end.risk, "risk_bound": end.risk_bound})
    return {"steps": T, "eta_out": eta, "output_only_risk": out_only.risk, "output_only_bound": out_only.risk_bound,
            "eta_1": eta_1, "kappa": kappa, "three_phase": plans}


def unit(args: dict) -> dict:
    """One (d, law, loss): under the squared loss the floor and the three-phase plan, under the logistic loss
    the output-only and three-phase risks after the same number of steps."""
    if args["loss"] == "squared":
        return {"floor": _floor(args), "three_phase": _three_phase_squared(args)}
    return {"logistic": _logistic(args)}


def summarise(cfg: dict, results: dict[str, dict]) -> dict:
    """Per (d, law): the floor (formula, series, Monte Carlo with its z-score), the three-phase plan under the
    squared loss, and the logistic risks."""
    rows = []
    for d in cfg["d"]:
        for law in cfg["laws"]:
            sq, lg = results.get(f"{law} squared d={d}"), results.get(f"{law} logistic d={d}")
            row = {"d": d, "law": law}
            if sq is not None:
                fl, tp = sq["floor"], sq["three_phase"]
                z = (fl["floor_mc"] - fl["floor"]) / fl["floor_mc_se"] if fl["floor_mc_se"] > 0 else None
                row.update({"parameter": fl["parameter"], "inverse_moment": fl["inverse_moment"],
                            "how": fl["inverse_moment_how"], "floor": fl["floor"], "floor_bound": fl["floor_bound"],
                            "floor_series": fl["floor_series"], "floor_mc": fl["floor_mc"],
                            "floor_mc_se": fl["floor_mc_se"], "mc_z": z, "reaches": tp["reaches"],
                            "smallest_eta2": tp["smallest_eta2"], "eta2_ratio": None if tp["smallest_eta2"] is None
                            else tp["smallest_eta2"] / tp["geometric_eta2_min"], "T": tp["T"],
                            "risk_T": tp["risk_T_at_smallest"]})
            if lg is not None:
                L = lg["logistic"]
                best = min((p for p in L["three_phase"] if p["risk"] is not None), key=lambda p: p["risk"], default=None)
                row.update({"logistic_steps": L["steps"], "logistic_output_only": L["output_only_risk"],
                            "logistic_three_phase": None if best is None else best["risk"],
                            "logistic_three_phase_all": L["three_phase"]})
            rows.append(row)
    floors = [r for r in rows if "floor" in r]
    verdict = {"floors_positive": all(r["floor"] - r["floor_bound"] > 0 for r in floors),
               "mc_agree": all(r["mc_z"] is not None and abs(r["mc_z"]) <= 4 for r in floors),
               "series_agree": all(abs(r["floor"] - r["floor_series"]) <= 1e-6 + r["floor_bound"] for r in floors),
               "reaches": {f"{r['law']} d={r['d']}": r["reaches"] for r in floors},
               "epsilon": cfg["epsilon"]}
    return {"title": TITLE, "rows": rows, "verdict": verdict}
