"""The Table 1 runner: for every row (task, head count), choose each plan's step sizes on tuning seeds, train
the reported seeds at the chosen step sizes, and measure them.

``run(config)`` returns a results dict (JSON-ready) that holds the whole configuration, the reading
(``protocol.Reading``), the step-size search of every plan, and per reported seed the held-out risk and
accuracy, the stopping step and status (converged / capped / diverged), the risk curve, and the three lag
measures of joint GD (``lag``); rows carry their capacity ceiling (``capacity``).  Verdicts are taken from
this dict by ``verdicts``; rendering is in app/render/table1.py.

Data (``make_data``): exact populations of count classes for occurrence and OR and one-head AND (their
a/b-symmetric reduction, exact from the zero start: ``population.population(merged=True)``), truncated to a
stated left-out mass; mini-batches from a seeded sampler otherwise (ICL, SLR, even pairs, and two-head AND,
whose heads break the a/b symmetry), with a fixed validation set (step-size choice and stopping) and a fixed
test set (reported), all drawn per seed: batch t of seed s from the generator seeded [s, task, 0, t].
"""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, fields, replace

import numpy as np

from numerics.model import Model
from theory.cache import package_version
from theory.validation import SettingError

from numerics.experiments import and_integral
from numerics.experiments import bank
from numerics.experiments import engine
from numerics.experiments import lag as lag_module
from numerics.experiments import protocol
from numerics.experiments import tasks as tasks_module
from numerics.experiments.population import expand, loss_bound, marked_symbols, population, rounding_bound
from numerics.experiments.grid import GridSearch
from numerics.experiments.protocol import BIMODAL_SEEDS, TUNING_SEED_BASE, Reading, base_grid, bimodal, plan_axes

PLANS = ("three_phase", "joint", "output_only", "attention_only")
AND_HEADS_DATA = ("sampled", "integral")
ICL_LOSSES = ("squared", "cross_entropy")
ATTENTION_ONLY_READOUTS = ("fixed", "small")
"""The readout of the attention-only plan on AND, which that plan never trains: "fixed", of order one
(``attention_only_readout``), or "small", the row's own start (zero for one head, init_scale otherwise)."""
EXACT_MASS_TOL = 1e-16
"""Left-out probability mass of the exact populations, lengths and light classes each (about 2e-16 left out
in all; the bound it puts on every risk, left-out mass times the largest loss, is recorded per row beside the
rounding allowance).  At this mass the truncation part of the bound stays under the 1e-12 target while
|f| < 99 (5e-13 at |f| = 70), for populations with 11-13 % more classes than at 1e-15.  A mass of 1e-15 would
bound one seed of docs/sweep (occurrence, output-only, d = 200, output weights up to 37) by 1.5e-12 of
truncation alone; at 1e-16 that seed's whole bound is 4.9e-13 (1.5e-13 of it the truncation's), the largest of
the sweep's exact seeds."""


def fields_dict(config) -> dict:
    """A frozen configuration's fields as JSON values: a reading as its dict, tuples as lists."""
    out = {}
    for f in fields(config):
        v = getattr(config, f.name)
        out[f.name] = v.to_dict() if isinstance(v, Reading) else (list(v) if isinstance(v, tuple) else v)
    return out


