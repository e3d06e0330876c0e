"""Study 3 of ``occ-companion scope``: stochastic gradients instead of the population.

Every plan of ``numerics.theorem.training`` (at the step sizes of ``kqv.plans_for``: the three-phase regime and the
main job's comparison plans) runs with mini-batch gradients: each step draws b fresh strings from the setting
and takes the mean of their per-string gradients (``numerics.theorem.montecarlo.per_string``, parameters in R^d, since
a sample breaks the symmetry in the unmarked symbols).  The risk of an SGD run is estimated on a held-out
sample of ``test_size`` strings (fixed per unit) with its standard error, at the steps that
``Trainer.recorded_steps`` records; a run reaches epsilon when its final held-out risk + 3 standard errors is
at most epsilon (the criterion of ``occ-companion finite``).  The population trajectory of each plan (exact
series, ``numerics.theorem.training.Trainer``) is one unit of its own.

Two grids: every plan at b in ``batch`` (the risk distribution over seeds against the population), and the
three-phase plan alone at b in ``batch_scan``, whose success counts give the smallest b at which it reaches
epsilon with probability ``rate`` (the rule of ``samples.smallest_n``, with Wilson intervals).
"""
from __future__ import annotations

import math

import numpy as np

from theory.setting import Setting

from numerics.theorem.montecarlo import per_string, sample_counts
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import Plan, Trainer
from numerics.scope.kqv import PLANS, plans_for
from numerics.scope.samples import smallest_n, wilson

TITLE = "Stochastic gradients"


def config(quick: bool) -> dict:
    """d, target, the batch sizes of the two grids, seeds, the plans' step sizes and the held-out size."""
    return {"d": 10 if quick else 50, "epsilon": 1e-3,
            "batch": [1, 16, 256],
            "batch_scan": [4 ** k for k in range(6 if quick else 8)],
            "seeds": 5 if quick else 20, "rate": 0.9, "confidence": 0.95,
            "steps": 100 if quick else 300, "joint_eta": 1.0, "eta1_frac": 0.5, "eta2_factor": 1.0, "eta_3": 1.0,
            "test_size": 2_000 if quick else 10_000, "max_points": 30,
            "criterion": "held-out risk + 3 standard errors <= epsilon"}


def _shared(cfg: dict) -> dict:
    return {k: cfg[k] for k in ("d", "epsilon", "steps", "joint_eta", "eta1_frac", "eta2_factor", "eta_3",
                                "test_size", "max_points")}


def units(cfg: dict) -> dict[str, dict]:
    """The population unit, every plan per (b, seed) of ``batch``, the three-phase plan per (b, seed) of
    ``batch_scan`` (a b in both grids is one unit with every plan)."""
    base = _shared(cfg)
    out = {"population": base | {"batch": None, "seed": None, "plans": list(PLANS)}}
    for b in sorted(set(cfg["batch"]) | set(cfg["batch_scan"])):
        plans = list(PLANS) if b in cfg["batch"] else ["three_phase"]
        for seed in range(cfg["seeds"]):
            out[f"b={b} seed={seed}"] = base | {"batch": b, "seed": seed, "plans": plans}
    return out


def sgd_run(setting: Setting, plan: Plan, batch: int, rng: np.random.Generator, test_counts: np.ndarray,
            recorder: Trainer) -> dict:
    """One plan with mini-batch gradients from zero: held-out risk (and its standard error) at the recorded
    steps; ``diverged`` when a parameter stops being finite."""
    d = setting.d
    alpha, beta = np.zeros(d), np.zeros(d)

    def held_out(a, b):
        loss = per_string(setting, a, b, test_counts)[0]
        return float(loss.mean()), float(loss.std(ddof=1) / math.sqrt(len(loss)))

    r0, s0 = held_out(alpha, beta)
    out = {"steps": [0], "risk": [r0], "risk_se": [s0], "diverged": False}
    step = 0
    for phase in plan.phases:
        eta_att = phase.eta if phase.eta_attention is None else phase.eta_attention
        keep = set(recorder.recorded_steps(phase.steps).tolist())
        for t in range(1, phase.steps + 1):
            _, counts = sample_counts(setting, batch, rng)
            _, ga, gb = per_string(setting, alpha, beta, counts)
            with np.errstate(over="ignore", invalid="ignore"):
                if phase.layer in ("attention", "joint"):
                    alpha = alpha - eta_att * ga.mean(axis=0)
                if phase.layer in ("output", "joint"):
                    beta = beta - phase.eta * gb.mean(axis=0)
            if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(beta))):
                out["diverged"] = True
                return out
            if t in keep:
                r, s = held_out(alpha, beta)
                out["steps"].append(step + t)
                out["risk"].append(r)
                out["risk_se"].append(s)
        step += phase.steps
    out |= {"final_alpha": alpha.tolist(), "final_beta": beta.tolist()}
    return out


