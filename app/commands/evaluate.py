"""``occ-companion values`` and ``occ-companion evaluate``: the closed forms at a chosen precision, and
the exact series (or the integral representation) at a parameter point.

Each ``cmd_*`` receives parsed, already validated options (``app.options`` types) and checks the
remaining combinations (vector lengths, precision against backend, ...) before printing anything.
"""
from __future__ import annotations

import argparse

import mpmath

from app.render.formatting import value_and_bound
from app.options import (
    HelpFormatter,
    UsageError,
    EXACT_NOTE,
    add_setting_options,
    check_memory,
    exact_nonnegative,
    exact_positive,
    float_in,
    int_at_least,
    nonnegative_int,
    number_list,
    positive_int,
    setting_from_args,
)

MAX_VALUES_DPS = 1000
"""Largest --dps of ``values``: every closed form at 1000 digits takes seconds, ten times as many digits far
longer."""
MAX_INTEGRAL_DPS = 1000
"""Largest --dps of ``evaluate --method integral`` (the integrals' cost grows fast with the digits)."""
GUARD_DIGITS = 10
MAX_FLOAT_BETA = 1e100
"""Largest |beta| entry of the float backend: the squared loss of larger outputs overflows a double."""
EVALUATE_BYTES = (100e6, 80.0)
"""Peak memory of ``evaluate`` before its series or integral: about 100 MB plus 80 bytes per symbol (its
parameter vectors; 0.77 and 7.1 GB at d = 1e7 and 1e8).  A d whose estimate exceeds the available memory
is refused (d = 1e9 does not fit)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register values and evaluate on the subcommand parser ``sub``."""
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
