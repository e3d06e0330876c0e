"""Proofs, for every alphabet size d >= 3, of the closed-form claims the theorems need.

Each ``prove_*`` function returns a ``ProofResult`` (claim, method, domain, the steps shown, PASS or
FAIL).  The functions take the expression (or the parameter) they reason about as an argument, so the
same machinery can be run on a false variant of each claim (``mutation_controls``): a proof procedure
that passes a false claim would be worthless, and the checks make sure every one of them FAILs there.

Methods, all working on real d (so they cover every integer d >= 3); the variable is x = d - 1 > 1:

* ``symbolic``: SymPy identities (``simplify(...) == 0``) and positivity of f on x > a by
  ``prove_positive``: either f is positive term by term after substituting x = a + t, t > 0 (SymPy's
  rule-based sign inference on sums and products of positive terms), or f(a+) >= 0 and f' > 0 on
  (a, oo), recursively (then f(x) = f(a+) + int_a^x f' > 0).  Constant signs (values at a) are decided
  by arb balls, not by floating point.
* ``branch and bound + asymptotic``: arb enclosures of f on real intervals of x (python-flint evaluates
  every function on a ball and returns a ball containing the range), bisected until every box is
  certified positive, on [x_lo, X0]; beyond X0 an explicit lower bound proved by ``prove_positive``.
* One analytic lemma is used, in the form SymPy derives it: Li_2(z) = sum_{k>=1} z^k / k^2 for
  0 <= z <= 1 (SymPy's summation returns exactly this), a series of non-negative terms, so
  0 <= z <= Li_2(z) for z in [0, 1).

Not proved here for all d (checked only at given d by ``occ-companion prove``): anything that needs the
phase-3 series (the curvature behind T_min, the three-phase end point), and the derivation steps of
``theory.symbolic`` themselves (SymPy's summation and solve are trusted as derivations).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import sympy as sp
from flint import arb, ctx, fmpq

from theory import symbolic
X = sp.Symbol("x", positive=True)  # x = d - 1
_T = sp.Symbol("t", positive=True)
_Z = sp.Symbol("z", nonnegative=True)
_K = sp.Symbol("k", integer=True, positive=True)
PREC_BITS = 128
LAW = "positive"  # the length law of the proofs; passed positionally, as theory.symbolic's caches key on it


@dataclass(frozen=True)
class ProofResult:
    """The outcome of one proof: ``status`` is PASS only if every step in ``steps`` was established."""

    claim: str
    method: str
    domain: str
    shown: str
    status: str
    steps: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def _result(claim, method, domain, shown, ok, steps) -> ProofResult:
    return ProofResult(claim, method, domain, shown, "PASS" if ok else "FAIL", tuple(steps))


# ----------------------------------------------------------------------------------------------
# tools


def constant_ball(expr) -> arb:
    """An arb ball of a constant SymPy expression (no free symbols)."""
    from theory.arb_forms import to_arb

    if sp.sympify(expr).free_symbols:
        raise ValueError(f"not a constant: {expr}")
    with ctx.workprec(PREC_BITS):
        return to_arb(expr, {})


def constant_sign(expr) -> int | None:
    """+1, -1 or 0 when decided (0 only by exact SymPy simplification, signs by arb balls), else None."""
    expr = sp.sympify(expr)
    if sp.simplify(expr) == 0:
        return 0
    ball = constant_ball(expr)
    if ball > 0:
        return 1
    if ball < 0:
        return -1
    return None


def _is_zero(expr) -> bool:
    """Exact identity test: the numerator of the expanded expression over a common denominator is 0
    (log and polylog terms are treated as independent symbols, so True is a proof; False may not be)."""
    return sp.expand(sp.numer(sp.together(sp.expand(expr)))) == 0


def _sign_on(expr, x, a) -> int | None:
    """Sign of expr(x) for every x > a, decided factor by factor after x = a + t (t > 0), or None."""
    e = sp.factor(sp.together(sp.sympify(expr).subs(x, a + _T)))
    sign = 1
    for f in sp.Mul.make_args(e):
        if not f.free_symbols:
            s = constant_sign(f)
            if not s:
                return None
        elif f.is_positive or sp.expand(f).is_positive:
            s = 1
        elif f.is_negative or sp.expand(f).is_negative:
            s = -1
        else:
            num, den = sp.fraction(sp.together(f))
            sn = 1 if sp.expand(num).is_positive else -1 if sp.expand(num).is_negative else None
            sd = 1 if sp.expand(den).is_positive else -1 if sp.expand(den).is_negative else None
            if sn is None or sd is None:
                return None
            s = sn * sd
        sign *= s
    return sign


def prove_positive(f, x=X, a=1, depth: int = 4) -> tuple[bool, list[str]]:
    """Show f(x) > 0 for every real x > a.  Returns (shown, the steps).

    f is factored; factors of a sign known on x > a are set aside, and for the rest g (with that sign
    folded in): term-by-term positivity, or g(a+) >= 0 (a limit, its sign by arb or exact zero) and,
    recursively, g' > 0 on (a, oo).  ``depth`` bounds the number of differentiations.
    """
    f = sp.factor(sp.together(sp.sympify(f)))
    if _sign_on(f, x, a) == 1:
        return True, [f"{f} > 0 for x > {a}: every factor positive (x = {a} + t, t > 0)"]
    sign, rest = 1, []
    for fac in sp.Mul.make_args(f):
        s = _sign_on(fac, x, a)
        if s:
            sign *= s
        else:
            rest.append(fac)
    g = sp.expand(sign * sp.Mul(*rest))
    head = f"{f}: the factors other than {g} have sign {sign} for x > {a}; " if g != sp.expand(f) else ""
    if depth == 0:
        return False, [f"{head}could not show {g} > 0 for x > {a}"]
    lim = sp.limit(g, x, a, "+")
    s = constant_sign(lim) if lim.is_finite else None
    if s is None or s < 0:
        return False, [f"{head}{g} at x = {a}+ is {lim}: not shown >= 0"]
    ok, steps = prove_positive(sp.diff(g, x), x, a, depth - 1)
    line = f"{head}{g} > 0 for x > {a}: its value at {a}+ is {lim} >= 0 and its derivative is > 0"
    return ok, ([line] if ok else [f"{head}{g}: derivative not shown positive"]) + steps


def branch_and_bound(f, x, lo: Fraction, hi: Fraction, *, max_boxes: int = 4000) -> tuple[bool, list[str]]:
    """Certify f(x) > 0 on the real interval [lo, hi] by arb enclosures on bisected boxes.

    Fails on a box whose midpoint value is certified <= 0 (a counterexample) or after ``max_boxes``.
    """
    from theory.arb_forms import to_arb

    boxes, certified, worst = [(Fraction(lo), Fraction(hi))], 0, None
    with ctx.workprec(PREC_BITS):
        while boxes:
            if certified + len(boxes) > max_boxes:
                return False, [f"undecided after {max_boxes} boxes on [{lo}, {hi}]"]
            a, b = boxes.pop()
            ball = arb(fmpq(a.numerator, a.denominator)).union(arb(fmpq(b.numerator, b.denominator)))
            val = to_arb(f, {x: ball})
            if val > 0:
                certified += 1
                worst = val if worst is None or val.lower() < worst.lower() else worst
                continue
            m = (a + b) / 2
            at_mid = to_arb(f, {x: arb(fmpq(m.numerator, m.denominator))})
            if at_mid <= 0:
                return False, [f"counterexample: f({m}) = {at_mid.str(10, radius=True)} <= 0"]
            boxes += [(a, m), (m, b)]
    return True, [f"{f} > 0 on x in [{lo}, {hi}]: {certified} boxes certified by arb, smallest lower "
                  f"bound {worst.lower().str(6)}"]


def polylog2_bounds_lemma() -> tuple[bool, str]:
    """SymPy sums sum_{k>=1} z^k/k^2 to Li_2(z) under a convergence condition; the condition is checked
    to hold on the whole interval 0 <= z <= 1 (as a set, not at a sample point).  Non-negative terms
    with first term z then give 0 <= z <= Li_2(z) on [0, 1]."""
    s = sp.summation(_Z**_K / _K**2, (_K, 1, sp.oo))
    branch = s.args[0] if isinstance(s, sp.Piecewise) else (s, sp.true)
    cond = branch[1]
    covered = cond == sp.true or sp.Interval(0, 1).is_subset(cond.as_set())
    ok = branch[0] == sp.polylog(2, _Z) and bool(covered)
    return ok, (f"Li_2(z) = sum_(k>=1) z^k/k^2 where {cond} (SymPy summation), which contains all of [0, 1]: "
                f"{'shown' if covered else 'not shown'}; so 0 <= z <= Li_2(z) for z in [0, 1]")


def li2_lower_bound(q, x, a) -> tuple[bool, list[str]]:
    """Show q(x) > 0 for x > a, where q = coeff * Li_2(1 - 1/x) + rest, by Li_2(z) >= z.

    The bound q >= rest + coeff (1 - 1/x) needs coeff > 0 on x > a, which is shown first (with a
    negative coefficient the inequality turns round and nothing follows)."""
    split = _split_li2(q)
    lemma_ok, lemma = polylog2_bounds_lemma()
    steps = [lemma]
    if split is None or not lemma_ok:
        return False, steps + ["Li_2 does not enter linearly: the lower bound does not apply"]
    coeff, rest = split
    if _sign_on(coeff, x, a) != 1:
        return False, steps + [f"Li_2 coefficient {coeff} not shown positive: the lower bound does not apply"]
    lower = sp.factor(sp.together(rest + coeff * (1 - 1 / x)))
    steps.append(f"q >= {lower} (Li_2 coefficient {coeff} > 0, Li_2(z) >= z)")
    ok, more = prove_positive(lower, x, a)
    return ok, steps + more


def _with_x(expr, p_expr=None):
    """Substitute p = p_expr (default the balancing p*(d) of the default length law), then d = x + 1."""
    p_expr = symbolic.balanced_p(LAW) if p_expr is None else p_expr
    return sp.together(sp.sympify(expr).subs(symbolic.p, p_expr).subs(symbolic.d, X + 1))


# ----------------------------------------------------------------------------------------------
# the claims


@lru_cache(maxsize=None)
def prove_balancing_p(p_expr=None) -> ProofResult:
    """P(y = +1) = 1/2 at p = p_expr (default the derived 1/(d-1)), p in (0, 1), and no other root in
    (0, 1): P(y = -1) is a Moebius function (a p + b) / (c p + e) of p whose denominator keeps one sign
    on [0, 1] and whose determinant a e - b c is nonzero, so it is strictly monotone there. For all real d > 2."""
    p_expr = symbolic.balanced_p(LAW) if p_expr is None else sp.sympify(p_expr)
    pm = symbolic.prob_no_marked(LAW)
    gap = sp.simplify(pm.subs(symbolic.p, p_expr) - sp.Rational(1, 2))
    steps = [f"P(y=-1) - 1/2 at p = {p_expr} simplifies to {gap}"]
    px = p_expr.subs(symbolic.d, X + 1)
    in_range = _sign_on(px, X, 1) == 1 and _sign_on(1 - px, X, 1) == 1
    steps.append(f"0 < p = {px} < 1 for x = d - 1 > 1: {'shown' if in_range else 'not shown'}")
    num, den = (sp.expand(t.subs(symbolic.d, X + 1)) for t in sp.fraction(sp.together(pm)))
    unique = False
    if sp.degree(num, symbolic.p) <= 1 and sp.degree(den, symbolic.p) <= 1:
        a, b = num.coeff(symbolic.p, 1), num.coeff(symbolic.p, 0)
        c, e = den.coeff(symbolic.p, 1), den.coeff(symbolic.p, 0)
        det = sp.factor(a * e - b * c)
        s0, s1 = _sign_on(den.subs(symbolic.p, 0), X, 1), _sign_on(den.subs(symbolic.p, 1), X, 1)
        unique = s0 is not None and s0 == s1 and _sign_on(det, X, 1) in (1, -1)
        steps.append(f"P(y=-1) = ({num}) / ({den}) is Moebius in p; denominator of one sign at p = 0 and p = 1 "
                     f"(linear, so on [0, 1]); determinant {det} nonzero for x > 1: strictly monotone, one root in "
                     f"(0, 1): {'shown' if unique else 'not shown'}")
    else:
        steps.append("P(y=-1) is not a Moebius function of p: uniqueness not shown")
    return _result("balancing_p", "symbolic", "all real d > 2", f"P(y=+1) = 1/2 at p = {p_expr}, the only root in (0, 1)",
                   gap == 0 and in_range and unique, steps)


@lru_cache(maxsize=None)
def prove_phase1_signs(p_expr=None) -> ProofResult:
    """dR/dbeta_a(0) < 0 < dR/dbeta_b(0) at p = p_expr, hence beta1_a > 0 > beta1_b and eta1_max = d."""
    p_expr = symbolic.balanced_p(LAW) if p_expr is None else sp.sympify(p_expr)
    g = symbolic.zero_init_gradients(LAW)
    ga, gb = _with_x(g["grad_beta_a"], p_expr), _with_x(g["grad_beta_b"], p_expr)
    sa, sb = _sign_on(ga, X, 1), _sign_on(gb, X, 1)
    steps = [f"dR/dbeta_a(0) = {ga}: sign {sa}", f"dR/dbeta_b(0) = {gb}: sign {sb}"]
    e1_expr = symbolic.eta1_max(LAW)
    (mx,) = e1_expr.atoms(sp.Max)
    others = [a for a in mx.args if sp.simplify(a - 1 / symbolic.d) != 0]
    largest = len(others) == len(mx.args) - 1 and all(_sign_on(_with_x(1 / symbolic.d - a, p_expr), X, 1) == 1 for a in others)
    steps.append(f"in eta1_max = {e1_expr}: 1/d exceeds {others} for x > 1: {'shown' if largest else 'not shown'}")
    e1 = sp.simplify(_with_x(e1_expr.subs(mx, 1 / symbolic.d), p_expr)) if largest else None
    ok = sa == -1 and sb == 1 and e1 is not None and sp.simplify(e1 - (X + 1)) == 0
    steps.append(f"so eta1_max = {e1} (= d: {'shown' if ok else 'not shown'})")
    return _result("phase1_signs", "symbolic", "all real d > 2",
                   "phase-1 gradient signs (-, +), beta1 = (+, -), eta1_max = d", ok, steps)


@lru_cache(maxsize=None)
def prove_output_floor_positive(c_expr=None) -> ProofResult:
    """c(d) > 0 for all real d > 2 (default: the derived balanced floor c(d))."""
    c_expr = symbolic.uniform_attention_min_risk(LAW) if c_expr is None else sp.sympify(c_expr)
    num, den = sp.fraction(sp.together(c_expr.subs(symbolic.d, X + 1)))
    steps = [f"c = N/D with N = {num}, D = {den} (x = d - 1)"]
    den_ok = _sign_on(den, X, 1) == 1
    steps.append(f"D > 0 for x > 1: {'shown' if den_ok else 'not shown'}")
    num_ok, more = prove_positive(sp.expand(num), X, 1)
    steps += more
    return _result("output_floor_positive", "symbolic (monotonicity)", "all real d > 2", "c(d) > 0",
                   den_ok and num_ok, steps)


@lru_cache(maxsize=None)
def prove_floor_is_infimum(c_expr=None) -> ProofResult:
    """c(d) = inf over beta in R^d of R(0, beta), for all real d > 2 (default: the derived c(d)).

    Steps: (i) at alpha = 0, f = sum_k beta_k c_k / n is linear in beta, so R(0, beta) = E[(f - y)^2]/2
    is a convex quadratic on R^d (an expectation of squares of affine functions); it is invariant under
    permutations of the d - 1 unmarked symbols, so averaging any beta over those permutations gives a
    symmetric beta with no larger risk (Jensen): the infimum over R^d equals the infimum over symmetric
    beta = (beta_a, beta_b, ..., beta_b).  (ii) On that plane R(0, beta) is the derived quadratic
    q(beta_a, beta_b) (checked to be of degree 2); its Hessian H has H_11 > 0 and det H > 0 for x > 1, so q
    is strictly convex with the unique minimiser H^-1 b and minimum q0 - b.H^-1 b / 2.  (iii) That minimum
    equals c_expr identically."""
    c_expr = symbolic.uniform_attention_min_risk(LAW) if c_expr is None else sp.sympify(c_expr)
    ba, bb = symbolic.beta_a, symbolic.beta_b
    poly = sp.Poly(sp.expand(symbolic.uniform_attention_risk(LAW)), ba, bb)
    steps = ["R(0, beta) is an expectation of squares of affine functions of beta (f linear in beta at "
             "alpha = 0): convex on R^d; invariant under permutations of the unmarked symbols, so by Jensen "
             "the infimum over R^d is the infimum over symmetric beta (hand-argued step, stated here)"]
    if poly.total_degree() != 2:
        return _result("floor_is_infimum", "symbolic", "all real d > 2", "c(d) = inf_beta R(0, beta)", False,
                       steps + [f"R(0, beta) on the symmetric plane has degree {poly.total_degree()}, not 2"])
    co = {m: c for m, c in poly.terms()}
    h11, h12, h22 = 2 * co.get((2, 0), 0), co.get((1, 1), 0), 2 * co.get((0, 2), 0)
    b = sp.Matrix([-co.get((1, 0), 0), -co.get((0, 1), 0)])
    H = sp.Matrix([[h11, h12], [h12, h22]])
    ok11, s11 = prove_positive(sp.factor(_with_x(h11)), X, 1)
    okdet, sdet = prove_positive(sp.factor(_with_x(H.det())), X, 1)
    steps += ["H_11 > 0:"] + s11 + ["det H > 0:"] + sdet
    same = False
    if not (ok11 and okdet):  # H may be singular: no minimiser to compare with c(d)
        steps.append("H is not shown positive definite on x > 1: no unique minimiser, identity not checked")
    else:
        minimum = co.get((0, 0), 0) - (b.T * H.inv() * b)[0] / 2
        same = _is_zero(_with_x(minimum - c_expr)) or sp.simplify(_with_x(minimum - c_expr)) == 0
        steps.append(f"q0 - b.H^-1 b / 2 - c(d) = 0 identically: {'shown' if same else 'not shown'}")
    return _result("floor_is_infimum", "symbolic (convex quadratic, Hessian, identity)", "all real d > 2",
                   "c(d) = inf over beta in R^d of R(0, beta), attained at a unique symmetric beta",
                   ok11 and okdet and same, steps)


def _kappa_linear(kappa_expr):
    """kappa = eta_1 * Q(eta_1) / |den| with Q linear in eta_1; returns (Q, steps) or (None, steps)."""
    num, den = sp.fraction(sp.together(sp.expand(_with_x(kappa_expr))))
    sd = _sign_on(den, X, 1)
    poly = sp.Poly(sp.expand(num), symbolic.eta1)
    if sd is None or poly.degree() > 2 or poly.coeff_monomial(1) != 0:
        return None, [f"kappa not of the form eta_1 (A + B eta_1) / den with den of known sign (den = {den})"]
    Q = sp.expand(sd * sp.quo(poly, sp.Poly(symbolic.eta1, symbolic.eta1)).as_expr())
    return Q, [f"kappa = eta_1 Q(eta_1) / |den|, den = {sp.factor(den)} of sign {sd}, Q linear in eta_1"]


def _kappa_endpoints(kappa_expr, range_factor):
    """Common part: Q(0) > 0 symbolically; returns (ok0, Q at eta_1 = range_factor * d, steps)."""
    Q, steps = _kappa_linear(kappa_expr)
    if Q is None:
        return False, None, steps
    ok0, s0 = prove_positive(sp.factor(Q.subs(symbolic.eta1, 0)), X, 1)
    steps += ["Q(0):"] + s0
    return ok0, sp.expand(Q.subs(symbolic.eta1, range_factor * (X + 1))), steps


def _range_label(range_factor: int) -> str:
    return "eta1_max = d" if range_factor == 1 else f"{range_factor} eta1_max = {range_factor} d"


def _split_li2(expr):
    """expr = coeff * Li_2(1 - 1/x) + rest; returns (coeff, rest) or None when Li_2 enters otherwise."""
    li = sp.polylog(2, 1 - 1 / X)
    expr = sp.expand(expr)
    coeff = sp.factor(expr.coeff(li))
    rest = sp.expand(expr - coeff * li)
    return (coeff, rest) if not rest.has(sp.polylog) and not coeff.has(sp.polylog) else None


D_LO = 3
"""The smallest alphabet size of the claims (theory.claims: d >= 3); every all-d proof covers real d >= D_LO."""


@lru_cache(maxsize=None)
def prove_kappa_positive_symbolic(kappa_expr=None, range_factor=1) -> ProofResult:
    """kappa(eta_1) > 0 on 0 < eta_1 <= range_factor * d (eta1_max = d), all real d > 2, via Li_2(z) >= z.

    kappa is linear-times-eta_1 (kappa = eta_1 Q(eta_1) / |den|, Q linear), so it is positive on the
    whole range once Q(0) > 0 and Q(range_factor * d) > 0.  The phase-2 gradient signs are not a separate
    step: theory.symbolic defines kappa = -d/(d-1) dR/dalpha_a(0, beta1) and dR/dalpha_b = -dR/dalpha_a/(d-1)
    (softmax shift invariance), so kappa > 0 is the statement that they are (-, +)."""
    kappa_expr = symbolic.attention_gap_rate(LAW) if kappa_expr is None else sp.sympify(kappa_expr)
    ok0, Qd, steps = _kappa_endpoints(kappa_expr, range_factor)
    okd = False
    if Qd is not None:
        steps.append(f"Q(eta_1 = {_range_label(range_factor)}):")
        okd, more = li2_lower_bound(Qd, X, 1)
        steps += more
    return _result("kappa_positive", "symbolic (linearity in eta_1, Li_2 >= z, monotonicity)", "all real d > 2",
                   f"kappa(eta_1) > 0 for 0 < eta_1 <= {_range_label(range_factor)}, so the phase-2 gradient "
                   "signs are (-, +)", ok0 and okd, steps)


@lru_cache(maxsize=None)
def prove_kappa_positive_bnb(kappa_expr=None, range_factor=1, D0: int = 10) -> ProofResult:
    """Same claim as the symbolic proof, endpoint eta_1 = range_factor * d by a second method:
    arb branch and bound over real d in [D_LO, D0] and, for d >= D0, the bound Li_2 >= 0 plus monotonicity.
    The two pieces cover every real d >= D_LO by construction (the boxes run from x = D_LO - 1 to D0 - 1, where
    the tail starts); the coverage step restates that, and can fail only if those two lines are edited apart."""
    kappa_expr = symbolic.attention_gap_rate(LAW) if kappa_expr is None else sp.sympify(kappa_expr)
    ok0, Qd, steps = _kappa_endpoints(kappa_expr, range_factor)
    okd = False
    box_lo, box_hi = Fraction(D_LO - 1), Fraction(D0 - 1)  # in x = d - 1
    if Qd is not None:
        ok_box, s_box = branch_and_bound(Qd, X, box_lo, box_hi)
        steps += s_box
        split = _split_li2(Qd)
        lemma_ok, lemma = polylog2_bounds_lemma()
        steps.append(lemma)
        ok_tail = False
        if split is not None and lemma_ok and _sign_on(split[0], X, box_hi) == 1:
            steps.append(f"for d >= {D0}: Q >= {sp.factor(split[1])} (Li_2 coefficient > 0, Li_2 >= 0)")
            ok_tail, more = prove_positive(split[1], X, box_hi)
            steps += more
        else:
            steps.append(f"for d >= {D0}: the Li_2 >= 0 bound does not apply")
        covers = box_lo <= D_LO - 1 and box_hi >= D0 - 1
        steps.append(f"pieces x in [{box_lo}, {box_hi}] and x >= {D0 - 1} cover every d >= {D_LO}: "
                     f"{'yes' if covers else 'no'}")
        okd = ok_box and ok_tail and covers
    return _result("kappa_positive", f"branch and bound on d in [{D_LO}, {D0}] (arb) + asymptotic bound for d >= {D0}",
                   f"all real d >= {D_LO}", f"kappa(eta_1) > 0 for 0 < eta_1 <= {_range_label(range_factor)}",
                   ok0 and okd, steps)


@lru_cache(maxsize=None)
def prove_regime_positive(eps_max=12) -> ProofResult:
    """eta1_max = d > 0; u_min(epsilon) > 1 for every epsilon < eps_max (so log u_min > 0 and
    eta2_min = log u_min / kappa > 0, kappa > 0 by ``prove_kappa_positive_symbolic``), for all d >= 3."""
    B2 = sp.factor(_with_x(symbolic.shifted_second_length_moment(LAW)))
    steps = [f"B_2 = {B2} at p = 1/(d-1); u_min^2 = 4 B_2 / epsilon"]
    ok_b2, more = prove_positive(sp.expand(4 * B2 - eps_max), X, 2)
    steps += [f"4 B_2 - {eps_max} >= 0 for x >= 2 (d >= 3):"] + more
    kappa = prove_kappa_positive_symbolic()
    steps.append(f"kappa > 0 on (0, eta1_max): {kappa.status}")
    e1 = prove_phase1_signs()
    steps.append(f"eta1_max = d > 0: {e1.status}")
    return _result("regime_positive", "symbolic (monotonicity) + the kappa and phase-1 proofs", "all d >= 3",
                   f"eta1_max > 0; for epsilon < {eps_max}: log u_min > 0 and eta2_min > 0 (else eta2_min = 0 by the max)",
                   ok_b2 and kappa.passed and e1.passed, steps)


@lru_cache(maxsize=None)
def prove_attention_only(loss: str = "squared", claimed=None) -> ProofResult:
    """At beta = 0, f = 0 on every string for every alpha and d, so grad_alpha = 0 (whatever the loss),
    beta never moves under attention steps, and R(alpha, 0) = E[loss(0, y)]: 1/2 for the squared loss,
    log 2 for the logistic loss.  ``claimed`` is the value the proof is asked to establish (default
    the right one for ``loss``); the controls give a wrong one."""
    if loss not in ("squared", "logistic"):
        raise ValueError(f"loss must be 'squared' or 'logistic', got {loss!r}")
    beta, c, alpha = sp.IndexedBase("beta"), sp.IndexedBase("c"), sp.IndexedBase("alpha")
    k, dd = sp.Symbol("k", integer=True), sp.Symbol("d", integer=True, positive=True)
    f = sp.Sum(beta[k] * c[k] * sp.exp(alpha[k]), (k, 1, dd)) / sp.Sum(c[k] * sp.exp(alpha[k]), (k, 1, dd))
    at_zero = f.replace(lambda e: isinstance(e, sp.Indexed) and e.base == beta, lambda e: sp.Integer(0))
    f0 = sp.simplify(at_zero.doit())
    y = sp.Symbol("y")
    loss_at_0 = (0 - y) ** 2 / 2 if loss == "squared" else sp.log(1 + sp.exp(-y * 0))
    if claimed is None:
        claimed = sp.Rational(1, 2) if loss == "squared" else sp.log(2)
    claimed = sp.sympify(claimed)
    vals = {int(v): sp.simplify(loss_at_0.subs(y, v)) for v in (1, -1)}
    ok = f0 == 0 and all(sp.simplify(v - claimed) == 0 for v in vals.values())
    steps = [f"f at beta = 0: {f0} for every alpha, every d (sum of zero terms)",
             "so df/dalpha = 0, the attention gradient loss'(f) df/dalpha vanishes for any loss, and beta is "
             "never changed: f = 0 for ever",
             f"{loss} loss at f = 0: {vals[1]} for y = +1 and {vals[-1]} for y = -1, so R(alpha, 0) = "
             f"E[loss(0, y)] = {claimed}: {'shown' if ok else 'not shown'}"]
    return _result("attention_only", "symbolic", "all d >= 2, any length law",
                   f"grad_alpha R(alpha, 0) = 0 for every alpha (so an attention-first step leaves alpha = 0), "
                   f"and R stays R(0, 0) = {claimed} ({loss} loss)", ok, steps)


def clear_caches() -> None:
    """Forget every cached proof (the proofs are cached per argument; a test that must see the code as
    it is now, e.g. under a mutation, clears them first)."""
    for fn in list(globals().values()):
        if hasattr(fn, "cache_clear") and getattr(fn, "__module__", "") == __name__:
            fn.cache_clear()


def all_proofs() -> list[ProofResult]:
    """Every all-d proof, in the order docs/proofs.md lists them."""
    return [prove_balancing_p(), prove_phase1_signs(), prove_output_floor_positive(), prove_floor_is_infimum(),
            prove_kappa_positive_symbolic(), prove_kappa_positive_bnb(), prove_regime_positive(),
            prove_attention_only("squared"), prove_attention_only("logistic")]


def kappa_false_near_d3():
    """A false variant of kappa: positive at eta_1 = d - 1, negative at eta_1 = d only for d in [3, 3.1)
    (a proof that starts its boxes at d = 4, or stops at eta_1 = d - 1, passes it)."""
    li = sp.polylog(2, 1 - 1 / (symbolic.d - 1))
    return symbolic.eta1 * (symbolic.d - 2 + symbolic.eta1 * (li / 4 - 2 / (symbolic.d - 1) ** 2))


def kappa_false_at_d():
    """A false variant of kappa: positive on 0 < eta_1 <= d - 1 for every d, negative at eta_1 = d; its
    Li_2 coefficient at eta_1 = d is positive, so only the endpoint decides."""
    li = sp.polylog(2, 1 - 1 / (symbolic.d - 1))
    return symbolic.eta1 * (symbolic.d - sp.Rational(1, 2) - symbolic.eta1 + symbolic.eta1 * li / (4 * symbolic.d))


@lru_cache(maxsize=None)
def li2_step_control() -> ProofResult:
    """The Li_2 >= z step alone on q = 1 - Li_2(1 - 1/x), which is false for large x (Li_2 -> pi^2/6):
    only the check that the Li_2 coefficient is positive stops the bound q >= 1/x."""
    ok, steps = li2_lower_bound(1 - sp.polylog(2, 1 - 1 / X), X, 1)
    return _result("li2_step", "symbolic (Li_2 >= z)", "x > 1", "1 - Li_2(1 - 1/x) > 0", ok, steps)


@lru_cache(maxsize=None)
def li2_tight_control() -> ProofResult:
    """The Li_2 >= z step alone on q = Li_2(z) - z - 1/(100 x), z = 1 - 1/x, which is false near x = 1
    (Li_2(z) - z ~ z^2/4): only the bound Li_2(z) >= z itself, no larger one, refuses it."""
    z = 1 - 1 / X
    ok, steps = li2_lower_bound(sp.polylog(2, z) - z - 1 / (100 * X), X, 1)
    return _result("li2_step", "symbolic (Li_2 >= z)", "x > 1", "Li_2(z) - z - 1/(100 x) > 0", ok, steps)


def mutation_controls() -> list[tuple[str, ProofResult]]:
    """The same proof procedures on false variants of the claims; each must FAIL."""
    c = symbolic.uniform_attention_min_risk(LAW)
    c_log10 = c.replace(sp.log, lambda a: sp.log(a) / sp.log(10))
    kap = symbolic.attention_gap_rate(LAW)
    kap_li2 = kap.replace(sp.polylog, lambda s, z: -sp.polylog(s, z))
    return [
        ("p = 1/d instead of 1/(d-1)", prove_balancing_p(1 / symbolic.d)),
        ("p = 1/(d+2): beta1_b > 0", prove_phase1_signs(1 / (symbolic.d + 2))),
        ("c(d) with log10 instead of ln (c(3) < 0)", prove_output_floor_positive(c_log10)),
        ("c(d) + 1/d^2 as the infimum of R(0, beta)", prove_floor_is_infimum(c + 1 / symbolic.d**2)),
        ("kappa on 0 < eta_1 <= 10 eta1_max (false at d = 3), symbolic", prove_kappa_positive_symbolic(range_factor=10)),
        ("kappa on 0 < eta_1 <= 10 eta1_max, branch and bound", prove_kappa_positive_bnb(range_factor=10)),
        ("kappa with the sign of Li_2 flipped, symbolic", prove_kappa_positive_symbolic(kap_li2)),
        ("kappa with the sign of Li_2 flipped, branch and bound", prove_kappa_positive_bnb(kap_li2)),
        ("a kappa false only at eta_1 = d (true at d - 1), symbolic", prove_kappa_positive_symbolic(kappa_false_at_d())),
        ("a kappa false only at eta_1 = d (true at d - 1), branch and bound", prove_kappa_positive_bnb(kappa_false_at_d())),
        ("a kappa false only for d in [3, 3.1), branch and bound", prove_kappa_positive_bnb(kappa_false_near_d3())),
        ("Li_2 step on 1 - Li_2(1 - 1/x) > 0 (false for large x; coefficient -1)", li2_step_control()),
        ("Li_2 step on Li_2(z) - z - 1/(100 x) > 0, z = 1 - 1/x (false near x = 1)", li2_tight_control()),
        ("u_min > 1 for every epsilon < 13 (false at d = 3)", prove_regime_positive(13)),
        ("R(0, 0) = 1/2 under the logistic loss (it is log 2)", prove_attention_only("logistic", sp.Rational(1, 2))),
    ]


# ----------------------------------------------------------------------------------------------
# docs/proofs.md

USED_BY = {
    "balancing_p": "three_phase (and every claim: the default law's p)",
    "phase1_signs": "three_phase",
    "output_floor_positive": "output_only, attention_then_output",
    "floor_is_infimum": "output_only, attention_then_output",
    "kappa_positive": "three_phase",
    "regime_positive": "three_phase",
    "attention_only": "attention_only, attention_then_output",
}
"""Which claims of theory.claims each all-d proof serves."""

_SERIES = "checked against the series at d = 2..60 (`checks/test_closed_forms_agree.py`, `checks/test_high_precision.py`)"
_SUMS = ("SymPy's summation over the length law, whose convergence condition on the series' ratio "
         "`theory.symbolic._first_branch` drops without a machine check")
CONDITIONS = {
    "balancing_p": f"given the SymPy derivation of P(y = -1) ({_SUMS}), {_SERIES}",
    "phase1_signs": f"given the SymPy derivation of the phase-1 gradients ({_SUMS}), {_SERIES}",
    "output_floor_positive": f"given the SymPy derivation of c(d) ({_SUMS}), {_SERIES}",
    "floor_is_infimum": ("given the SymPy derivation of R(0, beta) on the symmetric plane, checked against the series "
                         "for non-symmetric beta at d = 3..5; the symmetrisation step (convexity + permutation "
                         "invariance, Jensen) is argued by hand"),
    "kappa_positive": f"given the SymPy derivation of kappa ({_SUMS}), {_SERIES}",
    "regime_positive": f"given the SymPy derivation of B_2 and kappa ({_SUMS}), {_SERIES}",
    "attention_only": "none beyond the model's definition (f = sum_k beta_k softmax_k)",
}
"""The conditions each all-d proof rests on (printed in the table of docs/proofs.md)."""

HAND_ARGUED = (
    ("three_phase", "T_min certificate: if the phase-3 start point has gap alpha_a - alpha_b >= log u_min, then "
     "inf over beta of R(alpha, beta) <= floor + epsilon/2 (the u_min lemma)",
     "argued in the docstring of `numerics.theorem.certify.certify_series_items` (u_min from B_2 and the attention "
     "weight bound); not machine-checked: every T_min certificate depends on it"),
    ("three_phase", "T_min certificate: output GD on the phase-3 quadratic contracts the excess by "
     "(1 - eta_3 lambda_min)^2 per step when eta_3 lambda_max <= 1",
     "the standard bound for gradient descent on a convex quadratic; the certificate checks both eigenvalue "
     "conditions in arb"),
    ("output_only", "inf over R^d equals inf over symmetric beta",
     "convexity and permutation invariance (Jensen), stated in `floor_is_infimum`"),
)
"""Steps argued by hand on which a proof or certificate depends."""

CHECKED_ONLY_AT_GIVEN_D = (
    ("three_phase", "phase-3 curvature lambda_min(D^1/2 M D^1/2) > 0 and T_min",
     "needs the phase-3 series M, m (no closed form); certified per d by `prove` (arb series below d = 1000, "
     "the integral representation from d = 1000 on), resting on the u_min lemma below"),
    ("three_phase", "the three-phase end point has risk < floor + epsilon",
     "the plan is run in float; its end point is certified per d by `prove` (arb series below d = 1000, the "
     "integral representation from d = 1000 on)"),
    ("output_only", "every output-only trajectory point has R(0, beta_t) > c(d)",
     "per d and per point, from the closed-form quadratic R(0, beta) in arb (exact for alpha = 0)"),
    ("attention_then_output", "every attention-first trajectory point has R(0, beta_t) > c(d)",
     "as above (the attention step leaves alpha = 0 exactly)"),
    ("output_only", "c(d, p) = inf over beta in R^d of R(0, beta) at the given p",
     "proved for all d at the balancing p (`floor_is_infimum`); certified per d by `prove` (Hessian of the "
     "quadratic positive definite, its minimum overlapping c(d, p))"),
    ("finite_sample", "held-out risk <= epsilon with N = ceil(30 d ln d)",
     "statistical: estimated by checks/test_finite_sample.py, neither proved nor certified"),
    ("all", "the nonnegative-length variant and p other than the balancing p",
     "the all-d proofs here are for the default length law at p = 1/(d-1)"),
)


def proofs_markdown(results: list[ProofResult], controls: list[tuple[str, ProofResult]]) -> str:
    """docs/proofs.md: which claims are proved for all d (and how), which are only checked at given d."""
    out = ["# Proofs for all d, and what is only checked at given d", "",
           "Generated from `theory/proofs.py` (`python3 -m app.commands.prove --proofs-doc docs/proofs.md`); a check "
           "(`checks/test_proofs_all_d.py`) fails when this file is stale.", "",
           "Words: *proved* means a proof for every d >= 3 (symbolic, or arb branch and bound plus an "
           "asymptotic bound proved symbolically); *certified* means an arb ball enclosure at one given d "
           "(`occ-companion prove`); anything else is an *estimate*.", "",
           "Trusted ingredients: SymPy's derivations in `theory/symbolic.py` (summation, solve), its exact "
           "simplification of rational identities, its rule-based sign inference for sums and products of "
           "positive terms after substituting x = a + t with t > 0, and its limits at points of continuity; "
           "python-flint's arb enclosures (constant signs and the branch and bound); the series "
           "Li_2(z) = sum_k z^k/k^2 on [0, 1] as SymPy sums it. Variable: x = d - 1, so x > 1 covers every real d > 2.",
           "", "## Proved for all d", "",
           "| proof | used by (theory/claims.py) | method | domain | shown | conditions | status |",
           "|---|---|---|---|---|---|---|"]
    for r in results:
        out.append(f"| `{r.claim}` | {USED_BY[r.claim]} | {r.method} | {r.domain} | {r.shown} | "
                   f"{CONDITIONS[r.claim]} | {r.status} |")
    out += ["", "### The steps", ""]
    for r in results:
        out.append(f"**`{r.claim}`** ({r.method}): {r.shown}.")
        out.append("")
        out += [f"1. `{s}`" if len(s) < 400 else f"1. `{s[:400]}...`" for s in r.steps]
        out.append("")
    out += ["## Mutation controls (each must FAIL)", "",
            "The same procedures on false variants of the claims; a procedure that passed one would prove nothing.", "",
            "| false variant | method | status |", "|---|---|---|"]
    for name, r in controls:
        out.append(f"| {name} | {r.method} | {r.status} |")
    out += ["", "## Steps argued by hand", "",
            "These are not machine-checked; the items named depend on them.", "",
            "| claim | step | where, and what depends on it |", "|---|---|---|"]
    for key, item, how in HAND_ARGUED:
        out.append(f"| `{key}` | {item} | {how} |")
    out += ["", "## Checked only at given d", "",
            "`occ-companion prove --d 3,5,10,50` certifies these per d (PASS needs an arb ball on the right "
            "side, FAIL one on the wrong side; a ball that straddles the threshold is UNDECIDED after retrying at "
            "doubled precision up to `--max-prec-bits`); they are not proved for all d. `prove` also certifies, per d, each closed-form item proved "
            "above (balancing p, gradient signs, eta1_max, kappa(eta_1), log u_min, eta2_min, c(d), R(0, 0)) as an "
            "arb ball, a cross-check of the proofs at those d.", "",
            "| claim | item | how |", "|---|---|---|"]
    for key, item, how in CHECKED_ONLY_AT_GIVEN_D:
        out.append(f"| `{key}` | {item} | {how} |")
    return "\n".join(out) + "\n"