def unit(args: dict) -> dict:
    """The population trajectories (``batch`` None) or the SGD runs of one (b, seed): per plan the recorded
    held-out risks and the final one with its standard error and whether it reaches epsilon."""
    setting = Setting(args["d"])
    ev = SeriesEvaluator(setting)
    plans, regime = plans_for(setting, args, ev)
    recorder = Trainer(ev, max_points=args["max_points"])
    out = {"regime": regime, "plans": {}}
    if args["batch"] is None:
        for name in args["plans"]:
            traj = recorder.run(plans[name])
            out["plans"][name] = {"steps": [pt.step for pt in traj.points], "risk": traj.risks().tolist(),
                                  "final_risk": traj.final.risk, "risk_bound": traj.final.risk_bound}
        return out
    test = sample_counts(setting, args["test_size"], np.random.default_rng([args["seed"], 1]))[1]
    for name in args["plans"]:
        rng = np.random.default_rng([args["seed"], args["batch"], PLANS.index(name), 0])
        run = sgd_run(setting, plans[name], args["batch"], rng, test, recorder)
        if not run["diverged"]:
            run |= {"final_risk": run["risk"][-1], "final_se": run["risk_se"][-1],
                    "reached": bool(run["risk"][-1] + 3 * run["risk_se"][-1] <= args["epsilon"])}
        out["plans"][name] = run
    return out


def _quantiles(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    q = np.quantile(xs, [0.1, 0.5, 0.9])
    return {"n": len(xs), "q10": float(q[0]), "median": float(q[1]), "q90": float(q[2])}


def summarise(cfg: dict, results: dict[str, dict]) -> dict:
    """Per plan and b: the final held-out risk over seeds (quantiles) against the population's, divergences
    and the reached count; the three-phase success rate over ``batch_scan`` and the smallest b."""
    pop = results["population"]["plans"]
    table = []
    for name in PLANS:
        for b in cfg["batch"]:
            runs = [results[f"b={b} seed={s}"]["plans"][name] for s in range(cfg["seeds"])]
            ok = [r for r in runs if not r["diverged"]]
            table.append({"plan": name, "batch": b, "population_risk": pop[name]["final_risk"],
                          "final_risk": _quantiles([r["final_risk"] for r in ok]),
                          "diverged": len(runs) - len(ok), "reached": sum(r["reached"] for r in ok),
                          "seeds": len(runs)})
    scan = []
    for b in cfg["batch_scan"]:
        runs = [results[f"b={b} seed={s}"]["plans"]["three_phase"] for s in range(cfg["seeds"])]
        k = sum(1 for r in runs if not r["diverged"] and r["reached"])
        lo, hi = wilson(k, len(runs), cfg["confidence"])
        scan.append({"batch": b, "reached": k, "seeds": len(runs), "rate_low": lo, "rate_high": hi,
                     "median_risk": _quantiles([r["final_risk"] for r in runs if not r["diverged"]]).get("median")})
    star = smallest_n([(s["batch"], s["reached"], s["seeds"]) for s in scan], cfg["rate"])
    bands = {}
    for b in cfg["batch"]:
        runs = [results[f"b={b} seed={s}"]["plans"]["three_phase"] for s in range(cfg["seeds"])]
        ok = [r for r in runs if not r["diverged"]]
        if ok:
            R = np.array([r["risk"] for r in ok])
            bands[str(b)] = {"steps": ok[0]["steps"], "q10": np.quantile(R, 0.1, axis=0).tolist(),
                             "median": np.median(R, axis=0).tolist(), "q90": np.quantile(R, 0.9, axis=0).tolist()}
    verdict = {"d": cfg["d"], "epsilon": cfg["epsilon"], "rate": cfg["rate"], "seeds": cfg["seeds"],
               "regime": results["population"]["regime"],
               "population_three_phase": pop["three_phase"]["final_risk"],
               "smallest_batch": {"b": star["N"], "b_below": star["N_below"], "censored": star["censored"]}}
    if star["N"] is not None:
        row = next(s for s in scan if s["batch"] == star["N"])
        verdict["smallest_batch"] |= {"rate_interval": [row["rate_low"], row["rate_high"]],
                                      "reached": row["reached"]}
    population = {"steps": pop["three_phase"]["steps"], "risk": pop["three_phase"]["risk"]}
    return {"table": table, "scan": scan, "verdict": verdict, "bands": bands, "population": population}
