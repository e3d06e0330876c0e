"""Study 2 of ``occ-companion scope``: the key-query-value parameterisation.

The attention scores and the readout are products, alpha = K^T q and beta = V^T v, with K, V in R^{m x d} and
q, v in R^m.  Zero is a saddle there (every gradient vanishes), so training starts from small random values
symmetric in the unmarked symbols: every unmarked column of K (and of V) is the same vector.  Population
gradient descent keeps that symmetry, so the parameters are six vectors of R^m,
``theta = (k_a, k_b, q, v_a, v_b, v)`` (marked column of K, each unmarked column of K, the query, and the
same for V and v), and the exact population gradients come from the series' dR/dalpha, dR/dbeta by the
chain rule (``kqv_gradient``).  Output phases under the squared loss take dR/dbeta from the exact quadratic
of ``SeriesEvaluator.quadratic_moments`` (one series pass per phase); attention and joint phases evaluate
the series at every step.

The plans are those of ``numerics.theorem.training`` at the step sizes of the main job: the three-phase plan in its
regime (``numerics.theorem.regime.regime_plan``), output-only and attention-then-output at eta_3, attention-only at
eta_2, joint GD at ``joint_eta``; "output" trains (V, v), "attention" trains (K, q).  ``qv_step`` scales the
steps of q and v (0 freezes them): with m = 1, q = v = 1 frozen and K = V = 0, alpha = K^T q is K itself and
the plans are exactly the (alpha, beta) plans of ``numerics.theorem.training`` (the test of this module).  With q and
v trained, the map alpha = K^T q turns GD on (K, q) into a preconditioned GD on alpha, which is not the
(alpha, beta) trajectory even at m = 1.

Attention lag under joint GD is measured as in Table 1 (``numerics.experiments.lag``) on the functional
parameters (alpha, beta): displacement |alpha_t - alpha_0| / |alpha_end - alpha_0| (norms in R^d), and the
function measure gain_att(t) = R(alpha_0, beta_end) - R(alpha_t, beta_end), gain_out(t) = R(alpha_end, beta_0) -
R(alpha_end, beta_t) in exact population risk.  Each (m, scale) cell's lag is called by Table 1's rule
(``verdicts.ratio_call``): the ratio's interval over seeds, mean +- (3 SE + the snapshot resolution carried to the
ratio), against the practical band ``verdicts.LAG_BAND`` = [0.8, 1.25] fixed in advance, so "attention lags" needs
the whole interval above 1.25 and a ratio a few percent from 1, measured precisely, is "no appreciable lag".
``decide_lags`` makes those calls from the ratio statistics alone, so a recorded summary is called again by the rule
without recomputing a unit.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from theory.setting import Setting
from theory.validation import SettingError, check_int, check_real

from numerics.theorem.closed_forms import ClosedForms
from numerics.experiments.lag import crossing
from numerics.experiments import verdicts
from numerics.theorem.regime import regime_plan
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import Plan, Trainer, attention_only, attention_then_output, joint, output_only, three_phase
from numerics.scope.samples import wilson

TITLE = "Key-query-value parameterisation"
PLANS = ("three_phase", "output_only", "attention_only", "attention_then_output", "joint")
ROWS = ("k_a", "k_b", "q", "v_a", "v_b", "v")
MEASURES = ("displacement", "function")
LAG_OUTCOMES = (*verdicts.LAG_VERDICT, "refused")
"""The calls of a cell's lag: the outcomes of ``verdicts.lag_outcome``, and refused when no seed has a ratio."""


def config(quick: bool) -> dict:
    """The study's configuration: d, target, the grid of m x initialisation scale x seeds, and the plans'
    step sizes (as in the main job)."""
    return {"d": 10 if quick else 50, "epsilon": 1e-3,
            "m": [1, 4] if quick else [1, 2, 4, 8, 16],
            "scale": [0.1, 1.0] if quick else [0.01, 0.03, 0.1, 0.3, 1.0],
            "seeds": 2 if quick else 3,
            "init": "every entry of k_a, k_b, q, v_a, v_b, v ~ N(0, scale^2 / m), seeded",
            "steps": 100 if quick else 300, "joint_eta": 1.0, "eta1_frac": 0.5, "eta2_factor": 1.0,
            "eta_3": 1.0, "qv_step": 1.0, "max_points": 200, "tol": 1e-12}


