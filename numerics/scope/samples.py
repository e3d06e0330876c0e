"""Study 5 of ``occ-companion scope``: the sample-complexity constant of the finite-sample plan.

For each d, the finite-sample three-phase plan (``numerics.theorem.finite_sample.three_phase_finite``: phases 1-2 on
N_1 strings, phase 3 on N_3 fresh ones, the population regime's step sizes and T_min) runs with
N = N_1 = N_3 on a geometric grid N = ceil(C d ln d), C in ``c_grid``, over ``seeds`` seeds; a seed reaches
epsilon when its held-out risk + 3 standard errors is at most epsilon (the criterion of ``occ-companion
finite``).  N*(d) is the smallest grid N from which on every larger grid N reaches epsilon in at least
``rate`` of the seeds; the crossing lies in (previous grid N, N*], and the fit uses the geometric midpoint
of that bracket.  A d whose lowest grid N already succeeds, or whose highest does not, is censored and left
out of the fit.

The fits (``fit_constant``) are least squares in log N on one-parameter shapes N = C f(d), f in d ln d, d, d^2:
log C is the mean of log N - log f(d), with a Student-t interval from the residual scatter; the shapes are
compared by the root mean square of their log residuals, and a free power law log N = a + b log d gives the
exponent b with its interval.
"""
from __future__ import annotations

import math

import numpy as np

from theory.setting import Setting
from theory.validation import SettingError

from numerics.theorem.finite_sample import d_log_d, three_phase_finite
from numerics.theorem.regime import regime_plan

TITLE = "The sample-complexity constant"
SHAPES = {"d ln d": lambda d: d * np.log(d), "d": lambda d: d * 1.0, "d^2": lambda d: d * d * 1.0}


def _grid(lo: float, hi: float, ratio: float) -> list[float]:
    k = math.floor(math.log(hi / lo) / math.log(ratio) + 1e-9)
    return [lo * ratio ** i for i in range(k + 1)]


def config(quick: bool) -> dict:
    """d values, the C grid of N = ceil(C d ln d), seeds, target, success rate and the plan's step sizes."""
    return {"d": [5, 10, 20] if quick else [5, 10, 20, 50, 100, 200],
            "c_grid": _grid(0.5, 64, 2.0) if quick else _grid(0.25, 64, math.sqrt(2)),
            "seeds": 20, "rate": 0.9, "epsilon": 1e-3, "test_size": 5_000 if quick else 20_000, "eta1_frac": 0.5,
            "eta2_factor": 1.0, "eta_3": 1.0, "confidence": 0.95,
            "criterion": "held-out risk + 3 standard errors <= epsilon"}


def units(cfg: dict) -> dict[str, dict]:
    """One unit per (d, N): every seed at that sample size (grid points with equal N are one unit)."""
    out = {}
    for d in cfg["d"]:
        for c in cfg["c_grid"]:
            N = d_log_d(d, c)
            out[f"d={d} N={N}"] = {"d": d, "N": N, "seeds": cfg["seeds"], "epsilon": cfg["epsilon"],
                                   "test_size": cfg["test_size"], "eta1_frac": cfg["eta1_frac"],
                                   "eta2_factor": cfg["eta2_factor"], "eta_3": cfg["eta_3"]}
    return out


