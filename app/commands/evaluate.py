"""``occ-companion values`` and ``occ-companion evaluate``: the closed forms at a chosen precision, and
the exact series (or the integral representation) at a parameter point.

Each ``cmd_*`` receives parsed, already validated options (``app.options`` types) and checks the
remaining combinations (vector lengths, precision against backend, ...) before printing anything.
"""
from __future__ import annotations

import argparse
import json
import math

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
    evaluate.add_argument("--params", metavar="FILE", default=None,
                          help='the parameters from a JSON file {"alpha": [d numbers], "beta": [d numbers]} '
                               "instead of --alpha and --beta, for a d too large for the command line (a list "
                               "left out is zeros)")
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
    if args.params is not None and (args.alpha is not None or args.beta is not None):
        raise UsageError("--params FILE gives alpha and beta: use it or --alpha / --beta, not both")
    given, names = (read_params(args.params), PARAMS_NAMES) if args.params is not None else \
        ({"alpha": args.alpha, "beta": args.beta}, FLAG_NAMES)
    names = {k: v.format(file=args.params) for k, v in names.items()}
    for key, values in given.items():
        if values is not None and len(values) != d:
            raise UsageError(f"{names[key]} must have d = {d} entries (--d {d}), got {len(values)}")
    alpha = given["alpha"] or [0.0] * d
    beta = given["beta"] or [0.0] * d
    integral = args.method == "integral"
    if integral and not integral_applies(setting):
        raise UsageError("--method integral covers --loss squared with p < 1; use --method series")
    if integral and (len(set(alpha[1:])) > 1 or len(set(beta[1:])) > 1):
        raise UsageError(f"--method integral needs {names['alpha']} and {names['beta']} symmetric in the "
                         "unmarked symbols (entries 2 to d equal); use --method series")
    if integral and not abs(alpha[0] - alpha[-1]) <= MAX_GAP:
        raise UsageError(f"--method integral takes |alpha_1 - alpha_2| <= {MAX_GAP:g}; use --method series")
    if integral and args.dps > MAX_INTEGRAL_DPS:
        raise UsageError(f"--method integral takes --dps up to {MAX_INTEGRAL_DPS} (about 20 s there; "
                         f"{args.dps} digits would take far longer)")
    if args.backend == "float" and not integral and any(abs(b) > MAX_FLOAT_BETA for b in beta):
        raise UsageError(f"{names['beta']} entries above {MAX_FLOAT_BETA:g} in size overflow the float backend's "
                         "squared loss; use --backend mp or arb")
    if args.mc:
        check_memory("--mc", 3 * 8 * args.mc * (d + 2), f"a Monte Carlo sample of {args.mc} strings over d = {d}")
    if args.backend == "float" and args.tol < 1e-15 and not integral:
        raise UsageError(f"--tol {args.tol:g} is below what the float backend can honour (1e-15): "
                         "add --backend mp or raise --tol")
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
            print(f"{name} in [" + ", ".join(compressed(grad, lambda x: _ball_text(x, shown))) + "]")
        return _monte_carlo_line(args, setting, alpha, beta)
    digits = args.dps if args.backend == "mp" else 17
    risk, risk_bound = value_and_bound(result.risk, result.risk_bound, digits)
    print(f"risk = {risk}  (|error| <= {risk_bound}, {result.terms} terms)")
    bounds = []

    def text(x) -> str:
        value, bound = value_and_bound(x, result.grad_bound, digits)
        bounds.append(bound)
        return value

    for name, grad in (("grad_alpha", result.grad_alpha), ("grad_beta ", result.grad_beta)):
        print(f"{name} = [" + ", ".join(compressed(grad, text)) + "]")
    grad_bound = max(bounds, key=float)
    print(f"every gradient coordinate: |error| <= {grad_bound} (digits shown: those the bounds support, the "
          "bounds include the rounding of the digits shown; lower --tol for more)")
    return _monte_carlo_line(args, setting, alpha, beta)


FLAG_NAMES = {"alpha": "--alpha", "beta": "--beta"}
PARAMS_NAMES = {"alpha": '"alpha" of --params {file}', "beta": '"beta" of --params {file}'}
"""How the messages name a parameter vector: by its flag, or by its key in the --params file."""


