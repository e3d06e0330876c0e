"""Numbers as the suite prints them: no digit beyond what its error bound supports, and a printed
bound that covers the printed value.

A value x known to within ``bound`` (|exact - x| <= bound) is rounded, in exact rational arithmetic
from x's own binary value (a double, an mpmath mpf at any precision, or an arb midpoint; never through
a double), to the last decimal place whose half-unit is at most ``bound`` (and to at most
``max_digits`` significant digits).  The bound printed beside it is bound + |x - printed|, rounded up
to four significant digits, so |exact - printed| <= printed bound holds for what is on the screen.
"""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath

BOUND_DIGITS = 4


def exact_value(x: object) -> Fraction:
    """The exact rational value of a float, int, Fraction, mpmath mpf, or arb midpoint.

    >>> exact_value(0.1) == Fraction(3602879701896397, 2**55)
    True
    """
    if isinstance(x, Fraction):
        return x
    if isinstance(x, bool):
        raise TypeError("not a number")
    if isinstance(x, int):
        return Fraction(x)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError(f"not finite: {x}")
        return Fraction(x)
    if isinstance(x, mpmath.mpf):
        if not mpmath.isfinite(x):
            raise ValueError(f"not finite: {x}")
        sign, man, exp, _ = x._mpf_  # man_exp drops the sign
        return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)
    try:  # python-flint arb (its midpoint) or arf
        from flint import arb
    except ImportError:  # pragma: no cover
        arb = None
    if arb is not None and isinstance(x, arb):
        if not x.is_finite():
            raise ValueError(f"not finite: {x}")
        man, exp = x.mid().man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(exp)
    raise TypeError(f"cannot take the exact value of {type(x).__name__}")


def _floor_log10(q: Fraction) -> int:
    """floor(log10(q)) for a rational q > 0, exactly."""
    e = math.floor(math.log10(q.numerator) - math.log10(q.denominator))
    while Fraction(10) ** e > q:
        e -= 1
    while Fraction(10) ** (e + 1) <= q:
        e += 1
    return e


def _decimal_text(q: Fraction, decimals: int) -> str:
    """q (a multiple of 10^-decimals) as fixed-point text."""
    n = q * Fraction(10) ** decimals
    assert n.denominator == 1
    sign, digits = ("-" if n < 0 else ""), str(abs(n.numerator)).rjust(decimals + 1, "0")
    if decimals <= 0:
        return sign + digits + "0" * (-decimals)
    return f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"


def round_up_text(b: Fraction, digits: int = BOUND_DIGITS) -> str:
    """b >= 0 rounded up to ``digits`` significant digits, in the style of ``{:.3e}``.

    >>> round_up_text(Fraction(10991, 10**13)), round_up_text(Fraction(1, 3)), round_up_text(Fraction(0))
    ('1.100e-09', '3.334e-01', '0')
    """
    if b == 0:
        return "0"
    e = _floor_log10(b)
    m = math.ceil(b / Fraction(10) ** (e - digits + 1))
    if m >= 10**digits:
        m, e = m // 10 + (m % 10 > 0), e + 1
    text = str(m)
    return f"{text[0]}.{text[1:]}e{e:+03d}"


def value_and_bound(x: object, bound: float, max_digits: int) -> tuple[str, str]:
    """(x rounded to the digits ``bound`` supports, the bound to print beside it).

    The printed bound is at least ``bound`` plus the rounding error, rounded up, so that
    |exact - printed value| <= printed bound whenever |exact - x| <= bound.

    >>> value_and_bound(1736.7479416549616, 1.099e-9, 17)
    ('1736.747941655', '1.138e-09')
    >>> value_and_bound(0.5, 0.0, 17)
    ('0.5', '0')
    """
    value = exact_value(x)
    b = exact_value(float(bound)) if bound > 0 else Fraction(0)
    if not math.isfinite(bound):
        return mpmath.nstr(mpmath.mpf(value.numerator) / value.denominator, max_digits), str(bound)
    cap = None if value == 0 else max_digits - 1 - _floor_log10(abs(value))
    if b > 0:
        decimals = -_floor_log10(2 * b)  # 10^-decimals / 2 <= b: the last place the bound supports
        if Fraction(10) ** -decimals / 2 > b:
            decimals += 1
        decimals = decimals if cap is None else min(decimals, cap)
    else:
        decimals = cap if cap is not None else 0
    unit = Fraction(10) ** -decimals
    rounded = round(value / unit) * unit
    err = abs(value - rounded)
    text = _decimal_text(rounded, decimals)
    if b == 0 and err == 0 and "." in text:  # exact: no trailing zeros pretending to be digits
        text = text.rstrip("0")
        text = text + "0" if text.endswith(".") else text
    return text, round_up_text(b + err)


def supported_digits(x: object, bound: float, max_digits: int) -> str:
    """``x`` rounded to the last decimal place its absolute error ``bound`` supports (and to at most
    ``max_digits`` significant digits); see ``value_and_bound`` for the bound to print beside it.

    >>> supported_digits(0.123456789, 6e-5, 17)
    '0.1235'
    >>> supported_digits(2.0, 0.0, 5)
    '2.0'
    """
    return value_and_bound(x, bound, max_digits)[0]
