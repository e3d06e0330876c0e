"""Table 1: three-phase against joint GD, output-only and attention-only on six tasks, and the gap metric.

``run(config)`` trains every (row, plan, seed) in parallel processes and returns a results dict (JSON-ready)
holding the whole configuration; ``markdown(results)`` and ``figures(results, folder)`` rebuild the table and
the figures from that dict alone; ``write(results, folder)`` writes results/table1.json, table1.md and one
figure per row, each atomically (temporary file + os.replace).

Rows: one per task; AND has a two-head row (the default of the task) and a one-head row.  The step-size rule
(``plans.step_grid``) is run on seed 0 (its validation set; the population itself for the exact tasks) and the
chosen step sizes are reused for the other seeds.  Rows whose training is deterministic (exact population
gradients from zero initialisation, H = 1) are run once: their seed-to-seed spread is 0 by construction.
"""
from __future__ import annotations

import json
import math
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from numerics.model import Model, Params
from theory.files import atomic_write
from theory.validation import SettingError

from . import plans as P
from . import tasks as TK
from .population import expand, marked_symbols, population

ICL_LOSSES = ("squared", "cross_entropy")
"""The ICL bigram task's loss: squared on the one-hot target (the default) or cross-entropy (the variant)."""
DEFAULT_MASS_TOL = {"occurrence": 1e-10, "OR": 1e-8, "AND": 1e-3}
"""Probability mass of the lightest count classes left out of the exact population sums (per task; the
cost of AND grows as its lengths are long, mean about 88 at d = 50)."""


@dataclass
class Config:
    """Every parameter of a Table 1 run (all recorded in the results)."""

    tasks: tuple = TK.TASKS
    d: int = 50
    seeds: int = 5
    T: int = 50
    grid_B: tuple = (1 / 16, 1 / 4, 1.0)
    grid_alpha: tuple = (1.0, 8.0, 64.0)
    and_heads: tuple = (2, 1)
    init_scale: float = 0.01
    batch: int = 64
    val_size: int = 1024
    test_size: int = 1024
    mass_tol: dict = field(default_factory=lambda: dict(DEFAULT_MASS_TOL))
    len_tol: float = 1e-12
    curve_points: int = 10
    icl_loss: str = "squared"
    joint_steps: str = "separate"
    jobs: int = 2

    @classmethod
    def quick(cls, **overrides) -> "Config":
        """The small configuration of ``--quick``."""
        base = dict(d=8, seeds=3, T=20, batch=32, val_size=256, test_size=512)
        base.update(overrides)
        return cls(**base)

    def validate(self) -> "Config":
        """Raise SettingError (naming the parameter) on a configuration no run can use."""
        unknown = [t for t in self.tasks if t not in TK.TASKS]
        if unknown or not self.tasks:
            raise SettingError(f"tasks must be a non-empty list of {', '.join(TK.TASKS)}; got {list(self.tasks)}")
        for name in ("d", "seeds", "T", "batch", "val_size", "test_size", "curve_points", "jobs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SettingError(f"{name} must be an integer >= 1, got {v!r}")
        for t in self.tasks:
            if self.d < TK.MIN_D[t]:
                raise SettingError(f"d = {self.d} is too small for task {t} (needs d >= {TK.MIN_D[t]})")
        for name in ("grid_B", "grid_alpha"):
            g = getattr(self, name)
            if not g or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in g):
                raise SettingError(f"{name} factors must be finite and > 0, got {list(g)}")
        if not all(h in (1, 2, 3, 4) for h in self.and_heads) or not self.and_heads:
            raise SettingError(f"and_heads must be a non-empty list of head counts in 1..4, got {list(self.and_heads)}")
        for name, tol in list(self.mass_tol.items()) + [("len_tol", self.len_tol)]:
            if not (isinstance(tol, (int, float)) and 0 < tol < 1):
                raise SettingError(f"{name} tolerance must be in (0, 1), got {tol!r}")
        if self.joint_steps not in P.JOINT_STEPS:
            raise SettingError(f"joint_steps must be one of {', '.join(P.JOINT_STEPS)}, got {self.joint_steps!r}")
        if self.icl_loss not in ICL_LOSSES:
            raise SettingError(f"icl_loss must be one of {', '.join(ICL_LOSSES)}, got {self.icl_loss!r}")
        if not (math.isfinite(self.init_scale) and self.init_scale >= 0):
            raise SettingError(f"init_scale must be finite and >= 0, got {self.init_scale!r}")
        return self

    def to_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict) -> "Config":
        known = {f.name for f in fields(cls)}
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
        return cls(**kw)


