"""The lag map: joint GD on every Table 1 row over the ratio rho = eta_att / eta_out of the two blocks' step
sizes and over the readout's starting scale, with every lag measure the row has (``lag.measures``) and the
attribution (``lag.gd_attribution``).

A **cell** is one row at one rho and one starting scale.  Its common scale c (eta_out = c, eta_att = rho c) is
chosen on the tuning seeds by the reading's extending grid (``grid.GridSearch``, centred where the runner's
search centres the output rate: ``protocol.base_grid``), as ``runner.search`` chooses joint GD's shared rate
(rho = 1 is that search).  The reported seeds are then trained at c (``bank.train_bank``) and measured.  The
start is the row's (``runner.initial_params``) with the readout replaced by seeded normal values of the
starting scale, symmetric over the unmarked symbols and over the marked ones on the population tasks (so the
exact populations' reductions still hold); scale 0 is the zero readout.  A cell whose row is exact and whose
start is zero has one reported seed (every seed would train the same run).

Each cell is one unit of ``numerics.units`` (``cell_unit``), stored under its arguments and the code this
module imports, so a run resumes after a kill and runs on a dask cluster.  ``summarise`` turns the cells into
the map: per row, start and measure, the ratio's interval against rho, the final risk, the crossover rho* and
whether the risk-optimal rho lies on the lagging side.

**Intervals.**  A seed's t_half is located to within its measure's resolution (the crossing lies between the
recorded step before and the one reported), so its ratio lies in [(t_a - res) / t_o, t_a / (t_o - res)]; a
cell's interval is the hull of its seeds' intervals (the spread over seeds included).  A cell *lags* when its
whole interval is above 1, *leads* when it is below 1, and is undecided when it contains 1 or a seed has no
ratio.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from numerics.experiments import bank
from numerics.experiments import engine
from numerics.experiments import lag
from numerics.experiments import protocol
from numerics.experiments import runner
from numerics.experiments import tasks as tasks_module
from numerics.experiments.grid import GridSearch
from numerics.experiments.population import expand, marked_symbols
from numerics.experiments.protocol import TUNING_SEED_BASE, Reading
from theory.validation import SettingError

RHOS = tuple(4.0 ** k for k in range(-2, 4))
"""eta_att / eta_out: 1/16 to 64 by factors of 4 (rho = 1, one shared rate, included)."""
START_SCALES = (0.0, 0.01, 0.1, 1.0)
"""The readout's starting scales: zero, and seeded normal starts of increasing scale."""
MEASURES = ("displacement", "function", "alignment", "attribution")
QUICK = {"d": 8, "seeds": 2, "rhos": (0.25, 1.0, 4.0, 16.0), "start_scales": (0.0, 0.1),
         "val_size": 256, "test_size": 256, "batch": 32, "lag_points": 60}
"""The quick map (``MapConfig.quick``): a small alphabet, two seeds, four rho, two starts, short budgets
(``QUICK_BUDGET``)."""
QUICK_BUDGET = {"max_steps": 150, "eval_every": 10, "patience": 4, "tuning_seeds": 1, "max_extensions": 2}


