"""Benchmark of exact population evaluation: ``python3 -m numerics.benchmark [--quick]``.

Measured side by side in one run, at d = 50, 500 and 10^4 (symmetric parameters, squared loss):
the float series, the arb series (certified balls), the integral representation (certified balls at
30 digits, cost independent of d), a naive mpmath double sum over (n, c), and numpy Monte Carlo sized
for a standard error of 1e-6 (from a pilot run, extrapolated when the full run would take minutes),
with digits of agreement against the certified reference (the arb series, or the integral where the
arb series is out of reach); also one float evaluation at d = 50, 30-digit evaluations (the integral,
the arb series and mp), and the main job's wall time (``main_job_seconds``: a fresh
``python3 -m app run`` process, with the default evaluator and with the series forced), and the wall
time of README's test command.  Prints a table and writes docs/benchmarks.md.
Timings are wall-clock on a shared machine: read them as orders of magnitude and as ratios.
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path

import mpmath
import numpy as np

from theory.setting import Setting

from .integral import IntegralEvaluator
from .series import SeriesEvaluator

POINT = (2.3, -0.1, 1.5, -0.9)  # alpha_a, alpha_b, beta_a, beta_b
MC_TARGET_SE = 1e-6
DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def _timed(fn, repeat: int = 1):
    """(result, best wall seconds over ``repeat`` calls)."""
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return out, best


def naive_double_sum(d: int, point=POINT, digits: int = 16):
    """Risk by a direct mpmath sum over n <= N and c <= C (binomial terms by their ratio recurrence);
    N and C cut where the omitted mass is below 10^-digits."""
    s = Setting(d)
    with mpmath.workdps(digits + 10):
        p = mpmath.mpf(s.p_value.numerator) / s.p_value.denominator
        aa, ab, ba, bb = (mpmath.mpf(v) for v in point)
        ea, eb, q = mpmath.exp(aa), mpmath.exp(ab), mpmath.mpf(1) / d
        N = math.ceil(digits * math.log(10) / -math.log1p(-float(p))) + 1
        total = mpmath.mpf(0)
        for n in range(1, N + 1):
            w = p * (1 - p) ** (n - 1) * (1 - q) ** n
            cum = mpmath.mpf(0)
            for c in range(n + 1):
                if c:
                    w = w * (n - c + 1) / c * q / (1 - q)
                f = (c * ea * ba + (n - c) * eb * bb) / (c * ea + (n - c) * eb)
                total += w * (f - (1 if c else -1)) ** 2 / 2
                cum += w
                if cum > 1 - mpmath.mpf(10) ** -(digits + 2):
                    break
        return total


def monte_carlo(d: int, point=POINT, budget_entries: int = 20_000_000):
    """Pilot Monte Carlo of the risk; returns (estimate, its SE, pilot size, seconds, size for SE 1e-6,
    extrapolated seconds for that size)."""
    from .montecarlo import estimate

    size = max(1000, min(200_000, budget_entries // d))
    alpha = [point[0]] + [point[1]] * (d - 1)
    beta = [point[2]] + [point[3]] * (d - 1)
    mc, secs = _timed(lambda: estimate(Setting(d), alpha, beta, size=size, seed=1))
    need = math.ceil(size * (mc.risk_se / MC_TARGET_SE) ** 2)
    return mc.risk, mc.risk_se, size, secs, need, secs * need / size


def main_job_seconds(d: int, evaluator: str = "auto") -> str:
    """Wall time of the main job at alphabet size d, as a user runs it: a fresh process of
    ``python3 -m app run --d D --quiet --evaluator E --max-terms 30000000`` (imports, SymPy cache load,
    every plan, JSON and figure)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        # the default --max-terms (3e6) protects memory; the series at d = 10^4 needs about 1.1e7 terms
        proc = subprocess.run([sys.executable, "-m", "app", "run", "--d", str(d), "--quiet", "--out", out,
                               "--evaluator", evaluator, "--max-terms", "30000000"], capture_output=True, text=True)
        seconds = time.perf_counter() - t
    status = "" if proc.returncode == 0 else f" (exit {proc.returncode})"
    return f"{seconds:.2f} s{status}"


TEST_COMMAND = ("-m", "pytest", "-q", "-n", "auto", "checks", "tests")
"""README's test command (run from the checkout)."""


def suite_seconds(cold: bool = False) -> str:
    """Wall time of README's test command in a fresh process, with its summary line; ``cold`` points the
    SymPy derivation cache at an empty folder (as on a clean CI machine)."""
    import subprocess
    import tempfile

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as empty:
        env = dict(os.environ, OCC_CACHE_DIR=empty) if cold else None
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, *TEST_COMMAND], cwd=root, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - t
    last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    return f"{seconds:.1f} s ({last.strip('= ')})"


