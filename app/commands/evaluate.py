"""The subcommands besides the main job: finite, values, evaluate, latex, docs.

Each ``cmd_*`` receives parsed, already validated options (``app.options`` types) and checks the
remaining combinations (vector lengths, precision against backend, ...) before printing anything.
"""
from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import mpmath

from app.checkout import checkout_root
from app.render.formatting import value_and_bound
from app.io import OutputFolder, output_file
from app.options import (
    HelpFormatter,
    UsageError,
    EXACT_NOTE,
    add_setting_options,
    check_memory,
    exact_nonnegative,
    exact_positive,
    float_in,
    fraction,
    int_at_least,
    nonnegative,
    nonnegative_int,
    number_list,
    positive,
    positive_int,
    setting_from_args,
)
from app.progress import progress_factory

FINITE_EPSILON = 1e-2
MAX_VALUES_DPS = 1000
"""Largest --dps of ``values``: every closed form at 1000 digits takes about 10 s here; 10 000 did not finish."""
MAX_INTEGRAL_DPS = 1000
"""Largest --dps of ``evaluate --method integral`` (about 20 s at 1000 digits here)."""
GUARD_DIGITS = 10
MAX_FLOAT_BETA = 1e100
"""Largest |beta| entry of the float backend: the squared loss of larger outputs overflows a double."""
MAX_SAMPLE = 10**9
"""Largest sample size (finite's N_1, N_3, --test-size): beyond it the run takes hours even where memory suffices."""
FINITE_CPU_S_PER_COUNT = 3.5e-7
"""CPU seconds of ``finite`` per seed and per entry of its count matrices ((N_1 + N_3 + --test-size) x d):
2.4e-7 to 3.2e-7 measured at d = 50, 200, 400, 600 (defaults otherwise) on the 2-core development machine
under load; sampling the counts and the softmax weights over them take nine tenths of it."""
FINITE_BYTES_PER_COUNT = (8, 48, 1.2)
"""Memory of ``finite``: 8 bytes per entry of the three count matrices, 48 per entry of the largest (the float
work arrays of one estimate), times 1.2 (the measured peak was 1.13 to 1.17 times this model at d = 200-600)."""
EVALUATE_BYTES = (100e6, 80.0)
"""Peak memory of ``evaluate`` before its series or integral: about 100 MB plus 80 bytes per symbol (its
parameter vectors; measured 0.77 and 7.1 GB at d = 1e7 and 1e8).  A d whose estimate exceeds the available
memory is refused (d = 1e9 gave a MemoryError)."""
MAX_FINITE_CPU_S = 600.0
"""Longest ``finite`` run accepted (its estimate): a check of the finite-sample plan, not an experiment;
``finite --d 1000`` (5 seeds, about 15 CPU minutes) is refused, ``--seeds 1`` (about 3) runs."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register finite, values, evaluate, latex and docs on the subcommand parser ``sub``."""
    fs = sub.add_parser("finite", help="finite-sample three-phase plan (N_1, N_3 = C d ln d by default)",
                        description=cmd_finite.__doc__, formatter_class=HelpFormatter)
    add_setting_options(fs, 50, d_min=3, loss=False, p_one=False)
    fs.add_argument("--epsilon", type=positive, default=FINITE_EPSILON,
                    help="target held-out risk; looser than run's 1e-3 because finitely many samples leave an "
                         "excess risk: at d = 50 and N_1 = N_3 = ceil(30 d ln d) the held-out risk is about 4.5e-3 "
                         "(seeds 0, 1), so 1e-3 needs a larger --constant")
    fs.add_argument("--eta1-frac", type=fraction, default=0.5, help="eta_1 as a fraction of eta1_max, in (0, 1)")
    fs.add_argument("--constant", type=positive, default=30.0, help="C in N_1 = N_3 = ceil(C d ln d)")
    fs.add_argument("--n1", type=positive_int, default=None,
                    help="strings for phases 1-2 (default: ceil(C d ln d))")
    fs.add_argument("--n3", type=positive_int, default=None, help="fresh strings for phase 3 (default: ceil(C d ln d))")
    fs.add_argument("--seeds", type=positive_int, default=5, help="number of seeds (runs) to try")
    fs.add_argument("--seed", type=nonnegative_int, default=0, help="first seed; runs use seed, seed + 1, ...")
    fs.add_argument("--test-size", type=int_at_least(2), default=100_000,
                    help="held-out strings per seed for the risk estimate and its standard error")
    fs.add_argument("--quiet", action="store_true", help="no progress bars (they appear only on a terminal)")
    fs.set_defaults(func=cmd_finite)

    va = sub.add_parser("values", help="every derived expression evaluated by mpmath at a chosen precision",
                        description=cmd_values.__doc__, formatter_class=HelpFormatter)
    add_setting_options(va, 50, d_min=3, loss=False, p_one=False)
    va.add_argument("--dps", type=int_at_least(5, MAX_VALUES_DPS, why="higher precision takes minutes"), default=30,
                    help=f"significant digits, in [5, {MAX_VALUES_DPS}] (evaluated with {GUARD_DIGITS} guard digits, "
                         "so the last digit printed is correctly rounded)")
    va.add_argument("--eta1", type=exact_positive, default=None,
                    help=f"phase-1 step eta_1, in (0, eta1_max) (eta1_max = d at the balancing p), {EXACT_NOTE}")
    va.add_argument("--eta2", type=exact_nonnegative, default=None, help=f"phase-2 step eta_2, >= 0, {EXACT_NOTE}")
    va.add_argument("--epsilon", type=exact_positive, default=None, help=f"target risk epsilon, > 0, {EXACT_NOTE}")
    va.set_defaults(func=cmd_values)

    evaluate = sub.add_parser("evaluate", help="exact series risk and gradients at a parameter point",
                              description=cmd_evaluate.__doc__, formatter_class=HelpFormatter)
    add_setting_options(evaluate, 5)
    evaluate.add_argument("--alpha", type=number_list, default=None,
                          help="attention weights, d comma-separated numbers (default: zeros)")
    evaluate.add_argument("--beta", type=number_list, default=None,
                          help="output weights, d comma-separated numbers (default: zeros)")
    evaluate.add_argument("--backend", choices=["float", "mp", "arb"], default="float",
                          help="float (numpy doubles) or mp (mpmath at --dps digits): values with an error "
                               "estimate; arb (python-flint balls): enclosures of the exact values")
    evaluate.add_argument("--method", choices=["series", "integral"], default="series",
                          help="series: the enumerated series in the --backend context; integral: three arb "
                               "integrals at --dps digits (squared loss, p < 1, parameters symmetric in the "
                               "unmarked symbols; cost independent of d; --backend, --tol and --max-terms do "
                               "not apply)")
    evaluate.add_argument("--tol", type=float_in(0, 1), default=1e-12,
                          help="target omitted probability mass of the series, in (0, 1); >= 1e-15 for the float "
                               "backend. Only the digits the resulting error bound supports are printed")
    evaluate.add_argument("--dps", type=int_at_least(15, 10_000), default=30,
                          help="working digits of the mp backend and of --method integral")
    evaluate.add_argument("--max-terms", type=positive_int, default=3_000_000,
                          help="largest series enumeration allowed")
    evaluate.add_argument("--mc", type=nonnegative_int, default=0,
                          help="also a Monte Carlo estimate from this many strings (0: none)")
    evaluate.add_argument("--seed", type=nonnegative_int, default=0, help="Monte Carlo seed")
    evaluate.set_defaults(func=cmd_evaluate)

    lx = sub.add_parser("latex", help="export the derived formulas as a standalone LaTeX document",
                        description=cmd_latex.__doc__, formatter_class=HelpFormatter)
    lx.add_argument("--lengths", choices=["positive", "nonnegative"], default="positive", help="length law")
    lx.add_argument("--only", default="", help="comma-separated derivation keys as in docs/derivations.md (default: all)")
    lx.add_argument("--out", default="-", help="file to write (- for stdout)")
    lx.set_defaults(func=cmd_latex)

    dc = sub.add_parser("docs", help="regenerate docs/derivations.md and README's claims block (or --check them)",
                        description=cmd_docs.__doc__, formatter_class=HelpFormatter)
    dc.add_argument("--check", action="store_true", help="only check that they are current (exit 1 when stale)")
    dc.add_argument("--root", type=Path, default=None,
                    help="repository checkout to work on (default: the checkout this package runs from)")
    dc.set_defaults(func=cmd_docs)