@dataclass(frozen=True)
class MapConfig:
    """What the map is made of: the rows (tasks, AND's head counts), d, the reported seeds, the rho grid, the
    starting scales, the sizes of the sampled sets and the reading (GD: the attribution replays GD steps)."""

    tasks: tuple = tasks_module.TASKS
    and_heads: tuple = (2, 1)
    d: int = 50
    seeds: int = 3
    rhos: tuple = RHOS
    start_scales: tuple = START_SCALES
    batch: int = 64
    val_size: int = 1024
    test_size: int = 2048
    lag_points: int = 400
    reading: Reading = field(default_factory=Reading)

    @classmethod
    def quick(cls, **overrides) -> MapConfig:
        """The quick map: ``QUICK`` and the default reading shortened by ``QUICK_BUDGET``."""
        return cls(**{**QUICK, "reading": Reading(name="lag-quick").with_(**QUICK_BUDGET), **overrides})

    def validate(self) -> MapConfig:
        rc = self.run_config()
        rc.validate()
        if self.reading.optimizer != "gd":
            raise SettingError("the lag map trains plain GD (the attribution replays GD steps); "
                               f"got optimizer {self.reading.optimizer!r}")
        if not self.rhos or any(not (math.isfinite(r) and r > 0) for r in self.rhos) or 1.0 not in self.rhos:
            raise SettingError(f"rhos must be positive and include 1 (one shared rate); got {list(self.rhos)}")
        if list(self.rhos) != sorted(set(self.rhos)):
            raise SettingError(f"rhos must be increasing; got {list(self.rhos)}")
        if not self.start_scales or any(not (math.isfinite(s) and s >= 0) for s in self.start_scales):
            raise SettingError(f"start scales must be finite and >= 0; got {list(self.start_scales)}")
        return self

    def run_config(self) -> runner.Config:
        """The Table 1 configuration the cells' rows are built on (one job: the units are the parallelism)."""
        return runner.Config(tasks=tuple(self.tasks), and_heads=tuple(self.and_heads), d=self.d, seeds=self.seeds,
                             batch=self.batch, val_size=self.val_size, test_size=self.test_size,
                             lag_points=self.lag_points, jobs=1, reading=self.reading)

    def rows(self) -> list[runner.Row]:
        return runner.rows(self.run_config())

    def to_dict(self) -> dict:
        return runner.fields_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> MapConfig:
        """The configuration of ``to_dict``'s dict (fields it lacks take their defaults)."""
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()}
        kw["reading"] = Reading.from_dict(kw["reading"])
        return cls(**kw)


# ------------------------------------------------------------------------------------------------
# one cell