def unit(args: dict) -> dict:
    """Every seed of the finite-sample plan at N_1 = N_3 = N: held-out risk, its standard error, reached."""
    setting = Setting(args["d"])
    reg = regime_plan(setting, args["epsilon"], eta1_frac=args["eta1_frac"], eta2_factor=args["eta2_factor"],
                      eta_3=args["eta_3"])
    runs = [three_phase_finite(setting, reg.eta_1, reg.eta_2, reg.eta_3, reg.T_min, args["N"], args["N"],
                               seed=seed, test_size=args["test_size"]) for seed in range(args["seeds"])]
    return {"N": args["N"], "T_min": reg.T_min, "test_risk": [r.test_risk for r in runs],
            "test_se": [r.test_se for r in runs],
            "reached": [bool(r.test_risk + 3 * r.test_se <= args["epsilon"]) for r in runs]}


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a success probability from k successes in n trials."""
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def smallest_n(grid: list[tuple[int, int, int]], rate: float) -> dict:
    """From (N, successes, seeds) ascending in N: N* (the smallest N from which on every grid N reaches
    ``rate``), the grid N before it, and whether the crossing is censored ("below" the grid or "above")."""
    ok = [k >= rate * n for _, k, n in grid]
    i = len(ok)
    while i > 0 and ok[i - 1]:
        i -= 1
    if i == len(ok):
        return {"N": None, "N_below": grid[-1][0], "censored": "above"}
    if i == 0:
        return {"N": grid[0][0], "N_below": None, "censored": "below"}
    return {"N": grid[i][0], "N_below": grid[i - 1][0], "censored": None}


def fit_constant(ds, Ns, shape: str = "d ln d", confidence: float = 0.95) -> dict:
    """Least squares of log N = log C + log f(d): C (the geometric mean of N / f(d)), its Student-t interval
    from the scatter of the log residuals (n - 1 degrees of freedom; None with one point) and the root mean
    square of the log residuals."""
    from scipy.stats import t as student

    ds, Ns = np.asarray(ds, float), np.asarray(Ns, float)
    if len(ds) == 0 or len(ds) != len(Ns) or np.any(Ns <= 0) or np.any(ds < 2):
        raise SettingError("fit_constant needs matching d >= 2 and N > 0, at least one point")
    r = np.log(Ns) - np.log(SHAPES[shape](ds))
    logc = float(r.mean())
    resid = r - logc
    n = len(r)
    rms = float(math.sqrt(np.mean(resid ** 2)))
    if n < 2:
        return {"shape": shape, "C": math.exp(logc), "C_low": None, "C_high": None, "rms_log_residual": rms, "n": n}
    half = float(student.ppf(0.5 + confidence / 2, n - 1)) * float(resid.std(ddof=1)) / math.sqrt(n)
    return {"shape": shape, "C": math.exp(logc), "C_low": math.exp(logc - half), "C_high": math.exp(logc + half),
            "rms_log_residual": rms, "n": n}


def fit_power(ds, Ns, confidence: float = 0.95) -> dict | None:
    """log N = a + b log d by least squares: b with its Student-t interval (n - 2 degrees of freedom)."""
    from scipy.stats import linregress, t as student

    if len(ds) < 3:
        return None
    lr = linregress(np.log(np.asarray(ds, float)), np.log(np.asarray(Ns, float)))
    half = float(student.ppf(0.5 + confidence / 2, len(ds) - 2)) * float(lr.stderr)
    return {"b": float(lr.slope), "b_low": float(lr.slope) - half, "b_high": float(lr.slope) + half,
            "a": float(lr.intercept)}


def summarise(cfg: dict, results: dict[str, dict]) -> dict:
    """Per d: the success rate on the grid, N* with its bracket and Wilson interval; the fits."""
    table = []
    for d in cfg["d"]:
        Ns = sorted({d_log_d(d, c) for c in cfg["c_grid"]})
        grid = []
        for N in Ns:
            r = results[f"d={d} N={N}"]
            grid.append((N, sum(r["reached"]), len(r["reached"])))
        star = smallest_n(grid, cfg["rate"])
        row = {"d": d, "grid": [{"N": N, "reached": k, "seeds": n, "median_risk": float(np.median(
            results[f"d={d} N={N}"]["test_risk"]))} for N, k, n in grid]} | star
        if star["N"] is not None:
            k, n = next((k, n) for N, k, n in grid if N == star["N"])
            row["rate_at_N"] = k / n
            row["rate_interval"] = wilson(k, n, cfg["confidence"])
            row["N_mid"] = math.sqrt(star["N"] * star["N_below"]) if star["N_below"] else None
            row["C_at_N"] = star["N"] / (d * math.log(d))
        table.append(row)
    used = [r for r in table if r["censored"] is None]
    ds, mids = [r["d"] for r in used], [r["N_mid"] for r in used]
    fits = {s: fit_constant(ds, mids, s, cfg["confidence"]) for s in SHAPES} if used else {}
    bracket = ({"C_from_lower_ends": fit_constant(ds, [r["N_below"] for r in used])["C"],
                "C_from_upper_ends": fit_constant(ds, [r["N"] for r in used])["C"]} if used else None)
    best = min(fits, key=lambda s: fits[s]["rms_log_residual"]) if fits else None
    verdict = {"epsilon": cfg["epsilon"], "rate": cfg["rate"], "seeds": cfg["seeds"], "fitted_d": ds,
               "censored": {r["d"]: r["censored"] for r in table if r["censored"]},
               "fits": fits, "bracket": bracket, "best_shape": best, "power": fit_power(ds, mids, cfg["confidence"]),
               "grid_ratio": cfg["c_grid"][1] / cfg["c_grid"][0] if len(cfg["c_grid"]) > 1 else None,
               "suite_constant": 30}
    return {"table": table, "verdict": verdict}
