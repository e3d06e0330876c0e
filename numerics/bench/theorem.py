"""Benchmark of exact population evaluation (``occ-companion benchmark``): the measurements, returned as a
record that ``app.render.bench_theorem`` renders as docs/benchmarks.md.

Measured side by side in one run, at d = 50, 500 and 10^4 (symmetric parameters, squared loss):
the float series, the arb series (certified balls), the integral representation (certified balls at
30 digits, cost independent of d), the numpy double sum over (length n, marked count c) that a user
would write instead (float64, truncated at the float series' tolerance), and numpy Monte Carlo on
(n, c) sized for a standard error of 1e-6 (from a pilot run, extrapolated), with digits of agreement
against the certified reference (the arb series, or the integral where the arb series is out of
reach); also one float evaluation at d = 50, 30-digit evaluations (the integral, the arb series and
mp), the main job as a user runs it (fresh ``python3 -m app run`` processes: CPU seconds, wall
seconds and peak memory, medians of repeats) and the wall time of README's test command.  Every timed
evaluation is given as the median wall and median CPU seconds over a stated number of repeats.
Timings on a shared machine: CPU seconds hold up better than wall seconds; read both as orders of
magnitude and as ratios.
"""
from __future__ import annotations

import datetime
import math
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path

import statistics

import mpmath
import numpy as np

from theory.setting import Setting

from numerics.theorem.integral import IntegralEvaluator
from numerics.theorem import series as series_module
from numerics.theorem.series import SeriesEvaluator

POINT = (2.3, -0.1, 1.5, -0.9)  # alpha_a, alpha_b, beta_a, beta_b
MC_TARGET_SE = 1e-6
TINY_MC = 20_000
"""Monte Carlo pilot size of ``measure(tiny=True)``."""
DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


REPEATS = {"float series": 5, "certified": 3, "numpy double sum": 3, "Monte Carlo": 3, "float single": 200,
           "taylor": 3}
"""Repeats behind the medians of the evaluation tables (few for the slow certified rows)."""


def _timed(fn, repeat: int = 1):
    """(result, median wall seconds over ``repeat`` calls)."""
    out, wall, _ = _measure(fn, repeat)
    return out, wall


