"""SymPy expressions evaluated in ball arithmetic (python-flint arb): the bridge the certificates
(numerics.theorem.certify) and the all-d proofs (theory.proofs) share.

>>> import sympy as sp
>>> from flint import ctx
>>> x = sp.Symbol("x", positive=True)
>>> with ctx.workprec(100):
...     ball = to_arb(sp.log(1 + x) / 3, {x: arb_of(1)})
>>> ball.contains(arb_of(0.23104906018664842)), float(ball.rad()) < 1e-29
(False, True)
"""
from __future__ import annotations

import math
from fractions import Fraction

import sympy as sp
from flint import arb, fmpq

from theory.validation import SettingError


def arb_of(value) -> arb:
    """An exact arb from an int, Fraction, fmpq or float (floats are dyadic rationals: exact), or an arb."""
    if isinstance(value, arb):
        return value
    if isinstance(value, bool):
        raise SettingError(f"expected a number, got {value!r}")
    if isinstance(value, int):
        return arb(value)
    if isinstance(value, Fraction):
        return arb(fmpq(value.numerator, value.denominator))
    if isinstance(value, fmpq):
        return arb(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SettingError(f"expected a finite number, got {value!r}")
        return arb(value)
    raise SettingError(f"cannot enter {value!r} ({type(value).__name__}) exactly into ball arithmetic")


def to_arb(expr, values: dict) -> arb:
    """Evaluate a SymPy expression as an arb ball at the current flint precision.

    ``values`` maps SymPy symbols to arb balls.  Supported nodes: integers and rationals (exact),
    symbols, Add, Mul, Pow (integer, half-integer and rational exponents), log, exp, polylog(s, z) with
    integer s, Max, Min, Abs, pi, E.  A SymPy Float (an inexact constant) or any other node raises
    SettingError: the closed forms are exact expressions and are to stay so.
    """
    expr = sp.sympify(expr)
    if expr.is_Integer:
        return arb(int(expr))
    if expr.is_Rational:
        return arb(fmpq(int(expr.p), int(expr.q)))
    if expr.is_Symbol:
        if expr not in values:
            raise SettingError(f"closed form needs a value for {expr}")
        return values[expr]
    if expr is sp.pi:
        return arb.pi()
    if expr is sp.E:
        return arb.const_e()
    if isinstance(expr, sp.Add):
        out = arb(0)
        for a in expr.args:
            out += to_arb(a, values)
        return out
    if isinstance(expr, sp.Mul):
        out = arb(1)
        for a in expr.args:
            out *= to_arb(a, values)
        return out
    if isinstance(expr, sp.Pow):
        base, ex = expr.args
        b = to_arb(base, values)
        if ex.is_Integer:
            return b ** int(ex)
        if ex == sp.Rational(1, 2):
            return b.sqrt()
        if ex == sp.Rational(-1, 2):
            return b.rsqrt()
        return b ** to_arb(ex, values)
    if isinstance(expr, sp.log):
        return to_arb(expr.args[0], values).log()
    if isinstance(expr, sp.exp):
        return to_arb(expr.args[0], values).exp()
    if isinstance(expr, sp.polylog):
        s, z = expr.args
        if not s.is_Integer:
            raise SettingError(f"polylog order must be an integer in the closed forms, got {s}")
        return to_arb(z, values).polylog(int(s))
    if isinstance(expr, (sp.Max, sp.Min)):
        args = [to_arb(a, values) for a in expr.args]
        out = args[0]
        for a in args[1:]:
            out = out.max(a) if isinstance(expr, sp.Max) else out.min(a)
        return out
    if isinstance(expr, sp.Abs):
        return abs(to_arb(expr.args[0], values))
    raise SettingError(f"no ball-arithmetic translation for {type(expr).__name__} in {expr}")
