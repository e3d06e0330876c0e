"""The closed forms at 40 digits agree with independent high-precision values, to 1e-35.

``ClosedForms`` claims values correct to its working precision; double precision anywhere on the way
(a float p, a float coefficient) would show at the 17th digit, far above the 1e-35 tolerance here.
Independent values: the balancing p as an exact rational, L_1 = E[1{n>=1}/n] by direct summation of the
length law with a rigorous geometric tail bound, c(d) from its formula evaluated from exact rationals
with mpmath.log at 60 digits, and every catalogue entry in d and p re-evaluated by SymPy's own evalf
at an exact rational p (a second evaluation path: no lambdify, no mpmath conversion of the setting).
"""
from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest
import sympy as sp

from numerics.theorem.closed_forms import ClosedForms
from theory import catalogue
from theory import symbolic
from theory.setting import Setting

DPS = 40
TOL = mpmath.mpf(10) ** -35
DS = (3, 5, 10, 50)
LENGTHS = ("positive", "nonnegative")
CASES = [(d, lengths) for d in DS for lengths in LENGTHS]


def _exact_balanced_p(d: int, lengths: str) -> Fraction:
    """The balancing p as the setting states it: P(c = 0) = 1/2 gives 1/(d - 1), or 1/(d + 1) with the empty string."""
    return Fraction(1, d - 1) if lengths == "positive" else Fraction(1, d + 1)


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _close(a, b) -> bool:
    """|a - b| <= 1e-35 max(1, |b|), computed at 60 digits (mpmath's default 15 would round the difference away)."""
    with mpmath.workdps(60):
        return abs(a - b) <= TOL * max(1, abs(b))


@pytest.mark.parametrize("d,lengths", CASES)
def test_balancing_p_is_the_exact_rational(d, lengths):
    s = Setting(d, lengths=lengths)
    assert s.p_value == _exact_balanced_p(d, lengths)
    cf = ClosedForms(s, dps=DPS)
    with mpmath.workdps(60):
        exact = _mp(_exact_balanced_p(d, lengths))
    assert _close(cf.balanced_p(), exact) and _close(cf.value("balanced_p"), exact)


def _direct_L1(d: int, lengths: str) -> tuple[mpmath.mpf, mpmath.mpf]:
    """sum_{1 <= n <= N} P(n)/n at 60 digits and the bound P(n > N)/(N + 1) on the rest, N chosen for 1e-45."""
    with mpmath.workdps(60):
        p = _mp(_exact_balanced_p(d, lengths))
        q = 1 - p
        start = 1 if lengths == "positive" else 0
        term = p * q ** (1 - start)  # P(n = 1)
        total, n = mpmath.mpf(0), 1
        while True:
            total += term / n
            tail = term * q / (1 - q) / (n + 1)  # P(n' > n) = P(n) q / (1 - q); each 1/n' <= 1/(n + 1)
            if tail < mpmath.mpf(10) ** -45:
                return total, tail
            term *= q
            n += 1


@pytest.mark.parametrize("d,lengths", CASES)
def test_L1_matches_direct_summation_with_tail_bound(d, lengths):
    closed = ClosedForms(Setting(d, lengths=lengths), dps=DPS).value("L1")
    partial, tail = _direct_L1(d, lengths)
    with mpmath.workdps(60):
        assert partial - TOL <= closed <= partial + tail + TOL
    assert _close(closed, partial)


def _c_formula(d: int, lengths: str) -> mpmath.mpf:
    """c(d) at the balancing p from its formula, exact rationals and mpmath.log at 60 digits."""
    with mpmath.workdps(60):
        if lengths == "positive":
            return (1 - _mp(Fraction(d - 2, d - 1)) / mpmath.log(d - 1)) / 2
        return _mp(Fraction(1, 2 * (d + 1))) + _mp(Fraction(d - 1, 2 * d)) * (1 - _mp(Fraction(d, d + 1)) / mpmath.log(d + 1))


@pytest.mark.parametrize("d,lengths", CASES)
def test_output_only_floor_matches_its_formula(d, lengths):
    cf = ClosedForms(Setting(d, lengths=lengths), dps=DPS)
    expected = _c_formula(d, lengths)
    assert _close(cf.output_only_floor(), expected)  # c(d, p) evaluated at the setting's p
    assert _close(cf.value("c_balanced"), expected)  # the balanced form, a function of d alone


@pytest.mark.parametrize("d,lengths", [(3, "positive"), (10, "nonnegative"), (50, "positive")])
@pytest.mark.parametrize("p", [None, Fraction(2, 7)])
def test_every_catalogue_entry_matches_sympy_evalf(d, lengths, p):
    """Every entry in d and p alone, ClosedForms (lambdify + mpmath) against SymPy's evalf at exact p."""
    s = Setting(d, p=p, lengths=lengths)
    cf = ClosedForms(s, dps=DPS)
    p_exact = sp.Rational(s.p_value.numerator, s.p_value.denominator)
    checked = 0
    for der in catalogue.all_derivations(lengths):
        if {str(x) for x in sp.sympify(der.expr).free_symbols} - {"d", "p"}:
            continue
        reference = sp.sympify(der.expr).subs({symbolic.d: d, symbolic.p: p_exact}).evalf(60)
        with mpmath.workdps(60):
            ref = mpmath.mpf(str(sp.re(reference)))
        assert _close(cf.value(der.key), ref), der.key
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("d,lengths", CASES)
def test_balanced_specialisations_match_the_general_forms(d, lengths):
    """Entries simplified at the balancing p (functions of d) against the general ones at p = p*."""
    cf = ClosedForms(Setting(d, lengths=lengths), dps=DPS)
    for eta_1 in (Fraction(1, 3), Fraction(5, 2)):
        assert _close(cf.value("kappa_balanced", eta_1=eta_1), cf.kappa(eta_1))
    assert _close(cf.value("eta1_max_balanced"), cf.eta1_max())
    assert cf.value("eta1_max_balanced") == (d if lengths == "positive" else d + 1)


@pytest.mark.parametrize("d,lengths", [(3, "positive"), (5, "nonnegative"), (10, "positive")])
def test_uniform_attention_risk_at_40_digits(d, lengths):
    """R(0, beta) from the assembled quadratic against the symmetric-beta risk derived as an expectation
    (theory.symbolic.uniform_attention_risk), and invariant under permuting the unmarked coordinates."""
    cf = ClosedForms(Setting(d, lengths=lengths), dps=DPS)
    b_a, b_b = Fraction(7, 5), Fraction(-3, 4)
    symmetric = cf.uniform_attention_risk([b_a] + [b_b] * (d - 1))
    assert _close(symmetric, cf.expr(symbolic.uniform_attention_risk(lengths), beta_a=b_a, beta_b=b_b))
    beta = [Fraction(1, 2)] + [Fraction(k - 2, 3) for k in range(d - 1)]
    swapped = [beta[0]] + beta[:0:-1]
    assert _close(cf.uniform_attention_risk(beta), cf.uniform_attention_risk(swapped))