def _measure(fn, repeat: int = 1):
    """(result, median wall seconds, median CPU seconds of this process) over ``repeat`` calls."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        cpus.append(time.process_time() - c)
        walls.append(time.perf_counter() - t)
    return out, statistics.median(walls), statistics.median(cpus)


def double_sum_terms(d: int, tol: float = 1e-15, chunk: int = 4096) -> list[tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]]:
    """The point-independent part of ``numpy_double_sum``, which a numpy user evaluating many points builds
    once: per block of ``chunk`` lengths, the terms' lengths n, marked counts c and weights P(n) P(c | n)
    (geometric times scipy.stats.binom), lengths n = 1..N and counts c = 0..C(n), N cut where
    P(n > N) <= tol / 2 and C(n) where P(c > C(n) | n) <= tol / 2 (so the omitted mass is at most tol)."""
    from scipy.stats import binom

    s = Setting(d)
    if s.lengths != "positive":  # pragma: no cover - the benchmark's setting
        raise ValueError("numpy_double_sum covers lengths on {1, 2, ...}")
    p, q = float(s.p_value), 1.0 / d
    N = s.law.cutoff(tol / 2)
    blocks = []
    for lo in range(1, N + 1, chunk):
        n = np.arange(lo, min(lo + chunk, N + 1))
        top = np.minimum(binom.isf(tol / 2, n, q), n).astype(np.int64)  # P(c > top | n) <= tol / 2 for every n
        nn = np.repeat(n, top + 1)
        c = np.arange(len(nn)) - np.repeat(np.cumsum(top + 1) - (top + 1), top + 1)
        blocks.append((nn, c, p * (1 - p) ** (nn - 1.0) * binom.pmf(c, nn, q)))
    return blocks


def numpy_double_sum(d: int, point=POINT, tol: float = 1e-15, chunk: int = 4096, terms=None):
    """Risk by the double sum a numpy user would write: the weighted loss at f(n, c) over the terms of
    ``double_sum_terms(d, tol, chunk)`` (``terms``: those terms, built once for many points; the same bits),
    so the truncation error is at most tol times the largest loss.  Returns (risk, number of (n, c) terms).

    >>> r, terms = numpy_double_sum(5, (0.0, 0.0, 0.0, 0.0))   # f = 0 on every string
    >>> round(r, 12)
    0.5
    """
    blocks = double_sum_terms(d, tol, chunk) if terms is None else terms
    ea, eb = math.exp(point[0]), math.exp(point[1])
    ba, bb = point[2], point[3]
    parts, count = [], 0
    for nn, c, w in blocks:
        f = (c * ea * ba + (nn - c) * eb * bb) / (c * ea + (nn - c) * eb)
        parts.append(float(np.sum(w * (f - np.where(c > 0, 1.0, -1.0)) ** 2)) / 2)
        count += len(nn)
    return math.fsum(parts), count


def monte_carlo(d: int, point=POINT, size: int = 2_000_000, seed: int = 1, repeat: int = 1):
    """Pilot Monte Carlo of the risk on (n, c): n from the length law, c ~ Binomial(n, 1/d); returns
    (estimate, its SE, pilot size, median CPU seconds, size for SE 1e-6, extrapolated CPU seconds for that
    size, median wall seconds), the medians over ``repeat`` pilots (the same seed: the same estimate)."""
    def draw():
        s = Setting(d)
        rng = np.random.default_rng(seed)
        n = s.law.sample(rng, size)
        c = rng.binomial(n, 1.0 / d)
        ea, eb = math.exp(point[0]), math.exp(point[1])
        f = (c * ea * point[2] + (n - c) * eb * point[3]) / (c * ea + (n - c) * eb)
        loss = (f - np.where(c > 0, 1.0, -1.0)) ** 2 / 2
        return float(loss.mean()), float(loss.std(ddof=1) / math.sqrt(size))

    (risk, se), wall, cpu = _measure(draw, repeat)
    need = math.ceil(size * (se / MC_TARGET_SE) ** 2)
    return risk, se, size, cpu, need, cpu * need / size, wall


_RUSAGE_HELPER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps([usage.ru_utime + usage.ru_stime, usage.ru_maxrss, os.waitstatus_to_exitcode(status)]))
"""
"""Runs a command and prints its own rusage: CPU seconds, peak RSS (kB on Linux) and exit status.  A
small process spawns the command, because a child's ru_maxrss counts the memory it had before exec,
a copy of its parent's (the benchmark's own hundreds of MB)."""


def run_process(args: list[str], repeat: int = 3, warm: bool = False) -> dict:
    """``python3 -m app ARGS --quiet --out TMP`` in fresh processes, as a user runs it (imports, cache
    loads, every plan, the artifacts): medians over ``repeat`` runs of CPU seconds (user + system),
    wall seconds and peak resident memory (MB), each from the process's own rusage; and the exit status.
    Python's bytecode cache is on (as by default: ``PYTHONDONTWRITEBYTECODE`` is dropped); ``warm``
    adds one uncounted run first, so that imports read compiled modules as in a user's installation."""
    import json
    import subprocess
    import tempfile

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cpus, walls, peaks, status = [], [], [], 0
    for i in range(repeat + int(warm)):
        with tempfile.TemporaryDirectory() as out:
            t = time.perf_counter()
            report = subprocess.run([sys.executable, "-c", _RUSAGE_HELPER, sys.executable, "-m", "app", *args,
                                     "--quiet", "--out", out], capture_output=True, text=True, check=True, env=env)
            wall = time.perf_counter() - t
        if warm and i == 0:
            continue  # the warm-up run
        walls.append(wall)
        cpu, peak_kb, code = json.loads(report.stdout)
        cpus.append(cpu)
        peaks.append(peak_kb / 1024)
        status = status or code
    return {"cpu": statistics.median(cpus), "wall": statistics.median(walls), "peak_mb": statistics.median(peaks),
            "status": status, "repeat": repeat}