def read_params(path: str) -> dict[str, list[float] | None]:
    """The --params file: a JSON object with the keys "alpha" and "beta" (either may be left out: zeros), each a
    list of finite numbers; {"alpha": list or None, "beta": list or None}.  A file that cannot be read or is not
    of this form is a UsageError naming the file (exit 2, before any work)."""
    def refuse(why: str) -> UsageError:
        return UsageError(f"--params {path}: {why}; expected a JSON object "
                          '{"alpha": [d numbers], "beta": [d numbers]}')

    def no_constant(name: str):
        raise refuse(f"{name} is not a finite number")

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh, parse_constant=no_constant)
    except OSError as exc:
        raise UsageError(f"--params {path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise refuse(f"not JSON ({exc})") from None
    except RecursionError:
        raise refuse("not JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(data), "number")
        raise refuse(f"the top level is a JSON {kind}, not an object")
    unknown = sorted(set(data) - {"alpha", "beta"})
    if unknown:
        raise refuse(f"unknown key {unknown[0]!r}")
    if not data:
        raise refuse('neither "alpha" nor "beta" is given')
    out: dict[str, list[float] | None] = {"alpha": None, "beta": None}
    for key, values in data.items():
        if not isinstance(values, list):
            raise refuse(f'"{key}" is not a list')
        out[key] = [_finite(x, key, k, refuse) for k, x in enumerate(values)]
    return out


def _finite(x, key: str, k: int, refuse) -> float:
    """Entry k (from 0) of the list ``key`` of a --params file as a float, or ``refuse(why)`` raised."""
    try:
        if not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(float(x)):
            return float(x)
    except OverflowError:  # an integer beyond the doubles
        pass
    shown = json.dumps(x)
    raise refuse(f'"{key}" entry {k + 1} is {shown if len(shown) <= 40 else shown[:40] + "..."}, not a finite '
                 "number")


def _ball_text(x, digits: int) -> str:
    """An arb ball with its computed radius (``x.str`` with ``more=True`` shows the radius as computed,
    not as display rounding makes it)."""
    return x.str(digits, radius=True, more=True)


MIN_RUN = 3
"""Shortest run of equal gradient entries that prints as one entry and a note."""


def _same(x, y) -> bool:
    """Whether two gradient entries are the same number: equal values, and for arb balls also equal radii."""
    if x is y:
        return True
    if hasattr(x, "mid") and hasattr(x, "rad"):
        return bool(x.mid() == y.mid() and x.rad() == y.rad())
    return bool(x == y)


def compressed(values: list, text) -> list[str]:
    """The entries of a gradient as ``text`` prints them, except that a run of ``MIN_RUN`` or more consecutive
    equal entries (``_same``; the unmarked symbols of symmetric parameters) prints as its first entry and
    "... (entries i to j equal)", numbered from 1.  Only the entries printed are formatted, so a large d
    costs one comparison per entry.

    >>> compressed([1.0, 2.0, 2.0, 2.0, 3.0, 3.0], str)
    ['1.0', '2.0', '... (entries 2 to 4 equal)', '3.0', '3.0']
    """
    out, start = [], 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and _same(values[end + 1], values[start]):
            end += 1
        if end - start + 1 >= MIN_RUN:
            out += [text(values[start]), f"... (entries {start + 1} to {end + 1} equal)"]
        else:
            out += [text(x) for x in values[start:end + 1]]
        start = end + 1
    return out


def _monte_carlo_line(args: argparse.Namespace, setting, alpha, beta) -> int:
    """The optional Monte Carlo estimate beside the series (``--mc N``); returns the exit status 0."""
    if args.mc:
        from numerics.theorem.montecarlo import estimate

        mc = estimate(setting, alpha, beta, size=args.mc, seed=args.seed)
        print(f"Monte Carlo ({args.mc} strings, seed {args.seed}): risk = {mc.risk:.6g} +- {mc.risk_se:.2g} "
              "(an estimate with its standard error)")
    return 0