@dataclass(frozen=True)
class Config:
    """Every parameter of a Table 1 run besides the reading (all recorded in the results).  Frozen: a changed
    configuration is a new one (``dataclasses.replace``), so a row's configuration is the run's."""

    tasks: tuple = tasks_module.TASKS
    d: int = 50
    seeds: int = 5
    and_heads: tuple = (2, 1)
    init_scale: float = 0.01
    batch: int = 64
    val_size: int = 1024
    test_size: int = 2048
    mass_tol: float = EXACT_MASS_TOL
    len_tol: float = EXACT_MASS_TOL
    curve_points: int = 40
    lag_points: int = 400
    icl_loss: str = "squared"
    even_pairs_embedding: str = "ends"
    """The even-pairs tokens (``tasks.EVEN_PAIRS_EMBEDDINGS``): "ends" by default, under which no single token
    carries the label and the row has the two heads that represent it (``tasks.even_pairs_heads``)."""
    attention_only_readout: str = "fixed"
    """The attention-only plan's readout on AND rows (``ATTENTION_ONLY_READOUTS``): "fixed" at the scale
    ``attention_only_readout_scale`` (``attention_only_readout``), so that training attention alone can move the
    risk; "small" keeps the row's start, whose readout (0 or init_scale) leaves the risk near 1/2 whatever the
    attention does.  The other plans and rows never use it."""
    attention_only_readout_scale: float = 1.0
    kernel: str = "numpy"
    and_heads_data: str = "sampled"
    """AND rows with more than one head and a random start: "sampled" mini-batches (default: the committed
    results), or "integral", the exact population risk and gradient by the integral representation
    (``and_integral``; accuracies on the sampled test set)."""
    length_multiples: tuple = (1, 2, 5, 10, 20)
    """Edges of the held-out length buckets in multiples of the training law's mean length m: buckets
    [shortest, m), [m, 2m), [2m, 5m), [5m, 10m), [10m, 20m) by default (``length_buckets``)."""
    length_test_size: int = 512
    """Held-out strings per length bucket, per reported seed (``length_risk``)."""
    jobs: int = 2
    seed_base: int = 0
    """The first reported seed id: the reported seeds are seed_base, seed_base + 1, ... (``reported_seeds``)."""
    tuning_seed_base: int = TUNING_SEED_BASE
    """The first tuning seed id: draw j tunes on tuning_seed_base + j * tuning_seeds + i (``tuning_ids``)."""
    tuning_draws: int = 3
    """How many disjoint draws of tuning seeds choose the step sizes again (draw 0 is the primary result)."""
    bimodal_seeds: int = BIMODAL_SEEDS
    """The reported seeds a row gets when a plan's held-out risks are bimodal (``bimodal``)."""
    reading: Reading = field(default_factory=Reading)

    @classmethod
    def quick(cls, **overrides) -> "Config":
        """The small configuration of a quick run (``protocol.QUICK_SIZE``, the reading "quick": the
        protocol's default shortened by ``protocol.quick_reading``), with ``overrides``."""
        return cls(**{**protocol.QUICK_SIZE, "reading": protocol.quick_reading(Reading(name="quick")), **overrides})

    @classmethod
    def build(cls, quick: bool = False, reading: str | None = None, reading_changes: dict | None = None,
              **values) -> Config:
        """The validated configuration of a new run: the defaults (``quick``: the quick configuration) with
        ``values``, under the named reading (None: the configuration's own), shortened to a quick run when
        both are given, with ``reading_changes`` made to its fields."""
        base = cls.quick(**values) if quick else cls(**values)
        r = base.reading
        if reading is not None:
            r = protocol.quick_reading(protocol.reading(reading)) if quick else protocol.reading(reading)
        if reading_changes:
            r = r.with_(**reading_changes)
        return replace(base, reading=r).validate()

    def validate(self) -> "Config":
        unknown = [t for t in self.tasks if t not in tasks_module.TASKS]
        if unknown or not self.tasks:
            raise SettingError(f"tasks must be a non-empty list of {', '.join(tasks_module.TASKS)}; got {list(self.tasks)}")
        for name in ("d", "seeds", "batch", "val_size", "test_size", "curve_points", "lag_points", "jobs",
                     "length_test_size", "tuning_draws", "bimodal_seeds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SettingError(f"{name} must be an integer >= 1, got {v!r}")
        for t in self.tasks:
            if self.d < tasks_module.MIN_D[t]:
                raise SettingError(f"d = {self.d} is too small for task {t} (needs d >= {tasks_module.MIN_D[t]})")
        if not self.and_heads or not all(h in (1, 2, 3, 4) for h in self.and_heads):
            raise SettingError(f"and_heads must be a non-empty list of head counts in 1..4, got {list(self.and_heads)}")
        for name in ("mass_tol", "len_tol"):
            v = getattr(self, name)
            if not (isinstance(v, float) and 0 < v < 1):
                raise SettingError(f"{name} must be in (0, 1), got {v!r}")
        tasks_module.check_even_pairs_embedding(self.even_pairs_embedding)
        engine.check_kernel(self.kernel)
        if self.and_heads_data not in AND_HEADS_DATA:
            raise SettingError(f"and_heads_data must be one of {', '.join(AND_HEADS_DATA)}, "
                               f"got {self.and_heads_data!r}")
        if self.icl_loss not in ICL_LOSSES:
            raise SettingError(f"icl_loss must be one of {', '.join(ICL_LOSSES)}, got {self.icl_loss!r}")
        if not (math.isfinite(self.init_scale) and self.init_scale >= 0):
            raise SettingError(f"init_scale must be finite and >= 0, got {self.init_scale!r}")
        lm = self.length_multiples
        if (not lm or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in lm)
                or lm[0] <= 0 or any(b <= a for a, b in zip(lm, lm[1:]))):
            raise SettingError(f"length_multiples must be increasing positive numbers, got {list(lm)!r}")
        if self.attention_only_readout not in ATTENTION_ONLY_READOUTS:
            raise SettingError(f"attention_only_readout must be one of {', '.join(ATTENTION_ONLY_READOUTS)}, "
                               f"got {self.attention_only_readout!r}")
        v = self.attention_only_readout_scale
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise SettingError(f"attention_only_readout_scale must be finite and > 0, got {v!r}")
        self.reading.validate()
        check_seed_ids(self)
        return self

    def reported_range(self) -> range:
        """Every reported seed id a run may train: the seeds, and the further ones of a bimodal row."""
        return range(self.seed_base, self.seed_base + max(self.seeds, self.bimodal_seeds))

    def tuning_range(self) -> range:
        """Every tuning seed id of the run's draws (exact rows use the first id of each draw only)."""
        return range(self.tuning_seed_base, self.tuning_seed_base + self.tuning_draws * self.reading.tuning_seeds)

    def to_dict(self) -> dict:
        return fields_dict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Config":
        """The configuration a results file recorded.  A setting it does not name (it predates the setting) is
        the setting's default, except those in ``PREDATING``, whose default trains otherwise than the code
        before them did: they take the value that code had, so that a rerun trains what the file recorded."""
        known = {f.name for f in fields(cls)}
        data = {**PREDATING, **data}
        kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in known}
        if isinstance(kw.get("reading"), dict):
            kw["reading"] = Reading.from_dict(kw["reading"])
        return cls(**kw)


PREDATING = {"attention_only_readout": "small"}
"""The value of a setting in a configuration recorded before the setting existed, where it differs from the
setting's default (``Config.from_dict``): attention-only trained on the row's start readout."""


def check_seed_ids(cfg: Config) -> None:
    """Raise SettingError unless the seed bases are integers >= 0 and the reported ids (``reported_range``) and
    the tuning ids of every draw (``tuning_range``) are disjoint: a step size chosen on a seed that is also
    reported would be scored on the data it is judged on."""
    for name in ("seed_base", "tuning_seed_base"):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise SettingError(f"{name} must be an integer >= 0, got {v!r}")
    rep, tun = cfg.reported_range(), cfg.tuning_range()
    if rep.start < tun.stop and tun.start < rep.stop:
        raise SettingError(f"the reported seed ids {rep.start}..{rep.stop - 1} (seed_base {cfg.seed_base}, "
                           f"{max(cfg.seeds, cfg.bimodal_seeds)} seeds with a bimodal row's) and the tuning seed ids "
                           f"{tun.start}..{tun.stop - 1} (tuning_seed_base {cfg.tuning_seed_base}, {cfg.tuning_draws} "
                           f"draws of {cfg.reading.tuning_seeds}) overlap; they must be disjoint")


# ------------------------------------------------------------------------------------------------
# rows, data, starts