TEST_COMMAND = ("-m", "pytest", "-q", "-n", "auto", "-m", "slow or not slow", "checks", "tests")
"""README's test command (run from the checkout): every tier, the ``slow`` one included."""


def suite_seconds(cold: bool = False) -> tuple[float, str]:
    """Wall seconds of README's test command in a fresh process, and its summary line; ``cold`` points the
    SymPy derivation cache at an empty folder (as on a clean CI machine)."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, OCC_CACHE_DIR=empty) if cold else None
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, *TEST_COMMAND], cwd=root, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - t
    last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return seconds, last.strip("= ")


def _blas_threads() -> str:
    """numpy's BLAS libraries in this process and their threads (threadpoolctl), e.g. ``openblas 1``."""
    from threadpoolctl import threadpool_info

    found = [f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info()
             if i.get("user_api") == "blas" and "numpy" in i.get("filepath", "")]
    return ", ".join(found) or "none found"


def measure(dims=(50, 500, 10_000), quick: bool = False, tiny: bool = False, keep_suite: bool = False) -> dict:
    """Run the benchmark; returns the record docs/benchmarks.md is rendered from (``app.render.bench_theorem``).
    ``tiny`` (a smoke size for tests, a few seconds: its times mean nothing) measures only the first table,
    with a Monte Carlo pilot of ``TINY_MC`` strings.  ``keep_suite``: the test command is not run (the page
    carries its figures over from the page being replaced)."""
    from threadpoolctl import threadpool_limits

    from numerics.bench.engine import dgemm_rate

    with threadpool_limits(limits=1):
        gemm = dgemm_rate()[1]
    record = {"machine": machine(gemm), "dims": list(dims), "quick": quick, "tiny": tiny, "keep_suite": keep_suite,
              "methods": [], "single": None, "main_job": None, "taylor": None, "suite": None}
    for d in dims:
        record["methods"].append(methods_at(d, quick, tiny))
        print(f"d = {d} done", file=sys.stderr)
    if tiny:
        return record
    record["single"] = single_evaluations(quick)
    record["main_job"] = main_job(quick)
    record["taylor"] = taylor_model(steps=30 if quick else 300)
    if not quick and not keep_suite:
        record["suite"] = {"warm": suite_seconds(), "cold": suite_seconds(cold=True)}
    return record


def machine(gemm: float) -> dict:
    """The date, the host, the versions of the libraries, numpy's BLAS threads and the dgemm rate ``gemm``
    (GFLOP/s, one thread, by CPU time)."""
    import flint

    return {"date": datetime.date.today(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
            "python": platform.python_version(), "numpy": np.__version__, "flint": flint.__version__,
            "mpmath": mpmath.__version__, "gemm": gemm, "blas": _blas_threads(),
            "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS", "unset")}


