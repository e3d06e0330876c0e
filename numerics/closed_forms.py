"""mpmath evaluation of the SymPy closed forms, at a chosen precision.

Closed forms contain log p and the polylogarithms Li_s(1 - p), evaluated by mpmath to the working
precision (no truncation involved).  The only infinite series they stand for, the inverse length
moments L_s = E[1{n>=1} n^-s], can also be summed directly with ``inverse_length_moment_series``,
which returns a partial sum and a rigorous bound on the tail, for cross-checking.
"""
from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

import mpmath
import sympy as sp

from theory import symbolic as S
from theory.setting import Setting
from theory.validation import SettingError, check_steps_count

_ARGS = (S.d, S.p, S.eta1, S.eta2, S.eta3, S.eps, S.u, S.beta_a, S.beta_b)
_NAMES = ("eta_1", "eta_2", "eta_3", "epsilon", "u", "beta_a", "beta_b")


def to_mpf(x):
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


@lru_cache(maxsize=256)
def _compiled(expr):
    return sp.lambdify(_ARGS, expr, modules="mpmath")


def evaluate(expr, setting: Setting, *, dps: int = 50, **values):
    """Evaluate a SymPy expression in the symbols of ``theory.symbolic`` at this setting.

    ``values`` may give eta_1, eta_2, eta_3, epsilon, u, beta_a, beta_b; a symbol the expression
    needs but that is not given raises a SettingError naming it.
    """
    unknown = set(values) - set(_NAMES)
    if unknown:
        raise SettingError(f"unknown symbol(s) {sorted(unknown)}; expected some of {_NAMES}")
    if float(setting.p_value) == 1.0:
        raise SettingError("closed forms are stated for p < 1 (at p = 1 every string has length 1 and "
                           "log p / (p - 1) is a removable singularity); use numerics.series for p = 1")
    free = {str(s) for s in sp.sympify(expr).free_symbols} - {"d", "p"}
    missing = free - set(values)
    if missing:
        raise SettingError(f"expression needs values for {sorted(missing)}")
    with mpmath.workdps(dps):
        args = [mpmath.mpf(setting.d), to_mpf(setting.p_value)] + [to_mpf(values[k]) if k in values else mpmath.mpf(0) for k in _NAMES]
        val = _compiled(sp.sympify(expr))(*args)
        return +mpmath.mpf(val)  # round to working precision


def inverse_length_moment_series(s: int, setting: Setting, N: int, *, dps: int = 50):
    """Partial sum of L_s over n <= N and a bound on the omitted tail.

    Tail: sum_{n>N} P(n) n^-s <= P(n > N) / (N + 1)^s.
    """
    check_steps_count("N", N)
    with mpmath.workdps(dps):
        p = to_mpf(setting.p_value)
        lo_shift = 1 if setting.lengths == "positive" else 0
        total = mpmath.mpf(0)
        for n in range(1, N + 1):
            total += p * (1 - p) ** (n - lo_shift) / mpmath.mpf(n) ** s
        tail_mass = (1 - p) ** (N + 1 - lo_shift)
        return +total, tail_mass / mpmath.mpf(N + 1) ** s


def output_only_floor(setting: Setting, *, dps: int = 50):
    """c(d, p) = inf over all beta in R^d of R(0, beta), squared loss."""
    if setting.loss != "squared":
        raise SettingError("the closed-form floor c(d, p) is derived for the squared loss")
    return evaluate(S.uniform_attention_min_risk(setting.lengths, balanced=False), setting, dps=dps)


def uniform_attention_quadratic(setting: Setting, *, dps: int = 50):
    """(a_I, a_1, b_a, b_b): R(0, beta) = beta^T (a_I I + a_1 11^T) beta / 2 - b^T beta + 1/2."""
    return tuple(evaluate(e, setting, dps=dps) for e in S.uniform_attention_quadratic(setting.lengths))


def uniform_attention_risk_full(setting: Setting, beta, *, dps: int = 50):
    """R(0, beta) for arbitrary beta in R^d from the closed-form quadratic (squared loss)."""
    a_i, a_1, b_a, b_b = uniform_attention_quadratic(setting, dps=dps)
    with mpmath.workdps(dps):
        bt = [to_mpf(x) for x in beta]
        s1 = mpmath.fsum(bt)
        quad = a_i * mpmath.fsum(x * x for x in bt) + a_1 * s1 * s1
        lin = b_a * bt[0] + b_b * mpmath.fsum(bt[1:])
        return quad / 2 - lin + mpmath.mpf(1) / 2


def evaluate_all(setting: Setting, *, dps: int = 50, **values):
    """[(key, title, value, missing)] for every derivation of ``theory.symbolic.all_derivations``;
    value is None, and ``missing`` names the symbols, where the expression needs a symbol
    (eta_1, eta_2, epsilon, ...) not given in ``values``."""
    out = []
    for der in S.all_derivations(setting.lengths):
        free = {str(s) for s in sp.sympify(der.expr).free_symbols} - {"d", "p"}
        missing = sorted(free - set(values))
        if missing:
            out.append((der.key, der.title, None, missing))
            continue
        given = {k: v for k, v in values.items() if k in free}
        out.append((der.key, der.title, evaluate(der.expr, setting, dps=dps, **given), []))
    return out