def units(cfg: dict) -> dict[str, dict]:
    """One unit per (m, scale, seed): all five plans from one initialisation."""
    shared = {k: cfg[k] for k in ("d", "epsilon", "steps", "joint_eta", "eta1_frac", "eta2_factor", "eta_3",
                                  "qv_step", "max_points", "tol")}
    return {f"m={m} scale={s:g} seed={seed}": shared | {"m": m, "scale": s, "seed": seed}
            for m in cfg["m"] for s in cfg["scale"] for seed in range(cfg["seeds"])}


def initial_state(m: int, scale: float, seed: int) -> np.ndarray:
    """theta (6 x m): rows k_a, k_b, q, v_a, v_b, v with entries N(0, scale^2 / m) from ``seed``."""
    m = check_int("m", m)
    scale = check_real("scale", scale, 0, None, closed="low")
    return np.random.default_rng(seed).normal(0.0, scale / math.sqrt(m), size=(6, m))


def functional(theta: np.ndarray) -> tuple[float, float, float, float]:
    """(alpha_a, alpha_b, beta_a, beta_b) = (k_a.q, k_b.q, v_a.v, v_b.v)."""
    ka, kb, q, va, vb, v = theta
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging run is caught by the trainer
        return float(ka @ q), float(kb @ q), float(va @ v), float(vb @ v)


def kqv_gradient(theta: np.ndarray, grad_alpha, grad_beta, d: int) -> np.ndarray:
    """The gradient of the risk in theta from the per-coordinate gradients (marked, each unmarked) of
    alpha and beta: rows k_a, k_b, v_a, v_b are the gradients of one column of K or V (q g_a, q g_b, ...);
    rows q and v sum over all d columns (k_a g_a + (d - 1) k_b g_b, ...)."""
    ka, kb, q, va, vb, v = theta
    (ga, gb), (ha, hb) = grad_alpha, grad_beta
    return np.stack([q * ga, q * gb, ka * ga + (d - 1) * kb * gb,
                     v * ha, v * hb, va * ha + (d - 1) * vb * hb])