def exact(task: str, heads: int, cfg: Config) -> bool:
    """Rows trained on the exact population: occurrence, OR and one-head AND (zero start, so the a/b
    symmetry of OR and AND holds along the whole run)."""
    if task == "occurrence":
        return True
    return task in ("OR", "AND") and (heads == 1 or cfg.init_scale == 0)


def integral(task: str, heads: int, cfg: Config) -> bool:
    """Rows trained on AND's population by the integral (``and_heads_data="integral"``): the AND rows that are
    not ``exact`` (more than one head, random start).  Their seeds differ by their starts, so they are tuned and
    reported on several seeds like the sampled rows."""
    return task == "AND" and not exact(task, heads, cfg) and cfg.and_heads_data == "integral"


def task_loss(task: str, cfg: Config) -> str:
    return cfg.icl_loss if task == "ICL" else "squared"


@dataclass(frozen=True)
class Row:
    """One row of the table (task, head count) under a run's configuration, built once (``Row.of``) and handed
    whole to the functions of the row: what they read of the task and the configuration, and how the row's
    data is made (``exact``: the exact population; ``integral``: AND's population by the integral)."""

    name: str
    task: str
    heads: int
    d: int
    loss: str
    kernel: str
    exact: bool
    integral: bool
    config: Config

    @classmethod
    def of(cls, cfg: Config, task: str, heads: int | None = None) -> Row:
        """The row of ``task`` with ``heads`` heads (AND's rows are named by their head count; None: one head,
        on even pairs the embedding's own count, ``tasks.even_pairs_heads``)."""
        if heads is None:
            heads = tasks_module.even_pairs_heads(cfg.even_pairs_embedding) if task == "even_pairs" else 1
        return cls(name=f"AND (H={heads})" if task == "AND" else task, task=task, heads=heads, d=cfg.d,
                   loss=task_loss(task, cfg), kernel=cfg.kernel, exact=exact(task, heads, cfg),
                   integral=integral(task, heads, cfg), config=cfg)


def rows(cfg: Config) -> list[Row]:
    """The rows of the configuration, in table order; AND has one row per head count."""
    out = []
    for t in tasks_module.TASKS:
        if t in cfg.tasks:
            out += [Row.of(cfg, t, h) for h in cfg.and_heads] if t == "AND" else [Row.of(cfg, t)]
    return out


@dataclass
class Data:
    """Training batches by step, the validation set in the engine layout, the test set (built on first use:
    the step-size search never reads it, and at d = 200 an ICL test set holds 130 MB), and what the row
    records."""

    train: object
    val: engine.Tokens
    make_test: object
    exact: bool
    info: dict
    _test: engine.Tokens | None = field(default=None, repr=False)

    @property
    def test(self) -> engine.Tokens:
        if self._test is None:
            self._test = self.make_test()
        return self._test


def make_data(row: Row, seed: int) -> Data:
    """The data of one seed of the row."""
    task, d, kernel, cfg = row.task, row.d, row.kernel, row.config
    if row.exact:
        pop = population(task, d, cfg.mass_tol, cfg.len_tol, merged=task != "occurrence")
        tb = engine.from_batch(pop, kernel)
        return Data(lambda t: tb, tb, lambda: tb, True, dict(pop.extra))
    tid = tasks_module.TASKS.index(task)
    p = tasks_module.length_parameter(task, d)

    def draw(purpose: int, size: int, step: int = 0):
        # each purpose (0 training, 1 validation, 2 test) draws from its own generator: building one set or not
        # leaves the others' strings unchanged
        return tasks_module.sample(task, d, size, np.random.default_rng([seed, tid, purpose, step]), seed=seed,
                         even_pairs_embedding=cfg.even_pairs_embedding)

    if row.integral:
        pop = and_integral.IntegralPopulation(d, p)
        info = {"p": p, "kind": "integral", "accuracy": f"on the {cfg.test_size} sampled strings of the test set"}
        return Data(lambda t: pop, pop,
                    lambda: and_integral.IntegralPopulation(d, p, engine.from_batch(draw(2, cfg.test_size), kernel)),
                    False, info)
    info = {"p": p}
    if task == "SLR":
        info["k"], info["v"] = tasks_module.slr_directions(d, seed)   # the test batch's own k*, v* (sample_slr)
    return Data(lambda t: engine.from_batch(draw(0, cfg.batch, t), kernel),
                engine.from_batch(draw(1, cfg.val_size), kernel),
                lambda: engine.from_batch(draw(2, cfg.test_size), kernel), False, info)


