"""Benchmark of exact population evaluation (``occ-companion benchmark``, or ``python3 -m numerics.bench.theorem``).

Measured side by side in one run, at d = 50, 500 and 10^4 (symmetric parameters, squared loss):
the float series, the arb series (certified balls), the integral representation (certified balls at
30 digits, cost independent of d), the numpy double sum over (length n, marked count c) that a user
would write instead (float64, truncated at the float series' tolerance), and numpy Monte Carlo on
(n, c) sized for a standard error of 1e-6 (from a pilot run, extrapolated), with digits of agreement
against the certified reference (the arb series, or the integral where the arb series is out of
reach); also one float evaluation at d = 50, 30-digit evaluations (the integral, the arb series and
mp), the main job as a user runs it (fresh ``python3 -m app run`` processes: CPU seconds, wall
seconds and peak memory, medians of repeats) and the wall time of README's test command.  Every timed
evaluation is given as the median wall and median CPU seconds over a stated number of repeats, and every
value with only the digits its own error supports (``_rounded``).  Prints a table and writes
docs/benchmarks.md (``ROWS`` says what each row computes: the series and integral rows compute the risk and
its gradient, the numpy baselines the risk only).
Timings on a shared machine: CPU seconds hold up better than wall seconds; read both as orders of
magnitude and as ratios.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import shlex
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
"""Monte Carlo pilot size of ``run(tiny=True)``."""
DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"


ROWS = {
    "arb series (certified)": "risk and gradient: the series over (n, c) classes in ball arithmetic (python-flint "
                              "arb): balls that contain the exact risk and gradient, truncation tail included",
    "arb integral, 30 digits (certified)": "risk and gradient: the integral representation (three one-dimensional "
                                           "arb integrals, docs/integral.md): certified balls, cost independent of d",
    "float series (estimate)": "risk and gradient: the suite's float64 series (numerics.theorem.series) with its error "
                               "estimate; the enumeration is built once per d (build s) and reused for every "
                               "evaluation",
    "numpy double sum (float64)": "risk only: what a numpy user would write instead, the sum over lengths n <= N "
                                  "and marked counts c <= C(n) of geometric x binomial weights (scipy.stats) times "
                                  "the loss at (n, c), truncated where the omitted mass is below the float series' "
                                  "tol; the terms and their weights are built once per d (build s) and reused for "
                                  "every evaluation, as for the series",
    "numpy Monte Carlo on (n, c) (pilot)": "risk only: lengths n and marked counts c drawn directly (n geometric, c "
                                           "binomial: the risk at symmetric parameters depends on nothing else), the "
                                           "sample mean of the loss and its standard error; the size for SE 1e-6 is "
                                           "extrapolated from the pilot",
}
"""What each row of the first table computes (printed under it), all at the same point.  The series and
integral rows compute the risk and its gradient (``evaluate_symmetric`` has no risk-only path), the numpy
double sum and Monte Carlo the risk only: a time ratio of a numpy row to a series row is conservative for
the suite (the series does more work)."""

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


def _rounded(x: float, bound: float) -> tuple[str, str]:
    """``app.render.formatting.value_and_bound`` at 17 digits: x with only the digits ``bound`` supports, and the
    bound to print beside it (the rule is the CLI's, stated once there; imported here, where the page is
    rendered, so that computing in this module does not load the presentation layer)."""
    from app.render.formatting import value_and_bound

    return value_and_bound(x, bound, 17)


def _off(x, ref: str, ref_radius: float) -> float:
    """|x - reference| plus the reference's radius: x's error, as measured against the certified reference."""
    with mpmath.workdps(40):
        return float(abs(mpmath.mpf(x) - mpmath.mpf(ref))) + ref_radius


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


def _verdict(ok: bool | None) -> str:
    return "-" if ok is None else "yes" if ok else "**no**"


def _process_row(label: str, args: list[str], target: str, repeat: int = 3, cpu_s: float | None = None,
                 peak_mb: float | None = None, wall_s: float | None = None) -> str:
    """One main-job row; its target met when the command exited 0 and each median the target names is under
    it: CPU seconds ``cpu_s``, wall seconds ``wall_s``, peak resident memory ``peak_mb``."""
    r = run_process(args, repeat, warm=label == "run --d 50 --no-plot")  # the first row warms the cache
    status = "" if r["status"] == 0 else f" (exit {r['status']})"
    limits = [(r["cpu"], cpu_s), (r["wall"], wall_s), (r["peak_mb"], peak_mb)]
    ok = None if all(lim is None for _, lim in limits) else (
        r["status"] == 0 and all(lim is None or x < lim for x, lim in limits))
    return (f"| `{label}` | {r['cpu']:.2f}{status} | {r['wall']:.2f} | {r['peak_mb']:.0f} | {r['repeat']} | "
            f"{target} | {_verdict(ok)} |")


TEST_COMMAND = ("-m", "pytest", "-q", "-n", "auto", "-m", "slow or not slow", "checks", "tests")
"""README's test command (run from the checkout): every tier, the ``slow`` one included."""