# ------------------------------------------------------------------------------------------------
# rows and sources


def rows(cfg: Config) -> list[tuple[str, str, int]]:
    """(row name, task, heads) of the table, in order."""
    out = []
    for t in TK.TASKS:
        if t not in cfg.tasks:
            continue
        if t == "AND":
            out += [(f"AND (H={h})", t, h) for h in cfg.and_heads]
        else:
            out.append((t, t, 1))
    return out


def deterministic(task: str, heads: int, cfg: Config) -> bool:
    """Exact gradients from the zero start: every seed gives the same run."""
    return task in TK.POPULATION_TASKS and (heads == 1 or cfg.init_scale == 0)


def task_loss(task: str, cfg: Config) -> str:
    """The training and reported loss of a task: squared, except ICL under ``icl_loss``."""
    return cfg.icl_loss if task == "ICL" else "squared"


def make_source(task: str, seed: int, cfg: Config) -> P.Source:
    """The exact population (occurrence, OR, AND) or the seeded sampler with its validation and test sets."""
    if task in TK.POPULATION_TASKS:
        pop = population(task, cfg.d, cfg.mass_tol.get(task, DEFAULT_MASS_TOL[task]), cfg.len_tol)
        return P.Source(lambda t: pop, pop, pop, exact=True)
    tid = TK.TASKS.index(task)

    def draw(purpose: int, size: int, step: int = 0) -> TK.Batch:
        return TK.sample(task, cfg.d, size, np.random.default_rng([seed, tid, purpose, step]), seed=seed)

    return P.Source(lambda t: draw(0, cfg.batch, t), draw(1, cfg.val_size), draw(2, cfg.test_size))


def initial_params(task: str, heads: int, seed: int, cfg: Config) -> tuple[Model, Params]:
    """The model of the row and its start: zero for H = 1; for H >= 2 seeded normal values of scale
    init_scale, symmetric over the unmarked symbols on the class-reduced tasks."""
    model = Model(*TK.model_shape(task, cfg.d, heads))
    if heads == 1 or cfg.init_scale == 0:
        return model, model.zeros()
    if task in TK.POPULATION_TASKS:
        k = marked_symbols(task)
        rng = np.random.default_rng([seed, 99])
        a = cfg.init_scale * rng.standard_normal((heads, k + 1, 1))
        b = cfg.init_scale * rng.standard_normal((heads, k + 1, model.K))
        return model, Params(expand(a, cfg.d, k)[..., 0], expand(b, cfg.d, k))
    return model, model.init(cfg.init_scale, seed)


def curve_steps(n_steps: int, points: int) -> list[int]:
    """Snapshot steps 0, ..., n_steps, roughly log-spaced."""
    g = np.unique(np.round(np.geomspace(1, n_steps, max(points - 1, 1))).astype(int))
    return sorted({0, *g.tolist(), n_steps})


# ------------------------------------------------------------------------------------------------
# one job: a (row, plan, seed), with the step-size search on seed 0