def initial_params(row: Row, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The start of a row: zero for one head; for more heads seeded normal values of scale init_scale
    (symmetric over the unmarked symbols on occurrence, OR and AND)."""
    task, heads, d, cfg = row.task, row.heads, row.d, row.config
    H, D, K = tasks_module.model_shape(task, d, heads, even_pairs_embedding=cfg.even_pairs_embedding)
    if heads == 1 or cfg.init_scale == 0:
        return np.zeros((H, D)), np.zeros((H, D, K))
    rng = np.random.default_rng([seed, 99])
    if task in tasks_module.POPULATION_TASKS:
        k = marked_symbols(task)
        a = cfg.init_scale * rng.standard_normal((heads, k + 1, 1))
        b = cfg.init_scale * rng.standard_normal((heads, k + 1, K))
        return expand(a, d, k)[..., 0], expand(b, d, k)
    p = Model(H, D, K).init(cfg.init_scale, seed)
    return p.alpha, p.B


def fixed_readout(row: Row) -> bool:
    """Whether the row's attention-only plan starts from (and keeps) the fixed readout: AND rows under
    ``attention_only_readout="fixed"``."""
    return row.task == "AND" and row.config.attention_only_readout == "fixed"


def attention_only_readout(row: Row) -> np.ndarray:
    """The fixed readout (H, D, 1) of the attention-only plan on AND: scale / H times +1 on the marked symbols
    a and b and -1 on every other symbol, in every head.

    These are the signs of each symbol's correlation with the label at the start (a string's share of a or b
    tokens is larger on positive strings, so the share of the others is smaller), the readout the output layer
    takes first under every other plan; frozen there, the model's output is a weighted average of +-scale
    whose weights the attention alone sets, so its range is the labels' at scale 1 for any number of heads.
    It is a/b-symmetric and symmetric over the unmarked symbols, so the exact class population of one-head AND
    stays exact along the run."""
    H, D, K = tasks_module.model_shape(row.task, row.d, row.heads)
    sign = np.where(np.arange(D) < marked_symbols("AND"), 1.0, -1.0)
    return np.broadcast_to((row.config.attention_only_readout_scale / H) * sign[None, :, None], (H, D, K)).copy()


def start_of(row: Row, seed: int, plan: str) -> tuple[np.ndarray, np.ndarray]:
    """The start of one plan's run on the row: ``initial_params``, with the fixed readout in place of B for
    the attention-only plan where ``fixed_readout`` holds (that plan never trains B, so it keeps it)."""
    a0, b0 = initial_params(row, seed)
    if plan == "attention_only" and fixed_readout(row):
        b0 = attention_only_readout(row)
    return a0, b0


def model_class(row: Row) -> dict:
    """What the row's model class lets its claims test, recorded in the row: the attention-only plan's readout
    (kind and scale: the row's start, 0 or init_scale, where it is not fixed) and, on even pairs, the
    embedding and whether a single token's type carries the label (``tasks.label_in_single_token``)."""
    cfg = row.config
    if fixed_readout(row):
        kind, scale = "fixed", float(cfg.attention_only_readout_scale)
    else:
        kind, scale = "small", float(0.0 if row.heads == 1 or cfg.init_scale == 0 else cfg.init_scale)
    ep = row.task == "even_pairs"
    return {"attention_only_readout": kind, "attention_only_readout_scale": scale,
            "even_pairs_embedding": cfg.even_pairs_embedding if ep else None,
            "label_in_single_token": tasks_module.label_in_single_token(cfg.even_pairs_embedding) if ep else None}


def output_curvature(val: engine.Tokens, loss: str) -> float:
    """lambda_B: the largest eigenvalue of E[xbar xbar^T] (xbar the uniform-attention mean token,
    ``engine.uniform_mean_token_moment``), the curvature of the squared risk in each output column at
    alpha = 0 (divided by K under cross-entropy, whose Hessian in f at the zero start is (I - 11^T / K) / K):
    the scale of the step-size grids."""
    lam = float(np.linalg.eigvalsh(engine.uniform_mean_token_moment(val), UPLO="L")[-1])
    return lam / val.y.shape[1] if loss == "cross_entropy" else lam


# ------------------------------------------------------------------------------------------------
# step-size search on tuning seeds


def _value(axis_centres: dict, axes: tuple, point: tuple, ratio: float) -> dict:
    return {ax: axis_centres[ax] * ratio ** off for ax, off in zip(axes, point)}


def _program(plan: str, lrs: dict, label: dict) -> bank.Program:
    out = lrs.get("out", 0.0)
    att = lrs.get("att", out if plan == "joint" else 0.0)
    return bank.Program(plan=plan, lr_out=out, lr_att=att, label=label)


RUNS_PER_CALL = {"ICL": ((16, None), (50, 4), (math.inf, 1))}
"""Rows whose runs the runner does not bank whole, by task: (largest d, most runs a call of the engine) in
order of d, None no limit (``bank.train_bank``'s ``runs_per_call``; the runs of a bank share each step's
batch whatever the limit).  A bank is kept where one engine call of k runs takes at most 1.25 times as long as
the same k runs stepped one call each (docs/benchmarks_engine.md, "Banks").  ICL's banks of 16 do not from
d = 25 on (their token-row temporaries and readouts grow with the bank past what the cache holds), nor do its
banks of 4 above d = 50, while banks of 4 gain at d = 25 and hold even at d = 50: so ICL runs take calls of at
most 4 runs up to d = 50 and calls of their own above, where each run keeps the bits of the run trained alone
whatever runs share its bank.  SLR, even pairs, two-head AND and the exact rows are banked whole."""


def runs_per_call_at(task: str, d: int) -> int | None:
    """The most runs of ``task`` at ``d`` one engine call takes (``RUNS_PER_CALL``; None: all of a bank's)."""
    for top, cap in RUNS_PER_CALL.get(task, ()):
        if d <= top:
            return cap
    return None


def runs_per_call(row: Row) -> int | None:
    """``runs_per_call_at`` of the row's task and d."""
    return runs_per_call_at(row.task, row.d)


def _train(row: Row, seed: int, programs: list, record: bool = False, data: Data | None = None):
    data = data or make_data(row, seed)
    a, b = initial_params(row, seed)
    R = len(programs)
    a0, b0 = np.repeat(a[None], R, 0), np.repeat(b[None], R, 0)
    for i, prog in enumerate(programs):
        if prog.plan == "attention_only" and fixed_readout(row):
            a0[i], b0[i] = start_of(row, seed, prog.plan)
    return bank.train_bank(a0, b0, programs, data.train, data.val, row.loss, row.config.reading,
                           record=record, runs_per_call=runs_per_call(row)), data


def tuning_ids(row: Row, draw: int = 0) -> list[int]:
    """The tuning seeds of a draw: tuning_seed_base + draw * tuning_seeds + i for i < tuning_seeds (draws
    disjoint from each other and, by ``check_seed_ids``, from the reported seeds); an exact row tunes on the
    first of its draw's ids alone (every seed would train the same run)."""
    cfg = row.config
    n = cfg.reading.tuning_seeds
    base = cfg.tuning_seed_base + draw * n
    return [base + i for i in range(1 if row.exact else n)]


def search(row: Row, plans=PLANS, draw: int = 0) -> dict:
    """Each plan's step sizes, chosen on the tuning seeds by the extending grid of the reading
    (``grid.GridSearch``), all plans' pending points trained together in one bank per tuning seed (advancing
    the seeds by one array program, ``engine.grouped_risk_and_grad``, is mostly slower:
    docs/benchmarks_engine.md, "Seeds in one program").

    A point's score is the mean over the tuning seeds of its final validation risk (None when any seed
    diverged).  Returns per plan: the chosen rates, every tried point with its score, ``edge`` (the sides of
    the grid the choice still sits at), ``insensitive`` and ``all_diverged``.  ``draw`` picks the tuning
    seeds (``tuning_ids``)."""
    r = row.config.reading
    loss = row.loss
    if r.step_rule == "fixed":
        return _fixed_steps(row, plans)
    tune = tuning_ids(row, draw)
    datas = {s: make_data(row, s) for s in tune}
    lam = output_curvature(datas[tune[0]].val, loss)
    a0, b0 = initial_params(row, tune[0])
    flat = r.tol * float(engine.risk(a0[None], b0[None], datas[tune[0]].val, loss)[0])
    centres = {ax: base_grid(ax, lam, r)[(r.grid_points - 1) // 2] for ax in ("out", "att")}
    searches = {p: GridSearch(len(plan_axes(p, r)), r.grid_points, r.max_extensions, flat) for p in plans}
    steps_used = 0
    while not all(g.done for g in searches.values()):
        programs = [_program(p, _value(centres, plan_axes(p, r), pt, r.grid_ratio), {"plan": p, "point": pt})
                    for p, g in searches.items() for pt in g.pending]
        scores: dict = {}
        for s in tune:
            recs, _ = _train(row, s, programs, data=datas[s])
            for rec in recs:
                key = (rec.program.label["plan"], rec.program.label["point"])
                scores.setdefault(key, []).append(None if rec.failed else rec.final_val)
                steps_used += rec.steps
        for p, g in searches.items():
            g.record({pt: (None if any(x is None or not math.isfinite(x) for x in scores[(p, pt)])
                           else float(np.mean(scores[(p, pt)]))) for pt in g.pending})
    out = {}
    for p, g in searches.items():
        axes = plan_axes(p, r)
        best = g.best()
        out[p] = {"axes": list(axes), "lambda_B": lam, "centres": centres, "ratio": r.grid_ratio,
                  "chosen": None if best is None else _value(centres, axes, best, r.grid_ratio),
                  "chosen_point": None if best is None else list(best),
                  "tried": [{"point": list(pt), **_value(centres, axes, pt, r.grid_ratio), "score": v}
                            for pt, v in sorted(g.tried.items())],
                  "edge": [f"{axes[i]} {'low' if s < 0 else 'high'}" for i, s in g.edges()],
                  "insensitive": g.insensitive(), "all_diverged": best is None,
                  "tuning_seeds": tune, "flat_tolerance": flat}
    out["_steps"] = steps_used
    return out


def _fixed_steps(row: Row, plans) -> dict:
    """``search``'s record under ``step_rule = "fixed"``: every axis of every plan at ``fixed_lr``, nothing
    tried or trained (no tuning seed is used, so every tuning draw gives the same steps)."""
    r = row.config.reading
    out = {}
    for p in plans:
        axes = plan_axes(p, r)
        out[p] = {"axes": list(axes), "lambda_B": None, "centres": {ax: r.fixed_lr for ax in ("out", "att")},
                  "ratio": r.grid_ratio, "chosen": {ax: r.fixed_lr for ax in axes},
                  "chosen_point": [0] * len(axes), "tried": [], "edge": [], "insensitive": False,
                  "all_diverged": False, "tuning_seeds": [], "flat_tolerance": None, "fixed": True}
    out["_steps"] = 0
    return out


# ------------------------------------------------------------------------------------------------
# held-out risk by string length


LENGTH_PURPOSE = 3
"""The generator of length bucket k of seed s is seeded [s, task index, LENGTH_PURPOSE, k] (purposes 0-2 are
the training, validation and test sets)."""


def length_buckets(row: Row) -> list[tuple[int, int]]:
    """The row's held-out length buckets [lo, hi): from the task's shortest length to the first multiple of
    the mean length m, then between consecutive multiples (``Config.length_multiples``), each edge rounded up
    to an integer and kept above the one before."""
    m = tasks_module.mean_length(row.task, row.d)
    edges = [tasks_module.shortest_length(row.task)]
    for f in row.config.length_multiples:
        edges.append(max(edges[-1] + 1, math.ceil(f * m)))
    return list(zip(edges[:-1], edges[1:]))


def length_risk(row: Row, seed: int, finals: list[tuple[np.ndarray, np.ndarray]]) -> list[list[dict]]:
    """The held-out risk and accuracy of each final model (alpha, B) of ``finals`` in each length bucket of the
    row: on ``length_test_size`` fresh strings per bucket, drawn from the task's law conditioned on the bucket
    (``tasks.sample_lengths_in``, the generator seeded as ``LENGTH_PURPOSE`` says), also on the exact rows,
    whose population is not split by length.  Returns per model a list of {"lo", "hi", "risk", "acc"}."""
    cfg = row.config
    out: list[list[dict]] = [[] for _ in finals]
    if not finals:
        return out
    A = np.stack([a for a, _ in finals])
    B = np.stack([b for _, b in finals])
    tid = tasks_module.TASKS.index(row.task)
    for k, (lo, hi) in enumerate(length_buckets(row)):
        batch = tasks_module.sample_lengths_in(row.task, row.d, cfg.length_test_size,
                                               np.random.default_rng([seed, tid, LENGTH_PURPOSE, k]), lo, hi,
                                               seed=seed, even_pairs_embedding=cfg.even_pairs_embedding)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            risks, accs, _ = engine.risk_and_accuracy(A, B, engine.from_batch(batch, row.kernel), row.loss)
        for i in range(len(finals)):
            r = float(risks[i])
            out[i].append({"lo": lo, "hi": hi, "risk": r if math.isfinite(r) else None,
                           "acc": None if accs is None else float(accs[i])})
    return out


# ------------------------------------------------------------------------------------------------
# reported seeds


def curve_subset(steps: list[int], points: int) -> list[int]:
    """About ``points`` of the recorded steps, log-spaced, always with the first and the last."""
    steps = sorted(steps)
    if len(steps) <= points:
        return steps
    idx = np.unique(np.round(np.geomspace(1, len(steps), points)).astype(int) - 1)
    return sorted({steps[0], *[steps[i] for i in idx], steps[-1]})


def report_seed(row: Row, seed: int, chosen: dict) -> dict:
    """Train the chosen step sizes of every plan on one reported seed and measure them."""
    loss, cfg = row.loss, row.config
    plans = [p for p in PLANS if chosen.get(p) is not None]
    programs = [_program(p, chosen[p], {"plan": p}) for p in plans]
    recs, data = _train(row, seed, programs, record=True)
    out = {}
    for rec in recs:
        plan = rec.program.plan
        steps = curve_subset(sorted(rec.snapshots), cfg.curve_points)
        A = np.stack([rec.snapshots[s][0] for s in steps])
        B = np.stack([rec.snapshots[s][1] for s in steps])
        risks, accs, ties = [], [], []
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(0, len(steps), 16):
                r16, a16, t16 = engine.risk_and_accuracy(A[i:i + 16], B[i:i + 16], data.test, loss)
                risks += r16.tolist()
                accs += [None] * len(r16) if a16 is None else a16.tolist()
                ties += [None] * len(r16) if t16 is None else t16.tolist()
        risks = [x if math.isfinite(x) else None for x in risks]
        res = {"plan": plan, "seed": seed, "steps": rec.steps, "converged": rec.converged, "capped": rec.capped,
               "diverged": rec.diverged, "unstable": rec.unstable, "phase_ends": rec.phase_ends,
               "test_risk": None if rec.diverged else risks[-1], "test_acc": None if rec.diverged else accs[-1],
               "test_acc_tied": None if rec.diverged else ties[-1],
               "val_risk": rec.val_risk[-1], "curve": {"steps": steps, "risk": risks, "acc": accs},
               "val_curve": {"steps": rec.val_steps, "risk": [x if math.isfinite(x) else None for x in rec.val_risk]},
               "alpha_dist": [rec.alpha_dist[s] for s in steps], "B_dist": [rec.B_dist[s] for s in steps]}
        if data.exact:
            res["truncation_bound"] = None if rec.diverged else loss_bound(data.info["dropped"], rec.final_B)
            res["rounding_bound"] = (None if rec.diverged else
                                     rounding_bound(risks[-1], rec.final_alpha, rec.final_B))
        if isinstance(data.test, and_integral.IntegralPopulation):
            res["quadrature_estimate"] = None if rec.diverged else data.test.error_estimate(rec.final_alpha,
                                                                                            rec.final_B)
            # a stopped run whose last parameters the integral refuses was stopped by the integral, not by its risk
            res["integral_refused"] = rec.diverged and data.test.refusal(rec.final_alpha, rec.final_B) is not None
        if plan == "joint" and not rec.diverged:
            fsteps = curve_subset(sorted(rec.snapshots), cfg.lag_points)
            func = lag_module.functional_curves(rec.snapshots, fsteps, data.test, loss)
            align = lag_module.alignment_curves(row.task, row.d, rec.snapshots, fsteps, data.info)
            res["function"] = func
            res["alignment"] = align
            res["lag"] = lag_module.measures(fsteps, rec.alpha_dist, rec.B_dist, func, align)
        out[plan] = res
    trained = [rec for rec in recs if not rec.diverged]
    for rec, buckets in zip(trained, length_risk(row, seed, [(rec.final_alpha, rec.final_B) for rec in trained])):
        out[rec.program.plan]["length_risk"] = buckets
    for rec in recs:
        if rec.diverged:
            out[rec.program.plan]["length_risk"] = [{"lo": lo, "hi": hi, "risk": None, "acc": None}
                                                    for lo, hi in length_buckets(row)]
    return out


# ------------------------------------------------------------------------------------------------
# one row, and the table


def run_row(row: Row) -> dict:
    """Search, report and summarise one row (a picklable job for the process pool), with BLAS on one thread
    (rows run in parallel processes; BLAS threads on top of them only spin), and the engine's temporaries kept
    on the heap (``engine.keep_temporaries_on_heap``)."""
    from threadpoolctl import threadpool_limits

    engine.keep_temporaries_on_heap()
    with threadpool_limits(limits=1):
        return _run_row(row)


def _run_row(row: Row) -> dict:
    """The row of draw 0 (the primary result), with the rows of the further tuning draws under
    ``"tuning_draws"`` (``run`` moves them to the results' own ``"tuning_draws"``).

    Each draw chooses the step sizes on its own tuning seeds (``search(row, draw=j)``) and trains the reported
    seeds at them; a plan whose chosen step sizes another draw chose already keeps that draw's seeds (the same
    run: nothing is trained twice).  An exact row's search is the same computation on every draw (its data and
    its zero start do not depend on the seed), so draws 1.. reuse draw 0's search and say so
    (``reused_from_draw``).  A draw where some plan's held-out risks are ``bimodal`` on fewer than
    ``bimodal_seeds`` seeds trains further reported seeds, up to ``bimodal_seeds``, for every plan of the row."""
    cpu0, wall0 = time.process_time(), time.time()
    cfg = row.config
    trained: dict = {}
    ceiling = ceiling_of(row)
    first = reported_seeds(row)[0]
    data_info = (make_data(row, first).info if row.exact or row.integral
                 else {"p": tasks_module.length_parameter(row.task, row.d)})
    draws, first_search = [], None
    for j in range(cfg.tuning_draws):
        if j > 0 and row.exact:
            found = {p: {**first_search[p], "tuning_seeds": tuning_ids(row, j), "reused_from_draw": 0}
                     for p in PLANS}
            tuning_steps = 0
        else:
            found = search(row, draw=j)
            tuning_steps = found.pop("_steps")
            first_search = first_search or found
        chosen = {p: found[p]["chosen"] for p in PLANS}
        seeds = reported_seeds(row)
        per_plan = _reported(row, seeds, chosen, trained)
        extended = [p for p in PLANS if len(per_plan[p]) < cfg.bimodal_seeds
                    and bimodal([r["test_risk"] for r in per_plan[p]])]
        if extended:
            seeds = list(range(cfg.seed_base, cfg.seed_base + cfg.bimodal_seeds))
            per_plan = _reported(row, seeds, chosen, trained)
        out = assemble_row(row, found, per_plan, ceiling, data_info, seeds)
        draws.append(out | {"tuning_steps": tuning_steps, "tuning_draw": j, "bimodal_extended": extended})
    primary = draws[0]
    primary["tuning_draw_chosen"] = [{p: d["plans"][p]["chosen"] for p in PLANS} for d in draws]
    return primary | {"cpu_s": time.process_time() - cpu0, "wall_s": time.time() - wall0,
                      "tuning_draws": draws[1:]}


def _reported(row: Row, seeds: list[int], chosen: dict, trained: dict) -> dict:
    """Each plan's results on ``seeds`` at its ``chosen`` step sizes, in seed order: taken from ``trained``
    (keyed by plan, step sizes and seed) when there, else trained, the missing plans of a seed in one bank
    (``report_seed``), and added to it."""
    def key(p, s):
        return p, tuple(sorted(chosen[p].items())), s

    for s in seeds:
        need = {p: chosen[p] for p in PLANS if chosen[p] is not None and key(p, s) not in trained}
        if need:
            for p, res in report_seed(row, s, need).items():
                trained[key(p, s)] = res
    return {p: [trained[key(p, s)] for s in seeds] if chosen[p] is not None else [] for p in PLANS}


def reported_seeds(row: Row) -> list[int]:
    """The reported seeds of a row: seed_base alone on an exact population (every seed would train the same
    run), else seed_base, ..., seed_base + seeds - 1 (more on a bimodal row: ``_run_row``)."""
    base = row.config.seed_base
    return [base] if row.exact else list(range(base, base + row.config.seeds))


def assemble_row(row: Row, found: dict, per_plan: dict, ceiling: dict, data_info: dict,
                 seeds: list[int] | None = None) -> dict:
    """The row of a results dict from its parts: each plan's search (``search``), its reported-seed results
    (``report_seed``, per plan in seed order), the capacity ceiling, the data's description and the reported
    seeds (``reported_seeds`` when None).  Each plan records whether its held-out risks are ``bimodal``."""
    plans = {}
    for p in PLANS:
        recs = per_plan.get(p, [])
        chosen = found[p]["chosen"]
        plans[p] = {"search": found[p], "chosen": chosen, "seeds": recs,
                    "risk": stats([r["test_risk"] for r in recs]), "acc": stats([r["test_acc"] for r in recs]),
                    "diverged": [r["seed"] for r in recs if r["diverged"]],
                    **({"integral_refused": [r["seed"] for r in recs if r["integral_refused"]]}
                       if any("integral_refused" in r for r in recs) else {}),
                    "unstable": [r["seed"] for r in recs if r["unstable"]],
                    "capped": [r["seed"] for r in recs if r["capped"]],
                    "not_converged": [r["seed"] for r in recs if not r["converged"]],
                    "steps": stats([r["steps"] for r in recs]),
                    "length_risk": length_summary(row, recs),
                    "bimodal": bimodal([r["test_risk"] for r in recs])}
        for key, out_key in (("truncation_bound",) * 2, ("rounding_bound",) * 2, ("quadrature_estimate",) * 2,
                             ("test_acc_tied", "acc_tied")):
            bounds = [r.get(key) for r in recs if r.get(key) is not None]
            if bounds or key != "quadrature_estimate":  # the integral's rows alone carry an estimate
                plans[p][out_key] = max(bounds) if bounds else None  # acc_tied: the largest tied mass of a seed
    lag = {}
    joint = [r for r in plans["joint"]["seeds"] if "lag" in r]
    for m in ("displacement", "function", "alignment"):
        vals = [r["lag"][m] for r in joint if m in r["lag"]]
        if vals:
            lag[m] = {"t_half_att": stats([v["t_half_att"] for v in vals]),
                      "t_half_out": stats([v["t_half_out"] for v in vals]),
                      "ratio": stats([v["ratio"] for v in vals]),
                      "resolution": max(v["resolution"] for v in vals),
                      "resolution_per_seed": [v["resolution"] for v in vals]}
    data_info = {k: v for k, v in data_info.items() if not isinstance(v, np.ndarray)}
    lengths = {"mean_length": tasks_module.mean_length(row.task, row.d),
               "multiples": list(row.config.length_multiples), "strings_per_bucket": row.config.length_test_size,
               "seed": f"[reported seed, {tasks_module.TASKS.index(row.task)}, {LENGTH_PURPOSE}, bucket index]",
               "law": "the training length law conditioned on the bucket"}
    return {"name": row.name, "task": row.task, "heads": row.heads, "loss": row.loss, "exact": row.exact,
            "seeds_run": reported_seeds(row) if seeds is None else list(seeds),
            "data": data_info, "plans": plans, "lag": lag,
            "ceiling": ceiling, "model_class": model_class(row), "length_buckets": lengths}


def length_summary(row: Row, recs: list[dict]) -> list[dict]:
    """A plan's held-out risk per length bucket over its seeds: {"lo", "hi", "risk" and "acc" (``stats``),
    "n": strings per bucket and seed}.  Seed records without ``length_risk`` (saved before it was measured)
    count as missing."""
    out = []
    for k, (lo, hi) in enumerate(length_buckets(row)):
        got = [r["length_risk"][k] for r in recs if len(r.get("length_risk") or []) > k]
        out.append({"lo": lo, "hi": hi, "risk": stats([g["risk"] for g in got]),
                    "acc": stats([g["acc"] for g in got]), "n": row.config.length_test_size})
    return out


def ceiling_of(row: Row) -> dict:
    """The row's capacity ceiling (``capacity.ceiling``: bounds on the best population risk the model class
    reaches) as a dict, or the reason it could not be computed."""
    from numerics.experiments.capacity import ceiling

    opts = {"even_pairs_embedding": row.config.even_pairs_embedding} if row.task == "even_pairs" else {}
    try:
        return ceiling(row.task, row.d, row.heads, loss=row.loss, **opts).to_dict()
    except SettingError as exc:
        return {"error": str(exc)}


def stats(values: list) -> dict:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return {"mean": None, "std": None, "n": 0, "values": list(values)}
    a = np.asarray(v, float)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if len(a) > 1 else 0.0, "n": len(a),
            "values": list(values)}


COST = {"ICL": 10, "AND": 4, "OR": 2, "SLR": 2, "even_pairs": 1, "occurrence": 1}
"""Rough relative cost per row: the heaviest rows go to the pool first."""


def resumed_rows(cfg: Config, partial) -> dict:
    """The finished rows of a saved partial record (what ``run`` hands ``on_row``) that a run of ``cfg`` keeps:
    all of them when the record's configuration is ``cfg``, else none.  A setting the saved configuration does
    not name (it predates the setting) is that setting's default; one this version does not know makes it
    another configuration."""
    saved, now = partial.get("config") if isinstance(partial, dict) else None, cfg.to_dict()
    if not isinstance(saved, dict) or not set(saved) <= set(now):
        return {}
    try:
        same = Config.from_dict(saved).to_dict() == now
    except (TypeError, ValueError, SettingError):
        return {}
    if not same:
        return {}
    # a row saved without its tuning draws (a record that predates them) is trained again
    return {name: row for name, row in partial.get("rows", {}).items()
            if len(row.get("tuning_draws", [])) == cfg.tuning_draws - 1}


PR_SET_PDEATHSIG = 1
"""Linux's prctl option that sends the calling process a signal when its parent ends."""
WATCH_PARENT_S = 1.0
"""How often a pool worker's watchdog thread checks that its parent is still alive."""


def _end_with_parent(creator: int) -> None:
    """The initializer of every pool worker: end the worker when its parent ends, so that it ends with
    ``creator``, the process that started the pool.  A worker of a killed run would otherwise finish its row
    and then wait for work forever, re-parented to init.  The parent is the creator (the fork and spawn start
    methods) or the fork server, which itself ends with the creator.  On Linux the kernel kills the worker
    when its parent ends (``PR_SET_PDEATHSIG``, SIGKILL: a worker writes no file, so nothing is left
    half-done); everywhere, a daemon thread checks ``os.getppid()`` every ``WATCH_PARENT_S`` and exits when
    the parent has changed.  A worker whose creator died before it got here exits at once."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))
        except (OSError, AttributeError):  # no libc to load: the watchdog below still ends the worker
            pass
    if os.getppid() != parent or (parent != creator and not _running(creator)):
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_PARENT_S)
        os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _running(pid: int) -> bool:
    """Whether our process ``pid`` still runs (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except OSError:  # gone, or its number taken by another user's process
        return False
    return True


def run(cfg: Config, quiet: bool = False, command: list | None = None, on_row=None, done: dict | None = None,
        progress=None) -> dict:
    """Every row of the table (rows in parallel over ``cfg.jobs`` processes, which end when this process
    ends: ``_end_with_parent``); ``on_row(partial)`` is called as each row finishes with the partial record
    ``{"config": ..., "rows": the finished rows}`` (e.g. to save it; ``resumed_rows`` reads it back); rows
    already in ``done`` (finished rows of an interrupted run of the same configuration) are not trained again.
    ``progress(counts)`` is called as each row finishes with ``{"row": its name, "finished": rows finished,
    kept ones included, "total": rows of the table, "elapsed": seconds since the start}``.

    The results' ``"rows"`` are those of tuning draw 0; ``"tuning_draws"`` lists a results dict (same layout,
    ``"rows"`` by the same names) for each further draw, 1 .. tuning_draws - 1."""
    from tqdm import tqdm

    cfg.validate()
    started, cpu0 = time.time(), time.process_time()
    cfg_dict = cfg.to_dict()
    done = dict(done or {})
    table = rows(cfg)
    todo = sorted((r for r in table if r.name not in done), key=lambda r: -COST[r.task] * r.heads)
    bar = tqdm(total=len(todo), desc="Table 1 rows", disable=quiet or not sys.stderr.isatty(), unit="row")

    def finish(result):
        done[result["name"]] = result
        bar.update()
        bar.set_postfix_str(result["name"])
        if on_row is not None:
            on_row({"config": cfg_dict, "rows": done})
        if progress is not None:
            progress({"row": result["name"], "finished": len(done), "total": len(table),
                      "elapsed": time.time() - started})

    in_process = 0.0  # CPU of rows trained in this process, which process_time() below counts already
    if cfg.jobs == 1:
        for row in todo:
            result = run_row(row)
            in_process += result["cpu_s"]
            finish(result)
    else:
        with ProcessPoolExecutor(max_workers=cfg.jobs, initializer=_end_with_parent, initargs=(os.getpid(),)) as pool:
            pending = {pool.submit(run_row, row) for row in todo}
            while pending:
                fin, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in fin:
                    finish(fut.result())
    bar.close()
    ordered = {row.name: dict(done[row.name]) for row in table}
    draw_rows = [{} for _ in range(cfg.tuning_draws - 1)]
    for name, row in ordered.items():
        for j, drawn in enumerate(row.pop("tuning_draws", [])):
            draw_rows[j][name] = drawn
    return {"suite": "occurrence-companion", "version": package_version(), "command": command or sys.argv,
            "config": cfg_dict, "reading": cfg.reading.to_dict(), "elapsed_s": time.time() - started,
            "cpu_s": sum(r["cpu_s"] for r in ordered.values()) + time.process_time() - cpu0 - in_process,
            "rows": ordered,
            "tuning_draws": [{"suite": "occurrence-companion", "version": package_version(), "config": cfg_dict,
                              "reading": cfg.reading.to_dict(), "tuning_draw": j + 1, "rows": rows_j}
                             for j, rows_j in enumerate(draw_rows)],
            "engine": {"numpy": np.__version__}}