TIERS_HEADING = "## Test tiers"
"""The page's hand-maintained section of each test tier's time (``kept_tiers_section``)."""


def suite_seconds(cold: bool = False) -> str:
    """Wall time of README's test command in a fresh process, with its summary line; ``cold`` points the
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
    return f"{seconds:.1f} s ({last.strip('= ')})"


def carried_suite_section(doc: Path) -> list[str]:
    """The "Test command" section of the page ``doc`` being replaced, marked as carried over (``--keep-suite``:
    the suite is not run again, e.g. on a machine shared with other jobs, where it would also slow them)."""
    import re

    text = doc.read_text() if doc.exists() else ""
    section = re.search(r"^## Test command\n.*?(?=^## |\Z)", text, re.S | re.M)
    date = re.search(r"^Date (\S+?);", text, re.M)
    if section is None:
        return ["## Test command", "", "Not measured (`--keep-suite`, and the replaced page had no figures).", ""]
    body = section.group(0).rstrip().splitlines()
    if any(line.startswith("Carried over from") for line in body):  # carried before: its note names the source
        return [*body, ""]
    when = f" of {date.group(1)}" if date else ""
    return [body[0], "", f"Carried over from the page{when} that this one replaces: `--keep-suite` did not run "
            "the suite again.", *body[1:], ""]


def kept_tiers_section(doc: Path) -> list[str]:
    """The "Test tiers" section of the page ``doc`` being replaced, as it stands (measured and written by hand:
    the tiers are timed apart from this benchmark), or no lines when that page has none."""
    import re

    text = doc.read_text() if doc.exists() else ""
    section = re.search(rf"^{TIERS_HEADING}\n.*?(?=^## |\Z)", text, re.S | re.M)
    return [] if section is None else [*section.group(0).rstrip().splitlines(), ""]


def _digits(x, ref) -> str:
    """Decimal digits of agreement of x with ref."""
    with mpmath.workdps(40):
        diff = abs(float(mpmath.mpf(x) - mpmath.mpf(ref)))
    return ">16" if diff == 0 else f"{-math.log10(diff / max(abs(float(ref)), 1e-300)):.1f}"


def _arb_str(ball, digits: int = 20) -> str:
    """The ball to ``digits`` digits (the printed radius includes the rounding of the midpoint)."""
    return ball.str(digits, radius=True)


def _invocation() -> str:
    """The command that runs this benchmark, as this process was started: ``python3 -m numerics.bench.theorem``
    (numpy with OpenBLAS's default threads) or the command line's ``occ-companion benchmark`` (one thread)."""
    return ("python3 -m numerics.bench.theorem" if os.path.basename(sys.argv[0] if sys.argv else "") == "benchmark.py"
            else "occ-companion benchmark")


def _blas_threads() -> str:
    """numpy's BLAS libraries in this process and their threads (threadpoolctl), e.g. ``openblas 1``."""
    from threadpoolctl import threadpool_info

    found = [f"{i['internal_api']} {i['num_threads']}" for i in threadpool_info()
             if i.get("user_api") == "blas" and "numpy" in i.get("filepath", "")]
    return ", ".join(found) or "none found"


def run(dims=(50, 500, 10_000), quick: bool = False, tiny: bool = False, keep_suite: bool = False) -> list[str]:
    """Run the benchmark; returns the Markdown lines of docs/benchmarks.md.  ``tiny`` (a smoke size for tests,
    a few seconds: its times mean nothing) keeps only the first table, with a Monte Carlo pilot of
    ``TINY_MC`` strings, and the recorded experiment runs.  ``keep_suite``: the test-command figures are carried
    over from the page being replaced (``carried_suite_section``), the suite is not run."""
    import flint
    from threadpoolctl import threadpool_limits

    from numerics.bench.engine import dgemm_rate

    with threadpool_limits(limits=1):
        gemm = dgemm_rate()[1]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{_invocation()}` (do not edit by hand).",
        f"Date {datetime.date.today()}; {os.cpu_count()} cores ({platform.machine()}), Python "
        f"{platform.python_version()}, numpy {np.__version__}, python-flint {flint.__version__}, "
        f"mpmath {mpmath.__version__}.  Times on a shared machine: the tables of evaluations give the median wall "
        "and the median CPU seconds (of this process) over the repeats in each row, the main job CPU and wall "
        "seconds of fresh processes.",
        f"This host's speed: a 1000 x 1000 double matrix product on one BLAS thread ran at {gemm:.1f} GFLOP/s "
        "(process CPU time, median of 5, at the start of the run).  Every time below depends on the host, and "
        "the machines these pages are made on are shared and vary: compare two dates' pages by this rate, and "
        "read a target as met or missed on this host.",
        f"numpy's BLAS in this process: {_blas_threads()} thread(s) (OPENBLAS_NUM_THREADS "
        f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')} here; `occ-companion` and `python3 -m app` load "
        "numpy on one BLAS thread unless it, GOTO_NUM_THREADS or OMP_NUM_THREADS is set, and start the commands "
        "timed below without it, as a user's shell would; `python3 -m numerics.bench.theorem` keeps OpenBLAS's "
        "default).",
        f"Point: alpha = ({POINT[0]}, {POINT[1]}, ...), beta = ({POINT[2]}, {POINT[3]}, ...), squared loss, "
        "balancing p, lengths on {1, 2, ...}.",
        "",
        "## Risk at one point, by method",
        "",
        "Values carry only the digits their own error supports. Arb balls are printed as arb prints them: a "
        "midpoint with no more digits than its radius allows (at most 20 or 32), and the radius. The float "
        "series, the numpy double sum and the Monte Carlo mean are rounded to the last decimal place whose "
        "half-unit is at most their error: the series' error estimate (or its measured distance from the "
        "reference, where larger), the double sum's measured distance from the certified reference, the Monte "
        "Carlo standard error. The series' and the double sum's printed errors include that rounding; the "
        "standard error is printed as estimated.  Build s: the series' first "
        "call (building the enumeration) minus an evaluation; the double sum's terms and weights built; wall, one "
        "call.  Digits vs reference: of the unrounded "
        "value.",
        "",
        "| d | method | value | error (bound / SE) | terms or samples | build s | evaluation wall s | evaluation CPU s "
        "| repeats | digits vs reference |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for d in dims:
        s = Setting(d)
        fl_ev = SeriesEvaluator(s, tol=1e-15 if d <= 500 else 1e-12, max_terms=50_000_000)
        series_module.DISK_CACHE = False  # build s: the enumeration built, not read from the disk cache
        try:
            fl, build = _timed(partial(fl_ev.evaluate_symmetric, *POINT))
        finally:
            series_module.DISK_CACHE = True
        fl, secs, fcpu = _measure(partial(fl_ev.evaluate_symmetric, *POINT), REPEATS["float series"])
        ref = None
        arb_tol = {50: 1e-21, 500: 1e-16}.get(d)
        if arb_tol is not None and not (quick and d > 50):
            ab_ev = SeriesEvaluator(s, context="arb", tol=arb_tol, max_terms=50_000_000)
            ball, abuild = _timed(partial(ab_ev.evaluate_symmetric, *POINT))
            ball, asecs, acpu = _measure(partial(ab_ev.evaluate_symmetric, *POINT), REPEATS["certified"])
            ref, ref_radius = ball.risk.mid().str(40, radius=False), ball.risk_bound
            lines.append(f"| {d} | arb series (certified) | {_arb_str(ball.risk)} | {ball.risk_bound:.1e} (radius; "
                         f"gradient {ball.grad_bound:.1e}) | {ball.terms} | {abuild - asecs:.2f} | {asecs:.3f} | "
                         f"{acpu:.3f} | {REPEATS['certified']} | - |")
        else:
            notes.append(f"d = {d}: arb series skipped (about {fl.terms} terms at ~0.5-1 us per ball operation, "
                         "20 operations per term: minutes and gigabytes of balls); the integral is the reference.")
        integral = IntegralEvaluator(s, dps=30)
        ib, isecs, icpu = _measure(partial(integral.evaluate_symmetric, *POINT), REPEATS["certified"])
        if ref is None:
            ref, ref_radius = ib.risk.mid().str(40, radius=False), ib.risk_bound
            agree = "(reference)"
        else:
            agree = _digits(ib.risk.mid().str(40, radius=False), ref) + (
                " (balls overlap)" if ib.risk.overlaps(ball.risk) else " (balls DISJOINT)")
        lines.append(f"| {d} | arb integral, 30 digits (certified) | {_arb_str(ib.risk, 32)} | {ib.risk_bound:.1e} "
                     f"(radius; gradient {ib.grad_bound:.1e}) | 3 integrals | 0 | {isecs:.4f} | {icpu:.4f} | "
                     f"{REPEATS['certified']} | {agree} |")
        off = _off(fl.risk, ref, ref_radius)
        shown, bound = _rounded(fl.risk, max(fl.risk_bound, off))
        what = "estimate" if fl.risk_bound >= off else f"off the reference; estimate {fl.risk_bound:.1e}"
        lines.append(f"| {d} | float series (estimate) | {shown} | {bound} ({what}) | {fl.terms} | "
                     f"{build - secs:.2f} | {secs:.4f} | {fcpu:.4f} | {REPEATS['float series']} | "
                     f"{_digits(fl.risk, ref)} |")
        ds_terms, dbuild, _ = _measure(partial(double_sum_terms, d, tol=fl_ev.tol))
        (nv, nterms), nsecs, ncpu = _measure(partial(numpy_double_sum, d, tol=fl_ev.tol, terms=ds_terms),
                                             REPEATS["numpy double sum"])
        del ds_terms
        shown, bound = _rounded(nv, _off(nv, ref, ref_radius))
        lines.append(f"| {d} | numpy double sum (float64) | {shown} | {bound} (off the reference; tail mass "
                     f"{fl_ev.tol:.0e}) | {nterms} | {dbuild:.2f} | {nsecs:.4f} | {ncpu:.4f} | "
                     f"{REPEATS['numpy double sum']} | {_digits(nv, ref)} |")
        est, se, size, mcpu, need, extra, mwall = monte_carlo(d, size=TINY_MC if tiny else 2_000_000,
                                                              repeat=REPEATS["Monte Carlo"])
        lines.append(f"| {d} | numpy Monte Carlo on (n, c) (pilot) | {_rounded(est, se)[0]} | {se:.1e} (SE) | {size} | "
                     f"- | {mwall:.2f} | {mcpu:.2f} | {REPEATS['Monte Carlo']} | {_digits(est, ref)} |")
        notes.append(f"d = {d}: per evaluation the numpy double sum takes {nsecs / secs:.3g}x the float series' wall "
                     f"time and {ncpu / fcpu if fcpu > 0 else math.inf:.3g}x its CPU time ({nterms} against {fl.terms} "
                     "terms; each has a one-time build, not counted: the series its enumeration, the double sum its terms' "
                     "weights; the series computes the gradient too). Monte Carlo to SE 1e-6 "
                     f"needs about {need:.2e} strings, extrapolated {extra / 3600:.2g} CPU h from the pilot (not run).")
        print(f"d = {d} done: " + "; ".join(lines[-3:]), file=sys.stderr)
    lines += ["", "What each row computes (all at the same point; the series and integral rows compute the risk and "
              "its gradient, the numpy rows the risk only, so a time ratio of a numpy row to a series row is "
              "conservative for the suite):", ""]
    lines += [f"- {name}: {what}." for name, what in ROWS.items()]
    lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    if tiny:
        return lines + ["", *recorded_experiment_runs(), ""]

    # single-evaluation targets
    ev50 = SeriesEvaluator(Setting(50))
    ev50.evaluate_symmetric(*POINT)
    nf, nc = REPEATS["float single"], REPEATS["certified"]
    resf, per_float, cpu_float = _measure(lambda: ev50.evaluate_symmetric(*POINT), nf)
    arb30 = SeriesEvaluator(Setting(50), context="arb", dps=30, tol=1e-30)
    arb30.evaluate_symmetric(*POINT)
    res30, t30, c30 = _measure(lambda: arb30.evaluate_symmetric(*POINT), nc)
    integral30 = IntegralEvaluator(Setting(50), dps=30)
    resi, ti, ci = _measure(lambda: integral30.evaluate_symmetric(*POINT), nc)
    resi6, ti6, ci6 = _measure(lambda: IntegralEvaluator(Setting(10**6), dps=30).evaluate_symmetric(*POINT), nc)
    arb20 = SeriesEvaluator(Setting(50), context="arb", tol=1e-21)
    arb20.evaluate_symmetric(*POINT)
    res20, t20, c20 = _measure(lambda: arb20.evaluate_symmetric(*POINT), nc)
    lines += [
        "",
        "## Single evaluations at d = 50 (risk and gradient, after the one-time enumeration)",
        "",
        "Median wall and median CPU seconds over the repeats (the same point each time); the targets are wall seconds.",
        "",
        "| what | wall s | CPU s | repeats | target |",
        "|---|---|---|---|---|",
        f"| float, tol 1e-12 ({resf.terms} terms) | {per_float:.5f} | {cpu_float:.5f} | {nf} | < 0.001 |",
        f"| arb, radius {max(res20.risk_bound, res20.grad_bound):.1e} ({res20.terms} terms) | {t20:.3f} | {c20:.3f} | "
        f"{nc} | < 1 |",
        f"| 30 digits: arb integral, radius {max(resi.risk_bound, resi.grad_bound):.1e} (3 integrals) | "
        f"{ti:.4f} | {ci:.4f} | {nc} | < 0.1 |",
        f"| 30 digits: arb integral at d = 10^6, radius {max(resi6.risk_bound, resi6.grad_bound):.1e} | {ti6:.4f} | "
        f"{ci6:.4f} | {nc} | - |",
        f"| 30 digits: arb series, tol 1e-30, radius {max(res30.risk_bound, res30.grad_bound):.1e} "
        f"({res30.terms} terms) | {t30:.3f} | {c30:.3f} | {nc} | - |",
    ]
    if not quick:
        mp15 = SeriesEvaluator(Setting(50), context="mp", dps=30, tol=1e-15)
        mp15.evaluate_symmetric(*POINT)
        resm, tm, cm = _measure(lambda: mp15.evaluate_symmetric(*POINT), nc)
        lines.append(f"| mp at 30 digits, tol 1e-15 ({resm.terms} terms) | {tm:.3f} | {cm:.3f} | {nc} | - |")
    lines += [
        "",
        "## Main job",
        "",
        "Fresh `python3 -m app` processes as a user runs them (`--quiet --out TMP` added; bytecode cache on, after "
        "one uncounted run): CPU seconds (user + system) and peak resident memory from each process's own rusage, "
        "medians of the repeats; a target is read on what it names: CPU seconds, wall seconds where it says "
        "\"s\" alone (the targets set before CPU time was measured), and the peak memory (MB = 2^20 bytes).",
        "",
        "| command | CPU s | wall s | peak MB | repeats | target | met |",
        "|---|---|---|---|---|---|---|",
        _process_row("run --d 50 --no-plot", ["run", "--d", "50", "--no-plot"], "< 0.6 CPU s", 5 if not quick else 3,
                     cpu_s=0.6),
        _process_row("run --d 50", ["run", "--d", "50"], "< 3 s", 3, wall_s=3),
        _process_row("run --d 10000", ["run", "--d", "10000"], "< 60 s", 3 if not quick else 1, wall_s=60),
        _process_row("run --d 1000000", ["run", "--d", "1000000"], "< 10 CPU s, < 200 MB", 3 if not quick else 1,
                     cpu_s=10, peak_mb=200),
    ]
    if not quick:
        # the default --max-terms (3e6) protects memory; the series at d = 10^4 needs about 1.1e7 terms
        lines.append(_process_row("run --d 10000 --evaluator series --max-terms 30000000",
                                  ["run", "--d", "10000", "--evaluator", "series", "--max-terms", "30000000"], "-", 1))
    lines += ["", *taylor_model_rows(steps=30 if quick else 300)]
    if not quick:
        if keep_suite:
            lines += ["", *carried_suite_section(DOC)]
        else:
            lines += ["", "## Test command", "", "| command | wall time | target |", "|---|---|---|",
                      f"| `python3 {shlex.join(TEST_COMMAND)}`, warm derivation cache | {suite_seconds()} | < 40 s |",
                      f"| the same, empty derivation cache (a clean CI machine) | {suite_seconds(cold=True)} | < 40 s |"]
        tiers = kept_tiers_section(DOC)
        if tiers:
            lines += ["", *tiers]
    lines += ["", *recorded_experiment_runs(), ""]
    return lines


def taylor_model_rows(d: int = 10**6, steps: int = 300) -> list[str]:
    """The main job's joint plan at d (its default step, ``steps`` steps) on the integral evaluator as ``run``
    builds it (``numerics.theorem.evaluators``: 16 digits, Taylor models of order TAYLOR_ORDER) beside the same
    evaluator computing three integrals at every call, the arms alternating, in this process: CPU and wall
    seconds, integrals computed, and whether every recorded risk, parameter and bound agrees."""
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
    return ["## Taylor models in u (the integral evaluator)", "",
            f"The joint plan of `run --d {d}` ({steps} steps of size 1, every step recorded) on the integral evaluator "
            f"at {INTEGRAL_DPS} digits: with Taylor models of order {TAYLOR_ORDER} (as `run` builds it) and computing "
            f"the three integrals at every call, alternating, medians of {REPEATS['taylor']} repeats in this process.",
            "", "| evaluator | CPU s | wall s | integrals computed |", "|---|---|---|---|",
            f"| three integrals per call | {med[None][1]:.2f} | {med[None][0]:.2f} | {npl} |",
            f"| Taylor models, order {TAYLOR_ORDER} | {med[TAYLOR_ORDER][1]:.2f} | {med[TAYLOR_ORDER][0]:.2f} | {nm} |",
            "", f"CPU ratio {med[None][1] / med[TAYLOR_ORDER][1]:.1f}x. Every recorded parameter and risk "
            + ("is the same double in both" if same else "DIFFERS between the two")
            + ("; so is every recorded bound (an enclosure radius)." if bound == 0 else
               f"; the recorded bounds (enclosure radii) differ by at most {bound:.1e} of themselves.")]


def recorded_experiment_runs(docs: Path = DOC.parent) -> list[str]:
    """The Table 1 and sweep runs behind the committed docs, with the time each recorded (they take minutes to
    an hour, so the benchmark reads their records instead of running them again; per-step engine costs are in
    docs/benchmarks_engine.md)."""
    out = ["## Experiment runs (recorded, not re-run)", "",
           "The Table 1 engine's own costs per step, beside a PyTorch implementation and the FLOP bound, and their "
           "targets are on [benchmarks_engine.md](benchmarks_engine.md).", "",
           "| run | command | commit or start (UTC) | wall | CPU |", "|---|---|---|---|---|"]
    d200 = docs / "example_table1" / "d200"
    for t1, rows_named, cpu_target in ((docs / "example_table1" / "table1.json", False, None),
                                       (docs / "example_table1" / "theory-52" / "table1.json", False, 60.0),
                                       (d200 / "table1.json", True, None)):
        if t1.exists():
            r = json.loads(t1.read_text())
            rows = f", {', '.join(r['rows'])}" if rows_named else ""
            reading = r.get("reading", {}).get("name", "default")
            target = "" if cpu_target is None else (
                f" (the old 52-step protocol; target: under {cpu_target / 60:g} min CPU, met: "
                f"{_verdict(r['cpu_s'] < cpu_target)})")
            out.append(f"| Table 1, {reading} reading, d = {r['config']['d']}{rows}{target} | `{' '.join(r['command'])}` | "
                       f"{(r.get('commit') or '?')[:10]} | {r['elapsed_s'] / 60:.1f} min | {r['cpu_s'] / 60:.1f} min |")
    sw = docs / "sweep" / "sweep.json"
    if sw.exists():
        s = json.loads(sw.read_text())
        for run in s["runs"]:
            if run.get("wall_s") is None:  # a start without an end (sweep_render.invocations)
                out.append(f"| readings sweep (no end record: killed, or still running) | `{' '.join(run['command'])}` | "
                           f"{run.get('started', '?')} | unknown | unknown |")
            elif run.get("trained"):
                out.append(f"| readings sweep ({s['counts']['cells']} cells, {run['trained']} tasks) | "
                           f"`{' '.join(run['command'])}` | {run.get('started', '?')} | {run['wall_s'] / 60:.1f} min | "
                           f"{run['trained_cpu_s'] / 60:.1f} min (units) |")
    mem = d200 / "memory.json"
    if mem.exists():
        m = json.loads(mem.read_text())
        out += ["", f"Memory of the d = 200 run (target: under 2 GB): largest process {m['peak_rss_largest_process_GB']:.2f} "
                f"GB resident; resident sets summed over its processes {m['peak_rss_summed_GB']:.2f} GB at the peak, an "
                f"over-count of shared pages; proportional set size, sampled from second {m['pss_sampled_from_s']} on, "
                f"{m['peak_pss_summed_GB']:.2f} GB. Target met: {_verdict(m['peak_pss_summed_GB'] < 2)}, read on the "
                "peak of the summed PSS, the memory the run held at one moment (a peak shorter than the sampling "
                "period can be missed)"
                + (f"; the processes' resident high-water marks summed, {m['hwm_summed_GB']:.2f} GB, bound the "
                   "resident peak from above and are "
                   + ("under" if m["hwm_summed_GB"] < 2 else "over") + " the target, each mark reached at its own "
                   "moment" if "hwm_summed_GB" in m else "")
                + f". {m['note']}"]
        for w in m.get("reruns", []):
            out[-1] += " Measured since, " + _watched(w)
        earlier = m.get("earlier")
        if earlier:
            out += ["", f"Earlier runs of the same command, on the code before {earlier['until']}: {earlier['note']}"]
            first = earlier.get("first")
            if first:
                out[-1] += (f" The first committed run (at {first['commit'][:10]}): largest process "
                            f"{first['peak_rss_largest_process_GB']:.2f} GB resident; resident sets summed "
                            f"{first['peak_rss_summed_GB']:.2f} GB; PSS, sampled from second {first['pss_sampled_from_s']} "
                            f"on, {first['peak_pss_summed_GB']:.2f} GB. {first['note']}")
            for w in earlier.get("reruns", []):
                out[-1] += " Then, " + _watched(w)
    return out


def _watched(w: dict) -> str:
    """One memory measurement of a whole (or the start of a) run, PSS sampled from its start, as a sentence."""
    span = "a whole rerun" if w.get("whole", True) else f"the first {w['wall_s'] / 60:.0f} min of a rerun"
    period = w.get("sample_period_s", 1.0)
    every = "every second" if period == 1.0 else f"every {period:g} s"
    cpu = f", {w['cpu_s'] / 60:.0f} min CPU" if "cpu_s" in w else ""
    return (f"over {span} (`{' '.join(w['command'])}` at {w['commit'][:10]}, "
            f"{w['wall_s'] / 60:.0f} min wall{cpu}), PSS summed over its processes sampled {every} from the "
            f"start: peak {w['peak_pss_summed_GB']:.2f} GB at second {w['peak_pss_at_s']:.0f} (RSS summed "
            f"{w['peak_rss_summed_GB']:.2f} GB; the processes' resident high-water marks summed "
            f"{w['hwm_summed_GB']:.2f} GB, the largest {w['hwm_largest_GB']:.2f} GB). {w['note']}")


QUICK_OUT = Path("results") / "benchmarks_quick.md"
"""Where ``--quick`` writes unless --out is given (relative to the working folder), so a quick try leaves the
tracked page alone."""


if __name__ == "__main__":  # python3 -m numerics.bench.theorem ARGS is occ-companion benchmark ARGS (app.commands.benchmarks)
    import importlib

    sys.exit(importlib.import_module("app.cli").entry(["benchmark"]))