def _digits(x, ref) -> str:
    """Decimal digits of agreement of x with ref."""
    with mpmath.workdps(40):
        diff = abs(float(mpmath.mpf(x) - mpmath.mpf(ref)))
    return ">16" if diff == 0 else f"{-math.log10(diff / max(abs(float(ref)), 1e-300)):.1f}"


def _arb_str(ball, digits: int = 20) -> str:
    """The ball to ``digits`` digits (the printed radius includes the rounding of the midpoint)."""
    return ball.str(digits, radius=True)


def run(dims=(50, 500, 10_000), quick: bool = False) -> list[str]:
    """Run the benchmark; returns the Markdown lines of docs/benchmarks.md."""
    import flint

    lines = [
        "# Benchmarks",
        "",
        "Generated by `python3 -m numerics.benchmark` (do not edit by hand).",
        f"Date {datetime.date.today()}; {os.cpu_count()} cores ({platform.machine()}), Python "
        f"{platform.python_version()}, numpy {np.__version__}, python-flint {flint.__version__}, "
        f"mpmath {mpmath.__version__}.  Wall-clock times on a shared machine.",
        f"Point: alpha = ({POINT[0]}, {POINT[1]}, ...), beta = ({POINT[2]}, {POINT[3]}, ...), squared loss, "
        "balancing p, lengths on {1, 2, ...}.",
        "",
        "## Risk at one point, by method",
        "",
        "| d | method | value | error (bound / SE) | terms or samples | build s | evaluation s | digits vs reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for d in dims:
        s = Setting(d)
        fl_ev = SeriesEvaluator(s, tol=1e-15 if d <= 500 else 1e-12, max_terms=50_000_000)
        fl, build = _timed(partial(fl_ev.evaluate_symmetric, *POINT))
        fl, secs = _timed(partial(fl_ev.evaluate_symmetric, *POINT), repeat=5)
        ref = None
        arb_tol = {50: 1e-21, 500: 1e-16}.get(d)
        if arb_tol is not None and not (quick and d > 50):
            ab_ev = SeriesEvaluator(s, context="arb", tol=arb_tol, max_terms=50_000_000)
            ball, abuild = _timed(partial(ab_ev.evaluate_symmetric, *POINT))
            ball, asecs = _timed(partial(ab_ev.evaluate_symmetric, *POINT))
            ref = ball.risk.mid().str(40, radius=False)
            lines.append(f"| {d} | arb series (certified) | {_arb_str(ball.risk)} | {ball.risk_bound:.1e} (radius; "
                         f"gradient {ball.grad_bound:.1e}) | {ball.terms} | {abuild - asecs:.2f} | {asecs:.3f} | - |")
        else:
            notes.append(f"d = {d}: arb series skipped (about {fl.terms} terms at ~0.5-1 us per ball operation, "
                         "20 operations per term: minutes and gigabytes of balls); the integral is the reference.")
        integral = IntegralEvaluator(s, dps=30)
        ib, isecs = _timed(partial(integral.evaluate_symmetric, *POINT), repeat=3)
        if ref is None:
            ref = ib.risk.mid().str(40, radius=False)
            agree = "(reference)"
        else:
            agree = _digits(ib.risk.mid().str(40, radius=False), ref) + (
                " (balls overlap)" if ib.risk.overlaps(ball.risk) else " (balls DISJOINT)")
        lines.append(f"| {d} | arb integral, 30 digits (certified) | {_arb_str(ib.risk, 32)} | {ib.risk_bound:.1e} "
                     f"(radius; gradient {ib.grad_bound:.1e}) | 3 integrals | 0 | {isecs:.4f} | {agree} |")
        lines.append(f"| {d} | float series (estimate) | {fl.risk!r} | {fl.risk_bound:.1e} | {fl.terms} | "
                     f"{build - secs:.2f} | {secs:.4f} | {_digits(fl.risk, ref)} |")
        if d == 50:
            nv, nsecs = _timed(partial(naive_double_sum, d))
            lines.append(f"| {d} | naive mpmath double sum (16 digits) | {mpmath.nstr(nv, 20)} | 1e-16 (tail) | - | - | "
                         f"{nsecs:.1f} | {_digits(nv, ref)} |")
        else:
            notes.append(f"d = {d}: naive double sum skipped (its cost grows like d^2: about "
                         f"{(d / 50) ** 2:.0f}x the d = 50 time).")
        est, se, size, msecs, need, extra = monte_carlo(d)
        lines.append(f"| {d} | numpy Monte Carlo (pilot) | {est:.8f} | {se:.1e} (SE) | {size} | - | {msecs:.2f} | "
                     f"{_digits(est, ref)} |")
        notes.append(f"d = {d}: Monte Carlo to SE 1e-6 needs about {need:.2e} strings, extrapolated "
                     f"{extra / 3600:.1f} h from the pilot (not run).")
        print(f"d = {d} done: " + "; ".join(lines[-3:]), file=sys.stderr)
    lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]

    # single-evaluation targets
    ev50 = SeriesEvaluator(Setting(50))
    ev50.evaluate_symmetric(*POINT)
    gaps = [POINT[0] + 1e-3 * k for k in range(200)]
    t = time.perf_counter()
    for g in gaps:
        ev50.evaluate_symmetric(g, *POINT[1:])
    per_float = (time.perf_counter() - t) / len(gaps)
    arb30 = SeriesEvaluator(Setting(50), context="arb", dps=30, tol=1e-30)
    arb30.evaluate_symmetric(*POINT)
    res30, t30 = _timed(lambda: arb30.evaluate_symmetric(*POINT))
    integral30 = IntegralEvaluator(Setting(50), dps=30)
    resi, ti = _timed(lambda: integral30.evaluate_symmetric(*POINT), repeat=3)
    resi6, ti6 = _timed(lambda: IntegralEvaluator(Setting(10**6), dps=30).evaluate_symmetric(*POINT), repeat=3)
    arb20 = SeriesEvaluator(Setting(50), context="arb", tol=1e-21)
    arb20.evaluate_symmetric(*POINT)
    res20, t20 = _timed(lambda: arb20.evaluate_symmetric(*POINT))
    lines += [
        "",
        "## Single evaluations at d = 50 (risk and gradient, after the one-time enumeration)",
        "",
        "| what | seconds | target |",
        "|---|---|---|",
        f"| float, tol 1e-12 (mean of 200, {ev50.evaluate_symmetric(*POINT).terms} terms) | {per_float:.5f} | < 0.001 |",
        f"| arb, radius {max(res20.risk_bound, res20.grad_bound):.1e} ({res20.terms} terms) | {t20:.3f} | < 1 |",
        f"| 30 digits: arb integral, radius {max(resi.risk_bound, resi.grad_bound):.1e} (3 integrals) | "
        f"{ti:.4f} | < 0.1 |",
        f"| 30 digits: arb integral at d = 10^6, radius {max(resi6.risk_bound, resi6.grad_bound):.1e} | {ti6:.4f} | - |",
        f"| 30 digits: arb series, tol 1e-30, radius {max(res30.risk_bound, res30.grad_bound):.1e} "
        f"({res30.terms} terms) | {t30:.3f} | - |",
    ]
    if not quick:
        mp15 = SeriesEvaluator(Setting(50), context="mp", dps=30, tol=1e-15)
        mp15.evaluate_symmetric(*POINT)
        resm, tm = _timed(lambda: mp15.evaluate_symmetric(*POINT))
        lines.append(f"| mp at 30 digits, tol 1e-15 ({resm.terms} terms) | {tm:.3f} | - |")
    lines += [
        "",
        "## Main job",
        "",
        "| d | evaluator | wall time | target |",
        "|---|---|---|---|",
        f"| 50 | auto (series) | {main_job_seconds(50)} | < 3 s |",
        f"| 10000 | auto (integral) | {main_job_seconds(10_000)} | < 60 s |",
    ]
    if not quick:
        lines.append(f"| 10000 | series (forced) | {main_job_seconds(10_000, 'series')} | - |")
        lines += ["", "## Test command", "", "| command | wall time | target |", "|---|---|---|",
                  f"| `python3 {' '.join(TEST_COMMAND)}`, warm derivation cache | {suite_seconds()} | < 40 s |",
                  f"| the same, empty derivation cache (a clean CI machine) | {suite_seconds(cold=True)} | < 40 s |"]
    lines += [
        "",
    ]
    return lines


def main(argv=None) -> int:
    """Command line: run, print, and write docs/benchmarks.md (``--quick``: d = 50 only, no mp)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="d = 50 only, no mp timing")
    ap.add_argument("--out", type=Path, default=DOC)
    args = ap.parse_args(argv)
    lines = run(dims=(50,) if args.quick else (50, 500, 10_000), quick=args.quick)
    text = "\n".join(lines)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