def run_job(cfg_dict: dict, task: str, heads: int, plan: str, seed: int, chosen: dict | None) -> dict:
    """Train one plan on one seed (searching the step-size grid when ``chosen`` is None) and evaluate it."""
    cpu0 = time.process_time()
    cfg = Config.from_dict(cfg_dict)
    source = make_source(task, seed, cfg)
    model, p0 = initial_params(task, heads, seed, cfg)
    loss = task_loss(task, cfg)
    lam = P.output_curvature(source.val, loss)
    n_steps = cfg.T + 2
    snaps = curve_steps(n_steps, cfg.curve_points)
    candidates = [chosen] if chosen is not None else P.grid_points(
        plan, P.step_grid(lam, cfg.grid_B, cfg.grid_alpha), cfg.joint_steps)
    best, best_etas, searched = None, None, []
    for etas in candidates:
        run = P.run_plan(model, p0, P.schedule(plan, cfg.T, etas), source, loss=loss, snapshot_steps=snaps)
        searched.append({**etas, "val_risk": run.val_risk if math.isfinite(run.val_risk) else None})
        if best is None or run.val_risk < best.val_risk:
            best, best_etas = run, etas
    curve_risk, curve_acc = [], []
    for s in snaps:
        if s in best.snapshots:
            with np.errstate(over="ignore", invalid="ignore"):
                r, a = P.evaluate(model, best.snapshots[s], source.test, loss)
            curve_risk.append(r if math.isfinite(r) else None)
            curve_acc.append(a)
    final = best.snapshots.get(n_steps)
    bound = None
    if source.exact and final is not None:
        # every left-out class has loss <= (1 + max |f|)^2 / 2 with |f| <= sum_h max_k |B_hk|
        fmax = float(np.abs(final.B).max(axis=(1, 2)).sum())
        bound = source.test.extra["dropped"] * (1.0 + fmax) ** 2 / 2
    return {
        "task": task, "heads": heads, "plan": plan, "seed": seed, "loss": loss, "lambda_B": lam, "chosen": best_etas,
        "search": searched if chosen is None else None, "diverged": best.diverged,
        "test_risk": curve_risk[-1] if final is not None else None,
        "test_acc": curve_acc[-1] if final is not None else None,
        "curve": {"steps": snaps[: len(curve_risk)], "risk": curve_risk, "acc": curve_acc},
        "alpha_dist": best.alpha_dist, "B_dist": best.B_dist, "truncation_bound": bound,
        "cpu_s": time.process_time() - cpu0,
    }


# ------------------------------------------------------------------------------------------------


def _stats(values: list) -> dict:
    v = [x for x in values if x is not None]
    if not v:
        return {"mean": None, "std": None, "n": 0}
    a = np.asarray(v, float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0, "n": len(a)}


def _cost(task: str, heads: int) -> int:
    return {"AND": 4 * heads, "ICL": 6, "OR": 2}.get(task, 1)


def package_version() -> str:
    """The installed version of occurrence-companion ("unknown" when not installed)."""
    try:
        from importlib.metadata import version
        return version("occurrence-companion")
    except Exception:  # noqa: BLE001 - any failure of the metadata lookup means "unknown"
        return "unknown"