def start(row: runner.Row, seed: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The row's start with the readout drawn at ``scale`` (seeded by [seed, 98]; zero at scale 0)."""
    alpha0, B0 = runner.initial_params(row, seed)
    if scale == 0:
        return alpha0, np.zeros_like(B0)
    rng = np.random.default_rng([seed, 98])
    H, _, K = B0.shape
    if row.task in tasks_module.POPULATION_TASKS:
        k = marked_symbols(row.task)
        two = scale * rng.standard_normal((H, 2, K))       # one value for the marked symbols, one for the rest
        return alpha0, expand(np.concatenate([np.repeat(two[:, :1], k, axis=1), two[:, 1:]], axis=1), row.d, k)
    return alpha0, scale * rng.standard_normal(B0.shape)


def cell_seeds(row: runner.Row, scale: float, seeds: int) -> list[int]:
    """The reported seeds of a cell: seed 0 alone on an exact population from the zero readout."""
    return [0] if row.exact and scale == 0 else list(range(seeds))


def _train(row: runner.Row, seed: int, scale: float, programs: list, data: runner.Data, record: bool = False):
    a0, b0 = start(row, seed, scale)
    R = len(programs)
    return bank.train_bank(np.repeat(a0[None], R, 0), np.repeat(b0[None], R, 0), programs, data.train, data.val,
                           row.loss, row.config.reading, record=record)


def search(row: runner.Row, rho: float, scale: float) -> dict:
    """The common scale c of joint GD at eta_att = rho c, eta_out = c, chosen on the tuning seeds (mean final
    validation risk; a point where any seed failed is never chosen) by the reading's extending grid, centred
    where ``runner.search`` centres joint GD's rate."""
    r = row.config.reading
    tune = [TUNING_SEED_BASE + i for i in range(1 if row.exact and scale == 0 else r.tuning_seeds)]
    datas = {s: runner.make_data(row, s) for s in tune}
    lam = runner.output_curvature(datas[tune[0]].val, row.loss)
    a0, b0 = start(row, tune[0], scale)
    flat = r.tol * float(engine.risk(a0[None], b0[None], datas[tune[0]].val, row.loss)[0])
    centre = protocol.base_grid("out", lam, r)[(r.grid_points - 1) // 2]
    g = GridSearch(1, r.grid_points, r.max_extensions, flat)
    steps = 0
    while not g.done:
        programs = [bank.Program(plan="joint", lr_out=centre * r.grid_ratio ** pt[0],
                                 lr_att=rho * centre * r.grid_ratio ** pt[0], label={"point": pt}) for pt in g.pending]
        scores: dict = {}
        for s in tune:
            for rec in _train(row, s, scale, programs, datas[s]):
                scores.setdefault(rec.program.label["point"], []).append(None if rec.failed else rec.final_val)
                steps += rec.steps
        g.record({pt: (None if any(v is None for v in vs) else float(np.mean(vs))) for pt, vs in scores.items()})
    best = g.best()
    return {"centre": centre, "ratio": r.grid_ratio, "chosen": None if best is None else centre * r.grid_ratio ** best[0],
            "tried": [{"scale": centre * r.grid_ratio ** pt[0], "score": v} for pt, v in sorted(g.tried.items())],
            "edge": [("low" if s < 0 else "high") for _, s in g.edges()], "tuning_seeds": tune, "steps": steps}


def measure_seed(row: runner.Row, seed: int, scale: float, rho: float, c: float) -> dict:
    """One reported seed of a cell trained at eta_out = c, eta_att = rho c: its status, final test risk and
    every lag measure (``lag.measures`` and the attribution)."""
    data = runner.make_data(row, seed)
    prog = bank.Program(plan="joint", lr_out=c, lr_att=rho * c)
    rec = _train(row, seed, scale, [prog], data, record=True)[0]
    out = {"seed": seed, "steps": rec.steps, "diverged": rec.diverged, "unstable": rec.unstable,
           "converged": rec.converged, "capped": rec.capped, "test_risk": None, "lag": {}}
    if rec.failed:
        return out
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        risk = float(engine.risk(rec.final_alpha[None], rec.final_B[None], data.test, row.loss)[0])
    out["test_risk"] = risk if math.isfinite(risk) else None
    fsteps = runner.curve_subset(sorted(rec.snapshots), row.config.lag_points)
    func = lag.functional_curves(rec.snapshots, fsteps, data.test, row.loss)
    align = lag.alignment_curves(row.task, row.d, rec.snapshots, fsteps, data.info)
    out["lag"] = lag.measures(fsteps, rec.alpha_dist, rec.B_dist, func, align)
    a0, b0 = start(row, seed, scale)
    attr = lag.gd_attribution(a0, b0, rho * c, c, rec.steps, data.train, data.val, row.loss)
    out["lag"]["attribution"] = attr
    return out


def cell_unit(args: dict) -> dict:
    """The unit of one cell (``numerics.units.call_spec``): {"map": a ``MapConfig`` dict, "task", "heads",
    "rho", "scale"} -> the search and the reported seeds' measures."""
    cfg = MapConfig.from_dict(args["map"])
    row = runner.Row.of(cfg.run_config(), args["task"], args["heads"])
    found = search(row, args["rho"], args["scale"])
    seeds = []
    if found["chosen"] is not None:
        seeds = [measure_seed(row, s, args["scale"], args["rho"], found["chosen"])
                 for s in cell_seeds(row, args["scale"], cfg.seeds)]
    return {"search": found, "seeds": seeds}


GRID_FIELDS = ("tasks", "and_heads", "rhos", "start_scales")
"""MapConfig fields that choose which cells the map has, not what a cell computes: left out of a cell's
arguments, so maps of other grids share the cells they have in common."""


def cells(cfg: MapConfig) -> dict:
    """{(row name, rho, scale): the unit's arguments} of every cell of the map."""
    base = {k: v for k, v in cfg.to_dict().items() if k not in GRID_FIELDS}
    return {(row.name, rho, scale): {"map": base, "task": row.task, "heads": row.heads, "rho": rho, "scale": scale}
            for row in cfg.rows() for scale in cfg.start_scales for rho in cfg.rhos}


# ------------------------------------------------------------------------------------------------
# from cells to the map


def seed_interval(m: dict) -> tuple[float, float] | None:
    """The interval of one seed's ratio under one measure from its half times and their resolution (None: no
    ratio)."""
    ta, to, res = m.get("t_half_att"), m.get("t_half_out"), m.get("resolution") or 0
    if ta is None or not to:
        return None
    lo = max(ta - res, 0) / to
    hi = ta / (to - res) if to - res > 0 else math.inf
    return lo, hi


def cell_ratio(seeds: list[dict], measure: str) -> dict:
    """A cell's ratio under ``measure``: the mean over seeds, the hull of the seeds' intervals, and the side of 1
    it lies on ("lags": whole interval above 1; "leads": below; "undecided": contains 1, or a seed without a
    ratio, or no seed)."""
    per = [s["lag"].get(measure) for s in seeds if s["lag"]]
    per = [m for m in per if m is not None]
    if not per:
        return {"mean": None, "low": None, "high": None, "side": "undecided", "n": 0}
    ivs = [seed_interval(m) for m in per]
    ratios = [m["ratio"] for m in per if m["ratio"] is not None]
    if any(iv is None for iv in ivs):
        return {"mean": float(np.mean(ratios)) if ratios else None, "low": None, "high": None,
                "side": "undecided", "n": len(per)}
    lo, hi = min(iv[0] for iv in ivs), max(iv[1] for iv in ivs)
    return {"mean": float(np.mean(ratios)), "low": lo, "high": hi, "side": side(lo, hi), "n": len(per)}


def side(lo: float, hi: float) -> str:
    """Where an interval [lo, hi] of a ratio lies with respect to 1."""
    return "lags" if lo > 1 else "leads" if hi < 1 else "undecided"


def crossover(rhos: list[float], sides: list[str]) -> dict:
    """Where the ratio crosses 1 along the increasing grid ``rhos``: each pair of consecutive *decided* points
    (undecided ones skipped) on opposite sides brackets a crossing; the bracket is the interval of rho*, its
    geometric midpoint the reported value.  "not bracketed" when no two decided points lie on opposite sides
    (``direction`` then says the side every decided point is on, or "undecided")."""
    decided = [(r, s) for r, s in zip(rhos, sides) if s != "undecided"]
    found = [{"bracket": [r0, r1], "rho_star": math.sqrt(r0 * r1), "direction": f"{s0} to {s1}"}
             for (r0, s0), (r1, s1) in zip(decided, decided[1:]) if s0 != s1]
    if not found:
        kinds = {s for _, s in decided}
        return {"bracketed": False, "crossings": [], "rho_star": None, "bracket": None,
                "direction": kinds.pop() if len(kinds) == 1 else "undecided"}
    return {"bracketed": True, "crossings": found, "rho_star": found[0]["rho_star"], "bracket": found[0]["bracket"],
            "direction": found[0]["direction"]}


def risk_optimal(rhos: list[float], risks: list, sides: list[str]) -> dict:
    """The rho of least final risk (mean over seeds; None where no seed finished) and the side of 1 the
    ratio is on there."""
    ok = [(r, x, s) for r, x, s in zip(rhos, risks, sides) if x is not None]
    if not ok:
        return {"rho": None, "risk": None, "side": "undecided"}
    r, x, s = min(ok, key=lambda v: v[1])
    return {"rho": r, "risk": x, "side": s}


def remainder_share(seeds: list[dict]) -> float | None:
    """The largest |remainder| / |decrease| of the attribution over a cell's seeds (the higher-order part of
    the steps, which neither block is credited with; None without a seed that has it)."""
    v = [abs(a["remainder"] / a["total"]) for a in (s["lag"].get("attribution") for s in seeds)
         if a is not None and a["total"]]
    return max(v) if v else None


def _risk(seeds: list[dict]):
    v = [s["test_risk"] for s in seeds if s["test_risk"] is not None]
    return float(np.mean(v)) if v and len(v) == len(seeds) else None


def summarise(cfg: MapConfig, results: dict) -> dict:
    """The map from the cells' results ({(row, rho, scale): ``cell_unit``'s result}; a missing cell counts as
    not run): per row and starting scale, per measure the ratio against rho, the crossover and the side at
    the risk-optimal rho; the final risk and the chosen common scale against rho."""
    out = {}
    for row in cfg.rows():
        per_scale = {}
        for scale in cfg.start_scales:
            res = [results.get((row.name, rho, scale)) for rho in cfg.rhos]
            seeds = [[] if r is None else r["seeds"] for r in res]
            risks = [_risk(s) if s else None for s in seeds]
            measures = {}
            for m in MEASURES:
                ratios = [cell_ratio(s, m) for s in seeds]
                if all(c["n"] == 0 for c in ratios):
                    continue
                sides = [c["side"] for c in ratios]
                measures[m] = {"ratio": ratios, "crossover": crossover(list(cfg.rhos), sides),
                               "risk_optimal": risk_optimal(list(cfg.rhos), risks, sides),
                               "shared": sides[list(cfg.rhos).index(1.0)]}
            per_scale[str(scale)] = {
                "risk": risks, "remainder": [remainder_share(s) for s in seeds], "chosen": [None if r is None else r["search"]["chosen"] for r in res],
                "edge": [None if r is None else r["search"]["edge"] for r in res],
                "missing": [rho for rho, r in zip(cfg.rhos, res) if r is None],
                "diverged": [rho for rho, s in zip(cfg.rhos, seeds) if any(x["diverged"] or x["unstable"] for x in s)],
                "measures": measures}
        out[row.name] = {"task": row.task, "heads": row.heads, "exact": row.exact, "scales": per_scale}
    return {"config": cfg.to_dict(), "rhos": list(cfg.rhos), "start_scales": list(cfg.start_scales), "rows": out}


# ------------------------------------------------------------------------------------------------
# the run


UNIT = f"{__name__}:cell_unit"


def plan(cfg: MapConfig, version: str | None = None) -> dict:
    """{(row, rho, scale): (store key, unit spec)} of every cell."""
    from numerics import units

    code = units.unit_code(__name__)
    out = {}
    for cell, args in cells(cfg).items():
        spec = units.call_spec(UNIT, args, version, code)
        out[cell] = (units.key_of(spec), spec)
    return out


def run_map(cfg: MapConfig, store, cluster, progress=None, version: str | None = None) -> tuple[dict, object]:
    """Compute every cell of the map that ``store`` (a ``units.Store``) lacks on ``cluster`` (a
    ``units.Cluster``, connected at the first cell to compute, closed at the end) and summarise.  Returns (the
    map, the ``units.Outcome``); on Ctrl-C the finished cells are in the store and KeyboardInterrupt goes on
    up."""
    from numerics import units

    cfg.validate()
    p = plan(cfg, version)
    specs = {key: spec for key, spec in p.values()}
    try:
        outcome = units.execute_calls(specs, store, cluster.connect, progress, setup=engine.keep_temporaries_on_heap)
    finally:
        cluster.close()
    results = {cell: outcome.results[key] for cell, (key, _) in p.items() if key in outcome.results}
    summary = summarise(cfg, results)
    summary["failed"] = {f"{c[0]} rho={c[1]:g} scale={c[2]:g}": outcome.failed[k]["error"]
                         for c, (k, _) in p.items() if k in outcome.failed}
    summary["cells"] = len(p)
    summary["units_cpu_s"] = sum(outcome.unit_cpu.get(k, 0.0) for k, _ in p.values())
    return summary, outcome