# ------------------------------------------------------------------------------------------------
def cmd_finite(args: argparse.Namespace) -> int:
    """Finite-sample three-phase plan: phases 1-2 on N_1 strings, phase 3 on N_3 fresh strings, at
    N_1 = N_3 = ceil(C d ln d) unless given; held-out risk per seed.  Exits 1 unless every seed
    reaches the target (held-out mean + 3 standard errors <= floor + --epsilon; the floor is 0 under
    the default length law)."""
    from numerics.theorem.evaluators import population_evaluator
    from numerics.theorem.finite_sample import d_log_d, three_phase_finite
    from numerics.theorem.regime import regime_plan

    setting = setting_from_args(args)
    default_n = args.constant * setting.d * math.log(setting.d)
    if (args.n1 is None or args.n3 is None) and not default_n <= MAX_SAMPLE:
        raise UsageError(f"--constant {args.constant:g}: N = ceil(C d ln d) = {default_n:.3g} strings exceeds "
                         f"{MAX_SAMPLE:.0e}; lower --constant or give --n1 and --n3")
    N_1 = args.n1 if args.n1 is not None else d_log_d(setting.d, args.constant)
    N_3 = args.n3 if args.n3 is not None else d_log_d(setting.d, args.constant)
    for flag, n in (("--n1", N_1), ("--n3", N_3), ("--test-size", args.test_size)):
        if n > MAX_SAMPLE:
            raise UsageError(f"{flag}: {n} strings exceeds {MAX_SAMPLE:.0e}; use fewer")
    # each sample is a strings x d matrix of counts (int64); an estimate adds float work arrays of its shape
    counts = (N_1 + N_3 + args.test_size) * setting.d
    per_count, largest, margin = FINITE_BYTES_PER_COUNT
    check_memory("--d, --n1, --n3, --test-size, --constant",
                 margin * (per_count * counts + largest * max(N_1, N_3, args.test_size) * setting.d),
                 f"the samples of N_1 + N_3 + test = {N_1 + N_3 + args.test_size} strings over d = {setting.d} symbols")
    cpu_s = args.seeds * counts * FINITE_CPU_S_PER_COUNT
    if cpu_s > MAX_FINITE_CPU_S:
        raise UsageError(f"--d {setting.d} with N_1 = {N_1}, N_3 = {N_3}, --test-size {args.test_size} and --seeds "
                         f"{args.seeds}: about {cpu_s / 60:.0f} CPU minutes ({counts:.3g} counts per seed at about "
                         f"{FINITE_CPU_S_PER_COUNT:.1e} s each), more than finite's limit of "
                         f"{MAX_FINITE_CPU_S / 60:.0f} min; lower --seeds, --d, --constant (or --n1, --n3) or --test-size")
    reg = regime_plan(setting, args.epsilon, eta1_frac=args.eta1_frac, evaluator=population_evaluator(setting))
    target = args.epsilon + reg.floor
    print(f"setting: {setting.describe()}; eta_1={reg.eta_1:.4g}, eta_2={reg.eta_2:.4g}, eta_3=1, T={reg.T_min}, "
          f"N_1={N_1}, N_3={N_3}; about {cpu_s:.2g} CPU s", file=sys.stderr)
    progress = progress_factory(args.quiet)
    hits = 0
    for k in range(args.seeds):
        with warnings.catch_warnings():  # a 1-string training sample has no spread: numpy warns, nothing is wrong
            warnings.simplefilter("ignore", RuntimeWarning)
            run = three_phase_finite(setting, reg.eta_1, reg.eta_2, 1.0, reg.T_min, N_1, N_3, seed=args.seed + k,
                                     test_size=args.test_size, progress=progress)
        hits += run.test_risk + 3 * run.test_se <= target
        print(f"seed {run.seed}: held-out risk {run.test_risk:.5g} +- {run.test_se:.2g} (train {run.train_risk:.5g})")
    goal = f"{args.epsilon:g}" if reg.floor == 0 else f"floor + epsilon = {reg.floor:.3g} + {args.epsilon:g}"
    print(f"{hits}/{args.seeds} seeds reach risk <= {goal} (held-out mean + 3 SE)")
    return 0 if hits == args.seeds else 1