def run(cfg: Config, quiet: bool = False, command: list | None = None) -> dict:
    """Train the table (parallel over rows, plans and seeds with ``cfg.jobs`` processes) and return the
    results: configuration, per job records and per row summaries."""
    cfg.validate()
    started = time.time()
    table_rows = rows(cfg)
    for _, task, _h in table_rows:          # the length parameters (and AND's root) before any training
        TK.length_parameter(task, cfg.d)
    cfg_dict = cfg.to_dict()
    seeds_of = {name: ([0] if deterministic(t, h, cfg) else list(range(cfg.seeds))) for name, t, h in table_rows}
    bars = {name: tqdm(total=len(P.PLANS) * len(seeds_of[name]), desc=f"{name:<14}", file=sys.stderr,
                       disable=quiet, leave=True, position=i) for i, (name, _, _) in enumerate(table_rows)}
    records: dict = {name: {plan: {} for plan in P.PLANS} for name, _, _ in table_rows}
    sizes = {plan: len(P.grid_points(plan, {"B": cfg.grid_B, "alpha": cfg.grid_alpha}, cfg.joint_steps))
             for plan in P.PLANS}
    first = sorted(((name, t, h, plan) for name, t, h in table_rows for plan in P.PLANS),
                   key=lambda j: -_cost(j[1], j[2]) * sizes[j[3]])   # longest searches first

    def finish(name, rec):
        records[name][rec["plan"]][rec["seed"]] = rec
        bars[name].update()

    if cfg.jobs == 1:
        for name, t, h, plan in first:
            rec = run_job(cfg_dict, t, h, plan, 0, None)
            finish(name, rec)
            for s in seeds_of[name][1:]:
                finish(name, run_job(cfg_dict, t, h, plan, s, rec["chosen"]))
    else:
        with ProcessPoolExecutor(max_workers=cfg.jobs) as pool:
            pending = {pool.submit(run_job, cfg_dict, t, h, plan, 0, None): name for name, t, h, plan in first}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    name = pending.pop(fut)
                    rec = fut.result()
                    finish(name, rec)
                    if rec["seed"] == 0:
                        for s in seeds_of[name][1:]:
                            pending[pool.submit(run_job, cfg_dict, rec["task"], rec["heads"], rec["plan"], s,
                                                rec["chosen"])] = name
    for b in bars.values():
        b.close()
    out_rows = {}
    for name, task, heads in table_rows:
        plans = {}
        for plan in P.PLANS:
            recs = [records[name][plan][s] for s in seeds_of[name]]
            bounds = [r["truncation_bound"] for r in recs if r["truncation_bound"] is not None]
            plans[plan] = {"chosen": recs[0]["chosen"], "search": recs[0]["search"],
                           "truncation_bound": max(bounds) if bounds else None,
                           "risk": _stats([r["test_risk"] for r in recs]), "acc": _stats([r["test_acc"] for r in recs]),
                           "diverged": [r["seed"] for r in recs if r["diverged"]], "seeds": recs}
        joint = plans["joint"]["seeds"]
        ta = [P.t_half(r["alpha_dist"]) for r in joint]
        tb = [P.t_half(r["B_dist"]) for r in joint]
        ratio = [a / b for a, b in zip(ta, tb) if a is not None and b]
        info = {"task": task, "heads": heads, "loss": task_loss(task, cfg), "length_p": TK.length_parameter(task, cfg.d),
                "deterministic": deterministic(task, heads, cfg), "lambda_B": joint[0]["lambda_B"],
                "seeds_run": seeds_of[name], "plans": plans,
                "gap": {"t_half_alpha": ta, "t_half_B": tb, "ratio": ratio,
                        "t_half_alpha_stats": _stats(ta), "t_half_B_stats": _stats(tb), "ratio_stats": _stats(ratio)}}
        if task in TK.POPULATION_TASKS:
            pop = population(task, cfg.d, cfg.mass_tol.get(task, DEFAULT_MASS_TOL[task]), cfg.len_tol)
            info["population"] = dict(pop.extra)
        out_rows[name] = info
    return {"suite": "occurrence-companion", "version": package_version(), "command": command or sys.argv,
            "config": cfg_dict, "elapsed_s": time.time() - started,
            "cpu_s": sum(r["cpu_s"] for rec in records.values() for per in rec.values() for r in per.values()),
            "rows": out_rows}


# ------------------------------------------------------------------------------------------------
# rendering (from the results dict alone)


def _factors(values) -> str:
    return "{" + ", ".join(f"{v:g}" for v in values) + "}"


def _fmt(s: dict, digits: int = 3) -> str:
    if s["mean"] is None:
        return "n/a"
    if s["n"] <= 1:
        return f"{s['mean']:.{digits}g}"
    return f"{s['mean']:.{digits}g} ± {s['std']:.2g}"