class KQVTrainer:
    """Population GD on theta for the plans of ``numerics.theorem.training`` (squared loss)."""

    def __init__(self, evaluator: SeriesEvaluator, *, qv_step: float = 1.0, max_points: int | None = None):
        if evaluator.setting.loss != "squared":
            raise SettingError("the KQV study is stated for the squared loss")
        self.evaluator = evaluator
        self.d = evaluator.setting.d
        self.qv_step = check_real("qv_step", qv_step, 0, None, closed="low")
        self._recorder = Trainer(evaluator, max_points=max_points)  # its recorded_steps rule
        self._last = (None, None)

    def evaluate(self, point):
        """The series at a functional point (aa, ab, ba, bb), the last one reused."""
        key = tuple(float(x) for x in point)
        if self._last[0] != key:
            self._last = (key, self.evaluator.evaluate_symmetric(*key))
        return self._last[1]

    def run(self, plan: Plan, theta0: np.ndarray) -> dict:
        """The recorded trajectory: steps, phase ends, functional parameters, risks (and diverged)."""
        theta = np.array(theta0, dtype=float)
        d = self.d
        rows = {"steps": [0], "params": [list(functional(theta))], "risk": [float(self.evaluate(functional(theta)).risk)],
                "phase_ends": [], "diverged": False}
        step = 0
        for phase in plan.phases:
            eta_att = phase.eta if phase.eta_attention is None else phase.eta_attention
            keep = set(self._recorder.recorded_steps(phase.steps).tolist())
            quad = None
            if phase.layer == "output":
                aa, ab, _, _ = functional(theta)
                mo = self.evaluator.quadratic_moments(aa, ab)
                quad = (np.array([[float(x) for x in r] for r in mo.M]), np.array([float(x) for x in mo.m]))
            for t in range(1, phase.steps + 1):
                aa, ab, ba, bb = functional(theta)
                if quad is not None:  # dR/dbeta from the exact quadratic at fixed attention
                    G = quad[0] @ [ba, bb] - quad[1]
                    ga, gb = (0.0, 0.0), (G[0], G[1] / (d - 1))
                else:
                    e = self.evaluate((aa, ab, ba, bb))
                    ga, gb = [float(x) for x in e.grad_alpha], [float(x) for x in e.grad_beta]
                g = kqv_gradient(theta, ga, gb, d)
                mask = np.zeros((6, 1))
                if phase.layer in ("attention", "joint"):
                    mask[:3, 0] = (eta_att, eta_att, eta_att * self.qv_step)
                if phase.layer in ("output", "joint"):
                    mask[3:, 0] = (phase.eta, phase.eta, phase.eta * self.qv_step)
                with np.errstate(over="ignore", invalid="ignore"):
                    theta = theta - mask * g
                point = functional(theta)
                if not all(math.isfinite(x) and abs(x) < 1e150 for x in point):
                    rows["diverged"] = True
                    return rows
                if t in keep:
                    if quad is not None and t < phase.steps:
                        b = np.array(point[2:])
                        risk = float(0.5 * b @ quad[0] @ b - quad[1] @ b + 0.5)
                    else:
                        risk = float(self.evaluate(point).risk)
                    rows["steps"].append(step + t)
                    rows["params"].append(list(point))
                    rows["risk"].append(risk)
            step += phase.steps
            rows["phase_ends"].append(step)
        end = self.evaluate(tuple(rows["params"][-1]))
        rows["risk_bound"] = float(end.risk_bound)
        rows["theta"] = theta.tolist()
        return rows


def _norm(d: int, a: float, b: float) -> float:
    """The R^d norm of a symmetric vector (a, b, ..., b)."""
    return math.sqrt(a * a + (d - 1) * b * b)


def lag_measures(trainer: KQVTrainer, traj: dict) -> dict:
    """t_half of attention and output and their ratio under the displacement and function measures."""
    d, P, steps = trainer.d, np.array(traj["params"]), traj["steps"]
    a0, aT = P[0, :2], P[-1, :2]
    b0, bT = P[0, 2:], P[-1, 2:]
    disp_att = [_norm(d, *(p[:2] - a0)) for p in P]
    disp_out = [_norm(d, *(p[2:] - b0)) for p in P]
    risk_att = [float(trainer.evaluator.evaluate_symmetric(p[0], p[1], *bT).risk) for p in P]
    mo = trainer.evaluator.quadratic_moments(*aT)
    M, m = np.array([[float(x) for x in r] for r in mo.M]), np.array([float(x) for x in mo.m])
    risk_out = [float(0.5 * p[2:] @ M @ p[2:] - m @ p[2:] + 0.5) for p in P]
    curves = {"displacement": (disp_att, disp_out),
              "function": ([risk_att[0] - r for r in risk_att], [risk_out[0] - r for r in risk_out])}
    out = {}
    for name, (va, vb) in curves.items():
        (ta, ra), (tb, rb) = crossing(steps, va), crossing(steps, vb)
        out[name] = {"t_half_att": ta, "t_half_out": tb, "resolution": max(ra, rb),
                     "ratio": (ta / tb) if (ta is not None and tb) else None}
    return out


def quadratic_floor(evaluator: SeriesEvaluator, aa: float, ab: float) -> float:
    """min over beta of the squared risk at fixed symmetric attention (aa, ab): 1/2 - m^T M^-1 m / 2."""
    mo = evaluator.quadratic_moments(aa, ab)
    M, m = np.array([[float(x) for x in r] for r in mo.M]), np.array([float(x) for x in mo.m])
    return float(0.5 - 0.5 * m @ np.linalg.solve(M, m))