def cmd_values(args: argparse.Namespace) -> int:
    """Every derived expression of the catalogue evaluated by mpmath at --dps digits; expressions
    that need eta_1, eta_2 or epsilon are shown once those flags are given."""
    from numerics.theorem.closed_forms import ClosedForms

    setting = setting_from_args(args)
    if args.eta1 is not None:
        top = float(ClosedForms(setting).eta1_max())
        if not args.eta1 < top:
            raise UsageError(f"--eta1 must lie in (0, eta1_max) = (0, {top:.6g}) for this setting, got {args.eta1:g}")
    given = {k: v for k, v in (("eta_1", args.eta1), ("eta_2", args.eta2), ("epsilon", args.epsilon)) if v is not None}
    print(f"setting: {setting.describe()}; {args.dps} significant digits")
    for key, title, val, missing in ClosedForms(setting, dps=args.dps + GUARD_DIGITS).all(**given):
        shown = "(needs " + ", ".join("--" + m.replace("_", "") for m in missing) + ")" if val is None \
            else mpmath.nstr(val, args.dps)
        print(f"{key:<18} {shown}    # {title.replace('`', '')}")  # the backticks mark formulas (app.render.latex)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Exact series risk and gradients at (alpha, beta), with their error bounds, printed to the
    digits the bounds support (or, with --method integral, as arb balls from the integral
    representation); optionally a Monte Carlo estimate beside them."""
    from numerics.theorem.evaluators import integral_applies
    from numerics.theorem.integral import MAX_GAP
    from numerics.theorem.series import SeriesEvaluator

    setting = setting_from_args(args)
    d = setting.d
    check_memory("--d", EVALUATE_BYTES[0] + EVALUATE_BYTES[1] * d, f"evaluating at d = {d}")
    for flag, values in (("--alpha", args.alpha), ("--beta", args.beta)):
        if values is not None and len(values) != d:
            raise UsageError(f"{flag} must have d = {d} entries (--d {d}), got {len(values)}")
    integral = args.method == "integral"
    if integral and not integral_applies(setting):
        raise UsageError("--method integral covers --loss squared with p < 1; use --method series")
    if integral and (len(set((args.alpha or [0.0] * d)[1:])) > 1 or len(set((args.beta or [0.0] * d)[1:])) > 1):
        raise UsageError("--method integral needs --alpha and --beta symmetric in the unmarked symbols "
                         "(entries 2 to d equal); use --method series")
    if integral and args.alpha and not abs(args.alpha[0] - args.alpha[-1]) <= MAX_GAP:
        raise UsageError(f"--method integral takes |alpha_1 - alpha_2| <= {MAX_GAP:g}; use --method series")
    if integral and args.dps > MAX_INTEGRAL_DPS:
        raise UsageError(f"--method integral takes --dps up to {MAX_INTEGRAL_DPS} (about 20 s there; "
                         f"{args.dps} digits would take far longer)")
    if args.backend == "float" and not integral and any(abs(b) > MAX_FLOAT_BETA for b in args.beta or []):
        raise UsageError(f"--beta entries above {MAX_FLOAT_BETA:g} in size overflow the float backend's squared loss; "
                         "use --backend mp or arb")
    if args.mc:
        check_memory("--mc", 3 * 8 * args.mc * (d + 2), f"a Monte Carlo sample of {args.mc} strings over d = {d}")
    if args.backend == "float" and args.tol < 1e-15 and not integral:
        raise UsageError(f"--tol {args.tol:g} is below what the float backend can honour (1e-15): "
                         "add --backend mp or raise --tol")
    alpha = args.alpha or [0.0] * d
    beta = args.beta or [0.0] * d
    if integral:
        from numerics.theorem.integral import IntegralEvaluator

        evaluator = IntegralEvaluator(setting, dps=args.dps)
        how = "three arb integrals"
    else:
        evaluator = SeriesEvaluator(setting, backend=args.backend, tol=args.tol, dps=args.dps,
                                    max_terms=args.max_terms)
        how = "{} series terms"
    result = evaluator.evaluate(alpha, beta)
    print(f"setting: {setting.describe()}")
    if result.certified:
        shown = min(args.dps, 40) if integral else 20
        print(f"risk in {result.risk.str(shown, radius=True)}  (arb ball: an enclosure of the exact risk, "
              f"{how.format(result.terms)})")
        for name, grad in (("grad_alpha", result.grad_alpha), ("grad_beta ", result.grad_beta)):
            print(f"{name} in [" + ", ".join(_ball_text(x, shown) for x in _compressed(grad)) + "]")
        return _monte_carlo_line(args, setting, alpha, beta)
    digits = args.dps if args.backend == "mp" else 17
    risk, risk_bound = value_and_bound(result.risk, result.risk_bound, digits)
    print(f"risk = {risk}  (|error| <= {risk_bound}, {result.terms} terms)")
    shown = {name: [value_and_bound(x, result.grad_bound, digits) for x in grad]
             for name, grad in (("grad_alpha", result.grad_alpha), ("grad_beta ", result.grad_beta))}
    for name, pairs in shown.items():
        print(f"{name} = [" + ", ".join(v for v, _ in pairs) + "]")
    grad_bound = max((p for pairs in shown.values() for p in pairs), key=lambda vb: float(vb[1]))[1]
    print(f"every gradient coordinate: |error| <= {grad_bound} (digits shown: those the bounds support, the "
          "bounds include the rounding of the digits shown; lower --tol for more)")
    return _monte_carlo_line(args, setting, alpha, beta)


def _ball_text(x, digits: int) -> str:
    """An arb ball with its computed radius (``x.str`` with ``more=True`` shows the radius as computed,
    not as display rounding makes it)."""
    return x if isinstance(x, str) else x.str(digits, radius=True, more=True)


def _compressed(values: list) -> list:
    """The entries of a gradient; more than 6 with entries 2..d identical (symmetric parameters) print as
    the first, the second and "... (entries 2 to d equal)"."""
    if len(values) > 6 and all(v.mid() == values[1].mid() and v.rad() == values[1].rad() for v in values[2:]):
        return [values[0], values[1], f"... (entries 2 to {len(values)} equal)"]
    return values


def _monte_carlo_line(args: argparse.Namespace, setting, alpha, beta) -> int:
    """The optional Monte Carlo estimate beside the series (``--mc N``); returns the exit status 0."""
    if args.mc:
        from numerics.theorem.montecarlo import estimate

        mc = estimate(setting, alpha, beta, size=args.mc, seed=args.seed)
        print(f"Monte Carlo ({args.mc} strings, seed {args.seed}): risk = {mc.risk:.6g} +- {mc.risk_se:.2g} "
              "(an estimate with its standard error)")
    return 0


def cmd_latex(args: argparse.Namespace) -> int:
    """A standalone LaTeX document of the derived formulas (all, or the --only keys)."""
    from app.render.latex import latex_document

    keys = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else None
    if args.only and not keys:
        raise UsageError(f"--only {args.only!r} names no key; give comma-separated keys as in docs/derivations.md "
                         "or leave --only out for all")
    if args.out == "-":
        sys.stdout.write(latex_document(args.lengths, keys))
        return 0
    folder, name = output_file(args.out, result="latex", example="grads.tex")
    with folder as out:  # checked and locked before rendering
        path = out.write_text(name, latex_document(args.lengths, keys))
    print(f"wrote {path}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    """Regenerate docs/derivations.md and the claims block of README.md in the repository checkout
    (never in the working directory), or with --check report which of them are stale."""
    from app.render.report import generated_docs, stale_docs

    root = args.root.resolve() if args.root is not None else checkout_root()
    if not root.is_dir():
        raise UsageError(f"--root {args.root}: no such folder (give a checkout of the repository)")
    if not (root / "README.md").is_file() or not (root / "docs").is_dir():
        raise UsageError(f"--root {args.root}: not a checkout of the repository (no README.md and docs/ there)")
    if args.check:
        stale = stale_docs(root)
        for path in stale:
            print(f"{path} is stale: run `occ-companion docs`", file=sys.stderr)
        if not stale:
            print(f"{root / 'docs/derivations.md'} and the claims block of {root / 'README.md'} are up to date")
        return 1 if stale else 0
    with OutputFolder(root, result="docs", flag="--root") as out:  # checked and locked before rendering
        docs = generated_docs(root)
        changed = {path: text for path, text in docs.items() if not path.exists() or path.read_text() != text}
        if changed:  # both files as one result: a kill leaves the old pair or the new pair
            with out.transaction(marker=False) as tx:
                for path, text in changed.items():
                    tx.write_text(str(path.relative_to(root)), text)
    for path in docs:
        print(f"wrote {path}" if path in changed else f"{path} is up to date")
    return 0
