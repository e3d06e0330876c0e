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

from theory.validation import SettingError, check_d, check_loss, check_p, check_real, check_variant


@lru_cache(maxsize=None)
def balanced_p_exact(d: int, lengths: str = "positive") -> Fraction:
    """The balancing p for alphabet size d, from the SymPy derivation (1/(d-1), or 1/(d+1) for the variant),
    evaluated exactly in rational arithmetic from its cached source (``theory.compiled``: no SymPy import
    once the derivation is cached)."""
    from theory.compiled import rational

    d = check_d(d)
    check_variant(lengths)
    return rational("balanced_p", (lengths,), d)


class DiscreteLaw:
    """A law of the string length on {start, start + 1, ...}: what every evaluator and the Monte Carlo read.

    Subclasses give ``start``, ``pmf(n)``, ``tail(N)`` = P(length > N) and ``sample(rng, size)``;
    ``cutoff(tol)`` (the smallest N with tail <= tol) is found here from ``tail`` alone.  ``geometric`` says
    whether the closed forms and the integral representation (derived for the geometric law) apply."""

    start: int
    geometric = False

    def cutoff(self, tol: float) -> int:
        """The smallest N >= start with P(length > N) <= tol (doubling, then bisection on ``tail``)."""
        tol = check_real("tol", tol, 0, 1)
        hi = self.start
        while self.tail(hi) > tol:
            hi = 2 * hi + 1
        lo = self.start - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self.tail(mid) <= tol else (mid, hi)
        return max(hi, self.start)


@dataclass(frozen=True)
class LomaxLaw(DiscreteLaw):
    """A heavy-tailed law: the discretised Lomax (Pareto II) law on {1, 2, ...},
    P(length > N) = (sigma / (sigma + N))^shape for N >= 0, so P(n) = tail(n - 1) - tail(n) ~ shape sigma^shape
    n^-(shape+1): a power law with finite mean for shape > 1 (infinite variance for shape <= 2).  Exact sampler
    by inversion: n = ceil(sigma (U^(-1/shape) - 1)) for U uniform on (0, 1].

    >>> law = LomaxLaw(2.0, 3.0)
    >>> law.tail(0), round(law.pmf(1), 6), law.cutoff(0.02)
    (1.0, 0.4375, 19)
    """

    shape: float
    sigma: float
    start: int = 1

    def __post_init__(self):
        check_real("shape", self.shape, 1, None)
        check_real("sigma", self.sigma, 0, None)

    def tail(self, N):
        """P(length > N) = (sigma / (sigma + N))^shape for N >= 0 (1 below)."""
        return 1.0 if N < 1 else (self.sigma / (self.sigma + N)) ** self.shape

    def pmf(self, n):
        """P(length = n) = tail(n - 1) - tail(n); 0 outside {1, 2, ...}."""
        return 0.0 if n < 1 else self.tail(n - 1) - self.tail(n)

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` independent lengths (inversion of the tail)."""
        u = 1.0 - rng.random(size)  # in (0, 1]
        return np.maximum(np.ceil(self.sigma * (u ** (-1.0 / self.shape) - 1.0)), 1).astype(np.int64)

    def describe(self) -> str:
        return f"discretised Lomax(shape={self.shape:g}, sigma={self.sigma:.6g}) on {{1,2,...}}"


@dataclass(frozen=True)
class ShiftedPoissonLaw(DiscreteLaw):
    """A light-tailed law: n = 1 + K with K ~ Poisson(lam), on {1, 2, ...}.

    >>> law = ShiftedPoissonLaw(2.0)
    >>> round(law.pmf(1), 6), round(law.tail(1), 6)
    (0.135335, 0.864665)
    """

    lam: float
    start: int = 1

    def __post_init__(self):
        check_real("lam", self.lam, 0, None)

    def pmf(self, n):
        """P(length = n) = e^-lam lam^(n-1) / (n-1)!."""
        if n < 1:
            return 0.0
        return math.exp(-self.lam + (n - 1) * math.log(self.lam) - math.lgamma(n))

    def tail(self, N):
        """P(length > N) = P(K >= N) (the regularised lower incomplete gamma function)."""
        from scipy.special import gammainc

        return 1.0 if N < 1 else float(gammainc(N, self.lam))

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return 1 + rng.poisson(self.lam, size=size)

    def describe(self) -> str:
        return f"1 + Poisson(lam={self.lam:.6g}) on {{1,2,...}}"


@dataclass(frozen=True)
class LengthLaw(DiscreteLaw):
    """n ~ Geometric(p) on {start, start + 1, ...}: P(n) = p (1 - p)^(n - start).

    ``start`` is 1 under the default law and 0 under the nonnegative variant.  ``pmf`` and ``tail``
    are exact for a Fraction p (and follow the type of p otherwise).

    >>> law = LengthLaw(Fraction(1, 2), 0)
    >>> law.pmf(0), law.tail(0), law.cutoff(1e-3)
    (Fraction(1, 2), Fraction(1, 2), 9)
    """

    p: Fraction | float
    start: int
    geometric = True

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
    """One instance of the setting.  ``p=None`` means the balancing value (P(y=+1) = 1/2).  ``length_law``
    replaces the geometric law by another ``DiscreteLaw`` (then p and lengths are not used, and the closed
    forms and the integral representation, derived for the geometric law, refuse the setting)."""

    d: int
    p: float | Fraction | None = None
    lengths: str = "positive"
    loss: str = "squared"
    length_law: DiscreteLaw | None = None
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
        if self.length_law is not None and not isinstance(self.length_law, DiscreteLaw):
            raise SettingError(f"length_law must be a theory.setting.DiscreteLaw, got {self.length_law!r}")

    @property
    def law(self) -> DiscreteLaw:
        """The length law of this setting."""
        if self.length_law is not None:
            return self.length_law
        return LengthLaw(self.p_value, 1 if self.lengths == "positive" else 0)

    @property
    def geometric(self) -> bool:
        """Whether the length law is the geometric one (the closed forms' and the integral's law)."""
        return self.law.geometric

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