def table_rows_markdown(results: dict) -> list[str]:
    """The Markdown table of the results: per row and plan, held-out risk and accuracy (mean ± std over
    seeds), and the joint-GD t_half of attention and output with their ratio."""
    out = ["| task | plan | held-out risk | accuracy | step sizes | t_half(attention) | t_half(output) | ratio |",
           "|---|---|---|---|---|---|---|---|"]
    for name, row in results["rows"].items():
        g = row["gap"]
        for plan in P.PLANS:
            pr = row["plans"][plan]
            etas = ", ".join(f"{k}={v:.3g}" for k, v in pr["chosen"].items())
            gap = [_fmt(g["t_half_alpha_stats"]), _fmt(g["t_half_B_stats"]), _fmt(g["ratio_stats"])] \
                if plan == "joint" else ["", "", ""]
            bad = unstable_seeds(pr)
            div = f" (unstable: seeds {bad})" if bad else ""
            label = name if row.get("loss", "squared") == "squared" else f"{name} ({row['loss'].replace('_', '-')})"
            out.append(f"| {label} | {plan} | {_fmt(pr['risk'])}{div} | {_fmt(pr['acc'])} | {etas} | " + " | ".join(gap) + " |")
    return out


def markdown(results: dict) -> str:
    """results/table1.md: the configuration and the table."""
    cfg = results["config"]
    lines = ["# Table 1 (reconstruction)", "",
             f"occurrence-companion {results['version']}; command: `{' '.join(results['command'])}`; "
             f"{results['elapsed_s']:.0f} s.", "",
             f"d = {cfg['d']}, seeds = {cfg['seeds']}, T = {cfg['T']} (every plan T + 2 = {cfg['T'] + 2} steps), "
             f"output step sizes {_factors(cfg['grid_B'])} / lambda_B, attention step sizes "
             f"{_factors(cfg['grid_alpha'])} / lambda_B, batch {cfg['batch']}, "
             f"validation {cfg['val_size']}, test {cfg['test_size']}, two-head init scale {cfg['init_scale']}, "
             f"joint GD steps {cfg.get('joint_steps', 'separate')}.", "",
             f"Loss: squared on every task, ICL {cfg.get('icl_loss', 'squared').replace('_', '-')} "
             "(a row marked with its loss reports that loss).",
             "Held-out risk: exact population risk for occurrence, OR and AND (sum over the kept count classes;",
             "the left-out mass adds at most the truncation bound listed below); risk on the fixed test set otherwise.",
             "Rows marked deterministic are exact gradient descent from zero, identical for every seed.", "",
             *table_rows_markdown(results), ""]
    for name, row in results["rows"].items():
        pop = row.get("population")
        if pop:
            worst = max(pr["truncation_bound"] or 0.0 for pr in row["plans"].values())
            lines.append(f"* {name}: p = {pop['p']:.12g}, lengths n <= {pop['n_max']} (tail mass <= {pop['len_tol']:g}), "
                         f"{pop['classes']} count classes, left-out mass {pop['dropped']:.3g}, "
                         f"truncation bound on any risk above {worst:.2g}.")
        else:
            lines.append(f"* {name}: length parameter p = {row['length_p']:.12g}.")
    lines.append("")
    return "\n".join(lines)


