"""Benchmark of the Table 1 training engine (``occ-companion benchmark-engine``): the measurements.

Per task row of Table 1 (occurrence, OR and one-head AND on their exact populations as
``numerics.experiments.runner.make_data`` builds them; ICL, SLR, even pairs and two-head AND on sampled
mini-batches of the runner's default size) and per d, measured side by side in one run:

* the engine (``engine.risk_and_grad`` plus a gradient-descent update) for R = 1 run and for R = 8 runs
  advanced at once, reported per run-step;
* a PyTorch CPU implementation of the same model, batch and step, written here the way a user would
  (token-id tensors with multiplicities, embedding gathers, a masked softmax, a linear readout, autograd),
  float64 on one thread, checked to agree with the engine's risk and gradients to 1e-10 before it is timed
  (``torch`` is the optional ``bench`` extra; without it the column is skipped with a note);
* the operation-count lower bound of a step on the tokens' structure (``flop_count``), turned into time at
  the dgemm rate measured beside the row's own engine timing (a dgemm after each repeat, ``timed_beside_dgemm``:
  on a shared machine the rate of the moment moves, and a rate measured once at the start would not be the
  rate the row ran at);
* the bytes of its batch a step must read (``step_bytes``), turned into time at the memory's read rate measured
  at the start (``memory_bandwidth``), and each row's step against the larger of that traffic bound and its FLOP
  bound (``bounds``);
* the PyTorch programs a performance-aware user would write besides the padded float64 one (``anchors``:
  type-first (T, N) counts in float64 and float32 for the exact populations, the padded program's per-slot
  lookups in float32 for the sampled rows), each checked against the engine and its accuracy reported;
* the sampler's cost per batch (sampling plus the engine layout), part of every step of a sampled task;
* the peak traced memory (tracemalloc) of building the data and one engine step;
* the default kernel's step and sampler again with its numba loops switched off (``kernels.numpy_paths``: the
  bag's forward pass, the squared loss's terms, the ICL sampler's rounds and counts, the gather of a sparse
  table's rows into a sampled batch's layout, which give numpy's and scipy's bits),
  what numba gains on the default path, checked bit for bit against the step and batch with the loops first;
* for the rows the engine's compiled kernel takes (one-hot token rows: ICL, two-head AND), the same step
  with ``kernel = "compiled"`` (``table1 --kernel compiled``; other rounding, so not the default), checked
  against the numpy kernel before it is timed;
* for the same rows, the runner's seeds advanced by one array program (``engine.grouped_risk_and_grad``) beside
  one call per seed, which is what the runner does (``seeds_in_one_program``), checked bit for bit first;
* ICL's step beside its parts timed alone (numpy's exponential, the readout products, the rows loops:
  ``step_parts``), and the rows-loops rows' step beside the same step on a batch of two strings, which bounds
  what the step pays for its calls, in banks of 1, 4 and 16 runs (``fixed_share``);
* two-head AND's step on its exact population by the integral (``table1 --and-heads-data integral``,
  ``integral_step``) beside the sampled row's step and sampler;
* per sampled row at d = 50 and 200, the draw of a step's batch beside one run's step
  (``sampling_beside_step``); at d = 25, 50, 100 and 200, banks of 1, 4 and 16 runs stepped in one call
  beside the same runs one call each (``bank_steps``), which decide how many runs the runner puts in one
  call (``runner.RUNS_PER_CALL``).

Times are medians over repeats of wall time and of process CPU time, with BLAS limited to one thread
(threadpoolctl): on this shared machine a multi-threaded BLAS spins on small products.  The dgemm rate and
one ICL step are also measured with BLAS's default thread count, once.  The growth in d of every column is
the least-squares exponent over the measured d.  ``measure`` returns the record; ``app.render.bench_engine``
renders the page from it, which the command (``app.commands.benchmarks``) writes to docs/benchmarks_engine.md.
"""
from __future__ import annotations

import contextlib
import cProfile
import datetime
import io
import math
import os
import pstats
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from numerics.experiments import and_integral
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import layout, passes, readout
from numerics.experiments import popstep
from numerics.experiments import tasks
from numerics.experiments.population import population
from numerics.experiments.runner import Config, exact, task_loss

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks_engine.md"
ROWS = (("occurrence", "occurrence", 1), ("OR", "OR", 1), ("AND (H=1)", "AND", 1), ("ICL", "ICL", 1),
        ("SLR", "SLR", 1), ("even pairs", "even_pairs", 1), ("AND (H=2)", "AND", 2))
"""(row name, task, heads) of the benchmark, in Table 1's order."""
FULL_D = (50, 100, 200)
QUICK_D = (5, 8)
RUNS = 8
LR = 1e-3
PARAM_SCALE = 0.3
AGREE_TOL = 1e-10
MIN_REPEAT_SECONDS = 0.05


# ------------------------------------------------------------------------------------------------ data


@dataclass
class Case:
    """One (row, d): its batch, the engine layout, the loss and (sampled tasks) the sampler."""

    row: str
    task: str
    heads: int
    d: int
    batch: tasks.Batch
    tb: engine.Tokens
    loss: str
    exact: bool
    sampler: object = None


def make_case(row: str, task: str, heads: int, d: int, cfg: Config, seed: int = 0) -> Case:
    """The data of ``runner.make_data`` (exact population or the batch of step 0 of ``seed``), keeping the
    task batch itself for the PyTorch implementation."""
    loss = task_loss(task, cfg)
    if exact(task, heads, cfg):
        batch = population(task, d, cfg.mass_tol, cfg.len_tol, merged=task != "occurrence")
        return Case(row, task, heads, d, batch, engine.from_batch(batch), loss, True)
    tid = tasks.TASKS.index(task)

    def sampler(step: int) -> tuple[tasks.Batch, engine.Tokens]:
        b = tasks.sample(task, d, cfg.batch, np.random.default_rng([seed, tid, 0, step]), seed=seed)
        return b, engine.from_batch(b)

    batch, tb = sampler(0)
    return Case(row, task, heads, d, batch, tb, loss, False, sampler)