def plans_for(setting: Setting, args: dict, evaluator: SeriesEvaluator) -> tuple[dict[str, Plan], dict]:
    """The five plans at the study's step sizes, and the regime they come from."""
    reg = regime_plan(setting, args["epsilon"], eta1_frac=args["eta1_frac"], eta2_factor=args["eta2_factor"],
                      eta_3=args["eta_3"], evaluator=evaluator)
    T = args["steps"]
    plans = {"three_phase": three_phase(reg.eta_1, reg.eta_2, reg.eta_3, reg.T_min),
             "output_only": output_only(reg.eta_3, T),
             "attention_only": attention_only(reg.eta_2, T),
             "attention_then_output": attention_then_output(reg.eta_2, reg.eta_3, T),
             "joint": joint(args["joint_eta"], T)}
    return plans, {"eta_1": reg.eta_1, "eta_2": reg.eta_2, "eta_3": reg.eta_3, "T_min": reg.T_min}


def unit(args: dict) -> dict:
    """All five plans from one seeded initialisation; per plan the final risk and parameters, the curve,
    and for joint GD the lag measures."""
    setting = Setting(args["d"])
    ev = SeriesEvaluator(setting, tol=args["tol"])
    trainer = KQVTrainer(ev, qv_step=args["qv_step"], max_points=args["max_points"])
    plans, regime = plans_for(setting, args, ev)
    theta0 = initial_state(args["m"], args["scale"], args["seed"])
    out = {"regime": regime, "init_params": list(functional(theta0)), "plans": {}}
    for name, plan in plans.items():
        traj = trainer.run(plan, theta0)
        res = {"diverged": traj["diverged"], "steps": traj["steps"], "risk": traj["risk"],
               "phase_ends": traj["phase_ends"]}
        if not traj["diverged"]:
            fin = traj["params"][-1]
            res |= {"final_risk": traj["risk"][-1], "risk_bound": traj["risk_bound"], "final_params": fin,
                    "floor_at_final_attention": quadratic_floor(ev, fin[0], fin[1])}
            if name == "joint":
                res["lag"] = lag_measures(trainer, traj)
                res["params"] = traj["params"]
        out["plans"][name] = res
    return out


def _stats(xs: list[float]) -> dict:
    xs = [x for x in xs if x is not None]
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "std": None, "min": None, "max": None}
    return {"n": n, "mean": float(np.mean(xs)), "std": float(np.std(xs, ddof=1)) if n > 1 else 0.0,
            "min": float(min(xs)), "max": float(max(xs))}


def lag_cell(ratio: dict, t_half_att: dict, t_half_out: dict, resolution: float) -> dict:
    """One cell's lag from its statistics over seeds (``_stats`` of the ratio and of each t_half, and the
    coarsest snapshot resolution): Table 1's rule (``verdicts.ratio_call``), its interval and band recorded with
    the outcome ("call") and the verdict of "attention lags output"; refused when no seed has a ratio, and
    undecided when one seed has (the seeds are random starts: one gives no spread to judge by, as Table 1
    refuses to decide on one seed of a sampled row)."""
    cell = {"ratio": ratio, "t_half_att": t_half_att, "t_half_out": t_half_out, "resolution": resolution}
    if ratio["n"] == 0:
        return cell | {"ratio_se": None, "interval": None, "band": list(verdicts.LAG_BAND), "call": "refused",
                       "verdict": "refused"}
    rule = verdicts.ratio_call(ratio, resolution, t_half_out["mean"])
    out = cell | {k: rule[k] for k in ("ratio_se", "interval", "band", "verdict")} | {"call": rule["outcome"]}
    if ratio["n"] == 1:
        out |= {"call": "undecided", "verdict": "undecided", "reason": verdicts.ONE_SEED}
    return out