def figures(results: dict, folder: Path) -> list[Path]:
    """One figure per row: held-out risk by plan over steps (median over seeds, log scale) and the relative
    progress r_alpha(t), r_B(t) under joint GD."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, row in results["rows"].items():
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        ax = axes[0]
        for plan in P.PLANS:
            recs = row["plans"][plan]["seeds"]
            steps = recs[0]["curve"]["steps"]
            risks = np.array([[np.nan if v is None else v for v in r["curve"]["risk"]] for r in recs
                              if len(r["curve"]["risk"]) == len(steps)])
            if risks.size:
                ax.plot(steps, np.nanmedian(risks, axis=0), marker="o", ms=3, label=plan.replace("_", " "))
        ax.set_yscale("log")
        ax.set_xlabel("gradient step")
        ax.set_ylabel("held-out risk (median over seeds)")
        ax.set_title(f"{name}: risk by plan")
        ax.legend(fontsize=8)
        ax = axes[1]
        for key, label in (("alpha_dist", r"attention $r_\alpha(t)$"), ("B_dist", r"output $r_B(t)$")):
            curves = np.array([P.relative_progress(r[key]) for r in row["plans"]["joint"]["seeds"]
                               if len(r[key]) == row["plans"]["joint"]["seeds"][0][key].__len__()])
            ax.plot(np.arange(curves.shape[1]), curves.mean(axis=0), label=label)
        ax.axhline(0.5, color="k", lw=0.8, ls=":")
        ax.set_xlabel("joint GD step")
        ax.set_ylabel(r"relative progress $|P_t - P_0| / |P_T - P_0|$")
        ax.set_title("joint GD: attention vs output progress")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = folder / f"table1_{_slug(name)}.png"
        atomic_write(path, partial(_save_png, fig))
        plt.close(fig)
        paths.append(path)
    return paths


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").replace("__", "_")


def _save_png(fig, fh) -> None:
    fig.savefig(fh, format="png", dpi=100)


def write(results: dict, folder: Path) -> list[Path]:
    """Write table1.json, table1.md and the figures into ``folder``."""
    js = Path(folder) / "table1.json"
    atomic_write(js, lambda f: f.write(json.dumps(results, indent=1, allow_nan=False).encode()))
    return [js, *write_rendered(results, folder)]


def write_rendered(results: dict, folder: Path) -> list[Path]:
    """Write table1.md and the figures of ``results`` into ``folder`` (the rebuild path of --from-json)."""
    md = Path(folder) / "table1.md"
    atomic_write(md, lambda f: f.write(markdown(results).encode()))
    return [md, *figures(results, Path(folder))]


def load(path: Path) -> dict:
    """Read a results JSON written by ``write``."""
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------------------
# the paper's claims, assessed on a results dict (used by docs/table1.md and checks/test_table1.py)

MATCH_SHARE = 0.1
"""A plan 'matches' joint GD when its excess risk over joint GD is at most 3 standard errors of the seed
spread or MATCH_SHARE of the task's attention effect (output-only risk minus joint-GD risk), whichever is
larger; otherwise it 'falls short'."""


def excess(results: dict, row: str, plan: str, reference: str = "joint") -> tuple[float, float]:
    """(excess risk of ``plan`` over ``reference``, allowed margin) on a row (see MATCH_SHARE)."""
    plans = results["rows"][row]["plans"]
    a, b = plans[plan]["risk"], plans[reference]["risk"]
    se = math.sqrt(a["std"] ** 2 / a["n"] + b["std"] ** 2 / b["n"])
    effect = plans["output_only"]["risk"]["mean"] - plans["joint"]["risk"]["mean"]
    return a["mean"] - b["mean"], max(3 * se, MATCH_SHARE * abs(effect))


UNSTABLE_FACTOR = 10.0
"""A seed's run is unstable when its final held-out risk is missing (diverged) or above UNSTABLE_FACTOR times
the risk at its start."""


def unstable_seeds(plan_result: dict) -> list[int]:
    """Seeds whose run of this plan diverged or ended far above its starting risk (see UNSTABLE_FACTOR)."""
    out = []
    for r in plan_result["seeds"]:
        start = r["curve"]["risk"][0] if r["curve"]["risk"] else None
        if r["test_risk"] is None or start is None or r["test_risk"] > UNSTABLE_FACTOR * start:
            out.append(r["seed"])
    return out


def matches(results: dict, row: str, plan: str = "three_phase", reference: str = "joint") -> bool:
    """The plan's held-out risk is not worse than the reference's beyond the margin of ``excess``, and the
    plan has no unstable seed where the reference has none (an outlier must not widen the margin)."""
    plans = results["rows"][row]["plans"]
    if unstable_seeds(plans[plan]) and not unstable_seeds(plans[reference]):
        return False
    e, margin = excess(results, row, plan, reference)
    return e <= margin


PAPER_MATCH = ("occurrence", "OR", "ICL", "SLR")
"""Rows where the paper reports that three-phase matches joint GD."""


def attention_lags(ratio_stats: dict) -> bool:
    """The lag criterion: the mean t_half ratio (attention / output) above 1 by 3 standard errors
    (a single run has no standard error: its ratio alone decides)."""
    se = ratio_stats["std"] / math.sqrt(ratio_stats["n"]) if ratio_stats["n"] > 1 else 0.0
    return ratio_stats["mean"] is not None and ratio_stats["mean"] - 3 * se > 1


def assess(results: dict) -> list[dict]:
    """Each claim of the paper that the results can speak to: row, claim, expected, measured verdict, evidence."""
    rows = results["rows"]
    out = []

    def risk(row, plan):
        r = rows[row]["plans"][plan]["risk"]
        return f"{plan.replace('_', ' ')} {_fmt(r)}"

    for row in rows:
        task = rows[row]["task"]
        e, margin = excess(results, row, "three_phase")
        ev = f"{risk(row, 'three_phase')} vs {risk(row, 'joint')}: excess {e:.3g}, margin {margin:.3g}"
        bad = unstable_seeds(rows[row]["plans"]["three_phase"])
        if bad:
            ev += f"; three-phase unstable on seeds {bad}"
        if task in PAPER_MATCH:
            out.append({"row": row, "claim": "three-phase matches joint GD", "expected": True,
                        "holds": matches(results, row), "evidence": ev})
        if task == "AND":
            out.append({"row": row, "claim": "three-phase falls short of joint GD", "expected": True,
                        "holds": not matches(results, row), "evidence": ev})
            ea, ma = excess(results, row, "attention_only", "three_phase")
            out.append({"row": row, "claim": "attention-only is competitive (matches three-phase)", "expected": True,
                        "holds": ea <= ma, "evidence": f"{risk(row, 'attention_only')} vs "
                        f"{risk(row, 'three_phase')}: excess {ea:.3g}, margin {ma:.3g}"})
        g = rows[row]["gap"]
        rs = g["ratio_stats"]
        if rs["mean"] is not None:
            out.append({"row": row, "claim": "attention lags output under joint GD (t_half ratio > 1)",
                        "expected": True, "holds": attention_lags(rs),
                        "evidence": f"t_half(attention) {_fmt(g['t_half_alpha_stats'])}, t_half(output) "
                        f"{_fmt(g['t_half_B_stats'])}, ratio {_fmt(rs)}"})
    ratios = {r: rows[r]["gap"]["ratio_stats"] for r in rows if rows[r]["gap"]["ratio_stats"]["mean"] is not None}
    for r, rs in ratios.items():
        if rows[r]["task"] != "even_pairs":
            continue
        se = rs["std"] / math.sqrt(rs["n"]) if rs["n"] > 1 else 0.0
        out.append({"row": r, "claim": "attention grows almost as fast as the output under joint GD (t_half ratio "
                    "within 3 standard errors of 1)", "expected": True,
                    "holds": abs(rs["mean"] - 1) <= 3 * se, "evidence": f"ratio {_fmt(rs)}"})
        if len(ratios) > 1:
            out.append({"row": r, "claim": "the lag is least on even pairs (smallest t_half ratio of all rows)",
                        "expected": True, "holds": all(v["mean"] > rs["mean"] for k, v in ratios.items() if k != r),
                        "evidence": "ratios " + ", ".join(f"{k} {v['mean']:.3g}" for k, v in ratios.items())})
    return out
