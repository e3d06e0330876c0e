"""Number contexts: one algorithm, several number types (in the spirit of mpmath's fp / mp / iv).

The model (``numerics.model``) and the series evaluator are written once against a context ``ctx``,
which supplies the few operations that differ between number types; everything else is numpy
arithmetic, which works on float64 arrays and on object arrays of ``mpmath.mpf`` or ``flint.arb`` alike.

* ``FLOAT``: IEEE double, numpy float64 arrays (fast; an error *estimate* only).
* ``MPContext(dps)``: mpmath at ``dps`` decimal digits (object arrays of mpf).
* ``ArbContext(prec_bits)``: python-flint ``arb`` balls (object arrays); every result is an enclosure.

>>> import numpy as np
>>> FLOAT.exp(np.zeros(2)).tolist()
[1.0, 1.0]
>>> with ArbContext(100) as ctx:
...     ball = ctx.exp(ctx.asarray([0.5]))[0]
>>> float(ball.rad()) < 1e-29, ball.contains(1.6487212707001282)
(True, False)
"""
from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np

from theory.validation import check_int


class FloatContext:
    """numpy float64: the fast path."""

    name = "float"
    dtype = float

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def asarray(self, x) -> np.ndarray:
        """Convert numbers (floats, ints, Fractions) to an array of this context's numbers."""
        return np.asarray(x, dtype=float)

    def number(self, x):
        """One number of this context (exact rationals are rounded once)."""
        return float(x)

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)

    def log1pexp(self, z):
        """log(1 + e^z), without overflow for large z."""
        return np.logaddexp(0.0, z)

    def sigmoid(self, z):
        """1 / (1 + e^-z), without overflow."""
        ez = np.exp(-np.abs(z))
        return np.where(z >= 0, 1.0 / (1.0 + ez), ez / (1.0 + ez))

    def shift(self, x) -> np.ndarray:
        """A float array of the same shape, used only to stabilise exponentials (any value is exact)."""
        return np.asarray(x, dtype=float)

    def to_float(self, x):
        return np.asarray(x, dtype=float)


class _ObjectContext(FloatContext):
    """Common part of the object-array contexts (mpmath, arb)."""

    dtype = object

    def _setup(self, label: str, precision, minimum: int, exp, log, log1p) -> None:
        """Validate the precision and build the elementwise functions from scalar ones."""
        precision = check_int(label, precision, minimum)
        self._working = precision
        self._saved: list[int] = []
        self._exp1 = exp
        self.exp = np.frompyfunc(exp, 1, 1)
        self.log = np.frompyfunc(log, 1, 1)
        self.log1p = np.frompyfunc(log1p, 1, 1)

    def __enter__(self):
        self._saved.append(self._precision())
        self._set_precision(self._working)
        return self

    def __exit__(self, *exc):
        self._set_precision(self._saved.pop())
        return False

    def _convert(self, x):  # pragma: no cover - overridden
        raise NotImplementedError

    def asarray(self, x) -> np.ndarray:
        arr = np.asarray(x, dtype=object)
        out = np.empty(arr.shape, dtype=object)
        flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
        for i, v in enumerate(flat_in):
            flat_out[i] = self._convert(v)
        return out

    def number(self, x):
        return self._convert(x)

    def shift(self, x) -> np.ndarray:
        return np.vectorize(lambda v: float(self._mid(v)), otypes=[float])(np.asarray(x, dtype=object))

    def to_float(self, x):
        return np.vectorize(lambda v: float(self._mid(v)), otypes=[float])(np.asarray(x, dtype=object))

    def log1pexp(self, z):
        return self.log1p(self.exp(z))

    def sigmoid(self, z):
        one = self._convert(1)
        return np.frompyfunc(lambda v: one / (one + self._exp1(-v)), 1, 1)(z)


class MPContext(_ObjectContext):
    """mpmath at ``dps`` significant digits; use as ``with MPContext(40) as ctx:``."""

    name = "mp"

    def __init__(self, dps: int = 30):
        self._setup("dps", dps, 15, mpmath.exp, mpmath.log, mpmath.log1p)
        self.dps = dps

    @staticmethod
    def _precision() -> int:
        return mpmath.mp.dps

    @staticmethod
    def _set_precision(value: int) -> None:
        mpmath.mp.dps = value

    @staticmethod
    def _mid(v):
        return v

    def _convert(self, x):
        if isinstance(x, Fraction):
            return mpmath.mpf(x.numerator) / x.denominator
        return mpmath.mpf(x)


class ArbContext(_ObjectContext):
    """python-flint arb balls at ``prec_bits`` bits of working precision; every value is an enclosure.

    Inputs given as floats or Fractions are converted exactly (a float is a dyadic rational).
    """

    name = "arb"

    def __init__(self, prec_bits: int = 128):
        import flint

        self._flint = flint
        self._arb, self._fmpq = flint.arb, flint.fmpq
        self._setup("prec_bits", prec_bits, 53, lambda v: v.exp(), lambda v: v.log(), lambda v: v.log1p())
        self.prec_bits = prec_bits

    def _precision(self) -> int:
        return self._flint.ctx.prec

    def _set_precision(self, value: int) -> None:
        self._flint.ctx.prec = value

    @staticmethod
    def _mid(v):
        return v.mid()

    def _convert(self, x):
        arb = self._arb
        if isinstance(x, arb):
            return x
        if isinstance(x, Fraction):
            return arb(self._fmpq(x.numerator, x.denominator))
        if isinstance(x, (int, np.integer)):
            return arb(int(x))
        return arb(float(x))  # exact: a double is a dyadic rational


FLOAT = FloatContext()
"""The shared float context."""