def lag_counts(table: list[dict], recorded: bool = False) -> dict:
    """The verdict's lag entries: per measure the number of cells of each call (``LAG_OUTCOMES``), and the rule
    the calls follow, with ``recorded`` saying whether they were made from a recorded summary's statistics
    (``decide_lags``) rather than with the units' results."""
    return {"lag_calls": {meas: {c: sum(1 for row in table if row["lag"][meas]["call"] == c) for c in LAG_OUTCOMES}
                          for meas in MEASURES},
            "lag_rule": {"z": verdicts.Z, "band": list(verdicts.LAG_BAND), "rule": verdicts.rules()["lags"],
                         "from_recorded_summary": recorded}}


def decide_lags(summary: dict) -> dict:
    """A copy of a summary with every cell's lag called again (``lag_cell``) from the statistics it records, and
    the verdict's counts and rule with them; nothing else changes, and no unit is recomputed."""
    out = copy.deepcopy(summary)
    for row in out["table"]:
        for meas in MEASURES:
            x = row["lag"][meas]
            row["lag"][meas] = lag_cell(x["ratio"], x["t_half_att"], x["t_half_out"], x["resolution"])
    out["verdict"] |= lag_counts(out["table"], recorded=True)
    return out


def summarise(cfg: dict, results: dict[str, dict]) -> dict:
    """Per (m, scale): the final risk of each plan over seeds and the lag calls; and the study's answers."""
    d, eps = cfg["d"], cfg["epsilon"]
    c_d = float(ClosedForms(Setting(d)).output_only_floor())
    table = []
    for m in cfg["m"]:
        for s in cfg["scale"]:
            rs = [results[f"m={m} scale={s:g} seed={seed}"] for seed in range(cfg["seeds"])]
            row = {"m": m, "scale": s, "plans": {}, "lag": {}}
            for p in PLANS:
                prs = [r["plans"][p] for r in rs]
                fin = [x.get("final_risk") for x in prs]
                row["plans"][p] = {"risk": _stats(fin), "diverged": sum(x["diverged"] for x in prs),
                                   "reached": sum(1 for x in prs if not x["diverged"]
                                                  and x["final_risk"] + x["risk_bound"] <= eps),
                                   "floor_at_final_attention": _stats([x.get("floor_at_final_attention")
                                                                       for x in prs])}
            joints = [r["plans"]["joint"].get("lag") for r in rs]
            for meas in MEASURES:
                ms = [j[meas] for j in joints if j is not None]
                row["lag"][meas] = lag_cell(_stats([x["ratio"] for x in ms]), _stats([x["t_half_att"] for x in ms]),
                                            _stats([x["t_half_out"] for x in ms]),
                                            max([x["resolution"] for x in ms], default=0))
            table.append(row)
    units_n = len(results)
    tp = [r["plans"]["three_phase"] for r in results.values()]
    tp_reached = sum(1 for x in tp if not x["diverged"] and x["final_risk"] + x["risk_bound"] <= eps)
    stall = {}
    for p in ("output_only", "attention_then_output"):
        fins = [r["plans"][p] for r in results.values() if not r["plans"][p]["diverged"]]
        dev = [x["final_risk"] - c_d for x in fins]
        stall[p] = {"runs": len(fins), "diverged": units_n - len(fins),
                    "final_minus_c": _stats(dev),
                    "reached": sum(1 for x in fins if x["final_risk"] + x["risk_bound"] <= eps)}
    example = next(iter(results.values()))
    verdict = {"d": d, "epsilon": eps, "c_d": c_d, "units": units_n, "regime": example["regime"],
               "three_phase_reached": tp_reached,
               "three_phase_rate_interval": wilson(tp_reached, units_n),
               "three_phase_diverged": sum(x["diverged"] for x in tp),
               "three_phase_risk": _stats([x.get("final_risk") for x in tp]),
               "stall": stall} | lag_counts(table)
    curves = {}
    for name, r in results.items():
        if name.endswith("seed=0"):
            curves[name] = {p: {"steps": r["plans"][p]["steps"], "risk": r["plans"][p]["risk"]} for p in PLANS}
    return {"table": table, "verdict": verdict, "curves": curves}