def methods_at(d: int, quick: bool = False, tiny: bool = False) -> dict:
    """The first table's measurements at d: the float series (its build and evaluation), the arb series
    (where it is in reach: ``arb`` None elsewhere), the arb integral, the numpy double sum and the Monte
    Carlo pilot, each ``_measure``'s (result, wall, CPU) or the method's own tuple."""
    s = Setting(d)
    fl_ev = SeriesEvaluator(s, tol=1e-15 if d <= 500 else 1e-12, max_terms=50_000_000)
    series_module.DISK_CACHE = False  # build s: the enumeration built, not read from the disk cache
    try:
        _, build = _timed(partial(fl_ev.evaluate_symmetric, *POINT))
    finally:
        series_module.DISK_CACHE = True
    out = {"d": d, "tol": fl_ev.tol, "build": build, "arb": None,
           "series": _measure(partial(fl_ev.evaluate_symmetric, *POINT), REPEATS["float series"])}
    arb_tol = {50: 1e-21, 500: 1e-16}.get(d)
    if arb_tol is not None and not (quick and d > 50):
        ab_ev = SeriesEvaluator(s, context="arb", tol=arb_tol, max_terms=50_000_000)
        _, abuild = _timed(partial(ab_ev.evaluate_symmetric, *POINT))
        out["arb"] = (*_measure(partial(ab_ev.evaluate_symmetric, *POINT), REPEATS["certified"]), abuild)
    integral = IntegralEvaluator(s, dps=30)
    out["integral"] = _measure(partial(integral.evaluate_symmetric, *POINT), REPEATS["certified"])
    ds_terms, dbuild, _ = _measure(partial(double_sum_terms, d, tol=fl_ev.tol))
    (nv, nterms), nsecs, ncpu = _measure(partial(numpy_double_sum, d, tol=fl_ev.tol, terms=ds_terms),
                                         REPEATS["numpy double sum"])
    del ds_terms
    out["double_sum"] = {"risk": nv, "terms": nterms, "build": dbuild, "wall": nsecs, "cpu": ncpu}
    out["monte_carlo"] = monte_carlo(d, size=TINY_MC if tiny else 2_000_000, repeat=REPEATS["Monte Carlo"])
    return out


def single_evaluations(quick: bool = False) -> dict:
    """Single evaluations at d = 50 after the one-time enumeration: the float series, the arb series at
    about 20 digits, the arb integral at 30 digits (and at d = 10^6), the arb series at tol 1e-30 and, unless
    ``quick``, mp at 30 digits; each ``_measure``'s (result, wall, CPU)."""
    ev50 = SeriesEvaluator(Setting(50))
    ev50.evaluate_symmetric(*POINT)
    nf, nc = REPEATS["float single"], REPEATS["certified"]
    out = {"float_repeats": nf, "repeats": nc, "float": _measure(lambda: ev50.evaluate_symmetric(*POINT), nf)}
    arb30 = SeriesEvaluator(Setting(50), context="arb", dps=30, tol=1e-30)
    arb30.evaluate_symmetric(*POINT)
    out["arb30"] = _measure(lambda: arb30.evaluate_symmetric(*POINT), nc)
    integral30 = IntegralEvaluator(Setting(50), dps=30)
    out["integral"] = _measure(lambda: integral30.evaluate_symmetric(*POINT), nc)
    out["integral_1e6"] = _measure(lambda: IntegralEvaluator(Setting(10**6), dps=30).evaluate_symmetric(*POINT), nc)
    arb20 = SeriesEvaluator(Setting(50), context="arb", tol=1e-21)
    arb20.evaluate_symmetric(*POINT)
    out["arb20"] = _measure(lambda: arb20.evaluate_symmetric(*POINT), nc)
    out["mp"] = None
    if not quick:
        mp15 = SeriesEvaluator(Setting(50), context="mp", dps=30, tol=1e-15)
        mp15.evaluate_symmetric(*POINT)
        out["mp"] = _measure(lambda: mp15.evaluate_symmetric(*POINT), nc)
    return out