def initial(case: Case, runs: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Random parameters (scale PARAM_SCALE, so attention is far from uniform) of ``runs`` runs."""
    H, D, K = tasks.model_shape(case.task, case.d, case.heads)
    rng = np.random.default_rng([seed, case.d, tasks.TASKS.index(case.task), case.heads])
    return PARAM_SCALE * rng.standard_normal((runs, H, D)), PARAM_SCALE * rng.standard_normal((runs, H, D, K))


def engine_step(alpha: np.ndarray, B: np.ndarray, tb: engine.Tokens, loss: str) -> None:
    """One training step of all runs: risks and gradients (without outputs, as the trainer asks:
    ``bank.train_bank``), then the gradient-descent update in place."""
    _, ga, gB, _ = engine.risk_and_grad(alpha, B, tb, loss, with_f=False)
    alpha -= LR * ga
    B -= LR * gB


SEED_RUNS = (1, 4, 16)
"""Runs per seed of "Seeds in one program": one (a sweep's seed unit), four (Table 1's reported seeds: one run
per plan), sixteen (a step-size search round)."""
SEED_ROWS = (("ICL", "ICL", 1), ("AND (H=2)", "AND", 2))
"""The rows whose batches ``engine.stack`` takes (one-hot token rows)."""


def integral_step(d: int, runs: int, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS,
                  table1: bool = False) -> dict:
    """One training step of ``runs`` two-head AND runs on the exact population by the integral
    (``and_integral.IntegralPopulation`` through ``engine.risk_and_grad``, then the update), at the random
    parameters of ``initial`` (``table1``: with every unmarked symbol given the first one's, as a Table 1 row's
    parameters stay, so the integral's sums take three classes): medians (wall, CPU) per run-step, and the nodes
    of each one-dimensional integral at the first run's start (the cross term takes their square)."""
    pop = and_integral.IntegralPopulation(d, tasks.length_parameter("AND", d))
    a, B = initial(Case("AND (H=2)", "AND", 2, d, None, None, "squared", True), runs)
    if table1:
        a[..., 3:], B[..., 3:, :] = a[..., 2:3], B[..., 2:3, :]
    nodes = and_integral.population_risk(a[0], B[0], d).nodes

    def step():
        _, ga, gB, _ = engine.risk_and_grad(a, B, pop, "squared", with_f=False)
        a[...] -= LR * ga
        B[...] -= LR * gB

    t = timed(step, repeats, min_seconds)
    return {"runs": runs, "time": (t[0] / runs, t[1] / runs), "nodes": nodes, "table1": table1}


def seeds_in_one_program(task: str, heads: int, d: int, runs: int, repeats: int,
                         min_seconds: float = MIN_REPEAT_SECONDS) -> dict:
    """The runner's seeds (``Config().seeds`` of them, ``runs`` runs each, each seed its own batch of step 1)
    advanced by one ``risk_and_grad`` call per seed (what the runner does: one bank per seed) and by one array
    program (``engine.grouped_risk_and_grad`` on the stacked batches), after checking that both give the same
    bits.  Each call starts from batches without their operators, which a step builds for its fresh batches
    either way.  The two arms are timed alternately, repeat by repeat; medians (wall s, CPU s) per run-step of
    risks and gradients: ``{"per_seed", "stacked"}``; None where the batches cannot be stacked."""
    import dataclasses

    cfg = Config()
    S, tid, loss = cfg.seeds, tasks.TASKS.index(task), task_loss(task, cfg)
    raw = [engine.from_batch(tasks.sample(task, d, cfg.batch, np.random.default_rng([s, tid, 0, 1]), seed=s),
                        operators=False) for s in range(S)]
    if not engine.stackable(raw):  # (two-head AND below d = 17: a bag of few token types)
        return None
    groups = np.repeat(np.arange(S), runs)
    H, D, K = tasks.model_shape(task, d, heads)
    rng = np.random.default_rng([runs, d, tid, heads])
    alpha = PARAM_SCALE * rng.standard_normal((S * runs, H, D))
    B = PARAM_SCALE * rng.standard_normal((S * runs, H, D, K))

    def per_seed():
        out = []
        for s in range(S):
            idx = np.flatnonzero(groups == s)
            out.append(engine.risk_and_grad(alpha[idx], B[idx], dataclasses.replace(raw[s]), loss, with_f=False)[:3])
        return [np.concatenate(x) for x in zip(*out)]

    def stacked():
        return engine.grouped_risk_and_grad(alpha, B, [dataclasses.replace(p) for p in raw], groups, loss)

    if not all(_same_bits(a, b) for a, b in zip(per_seed(), stacked())):
        raise AssertionError(f"{task} d={d}: the stacked seeds' risks or gradients differ from one call per seed")
    got = alternated({"per_seed": per_seed, "stacked": stacked}, repeats, _calls_for(per_seed, min_seconds))
    return {k: (w / (S * runs), c / (S * runs)) for k, (w, c) in got.items()} | {"seeds": S, "runs": runs}


SHARE_RUNS = (1, 4, 16)
"""Runs per step of "The step's fixed cost": one (a sweep's seed unit), four (Table 1's reported seeds: one run per
plan), sixteen (a step-size search round)."""
SMALL_STRINGS = 2
"""Strings in the small batch of ``fixed_share``."""


def step_path(tb: engine.Tokens) -> tuple:
    """What decides the calls of an engine step on ``tb``: its layout, width, whether the rows loops do not take it
    (``_rows_loops`` is None), and (rows layout) whether every string is non-empty (else the backward pass
    gathers the non-empty ones)."""
    return (tb.layout, tb.table.shape[1], layout._rows_loops(tb) is None,
            tb.starts is not None and len(tb.starts) == tb.size)


def small_batch(case: Case, strings: int = SMALL_STRINGS) -> engine.Tokens:
    """A batch of ``strings`` strings of the case's task at its d with the case's batch's ``step_path``, drawn
    from fixed seeds until one has it; AssertionError after 1000 draws."""
    want = step_path(case.tb)
    for s in range(1000):
        tb = engine.from_batch(tasks.sample(case.task, case.d, strings, np.random.default_rng([s, case.d, 41]), seed=0))
        if step_path(tb) == want:
            return tb
    raise AssertionError(f"no batch of {strings} strings of {case.task} at d = {case.d} takes its batch's path")


def fixed_share(case: Case, runs: int, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> dict:
    """One step of ``runs`` runs on the case's batch and the same step (from the same parameters) on a batch of
    ``SMALL_STRINGS`` strings (``small_batch``: the same path), timed alternately.  In one chunk of runs the small
    batch's step makes the same calls, with little arithmetic, so its time bounds from above what the step pays
    for its calls (the Python interpreter and each call's own cost).  Where the case's batch splits the runs into
    chunks (``engine._chunk``), the small batch's step takes the runs in slices of that chunk, one
    ``engine_step`` each: as many calls or more (more from three chunks on), though not the same ones (an
    update a slice in place of the chunks' concatenations).  What the small step's time still holds: its own
    arithmetic, which does not shrink with the batch where it works on the D x K readouts (the update, dB), and
    its strings' rows (long at large d).
    Medians (wall s, CPU s) per step: ``{"step", "small"}``, with the runs, the small batch's strings and token
    rows and the case's chunks."""
    tiny = small_batch(case)
    H, D, K = tasks.model_shape(case.task, case.d, case.heads)
    c = engine._chunk(case.tb, H, K)
    a, B = initial(case, runs)
    pa, pB = (a.copy(), B.copy()), (a.copy(), B.copy())

    def small():
        for i in range(0, runs, c):
            engine_step(pB[0][i:i + c], pB[1][i:i + c], tiny, case.loss)

    step = lambda: engine_step(*pa, case.tb, case.loss)  # noqa: E731
    got = alternated({"step": step, "small": small}, repeats, _calls_for(step, min_seconds))
    return got | {"runs": runs, "strings": tiny.size, "rows": tiny.rows.shape[0] if tiny.layout == "rows" else None,
                  "chunks": -(-runs // c)}


def part_arms(case: Case):
    """(the arms of ``step_parts`` but the step, by name; what they write: ``shifted`` the step's shifted scores
    (M, H), ``out`` their exponentials, ``xbar`` the mean tokens, ``ga`` a score gradient), or None off the rows
    loops."""
    oh = layout._rows_loops(case.tb)
    if oh is None:
        return None
    H, D, K = tasks.model_shape(case.task, case.d, case.heads)
    a, _ = initial(case, 1)
    A = np.ascontiguousarray(a.reshape(H, D))
    loops = kernels._compiled()
    M, N_ne = oh.idx.shape[1], oh.bounds.size - 1
    S = np.empty((M, H))
    loops.rows_shifted_scores(A, oh.uidx, oh.ubounds, S)
    rng = np.random.default_rng(0)
    st = SimpleNamespace(shifted=S.copy(), out=np.empty((M, H)), xbar=np.empty((H, N_ne, D)), ga=np.empty((H, D)))
    E0, U, fg = np.exp(S), rng.standard_normal((H, N_ne, D)), rng.standard_normal((N_ne, H))

    def rows_loops():
        loops.rows_shifted_scores(A, oh.uidx, oh.ubounds, S)
        S[:] = E0
        loops.rows_normalise_scatter(S, oh.mult, oh.heavy, oh.uidx, oh.ubounds, st.xbar)
        loops.rows_score_grad(U, fg, S, oh.uidx, oh.ubounds, st.ga)

    return {"exp": lambda: np.exp(st.shifted, out=st.out), "products": readout_products(case),
            "loops": rows_loops}, st


def step_parts(case: Case, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> dict | None:
    """One run's default-kernel step on a rows-loops batch (ICL) beside its parts (``part_arms``), each timed
    alone, the four alternately: ``exp``, numpy's exponential of the step's M shifted scores (into another
    array: the step does it in place); ``products``, the three readout products (``readout_products``);
    ``loops``, the three rows loops (the shifted scores, the normalisation and scatter, after a copy of the M
    exponentials they overwrite, and the score gradient).  The default kernel takes its exponentials from numpy
    and its products from BLAS (its loops replay numpy's and scipy's operations in their order), so
    ``exp + products`` is what any arrangement of its step pays that keeps those calls; one that replayed them
    in its own code (the C library's exp inside a loop, which gives numpy's float64 exp on a machine without
    AVX-512; BLAS's summation order) would still pay the M exponentials themselves.  Medians (wall s, CPU s)
    per call: ``{"step", "exp", "products", "loops"}`` with M; None off the rows loops."""
    got = part_arms(case)
    if got is None:
        return None
    arms, st = got
    pa = initial(case, 1)
    step = lambda: engine_step(*pa, case.tb, case.loss)  # noqa: E731
    return alternated({"step": step, **arms}, repeats, _calls_for(step, min_seconds)) | {"M": st.out.shape[0]}


# ------------------------------------------------------------------------------------------------ FLOPs


def _nonzero_rows(tb: engine.Tokens):
    """The rows layout's token rows as CSR with only its non-zero entries (explicit zeros dropped), or the
    dense array."""
    X = tb.rows
    if not sparse.issparse(X):
        return X
    X = sparse.csr_array(X)
    if np.all(X.data != 0):
        return X
    X = X.copy()
    X.eliminate_zeros()
    return X


def touched(tb: engine.Tokens) -> np.ndarray:
    """u_n: how many coordinates each non-empty string of a rows-layout batch touches, the distinct columns
    of its rows' non-zeros (all D for dense rows)."""
    X, D = _nonzero_rows(tb), tb.table.shape[1]
    rows_per_string = np.diff(np.append(tb.starts, X.shape[0]))
    if not sparse.issparse(X):
        return np.where(rows_per_string > 0, D, 0)
    string_of_row = np.repeat(np.arange(len(tb.starts), dtype=np.int64), rows_per_string)
    keys = np.unique(np.repeat(string_of_row, np.diff(X.indptr)) * D + X.indices)
    return np.bincount(keys // D, minlength=len(tb.starts))


def flop_count(tb: engine.Tokens, H: int, K: int) -> float:
    """Operation count of one step of one run on the tokens' structure (a multiply-add is 2, an add, a
    multiply or an exp 1).

    Rows layout, with M token rows, z their non-zeros (one per one-hot coordinate; D per dense row) and u_n
    the coordinates string n touches (the union of its rows' non-zero columns, the non-zeros of its mean
    token), per head: scores 2z (dot products), softmax 2M (an exp and a sum per row), the mean token 2z,
    the score gradient 2z and its scatter 2z; where every non-zero is 1 (one-hot rows: ICL, two-head AND)
    the products are lookups and adds, so scores z - M, the mean token z + M (a weight times the row's
    multiplicity, then adds), the score gradient z + M and the scatter z; readout f_n and its gradient
    B g_n, and dB = sum_n xbar_n g_n^T, each 2 K u_n per string and head (a string's mean token is non-zero
    on u_n coordinates only, so it touches u_n rows of B); the loss 3 N K; the update 2 H D (K + 1).
    Bag layout (few shared types, T of them with c_t non-zeros in the table, C non-zero counts): table
    products 2 (K + 1) sum_t c_t forward and again backward, softmax 3C, outputs and their gradients
    6 K C per head; the loss and update as above.  A lower bound on the arithmetic of any implementation
    that uses the tokens' structure; at the dgemm rate it is an optimistic time."""
    D = tb.table.shape[1]
    N = tb.size
    upd = 2 * H * D * (K + 1)
    lossc = 3 * N * K
    if tb.layout == "rows":
        X = _nonzero_rows(tb)
        M = float(X.shape[0])
        if sparse.issparse(X):
            z = float(X.nnz)
            rows = 4 * z + 3 * M if np.all(X.data == 1) else 8 * z + 2 * M
        else:
            rows = 8 * float(X.size) + 2 * M
        return H * (rows + 6 * K * float(touched(tb).sum())) + lossc + upd
    table_nnz = float(np.count_nonzero(np.asarray(tb.table)))
    C = float(np.count_nonzero(tb.counts))
    return H * (4 * (K + 1) * table_nnz + 3 * C + 6 * K * C) + lossc + upd


def dgemm_rate(n: int = 1000, repeat: int = 5) -> tuple[float, float]:
    """GFLOP/s of an n x n double matrix product under the current BLAS threads: (by median wall time, by
    median process CPU time).  On one thread the CPU-time rate is the one comparable with the engine's CPU
    times (and less sensitive to other processes on a shared machine)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a @ b
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        a @ b
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return 2 * n ** 3 / float(np.median(walls)) / 1e9, 2 * n ** 3 / float(np.median(cpus)) / 1e9


# ------------------------------------------------------------------------------------------------ timing


def _calls_for(fn, min_seconds: float) -> int:
    """How many calls of ``fn`` last ``min_seconds``, set from its second call: the first can pay one-off costs
    (numba's import and compilation, caches built on a batch), and a count sized on it would time one call."""
    fn()
    t0 = time.perf_counter()
    fn()
    return max(1, int(math.ceil(min_seconds / max(time.perf_counter() - t0, 1e-7))))


def _clocked(fn, calls: int) -> tuple[float, float]:
    """(wall s, CPU s) per call of ``calls`` calls of ``fn`` in a row."""
    w, c = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - w) / calls, (time.process_time() - c) / calls


def _medians(times: list) -> tuple[float, float]:
    """(median wall, median CPU) of (wall, CPU) pairs."""
    return float(np.median([t[0] for t in times])), float(np.median([t[1] for t in times]))


def alternated(arms: dict, repeats: int, calls: int) -> dict:
    """Each arm (name: function) run ``calls`` times in a row, the arms one after another within a repeat and
    their order rotated every repeat, so that a shared machine's slow moments fall on every arm alike:
    {name: medians (wall s, CPU s) per call}."""
    names = list(arms)
    times = {k: [] for k in names}
    for t in range(repeats):
        for k in names[t % len(names):] + names[:t % len(names)]:
            times[k].append(_clocked(arms[k], calls))
    return {k: _medians(v) for k, v in times.items()}


def timed(fn, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS, after_each=None) -> tuple[float, float]:
    """(median wall s, median CPU s) per call: each repeat runs ``fn`` enough times to last ``min_seconds``
    (``_calls_for``); ``after_each`` (untimed) runs after every repeat."""
    calls = _calls_for(fn, min_seconds)
    times = []
    for _ in range(repeats):
        times.append(_clocked(fn, calls))
        if after_each is not None:
            after_each()
    return _medians(times)


def timed_beside_dgemm(fn, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS,
                       n: int = 1000) -> tuple[float, float, float]:
    """``timed`` with an n x n dgemm timed (process CPU) after each repeat: (median wall s, median CPU s per
    call, median dgemm GFLOP/s by CPU time over the repeats), so that a ratio to the FLOP bound compares the
    row with the machine's rate at the same moment."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    rates = []

    def gemm():
        c = time.process_time()
        a @ b
        rates.append(2 * n ** 3 / max(time.process_time() - c, 1e-9) / 1e9)

    gemm()
    rates.clear()
    wall, cpu = timed(fn, repeats, min_seconds, after_each=gemm)
    return wall, cpu, float(np.median(rates))


def sampler_timed(case: Case, repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of drawing one batch and putting it in the engine layout (fresh steps)."""
    return _medians([_clocked(lambda: case.sampler(t), 1) for t in range(1, repeats + 1)])


def with_and_without_loops(step, case: Case, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> dict:
    """The default kernel's step (``step()``) and, on sampled rows, its sampler timed with numba's same-bits
    loops and without them (``kernels.numpy_paths``), alternately, repeat by repeat, by the same clock: each
    repeat runs the step enough times to last ``min_seconds`` once with the loops and once without, and the
    sampler draws a fresh step each way (just after an untimed draw, the arms' order swapped every repeat).
    Medians (wall s, CPU s) per call: ``{"with_1", "without_1", "with_sampler", "without_sampler"}`` (the
    samplers None on exact rows)."""
    calls = _calls_for(step, min_seconds)
    with kernels.numpy_paths():
        calls_np = _calls_for(step, min_seconds)
    times = {k: [] for k in ("with_1", "without_1", "with_sampler", "without_sampler")}
    for t in range(1, repeats + 1):
        times["with_1"].append(_clocked(step, calls))
        with kernels.numpy_paths():
            times["without_1"].append(_clocked(step, calls_np))
        if not case.exact:  # fresh steps of their own, each timed just after an untimed draw (as in a run of
            # draws: a draw right after the step loop above, or a second draw of the same step, is not what a row
            # pays), the arms' order swapped every repeat
            for arm in (("with", "without") if t % 2 else ("without", "with")):
                s = 2 * t + (arm == "without")
                with kernels.numpy_paths() if arm == "without" else contextlib.nullcontext():
                    case.sampler(10_000 + s)
                    times[f"{arm}_sampler"].append(_clocked(lambda: case.sampler(s), 1))
    return {k: _medians(v) if v else None for k, v in times.items()}


def peak_memory(row: str, task: str, heads: int, d: int, cfg: Config) -> float:
    """Peak traced bytes (tracemalloc: numpy and Python allocations) of building the row's data and one
    engine step of one run; the population cache is bypassed so the build is counted."""
    population.cache_clear()
    tracemalloc.start()
    try:
        case = make_case(row, task, heads, d, cfg)
        a, B = initial(case, 1)
        engine_step(a, B, case.tb, case.loss)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return float(peak)


def profile_top(fn, calls: int = 20, top: int = 5) -> list[tuple[str, float, float]]:
    """The ``top`` functions by own time over ``calls`` calls of ``fn``: (name, own share, cumulative share)."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    st = pstats.Stats(prof, stream=io.StringIO())
    total = sum(v[2] for v in st.stats.values()) or 1.0
    items = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]
    out = []
    for (fname, line, func), (_, _, tt, ct, _) in items:
        where = f"{Path(fname).name}:{line}({func})" if line else func
        out.append((where, tt / total, ct / total))
    return out


ENGINE_FILES = (engine.__file__, passes.__file__, readout.__file__)
"""The engine's modules whose lines ``line_times`` reports."""
LINE_FUNCTIONS = ("risk_and_grad", "_risk_and_grad", "forward", "_forward_rows", "_backward_rows", "losses",
                  "_onehot_risk_and_grad", "_onehot_forward")
"""The engine functions whose lines ``line_times`` reports (the time of the helpers they call, such as
``_CsrProduct``, goes to the calling line)."""


def line_times(fn, paths, steps: int = 100, top: int = 12,
               functions=LINE_FUNCTIONS) -> list[tuple[str, str, float, float]]:
    """Where a call of ``fn`` spends its time, line by line in the source files ``paths`` (the engine's
    modules), in the functions named ``functions``: a line's time is from its line event to the next event of a traced
    frame (so a call of any other function goes to the calling line), summed per call, median over
    ``steps`` calls.
    Returns the ``top`` lines as ("file:line", code, median seconds per call, share of the sum of all
    lines' medians).  Tracing adds about a microsecond per line event, so the small lines are inflated."""
    import linecache

    files = set(paths)
    per_step: list[dict] = []
    cur: dict = {}
    last = [None, 0.0]

    def local(frame, event, arg):
        now = time.perf_counter()
        if last[0] is not None:
            cur[last[0]] = cur.get(last[0], 0.0) + now - last[1]
        last[0] = (frame.f_code.co_filename, frame.f_lineno) if event == "line" else None
        last[1] = time.perf_counter()
        return local

    def tracer(frame, event, arg):
        code = frame.f_code
        return local if code.co_filename in files and code.co_name in functions else None

    for _ in range(steps):
        cur = {}
        last[0] = None
        sys.settrace(tracer)
        try:
            fn()
        finally:
            sys.settrace(None)
        per_step.append(cur)
    lines = set().union(*per_step)
    med = {ln: float(np.median([st.get(ln, 0.0) for st in per_step])) for ln in lines}
    total = sum(med.values()) or 1.0
    best = sorted(med.items(), key=lambda kv: -kv[1])[:top]
    return [(f"{Path(path).name}:{ln}", linecache.getline(path, ln).strip(), t, t / total)
            for (path, ln), t in best]


def fit_exponent(ds, values) -> float | None:
    """Least-squares slope of log(value) against log(d); None with fewer than two positive values."""
    pts = [(math.log(d), math.log(v)) for d, v in zip(ds, values) if v is not None and v > 0]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


# ------------------------------------------------------------------------------------------------ PyTorch


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


class TorchModel:
    """The model written in PyTorch the way a user would, on the same batch.

    Each string is a padded row of token ids with their multiplicities (its distinct tokens: the model has
    no positional encoding, so a repeated token is one token with a count).  One-hot tokens (every table
    row has at most two unit entries: the symbols, the even-pairs cells, the ICL pairs [e_z; e_prev]) are
    embedded by gathers: the score is alpha gathered at the token's coordinates, the attention-weighted mean
    token is a scatter-add of the weights, then the linear readout.  Other tokens (the class tokens of the
    populations, SLR's Gaussian vectors) are projected once per table row (scores table @ alpha, readouts
    table @ B) and gathered at the token ids.  The softmax runs over the string's tokens with
    log-multiplicities and padding masked; then the loss, autograd, and the gradient-descent update.  ``dtype``
    "float32" is the same program in single precision (``anchors``)."""

    def __init__(self, batch: tasks.Batch, loss: str, heads: int, D: int, K: int, dtype: str = "float64"):
        import torch

        self.torch = torch
        self.dtype = getattr(torch, dtype)
        self.loss, self.H, self.D, self.K = loss, heads, D, K
        X = batch.X
        if not sparse.issparse(X):
            X = np.asarray(X, float)
        if X.ndim == 3:  # per-string embeddings: one table row per present token
            m = np.asarray(batch.m, float)
            n_idx, pos = np.nonzero(m)
            table, tok, mult = X[n_idx, pos], np.arange(len(n_idx)), m[n_idx, pos]
        else:
            mc = sparse.csr_matrix(batch.m)
            mc.eliminate_zeros()
            n_idx = np.repeat(np.arange(mc.shape[0]), np.diff(mc.indptr))
            tok, mult, table = mc.indices.astype(np.int64), mc.data.astype(float), X
        N = batch.y.shape[0]
        per = np.bincount(n_idx, minlength=N)
        if (per == 0).any():
            raise ValueError("the PyTorch implementation needs every string non-empty")
        L = int(per.max())
        slot = np.arange(len(n_idx)) - np.repeat(np.cumsum(per) - per, per)
        ids = np.zeros((N, L), np.int64)
        cnt = np.zeros((N, L))
        ids[n_idx, slot] = tok
        cnt[n_idx, slot] = mult
        self.ids = torch.from_numpy(ids)
        self.mask = torch.from_numpy(cnt > 0)
        self.logm = torch.from_numpy(np.log(np.where(cnt > 0, cnt, 1.0))).to(self.dtype)
        tcsr = sparse.csr_matrix(table)
        one_hot = tcsr.nnz == 0 or (np.all(tcsr.data == 1.0) and np.diff(tcsr.indptr).max() <= 2)
        if one_hot:
            P = max(1, int(np.diff(tcsr.indptr).max()))
            feat = np.full((tcsr.shape[0], P), D, np.int64)  # D: a padding coordinate with zero parameters
            fslot = np.arange(tcsr.nnz) - np.repeat(tcsr.indptr[:-1], np.diff(tcsr.indptr))
            feat[np.repeat(np.arange(tcsr.shape[0]), np.diff(tcsr.indptr)), fslot] = tcsr.indices
            self.feat = torch.from_numpy(feat)[self.ids]                    # (N, L, P) coordinates
            self.table = None
        else:
            self.feat = None
            self.table = torch.from_numpy(np.asarray(tcsr.toarray(), float)).to(self.dtype)
        self.w = torch.from_numpy(np.full(N, 1.0 / N) if batch.weights is None
                                  else np.asarray(batch.weights, float)).to(self.dtype)
        if loss == "cross_entropy":
            self.target = torch.from_numpy(np.asarray(batch.labels, np.int64))
        else:
            self.target = torch.from_numpy(np.asarray(batch.y, float)).to(self.dtype)

    def risk(self, alpha, B):
        torch = self.torch
        N, L = self.ids.shape
        if self.feat is not None:
            zero = alpha.new_zeros(self.H, 1)
            a_pad = torch.cat([alpha, zero], dim=1)                         # (H, D + 1)
            s = a_pad[:, self.feat].sum(-1)                                 # (H, N, L) score lookups
        else:
            s = (self.table @ alpha.T)[self.ids].permute(2, 0, 1)           # (H, N, L) projected, gathered
        s = (s + self.logm).masked_fill(~self.mask, float("-inf"))
        w = torch.softmax(s, dim=-1)                                        # (H, N, L)
        if self.feat is not None:
            P = self.feat.shape[-1]
            idx = self.feat.reshape(1, N, L * P).expand(self.H, N, L * P)
            src = w.unsqueeze(-1).expand(self.H, N, L, P).reshape(self.H, N, L * P)
            xbar = w.new_zeros(self.H, N, self.D + 1).scatter_add(2, idx, src)[..., : self.D]
            f = torch.einsum("hnd,hdk->nk", xbar, B)                        # linear readout, heads summed
        else:
            V = torch.einsum("td,hdk->thk", self.table, B)                  # each token's readout
            f = torch.einsum("hnl,nlhk->nk", w, V[self.ids])
        if self.loss == "squared":
            lv = 0.5 * ((f - self.target) ** 2).sum(-1)
        elif self.loss == "cross_entropy":
            lv = torch.nn.functional.cross_entropy(f, self.target, reduction="none")
        else:
            lv = torch.nn.functional.softplus(-self.target[:, 0] * f[:, 0])
        return (self.w * lv).sum()

    def risk_and_grad(self, alpha: np.ndarray, B: np.ndarray):
        torch = self.torch
        a = torch.tensor(alpha, dtype=self.dtype, requires_grad=True)
        b = torch.tensor(B, dtype=self.dtype, requires_grad=True)
        r = self.risk(a, b)
        r.backward()
        return float(r.detach()), a.grad.double().numpy().copy(), b.grad.double().numpy().copy()

    def stepper(self, alpha: np.ndarray, B: np.ndarray):
        """A function doing one training step (forward, backward, update) on leaf tensors it owns."""
        torch = self.torch
        a = torch.tensor(alpha, dtype=self.dtype, requires_grad=True)
        b = torch.tensor(B, dtype=self.dtype, requires_grad=True)

        def step():
            a.grad = b.grad = None
            self.risk(a, b).backward()
            with torch.no_grad():
                a.sub_(LR * a.grad)
                b.sub_(LR * b.grad)
        step.tensors = (a, b)
        return step


def check_agreement(case: Case, tm: TorchModel, alpha: np.ndarray, B: np.ndarray) -> float:
    """Largest relative difference between the engine's and PyTorch's risk and gradients at (alpha, B) of
    one run; raises AssertionError above AGREE_TOL (the timings would compare different computations)."""
    r, ga, gB, _ = engine.risk_and_grad(alpha[None], B[None], case.tb, case.loss)
    rt, gat, gBt = tm.risk_and_grad(alpha, B)
    return _agreement("PyTorch", case, (r[0], ga[0], gB[0]), (rt, gat, gBt), (rt, gat, gBt))


def _agreement(other: str, case: Case, ours, theirs, scale) -> float:
    """Largest relative difference of (risk, alpha gradient, B gradient) between the engine's `ours` and
    `theirs`, each relative to the size of `scale`; raises AssertionError above AGREE_TOL."""
    errs = [float(np.abs(np.asarray(a) - b).max() / max(np.abs(np.asarray(c)).max(), 1e-300))
            for a, b, c in zip(ours, theirs, scale)]
    worst = max(errs)
    if not worst <= AGREE_TOL:
        raise AssertionError(f"{other} and the engine disagree on {case.row} at d = {case.d}: relative "
                             f"differences risk {errs[0]:.2e}, alpha grad {errs[1]:.2e}, B grad {errs[2]:.2e} "
                             f"(tolerance {AGREE_TOL:g})")
    return worst


# ------------------------------------------------------------------------------------------------ bounds, anchors


BANDWIDTH_BYTES = 1 << 28
"""The array ``memory_bandwidth`` reads: 256 MB, eight times the largest last-level cache seen here (32 MB), so
that the rate is the main memory's."""


def memory_bandwidth(nbytes: int = BANDWIDTH_BYTES, repeat: int = 5) -> tuple[float, float]:
    """The memory's read rate in bytes/s on one thread: a float64 array of ``nbytes`` summed by numpy (one
    pass that reads every byte once and writes nothing), (by median wall time, by median process CPU time)
    over ``repeat`` sums after a first untimed one."""
    a = np.ones(max(1, nbytes // 8))
    a.sum()
    walls, cpus = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        a.sum()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return a.nbytes / max(float(np.median(walls)), 1e-9), a.nbytes / max(float(np.median(cpus)), 1e-9)


def step_bytes(tb: engine.Tokens, H: int, K: int, loss: str) -> float:
    """The bytes of its batch a step must read once: where the fused population pass applies (``popstep``), the
    population's classes in its narrow copy (two counts, a target and a weight a class, the padding left out);
    elsewhere the arrays of the layout the step reads (the count matrix, or the token rows with their
    multiplicities and string starts; the targets and weights)."""
    if popstep.applies(tb, H, K, loss):
        return float(tb.size * popstep.narrow(tb).bytes_per_class)
    parts = [tb.y, tb.weights]
    if tb.layout == "bag":
        parts.append(tb.counts)
    else:
        X = tb.rows
        parts += [X.data, X.indices, X.indptr] if sparse.issparse(X) else [np.asarray(X)]
        parts += [tb.mult, tb.starts]
    return float(sum(np.asarray(p).nbytes for p in parts))


def bounds(flops: float, gflops: float, nbytes: float, bandwidth: float) -> dict:
    """A step's two lower bounds in seconds, its operation count at ``gflops`` GFLOP/s and its bytes at
    ``bandwidth`` bytes/s, and the larger of the two (the bound a row's ratio is taken against)."""
    flop_s, traffic_s = flops / (gflops * 1e9), nbytes / bandwidth
    return {"flop": flop_s, "traffic": traffic_s, "larger": max(flop_s, traffic_s)}


class TorchTypeFirst:
    """A population written in PyTorch the way a performance-aware user would: type-first, the counts a (T, N)
    tensor (each type's counts contiguous over the classes), the T scores and type values projected once (table
    @ alpha, table @ B), each class's attention weights counts x exp(score - max score) normalised over the T
    types, the output their mean type value; the squared loss, autograd and the gradient-descent update.  One
    head and one output (the exact populations), in float64 or float32 (``dtype``)."""

    def __init__(self, batch: tasks.Batch, dtype: str = "float64"):
        import torch

        self.torch = torch
        self.dtype = getattr(torch, dtype)
        as_t = lambda x: torch.from_numpy(np.ascontiguousarray(x, float)).to(self.dtype)  # noqa: E731
        self.counts = as_t(np.asarray(batch.m, float).T)                                  # (T, N)
        self.table = as_t(batch.X)                                                         # (T, D)
        self.y = as_t(np.asarray(batch.y, float)[:, 0])
        self.w = as_t(batch.weights)

    def risk(self, alpha, B):
        torch = self.torch
        s = self.table @ alpha[0]                                                          # (T,)
        V = self.table @ B[0, :, 0]                                                        # (T,)
        wn = self.counts * torch.exp(s - s.max())[:, None]                                 # (T, N)
        Z = wn.sum(0)
        f = (V @ wn) / torch.where(Z > 0, Z, torch.ones_like(Z))                           # empty class: f = 0
        return (self.w * (0.5 * (f - self.y) ** 2)).sum()

    risk_and_grad = TorchModel.risk_and_grad
    stepper = TorchModel.stepper


ANCHOR_TOL = {"float64": AGREE_TOL, "float32": 1e-3}
"""The largest relative difference from the engine an anchor may show before it is timed (``anchor_agreement``):
float64 anchors as the PyTorch column, float32 ones at a tolerance that a wrong program misses and single
precision's rounding (1e-7 relative a term, more through cancellation) meets; the measured difference is
reported beside each."""


def anchors(case: Case, D: int, K: int) -> dict:
    """The PyTorch programs a performance-aware user would write for the case, by name (without the float64
    padded one, ``TorchModel``, timed as the PyTorch column): exact populations of one head and one output,
    type-first in float64 and float32 (``TorchTypeFirst``); sampled rows, the padded program with its per-slot
    index lookups in float32."""
    if case.exact and case.heads == 1 and K == 1 and case.loss == "squared":
        return {f"type-first {dt}": TorchTypeFirst(case.batch, dt) for dt in ("float64", "float32")}
    if not case.exact:
        return {"per-slot float32": TorchModel(case.batch, case.loss, case.heads, D, K, "float32")}
    return {}


def anchor_agreement(case: Case, name: str, model, alpha: np.ndarray, B: np.ndarray) -> float:
    """Largest relative difference between the engine's and an anchor's risk and gradients at (alpha, B) of one
    run, each relative to the engine's own size; AssertionError above the anchor's ``ANCHOR_TOL``."""
    r, ga, gB, _ = engine.risk_and_grad(alpha[None], B[None], case.tb, case.loss, with_f=False)
    rt, gat, gBt = model.risk_and_grad(alpha, B)
    ours = (r[0], ga[0], gB[0])
    errs = [float(np.abs(np.asarray(a) - b).max() / max(np.abs(np.asarray(a)).max(), 1e-300))
            for a, b in zip(ours, (rt, gat, gBt))]
    tol = ANCHOR_TOL["float32" if name.endswith("float32") else "float64"]
    if not max(errs) <= tol:
        raise AssertionError(f"PyTorch {name} and the engine disagree on {case.row} at d = {case.d}: relative "
                             f"differences {', '.join(f'{e:.2e}' for e in errs)} (tolerance {tol:g})")
    return max(errs)


def _anchor_records(case: Case, D: int, K: int, repeats: int, min_seconds: float) -> dict:
    """Each anchor's accuracy against the engine and its step time (median wall, CPU per run-step)."""
    out = {}
    for name, model in anchors(case, D, K).items():
        a0, B0 = initial(case, 1, seed=2)
        agree = anchor_agreement(case, name, model, a0[0], B0[0])
        out[name] = {"agree": agree, "time": timed(model.stepper(a0[0], B0[0]), repeats, min_seconds)}
    return out


# ------------------------------------------------------------------------------------------------ compiled kernel


def compiled_case(case: Case) -> engine.Tokens | None:
    """The case's batch in the layout of the compiled kernel (``table1 --kernel compiled``), or None where the
    kernel does not apply (bags, dense rows) or numba is absent."""
    if case.tb.layout != "rows" or not kernels.available():
        return None
    tbc = engine.from_batch(case.batch, "compiled")
    return tbc if layout._onehot(tbc) is not None else None


def readout_products(case: Case):
    """The three dense products of one run's step at the case's sizes, for each of its H heads (f_h = xbar_h B_h,
    dB_h = xbar_h^T g, U_h = g B_h^T, with xbar (H, N_ne, D), B (H, D, K), g (N_ne, K)), batched over the heads
    as the engine does: the BLAS part of a rows-layout step, which both kernels call, timed alone."""
    tb = case.tb
    N_ne, (H, D, K) = len(tb.starts), tasks.model_shape(case.task, case.d, case.heads)
    rng = np.random.default_rng(0)
    xbar, B, g = rng.random((H, N_ne, D)), rng.random((H, D, K)), rng.random((N_ne, K))

    def products():
        xbar @ B
        xbar.transpose(0, 2, 1) @ g
        g @ B.transpose(0, 2, 1)
    return products


def check_compiled(case: Case, tbc: engine.Tokens, alpha: np.ndarray, B: np.ndarray) -> float:
    """Largest relative difference between the numpy and the compiled kernel's risk and gradients at (alpha,
    B) of one run; raises AssertionError above AGREE_TOL."""
    r, ga, gB, _ = engine.risk_and_grad(alpha[None], B[None], case.tb, case.loss)
    rc, gac, gBc, _ = engine.risk_and_grad(alpha[None], B[None], tbc, case.loss)
    return _agreement("the compiled kernel", case, (r[0], ga[0], gB[0]), (rc[0], gac[0], gBc[0]), (r[0], ga, gB))


# ------------------------------------------------------------------------------------------------ numpy paths


def _same_bits(a, b) -> bool:
    """Whether a and b (arrays, sparse matrices, scalars or None) hold the same values bit for bit, in the same
    dtype, shape and (sparse) layout."""
    if a is None or b is None:
        return a is None and b is None
    if sparse.issparse(a) or sparse.issparse(b):
        if not (sparse.issparse(a) and sparse.issparse(b)) or a.format != b.format or a.shape != b.shape:
            return False
        a, b = sparse.csr_matrix(a), sparse.csr_matrix(b)
        return all(_same_bits(x, y) for x, y in ((a.indptr, b.indptr), (a.indices, b.indices), (a.data, b.data)))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_numpy_paths(case: Case, alpha: np.ndarray, B: np.ndarray) -> None:
    """Raises AssertionError unless the default kernel's risk, gradients and outputs at (alpha, B) of one run, and
    (sampled rows) the batch of step 1 and its engine layout, have the same bits with the numba loops as with
    them switched off (``kernels.numpy_paths``), as the engine promises: otherwise the two timings would compare
    different computations."""
    layout = ("counts", "mult", "starts", "seg", "nonempty", "rows")

    def work():
        out = engine.risk_and_grad(alpha[None], B[None], case.tb, case.loss)
        if case.sampler is not None:
            b, tb = case.sampler(1)
            out += (b.m, b.y, b.labels, b.extra.get("n"), *(getattr(tb, f) for f in layout))
        return out

    names = ("risk", "alpha grad", "B grad", "outputs", "batch counts", "batch targets", "batch labels",
             "batch lengths", *(f"layout's {f}" for f in layout))
    loops = work()
    with kernels.numpy_paths():
        plain = work()
    differ = [n for n, a, b in zip(names, loops, plain) if not _same_bits(a, b)]
    if differ or len(loops) != len(plain):
        raise AssertionError(f"the default kernel with and without its numba loops differs on {case.row} at "
                             f"d = {case.d}: {', '.join(differ)} not bit for bit the same")


# ------------------------------------------------------------------------------------------------ run


def bench(ds, repeats: int, rows=ROWS, use_torch: bool = True, progress=None, memory: bool = True,
          min_seconds: float = MIN_REPEAT_SECONDS, gemm_n: int = 1000) -> dict:
    """Measure every row at every d (see the module doc); returns a JSON-ready dict."""
    out, default_threads = _machine(ds, repeats, use_torch, gemm_n)
    for row, task, heads in rows:
        res = out["rows"].setdefault(row, {})
        for d in ds:
            if d < tasks.MIN_D[task]:
                continue
            with threadpool_limits(limits=1):
                res[d] = _row_record(row, task, heads, d, repeats, min_seconds, gemm_n, out["torch"])
            if progress:
                progress(f"{row} d={d}: engine {res[d]['engine_1'][0] * 1e3:.3f} ms")
    out["seeds"] = _seeds(ds, rows, repeats, min_seconds)
    out["parts"], out["fixed_share"] = _parts_and_shares(out, ds, rows, repeats, min_seconds)
    # two-head AND on its population by the integral, beside its sampled row
    out["and_integral"] = {}
    if any(r[1:] == ("AND", 2) for r in rows):
        for d in ds:
            with threadpool_limits(limits=1):
                out["and_integral"][d] = [integral_step(d, n, repeats, min_seconds, t1) for t1 in (False, True)
                                          for n in (1, RUNS)]
    # memory across d (for its growth), data + one step, every row
    if memory:
        for row, task, heads in rows:
            for d in ds:
                if d in out["rows"][row]:
                    with threadpool_limits(limits=1):
                        out["rows"][row][d]["peak_bytes"] = peak_memory(row, task, heads, d, Config())
    out["sampling"], out["banks"] = sampling_and_banks(ds, rows, repeats, min_seconds)
    out["icl_default_threads"] = _icl_threads(ds[0], repeats, min_seconds, default_threads)
    out["icl_fixed_cost"] = _icl_fixed_cost(repeats, min_seconds)
    out["load"].append(_load())
    return out


def _machine(ds, repeats: int, use_torch: bool, gemm_n: int) -> tuple[dict, int]:
    """The result's settings and the machine's figures (dgemm rates, PyTorch's version), and BLAS's default
    thread count."""
    cfg = Config()
    out = {"ds": list(ds), "repeats": repeats, "runs": RUNS, "batch": cfg.batch, "mass_tol": cfg.mass_tol,
           "len_tol": cfg.len_tol, "torch": None, "rows": {}, "load": [_load()],
           # the allocator setting of the processes that train Table 1's rows and the sweep's units: without
           # it, how fast the exact rows step depends on what this process allocated before them
           "heap_setting": engine.keep_temporaries_on_heap()}
    if use_torch and torch_available():
        import torch
        torch.set_num_threads(1)
        out["torch"] = torch.__version__
    with threadpool_limits(limits=1):
        out["dgemm_gflops_1thread_wall"], out["dgemm_gflops_1thread"] = dgemm_rate(gemm_n)
    # BLAS's default: one thread a core this process may run on, set explicitly (``occ-companion`` loads numpy on
    # one thread)
    default_threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with threadpool_limits(limits=default_threads, user_api="blas"):
        out["dgemm_gflops_default"], _ = dgemm_rate(gemm_n)
    out["gemm_n"] = gemm_n
    out["blas_default_threads"] = default_threads
    out["bandwidth_wall"], out["bandwidth"] = memory_bandwidth()
    out["bandwidth_bytes"] = BANDWIDTH_BYTES
    return out, default_threads


def _row_record(row: str, task: str, heads: int, d: int, repeats: int, min_seconds: float, gemm_n: int,
                torch_version) -> dict:
    """One row at one d: the engine's step (1 and 8 runs), its FLOP bound, the sampler, the step without
    the numba loops, the compiled kernel where it runs and PyTorch where it is installed."""
    t = time.process_time()
    case = make_case(row, task, heads, d, Config())
    build_cpu = time.process_time() - t
    H, D, K = tasks.model_shape(task, d, heads)
    a1, B1 = initial(case, 1)
    a8, B8 = initial(case, RUNS)
    *e1, rate = timed_beside_dgemm(lambda: engine_step(a1, B1, case.tb, case.loss), repeats, min_seconds, gemm_n)
    e8 = timed(lambda: engine_step(a8, B8, case.tb, case.loss), repeats, min_seconds)
    rec = {"engine_1": tuple(e1), "engine_8": (e8[0] / RUNS, e8[1] / RUNS), "flops": flop_count(case.tb, H, K),
           "layout": case.tb.layout, "N": case.tb.size, "exact": case.exact,
           "build_cpu": build_cpu if case.exact else None,
           "sampler": None if case.exact else sampler_timed(case, repeats)}
    # the same step and draws with the numba loops switched off, just after: what numba gains on the
    # default path (the same bits, checked first)
    a0, B0 = initial(case, 1, seed=2)
    check_numpy_paths(case, a0[0], B0[0])
    n1 = (a1.copy(), B1.copy())
    rec["numba"] = with_and_without_loops(lambda: engine_step(*n1, case.tb, case.loss), case, repeats, min_seconds)
    rec["dgemm_gflops_beside"] = rate
    rec["flop_seconds"] = rec["flops"] / (rate * 1e9)
    tbc = compiled_case(case)
    if tbc is not None:
        rec.update(_compiled_record(case, tbc, (a1, B1), (a8, B8), rec["flops"], repeats, min_seconds, gemm_n))
    if torch_version:
        a0, B0 = initial(case, 1, seed=2)
        tm = TorchModel(case.batch, case.loss, heads, D, K)
        rec["agreement"] = check_agreement(case, tm, a0[0], B0[0])
        rec["torch"] = timed(tm.stepper(a0[0], B0[0]), repeats, min_seconds)
        rec["anchors"] = _anchor_records(case, D, K, repeats, min_seconds)
    rec["bytes"] = step_bytes(case.tb, H, K, case.loss)
    return rec


def _compiled_record(case: Case, tbc: engine.Tokens, one, eight, flops: float, repeats: int, min_seconds: float,
                     gemm_n: int) -> dict:
    """The compiled kernel's step on a row's batch (``compiled_case``), checked against the numpy kernel
    first, from copies of the numpy kernel's parameters ``one`` (1 run) and ``eight`` (``RUNS`` runs)."""
    a0, B0 = initial(case, 1, seed=2)
    rec = {"compiled_agreement": check_compiled(case, tbc, a0[0], B0[0])}
    c1, c8 = (one[0].copy(), one[1].copy()), (eight[0].copy(), eight[1].copy())
    *c1t, crate = timed_beside_dgemm(lambda: engine_step(*c1, tbc, case.loss), repeats, min_seconds, gemm_n)
    rec["compiled_1"] = tuple(c1t)
    # its own bound, at the dgemm rate beside its own repeats (the machine's rate moves)
    rec["compiled_dgemm_beside"] = crate
    rec["compiled_flop_seconds"] = flops / (crate * 1e9)
    t8 = timed(lambda: engine_step(*c8, tbc, case.loss), repeats, min_seconds)
    rec["compiled_8"] = (t8[0] / RUNS, t8[1] / RUNS)
    rec["readout_products"] = timed(readout_products(case), repeats, min_seconds)
    return rec


def _seeds(ds, rows, repeats: int, min_seconds: float) -> dict:
    """Seeds in one array program against one call per seed (what the runner does), on ``SEED_ROWS``."""
    out = {}
    for row, task, heads in rows:
        if (row, task, heads) in SEED_ROWS:
            for d in ds:
                if d >= tasks.MIN_D[task]:
                    with threadpool_limits(limits=1):
                        got = [seeds_in_one_program(task, heads, d, n, repeats, min_seconds) for n in SEED_RUNS]
                        if None not in got:
                            out.setdefault(row, {})[d] = got
    return out


def _parts_and_shares(out: dict, ds, rows, repeats: int, min_seconds: float) -> tuple[dict, dict]:
    """ICL's step beside its parts (``step_parts``), and every rows-loops row's step beside the same step on
    a small batch (``fixed_share``)."""
    parts, shares = {}, {}
    for row, task, heads in rows:
        if (row, task, heads) in SEED_ROWS:
            for d in ds:
                if d in out["rows"].get(row, {}):
                    with threadpool_limits(limits=1):
                        case = make_case(row, task, heads, d, Config())
                        if task == "ICL":
                            got = step_parts(case, repeats, min_seconds)
                            if got is not None:
                                parts[d] = got
                        if layout._rows_loops(case.tb) is not None:
                            shares.setdefault(row, {})[d] = [
                                fixed_share(case, n, repeats, min_seconds) for n in SHARE_RUNS]
    return parts, shares


def _icl_threads(d: int, repeats: int, min_seconds: float, default_threads: int) -> dict:
    """One ICL step under BLAS's default threads (the setting not to time with), and on one thread."""
    case = make_case("ICL", "ICL", 1, d, Config())
    a1, B1 = initial(case, 1)
    with threadpool_limits(limits=default_threads, user_api="blas"):
        out = {"d": d, "time": timed(lambda: engine_step(a1, B1, case.tb, case.loss), repeats, min_seconds)}
    with threadpool_limits(limits=1):
        out["time_1thread"] = timed(lambda: engine_step(a1, B1, case.tb, case.loss), repeats, min_seconds)
    return out


def _icl_fixed_cost(repeats: int, min_seconds: float) -> dict:
    """The ICL step's fixed cost: at d = FIXED_COST_D the arithmetic is negligible (a few kFLOP), so its time
    is that of the step's numpy and scipy calls, which every d pays."""
    with threadpool_limits(limits=1):
        case = make_case("ICL", "ICL", 1, FIXED_COST_D, Config())
        a1, B1 = initial(case, 1)
        K = tasks.model_shape("ICL", FIXED_COST_D, 1)[2]
        out = {"d": FIXED_COST_D, "flops": flop_count(case.tb, 1, K),
               "time": timed(lambda: engine_step(a1, B1, case.tb, case.loss), repeats, min_seconds)}
        tbc = compiled_case(case)
        if tbc is not None:
            c1 = (a1.copy(), B1.copy())
            out["time_compiled"] = timed(lambda: engine_step(*c1, tbc, case.loss), repeats, min_seconds)
    return out


FIXED_COST_D = 4
"""The alphabet size at which the benchmark times the ICL step's fixed cost (its calls, not its arithmetic)."""


def _load() -> float | None:
    """The 1-minute load average (None where the system has none): other processes on a shared machine slow
    the small operations of a step (cache, memory bandwidth) more than the dgemm rate of the FLOP bound."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def targets(res: dict) -> list[dict]:
    """The issue's targets, each with its measured value and whether it is met."""
    ds = res["ds"]
    rows = res["rows"]
    out = []
    d0 = ds[0]
    if res["torch"]:
        for row, r in rows.items():
            if d0 in r and "torch" in r[d0]:
                e, t = r[d0]["engine_1"][1], r[d0]["torch"][1]
                out.append({"target": f"{row}: engine per step <= PyTorch at d = {d0} (CPU)",
                            "value": ("versus", e, t), "met": e <= t,
                            "row": row, "d": d0})
    for d in ds:
        r = rows.get("ICL", {}).get(d)
        if r:
            ratio = r["engine_1"][1] / r["flop_seconds"]
            out.append({"target": f"ICL at d = {d}: within 3x of the FLOP bound (CPU, default numpy kernel)",
                        "value": ("ratio", ratio), "met": ratio <= 3, "row": "ICL", "d": d})
            if "compiled_1" in r:
                ratio = r["compiled_1"][1] / r["compiled_flop_seconds"]
                ratio8 = r["compiled_8"][1] / r["compiled_flop_seconds"]
                out.append({"target": f"ICL at d = {d}: within 3x of the FLOP bound (CPU, compiled kernel)",
                            "value": ("ratios", ratio, ratio8), "met": ratio <= 3,
                            "row": "ICL", "d": d, "kernel": "compiled"})
    if 200 in ds and 200 in rows.get("ICL", {}):
        r = rows["ICL"][200]
        tot = r["engine_1"][1] + r["sampler"][1]
        out.append({"target": "ICL at d = 200: under 10 ms per step (CPU, engine)",
                    "value": ("with sampler", r["engine_1"][1], tot),
                    "met": r["engine_1"][1] < 0.01, "row": "ICL", "d": 200})
    for row, r in rows.items():
        dd = [d for d in ds if d in r]
        for key, name in (("engine_1", "step"), ("peak_bytes", "memory")):
            vals = [(r[d][key][1] if key == "engine_1" else r[d].get(key)) for d in dd]
            k = fit_exponent(dd, vals)
            if k is not None:
                out.append({"target": f"{row}: {name} grows no faster than d^2", "value": ("exponent", k),
                            "met": k <= 2, "row": row, "d": max(dd)})
    return out + bound_and_anchor_targets(res)


def row_bounds(res: dict, rec: dict) -> dict | None:
    """``bounds`` of a row's record: its FLOP count at the dgemm rate beside it, its ``step_bytes`` at the
    memory's read rate by CPU time (``memory_bandwidth``); None for a record without its bytes."""
    if "bytes" not in rec or not res.get("bandwidth"):
        return None
    return bounds(rec["flops"], rec["dgemm_gflops_beside"], rec["bytes"], res["bandwidth"])


def best_anchor(rec: dict) -> tuple[str, tuple[float, float]] | None:
    """(name, time) of the fastest PyTorch program of a row by CPU time: the PyTorch column's (float64,
    padded) and its ``anchors``; None without PyTorch."""
    if "torch" not in rec:
        return None
    timings = {"padded float64": rec["torch"]} | {k: v["time"] for k, v in rec.get("anchors", {}).items()}
    name = min(timings, key=lambda k: timings[k][1])
    return name, timings[name]


def bound_and_anchor_targets(res: dict) -> list[dict]:
    """The exact-population rows within 2x of the larger of their FLOP and traffic bounds at every d (one run,
    CPU); every row at least as fast as the best of its PyTorch programs at every d (CPU)."""
    out = []
    for row, r in res["rows"].items():
        for d in res["ds"]:
            rec = r.get(d)
            if rec is None:
                continue
            b = row_bounds(res, rec)
            if rec.get("exact") and b is not None:
                ratio = rec["engine_1"][1] / b["larger"]
                out.append({"target": f"{row} at d = {d}: within 2x of the larger of its FLOP and traffic bounds "
                                      "(CPU)", "value": ("ratio to", ratio, 2), "met": ratio <= 2, "row": row, "d": d})
            best = best_anchor(rec)
            if best is not None:
                e = rec["engine_1"][1]
                out.append({"target": f"{row} at d = {d}: engine per step <= the best PyTorch program "
                                      f"({best[0]}, CPU)", "value": ("versus", e, best[1][1]),
                            "met": e <= best[1][1], "row": row, "d": d})
    return out


SIZES = {"full": dict(ds=FULL_D, repeats=7),
         "quick": dict(ds=QUICK_D, repeats=3, min_seconds=0.003, gemm_n=300),
         "tiny": dict(ds=QUICK_D[:1], repeats=1, rows=ROWS[:1], memory=False, min_seconds=0.001, gemm_n=100)}
"""The benchmark's sizes: the full one (docs/benchmarks_engine.md), ``quick`` (d = 5, 8, seconds) and ``tiny``
(the occurrence row at d = 5, one repeat, no memory column: a smoke size for tests, its times mean nothing)."""


def measure(size: str = "full", use_torch: bool = True, progress=None) -> dict:
    """Run the benchmark at ``size`` (a key of ``SIZES``) and profile the rows that miss a target; returns the
    record the page is rendered from (``app.render.bench_engine.render``): ``res`` (``bench``), ``targets``,
    ``profiles`` (``profile_top`` of each row that misses one, at most four), ``lines`` (``line_times`` of
    ICL's step, full size only), ``seconds`` (the run's wall and CPU time) and ``finished`` (UTC)."""
    w0, c0 = time.perf_counter(), time.process_time()
    opts = dict(SIZES[size])
    ds, repeats = opts.pop("ds"), opts.pop("repeats")
    res = bench(ds, repeats, use_torch=use_torch, progress=progress, **opts)
    tg = targets(res)
    profiles = _missed_profiles(tg)  # (the engine step's profiles: not of the sampling and bank targets)
    tg += sampling_and_bank_targets(res)
    return {"res": res, "targets": tg, "profiles": profiles,
            "lines": _icl_lines(ds) if size == "full" else {},
            "seconds": (time.perf_counter() - w0, time.process_time() - c0),
            "finished": datetime.datetime.now(datetime.timezone.utc)}


def _missed_profiles(tg: list[dict]) -> dict:
    """``profile_top`` of one step of each row (and kernel) that misses a target, at most four."""
    profiles = {}
    for t in tg:
        name = t["row"] + (" (compiled kernel)" if t.get("kernel") == "compiled" else "")
        if not t["met"] and (name, t["d"]) not in profiles and len(profiles) < 4:
            row, task, heads = next(x for x in ROWS if x[0] == t["row"])
            with threadpool_limits(limits=1):
                case = make_case(row, task, heads, t["d"], Config())
                tb = compiled_case(case) if t.get("kernel") == "compiled" else case.tb
                a1, B1 = initial(case, 1)
                profiles[(name, t["d"])] = profile_top(lambda: engine_step(a1, B1, tb, case.loss))
    return profiles


def _icl_lines(ds) -> dict:
    """``line_times`` of ICL's step at every d, and with the compiled kernel at the first."""
    lines = {}
    for d in ds:
        with threadpool_limits(limits=1):
            case = make_case("ICL", "ICL", 1, d, Config())
            a1, B1 = initial(case, 1)
            lines[("ICL", d)] = line_times(lambda: engine.risk_and_grad(a1, B1, case.tb, case.loss), ENGINE_FILES)
    with threadpool_limits(limits=1):
        case = make_case("ICL", "ICL", 1, ds[0], Config())
        tbc = compiled_case(case)
        if tbc is not None:
            a1, B1 = initial(case, 1)
            lines[("ICL (compiled kernel)", ds[0])] = line_times(
                lambda: engine.risk_and_grad(a1, B1, tbc, case.loss), ENGINE_FILES)
    return lines


# ------------------------------------------------------------------------------------------------ sampling and banks


SAMPLED_D = (50, 200)
"""The alphabet sizes of "Sampling beside the step" (at a size without them, its own d)."""
BANK_D = (25, 50, 100, 200)
"""The alphabet sizes of "Banks": the readings grid's, on which ``runner.RUNS_PER_CALL`` is decided (at a size
without d = 50, its own d)."""
BANK_RUNS = (1, 4, 16)
"""Runs of a bank in "Banks": one run alone, four (Table 1's reported seed: one run per plan), sixteen (a
step-size search round)."""
BANK_TARGET = 0.8
"""The banks' target: a bank of k runs steps at least BANK_TARGET k runs in the time one run alone takes a step,
``bank_ratio`` >= BANK_TARGET k (k runs in one call as fast per run as 0.8 k runs alone: a bank of k at most
1 / BANK_TARGET steps of one run), or the runner does not bank the row."""
BANK_PAYS = 0.8
"""The runner banks a row (``runner.RUNS_PER_CALL``) where every bank measured has ``bank_gain`` >= BANK_PAYS:
one call of k runs takes at most 1 / BANK_PAYS the time of the same runs stepped one call each (a shared
machine's noise is of that order), so stepping them one call each would not be clearly faster."""


def sampled_rows(rows=ROWS) -> list[tuple[str, str, int]]:
    """The rows of ``rows`` that train on sampled batches under the runner's default configuration."""
    cfg = Config()
    return [(row, task, heads) for row, task, heads in rows if not exact(task, heads, cfg)]


def sampled_ds(ds) -> list[int]:
    """The d of ``ds`` that the sampling and bank sections measure: ``SAMPLED_D``, else every d of ``ds``."""
    return [d for d in ds if d in SAMPLED_D] or list(ds)


def bank_ds(ds) -> list[int]:
    """The d that the bank section measures: ``BANK_D`` where ``ds`` holds d = 50, else every d of ``ds``."""
    return list(BANK_D) if 50 in ds else list(ds)


def sampling_beside_step(case: Case, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> dict:
    """The draw of a fresh step's batch in the engine layout (``case.sampler``: the sampler, then ``from_batch``
    with the batch's operators, what the runner pays each step) beside one engine step of one run on a batch
    whose operators are built, alternately, repeat by repeat (``alternated``; every draw a new step).  Medians
    (wall s, CPU s) per call: ``{"draw", "step"}``."""
    a, B = initial(case, 1)
    step_no = iter(range(1, 1 << 30))

    def draw():
        case.sampler(next(step_no))

    step = lambda: engine_step(a, B, case.tb, case.loss)  # noqa: E731
    got = alternated({"draw": draw, "step": step}, repeats, _calls_for(step, min_seconds))
    return {k: got[k] for k in ("draw", "step")}


def bank_steps(case: Case, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> dict:
    """For each k of ``BANK_RUNS``: one step of k runs in one call (``engine_step``: a bank), and for k > 1 the
    same k runs stepped by k calls of one run each (what the runner does where it does not bank a row), all
    arms timed alternately, repeat by repeat, on the case's batch.  Each run has parameters of its own, so the
    calls of one run each read k runs' parameters as the bank does (one run stepped alone keeps its own in
    cache).  Medians (wall s, CPU s) per step of the k runs: ``{k: {"bank": ..., "calls": ...}}`` (k = 1: the
    bank alone)."""
    params = {k: initial(case, k) for k in BANK_RUNS}
    arms = {}
    for k in BANK_RUNS:
        a, B = params[k]
        arms[(k, "bank")] = lambda a=a, B=B: engine_step(a, B, case.tb, case.loss)
        if k > 1:
            arms[(k, "calls")] = lambda a=a, B=B: [engine_step(a[i:i + 1], B[i:i + 1], case.tb, case.loss)
                                                    for i in range(a.shape[0])]
    got = alternated(arms, repeats, _calls_for(arms[(BANK_RUNS[-1], "bank")], min_seconds))
    out: dict = {}
    for (k, arm), t in got.items():
        out.setdefault(k, {})[arm] = t
    return out


def sampling_and_banks(ds, rows, repeats: int, min_seconds: float = MIN_REPEAT_SECONDS) -> tuple[dict, dict]:
    """``sampling_beside_step`` of every sampled row at ``sampled_ds(ds)`` and its ``bank_steps`` at
    ``bank_ds(ds)``, on one BLAS thread: ({row: {d: record}}, {row: {d: record}})."""
    draws, banks = {}, {}
    for row, task, heads in sampled_rows(rows):
        for d in sorted(set(sampled_ds(ds)) | set(bank_ds(ds))):
            if d < tasks.MIN_D[task]:
                continue
            with threadpool_limits(limits=1):
                case = make_case(row, task, heads, d, Config())
                if d in sampled_ds(ds):
                    draws.setdefault(row, {})[d] = sampling_beside_step(case, repeats, min_seconds)
                if d in bank_ds(ds):
                    banks.setdefault(row, {})[d] = bank_steps(case, repeats, min_seconds)
    return draws, banks


def bank_ratio(steps: dict, k: int) -> float:
    """k T_1 / T_k by CPU medians (``bank_steps``' record): how many runs a bank of k steps in the time one run
    alone takes a step."""
    return k * steps[1]["bank"][1] / steps[k]["bank"][1]


def bank_gain(steps: dict, k: int) -> float:
    """The time of k runs stepped one call each over that of the bank of k (CPU medians): above 1 the bank is
    faster."""
    return steps[k]["calls"][1] / steps[k]["bank"][1]


def bank_met(task: str, d: int, steps: dict) -> bool:
    """The banks' target at one d: every bank of k > 1 runs that the runner makes (k at most its
    ``runner.runs_per_call_at``) steps at least ``BANK_TARGET`` k runs per step of one run alone."""
    from numerics.experiments.runner import runs_per_call_at

    cap = runs_per_call_at(task, d)
    return all(bank_ratio(steps, k) >= BANK_TARGET * k for k in BANK_RUNS if k > 1 and (cap is None or k <= cap))


def sampling_and_bank_targets(res: dict) -> list[dict]:
    """The targets of sampling (at d = 200, the draw of a step's batch at most the step of one run, CPU) and of
    banks (every sampled row at d = 50 and 200, k = 4 and 16: ``bank_met``)."""
    out = []
    for row, by_d in (res.get("sampling") or {}).items():
        if 200 in by_d:
            x = by_d[200]
            out.append({"target": f"{row} at d = 200: drawing a step's batch costs at most the step (CPU)",
                        "value": ("draw vs step", x["draw"][1], x["step"][1]), "met": x["draw"][1] <= x["step"][1],
                        "row": row, "d": 200})
    for row, by_d in (res.get("banks") or {}).items():
        task = next(t for r, t, _ in ROWS if r == row)
        for d in [d for d in SAMPLED_D if d in by_d] or list(by_d):
            ratios = tuple(bank_ratio(by_d[d], k) / k for k in BANK_RUNS if k > 1)
            out.append({"target": f"{row} at d = {d}: k = 4, 16 runs in one call step >= {BANK_TARGET} k runs "
                                  "per step of one run alone, or the runner does not bank them",
                        "value": ("bank", *ratios), "met": bank_met(task, d, by_d[d]), "row": row, "d": d})
    return out
