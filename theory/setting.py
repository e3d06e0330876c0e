"""The setting as a value object: alphabet size, length law, loss, geometric parameter.

The setting owns the two facts every layer needs and nobody else writes down: the length law
(``Setting.law``: support, pmf, tail mass, sampler, cut-off) and the labelling rule
(``Setting.label``: y = +1 iff the marked symbol occurs).

>>> s = Setting(5)
>>> s.p_value, s.law.start, s.law.pmf(1), s.law.tail(2)
(Fraction(1, 4), 1, Fraction(1, 4), Fraction(9, 16))
>>> s.label([0, 2]).tolist()
[-1.0, 1.0]
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .validation import check_d, check_loss, check_p, check_real, check_variant


@lru_cache(maxsize=None)
def balanced_p_exact(d: int, lengths: str = "positive") -> Fraction:
    """The balancing p for alphabet size d, from the SymPy derivation (1/(d-1), or 1/(d+1) for the variant),
    evaluated exactly in rational arithmetic from its cached source (``theory.compiled``: no SymPy import
    once the derivation is cached)."""
    from .compiled import rational

    d = check_d(d)
    check_variant(lengths)
    return rational("balanced_p", (lengths,), d)


@dataclass(frozen=True)
class LengthLaw:
    """n ~ Geometric(p) on {start, start + 1, ...}: P(n) = p (1 - p)^(n - start).

    ``start`` is 1 under the default law and 0 under the nonnegative variant.  ``pmf`` and ``tail``
    are exact for a Fraction p (and follow the type of p otherwise).

    >>> law = LengthLaw(Fraction(1, 2), 0)
    >>> law.pmf(0), law.tail(0), law.cutoff(1e-3)
    (Fraction(1, 2), Fraction(1, 2), 9)
    """

    p: Fraction | float
    start: int

    def pmf(self, n):
        """P(length = n); 0 outside the support."""
        if n < self.start:
            return 0 * self.p
        return self.p * (1 - self.p) ** (n - self.start)

    def tail(self, N):
        """P(length > N) = (1 - p)^(N - start + 1) for N >= start - 1."""
        return (1 - self.p) ** max(N - self.start + 1, 0)

    def cutoff(self, tol: float) -> int:
        """The smallest N >= start with P(length > N) <= tol (computed in double, then verified exactly)."""
        tol = check_real("tol", tol, 0, 1)
        if self.p == 1:
            return self.start
        N = self.start + max(0, math.ceil(math.log(tol) / math.log1p(-float(self.p))) - 1)
        while N > self.start and self.tail(N - 1) <= tol:
            N -= 1
        while self.tail(N) > tol:
            N += 1
        return N

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent lengths."""
        return rng.geometric(float(self.p), size=size) - 1 + self.start

    def describe(self) -> str:
        """E.g. "Geometric(p=0.25) on {1,2,...}"."""
        return f"Geometric(p={float(self.p):.6g}) on {{{self.start},{self.start + 1},...}}"


@dataclass(frozen=True)
class Setting:
    """One instance of the setting.  ``p=None`` means the balancing value (P(y=+1) = 1/2)."""

    d: int
    p: float | Fraction | None = None
    lengths: str = "positive"
    loss: str = "squared"
    p_value: Fraction | float = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "d", check_d(self.d))
        check_variant(self.lengths)
        check_loss(self.loss)
        if self.p is None:
            pv = balanced_p_exact(self.d, self.lengths)
        else:
            pv = check_p(self.p)
        object.__setattr__(self, "p_value", pv)

    @property
    def law(self) -> LengthLaw:
        """The length law of this setting."""
        return LengthLaw(self.p_value, 1 if self.lengths == "positive" else 0)

    @staticmethod
    def label(marked_counts) -> np.ndarray:
        """The labelling rule: y = +1 iff the marked symbol occurs (count > 0), else -1 (empty strings too)."""
        return np.where(np.asarray(marked_counts) > 0, 1.0, -1.0)

    @property
    def balanced(self) -> bool:
        return self.p is None or Fraction(self.p_value) == balanced_p_exact(self.d, self.lengths)

    def describe(self) -> str:
        return (f"d={self.d}, n ~ {self.law.describe()}, "
                f"{self.loss} loss{' (balanced classes)' if self.balanced else ''}")
