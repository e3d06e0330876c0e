"""Numbers as the suite prints them: no digit beyond what its error bound supports."""
from __future__ import annotations

import math
from decimal import Decimal

import mpmath


def supported_digits(x: object, bound: float, max_digits: int) -> str:
    """``x`` rounded to the last decimal place its absolute error ``bound`` supports (and to at most
    ``max_digits`` significant digits), so no printed digit is noise.

    >>> supported_digits(0.123456789, 6e-5, 17)
    '0.1235'
    >>> supported_digits(2.0, 0.0, 5)
    '2.0'
    """
    value = mpmath.mpf(x)
    if bound <= 0 or not math.isfinite(bound):
        return mpmath.nstr(value, max_digits)
    decimals = max(0, -math.floor(math.log10(bound)) - 1)
    if value != 0:
        decimals = min(decimals, max(0, max_digits - 1 - int(mpmath.floor(mpmath.log10(abs(value))))))
    rounded = Decimal(mpmath.nstr(value, max_digits + 5, min_fixed=-math.inf, max_fixed=math.inf))
    return f"{rounded.quantize(Decimal(1).scaleb(-decimals)):f}"