def main_job(quick: bool = False) -> list[dict]:
    """The main job's rows (``process_row``), in the page's order."""
    rows = [process_row("run --d 50 --no-plot", ["run", "--d", "50", "--no-plot"], "< 0.6 CPU s",
                        5 if not quick else 3, cpu_s=0.6),
            process_row("run --d 50", ["run", "--d", "50"], "< 3 s", 3, wall_s=3),
            process_row("run --d 10000", ["run", "--d", "10000"], "< 60 s", 3 if not quick else 1, wall_s=60),
            process_row("run --d 1000000", ["run", "--d", "1000000"], "< 10 CPU s, < 200 MB", 3 if not quick else 1,
                        cpu_s=10, peak_mb=200)]
    if not quick:
        # the default --max-terms (3e6) protects memory; the series at d = 10^4 needs about 1.1e7 terms
        rows.append(process_row("run --d 10000 --evaluator series --max-terms 30000000",
                                ["run", "--d", "10000", "--evaluator", "series", "--max-terms", "30000000"], "-", 1))
    return rows


def process_row(label: str, args: list[str], target: str, repeat: int = 3, cpu_s: float | None = None,
                peak_mb: float | None = None, wall_s: float | None = None) -> dict:
    """One main-job row: ``run_process``'s medians with the row's ``label`` and ``target``, and ``ok``, whether
    the target is met (None where it names no figure): the command exited 0 and each median the target names
    is under it, CPU seconds ``cpu_s``, wall seconds ``wall_s``, peak resident memory ``peak_mb``."""
    r = run_process(args, repeat, warm=label == "run --d 50 --no-plot")  # the first row warms the cache
    limits = [(r["cpu"], cpu_s), (r["wall"], wall_s), (r["peak_mb"], peak_mb)]
    ok = None if all(lim is None for _, lim in limits) else (
        r["status"] == 0 and all(lim is None or x < lim for x, lim in limits))
    return {"label": label, "target": target, "ok": ok, **r}


def taylor_model(d: int = 10**6, steps: int = 300) -> dict:
    """The main job's joint plan at d (its default step, ``steps`` steps) on the integral evaluator as ``run``
    builds it (``numerics.theorem.evaluators``: 16 digits, Taylor models of order TAYLOR_ORDER) beside the same
    evaluator computing three integrals at every call, the arms alternating, in this process: the medians
    (wall, CPU seconds) of each arm (``medians``, keyed by the order, None for three integrals a call), the
    integrals each computed, whether every recorded risk and parameter is the same double in both (``same``)
    and the largest relative difference of their recorded bounds (``bound``)."""
    from numerics.theorem import training
    from numerics.theorem.evaluators import INTEGRAL_DPS, TAYLOR_ORDER

    def arm(order):
        ev = IntegralEvaluator(Setting(d), dps=INTEGRAL_DPS, taylor_order=order)
        traj = training.Trainer(ev, record_every=1).run(training.joint(1.0, steps))
        return traj, ev.integrals_computed

    runs = {None: [], TAYLOR_ORDER: []}
    out = {}
    for _ in range(REPEATS["taylor"]):
        for order in (TAYLOR_ORDER, None):
            out[order], wall, cpu = _measure(partial(arm, order))
            runs[order].append((wall, cpu))
    (tm, nm), (tp, npl) = out[TAYLOR_ORDER], out[None]
    same = all((a.alpha_a, a.alpha_b, a.beta_a, a.beta_b, a.risk) == (b.alpha_a, b.alpha_b, b.beta_a, b.beta_b, b.risk)
               for a, b in zip(tm.points, tp.points)) and len(tm.points) == len(tp.points)
    bound = max((abs(a.risk_bound - b.risk_bound) / b.risk_bound if b.risk_bound > 0 else
                 (0.0 if a.risk_bound == 0 else math.inf)) for a, b in zip(tm.points, tp.points))
    med = {o: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for o, r in runs.items()}
    return {"d": d, "steps": steps, "dps": INTEGRAL_DPS, "order": TAYLOR_ORDER, "repeats": REPEATS["taylor"],
            "medians": med, "integrals": {TAYLOR_ORDER: nm, None: npl}, "same": same, "bound": bound}


QUICK_OUT = Path("results") / "benchmarks_quick.md"
"""Where ``--quick`` writes unless --out is given (relative to the working folder), so a quick try leaves the
tracked page alone."""
