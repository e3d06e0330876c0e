"""Exact series evaluation of the population risk and gradients, one algorithm over three number contexts.

The population risk is E_n E_{counts | n}[loss(f(X), y)], a series over the length n and the token
counts.  Symbols are grouped into classes with equal (alpha_k, beta_k) -- the marked symbol is always a
class of its own -- so f depends on the counts per class only.  With n ~ Geometric(p) on {lo, lo+1, ...}
the counts have a simple joint law: write the counts as the "prefix" (every class but the largest, L)
and r (the count of class L).  The prefix total s is geometric (P(s) ~ X^s with X < 1, about 1/2 for
the marked symbol alone), and given the prefix, r is negative binomial.  The series is enumerated as
rows: prefixes with s <= S (the geometric tail decides S), then r = 0..R_t per prefix (a negative
binomial quantile decides R_t).  For d = 50 and tol = 1e-12 that is about 50k terms, linear in d.

The integrand is the model of ``numerics.model``: ``Model.risk_and_grad`` on bags of class tokens with
their counts as multiplicities, or for the symmetric two-class case its lean form ``attend_pair`` with
``loss_terms``; the empty string (lengths on {0, 1, ...}) goes through ``Model.risk_and_grad``.

Number contexts (``context=``): ``"float"`` (numpy float64, fast), ``"mp"`` (mpmath at ``dps`` digits)
and ``"arb"`` (python-flint balls at ``prec_bits`` bits).  The truncation error is bounded *a posteriori*:

    |true - computed| <= sup |integrand| * omitted,   omitted = 1 - (total weight of the enumerated terms)

which holds whatever truncation rule was used, since every term is a probability weight times a bounded
integrand and the weights of all strings sum to 1.  Bounds: |f| <= B = max_k |beta_k|; squared loss
<= (B+1)^2/2 with |dloss/df| <= B+1; logistic loss <= log(1 + e^B) with |dloss/df| <= 1; attention
weights lie in [0, 1] and |beta_k - f| <= 2B.

* ``arb``: weights are balls from exact rational row starts and exact recurrences, the integrand is
  ball arithmetic, ``omitted`` is the upper end of the ball 1 - sum, and the tail term
  sup * omitted is added to every radius.  Risk and gradient coordinates are balls that contain the
  exact population values: **certified** (``Evaluation.certified`` is True).
* ``float`` and ``mp``: the same bound plus a rounding allowance (``FLOAT_ROUNDING_ALLOWANCE``, or
  10^(2 - dps)) times the integrand bound: an error *estimate*, not an enclosure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from itertools import product as _product
from typing import Sequence, Union

import numpy as np

from theory.setting import Setting
from theory.validation import (
    SettingError,
    check_choice,
    check_int,
    check_real,
    check_vector,
)

from numerics.contexts import FLOAT, ArbContext, MPContext
from numerics.model import Model, Params, attend_pair, loss_terms, pair_squared_sums

FLOAT_ROUNDING_ALLOWANCE = 1e-13
"""Rounding allowance of the float context, relative to the integrand bound: weights to a few ulp,
the integrand to a dozen operations, pairwise sums to O(log terms) ulp -- a few hundred ulp in all."""
CONTEXTS = ("float", "mp", "arb")
Number = Union[float, int, Fraction, object]
"""A real number: float, int, Fraction, mpf or arb (arb inputs are used as balls in the arb context)."""


@dataclass(frozen=True)
class Evaluation:
    """Population risk and gradient at one parameter point, with the truncation error.

    ``risk``, ``grad_alpha``, ``grad_beta`` are numbers of the context (float, mpf, or arb balls).
    ``risk_bound``/``grad_bound``: the error of the risk / of every gradient coordinate -- an estimate
    in the float and mp contexts, the largest ball radius in the arb context, where ``certified`` is
    True and every value is an enclosure of the exact population value.
    """

    risk: object
    grad_alpha: list
    grad_beta: list
    risk_bound: float
    grad_bound: float
    omitted_mass: float
    terms: int
    certified: bool = False


@dataclass(frozen=True)
class QuadraticMoments:
    """Squared-loss risk at fixed symmetric attention as a quadratic in (beta_a, beta_b).

    With phi = (g, 1 - g) on non-empty strings (g the attention weight on the marked class) and phi = 0
    on the empty one, f = beta . phi and R(beta) = 1/2 beta^T M beta - m^T beta + const, with
    M = E[phi phi^T], m = E[y phi], const = E[y^2]/2 = 1/2.  The class gradient is M beta - m (per
    unmarked coordinate: divide its entry by d - 1).  ``bound`` bounds the error of every entry of M
    and m (an estimate; ball radii included when ``certified``).
    """

    M: list
    m: list
    const: object
    bound: float
    certified: bool = False

    def risk(self, beta_a: Number, beta_b: Number):
        """R(beta) from the moments (numbers of the context)."""
        (a, b), (_, c) = self.M
        return (a * beta_a * beta_a + 2 * b * beta_a * beta_b + c * beta_b * beta_b) / 2 \
            - self.m[0] * beta_a - self.m[1] * beta_b + self.const


# ------------------------------------------------------------------------------------------------
# the enumeration of the series


def _length_law(setting: Setting) -> tuple[Fraction | float, int]:
    """(p, lo): n ~ Geometric(p) on {lo, lo + 1, ...}; the one place this module reads the length law."""
    return setting.law.p, setting.law.start


@dataclass
class _Enumeration:
    """The enumerated terms: non-empty strings as count rows (classes in the caller's order), their
    probability weights as context numbers, the empty string's weight apart, and the omitted mass."""

    counts: np.ndarray            # (T, K) int64
    weights: np.ndarray           # (T,) context numbers
    labels: np.ndarray            # (T,) float +-1: does the marked class occur
    empty_weight: object          # P(n = 0) (0 when lengths are positive)
    omitted: object               # 1 - total enumerated weight (a ball in arb)
    lean: dict = field(default_factory=dict)  # two classes: counts as context numbers, float buffers


_TINY = math.ulp(0.0)
"""The smallest positive double: the floor of the attention scaling factor e^-|gap|."""


def _compositions(s: int, parts: int):
    """All tuples of ``parts`` non-negative integers summing to s."""
    if parts == 1:
        yield (s,)
        return
    for first in range(s, -1, -1):
        for rest in _compositions(s - first, parts - 1):
            yield (first,) + rest


def _too_many(max_terms: int, K: int) -> str:
    return (f"series enumeration exceeds max_terms={max_terms} ({K} parameter classes); group equal "
            "parameters, loosen tol, or use numerics.theorem.montecarlo for this point")


def _nbinom():
    """(pmf, isf) of the negative binomial law, as scipy.stats.nbinom computes them (Boost).

    scipy.stats costs over a second of import time, most of the main job's start-up; the Boost ufuncs
    that its ``nbinom`` calls live in scipy.special._ufuncs and are used directly (isf rounded up to the
    integer quantile, as rv_discrete does).  A SciPy without them falls back to scipy.stats;
    tests/theorem/test_series.py checks both agree.
    """
    try:
        from scipy.special._ufuncs import _nbinom_isf, _nbinom_pmf
    except ImportError:  # pragma: no cover - other SciPy versions
        from scipy.stats import nbinom

        return nbinom.pmf, nbinom.isf
    return (lambda k, n, q: _nbinom_pmf(np.asarray(k, dtype=float), n, q),
            lambda y, n, q: np.ceil(_nbinom_isf(y, n, q)))


def _rows(p: float, lo: int, probs: list[float], L: int, tol: float, max_terms: int):
    """Choose the rows: (prefix count tuples (R x K-1), row lengths); float arithmetic (any rule is valid,
    the bound is computed afterwards)."""
    from scipy.special import gammaln

    K = len(probs)
    prefix = [k for k in range(K) if k != L]
    if p >= 1.0:  # every string has length lo
        tuples = [t for t in _product(range(lo + 1), repeat=K - 1) if sum(t) <= lo]
        comps = np.array(tuples, dtype=np.int64).reshape(-1, K - 1)
        return comps, lo - comps.sum(axis=1)
    xL = probs[L] * (1 - p)
    X = (1 - p) * (1 - probs[L]) / (1 - xL)
    scale = p / (1 - xL) / (1 - p) ** lo  # P(s) = scale X^s
    if X >= 1.0:  # p below the double resolution of 1 - p: strings are astronomically long
        raise SettingError(_too_many(max_terms, K))
    if X > 0:
        S = max(0, math.ceil(math.log(tol / 3 * (1 - X) / scale) / math.log(X)) - 1)
    else:
        S = 0
    if math.comb(S + K - 1, K - 1) > max_terms:
        raise SettingError(_too_many(max_terms, K))
    comps = np.array([c for s in range(S + 1) for c in _compositions(s, K - 1)], dtype=np.int64)
    s = comps.sum(axis=1)
    logq = np.log([probs[k] * (1 - p) / (1 - xL) / X for k in prefix]) if X > 0 else np.zeros(K - 1)
    logP = np.log(scale) + s * (math.log(X) if X > 0 else 0.0) + gammaln(s + 1.0) \
        - gammaln(comps + 1.0).sum(axis=1) + (comps * logq).sum(axis=1)
    P = np.exp(logP)
    keep = P >= tol / (3 * len(P))
    comps, s, P = comps[keep], s[keep], P[keep]
    q = np.minimum(tol / (3 * len(P) * P), 1.0)
    R = np.maximum(_nbinom()[1](q, s + 1, 1 - xL), 0).astype(np.int64)
    return comps, R


def _term_counts(comps: np.ndarray, R: np.ndarray, L: int, K: int, lo: int):
    """Count rows (T, K) of the non-empty strings of the rows; r runs 0..R_t (from 1 on the empty prefix)."""
    lens = R + 1
    T = int(lens.sum())
    row = np.repeat(np.arange(len(R)), lens)
    starts = np.cumsum(lens) - lens
    r = np.arange(T) - np.repeat(starts, lens)
    counts = np.empty((T, K), dtype=np.int64)
    prefix = [k for k in range(K) if k != L]
    counts[:, prefix] = comps[row]
    counts[:, L] = r
    nonempty = counts.sum(axis=1) >= max(lo, 1)
    return counts[nonempty], row[nonempty]


def _float_weights(counts, p, lo, probs, L):
    """Weights in float64: P(prefix) times the negative binomial pmf of r (scipy: a few ulp)."""
    from scipy.special import gammaln

    K = len(probs)
    prefix = [k for k in range(K) if k != L]
    n = counts.sum(axis=1)
    if p >= 1.0:
        logw = gammaln(n + 1.0) - gammaln(counts + 1.0).sum(axis=1) + (counts * np.log(probs)).sum(axis=1)
        return np.exp(logw)
    xL = probs[L] * (1 - p)
    X = (1 - p) * (1 - probs[L]) / (1 - xL)
    scale = p / (1 - xL) / (1 - p) ** lo
    pre = counts[:, prefix]
    s = pre.sum(axis=1)
    Ps = scale * X ** s.astype(float)
    if K > 2:
        logq = np.log([probs[k] * (1 - p) / (1 - xL) / X for k in prefix])
        Ps = Ps * np.exp(gammaln(s + 1.0) - gammaln(pre + 1.0).sum(axis=1) + (pre * logq).sum(axis=1))
    return Ps * _nbinom()[0](counts[:, L], s + 1, 1 - xL)


def _exact_weights(counts, rows, ctx, p, lo, d, sizes, L):
    """Weights as context numbers: an exact rational start per row, then w(r+1) = w(r) (1-p) pi_L n / r
    along the row (n = s + r; ball arithmetic in arb, so every weight is an enclosure)."""
    pq = Fraction(p)
    pis = [Fraction(sz, d) for sz in sizes]
    step = ctx.number((1 - pq) * pis[L])
    out = np.empty(len(counts), dtype=object)
    bounds = np.flatnonzero(np.diff(rows, prepend=-1, append=len(rows) + 1))
    for a, b in zip(bounds[:-1], bounds[1:]):
        first = counts[a].tolist()
        n = sum(first)
        exact = pq * (1 - pq) ** (n - lo) * math.factorial(n)
        for k, c in enumerate(first):
            exact = exact * pis[k] ** c / math.factorial(c)
        w = out[a] = ctx.number(exact)
        r0 = first[L]
        for i, r in enumerate(range(r0 + 1, r0 + b - a), start=a + 1):
            w = out[i] = w * step * (n + r - r0) / r
    return out


@lru_cache(maxsize=32)
def _enumeration(d: int, p, lo: int, sizes: tuple, tol: float, ctx_key: tuple, max_terms: int) -> _Enumeration:
    """Enumerate the series for class sizes ``sizes`` (sizes[0] == 1: the marked class) in one context."""
    K = len(sizes)
    probs = [sz / d for sz in sizes]
    L = 1 + int(np.argmax(sizes[1:]))

    def terms():
        comps, R = _rows(float(p), lo, probs, L, tol, max_terms)
        if int((R + 1).sum()) > max_terms:
            raise SettingError(_too_many(max_terms, K))
        return _term_counts(comps, R, L, K, lo)

    ctx = _make_context(ctx_key, guard=True)
    with ctx:
        empty = ctx.number(Fraction(p) if lo == 0 else 0)
        if ctx is FLOAT:
            counts, weights = _float_terms(terms, d, p, lo, sizes, tol, max_terms, probs, L)
            omitted = max(1.0 - math.fsum(weights.tolist()) - float(empty), 0.0)
        else:
            counts, rows = terms()
            weights = _exact_weights(counts, rows, ctx, p, lo, d, sizes, L)
            omitted = 1 - (weights.sum() + empty)
    return _assemble(counts, weights, empty, omitted, ctx)


FLOAT_CACHE_TERMS = 1 << 18
"""Float enumerations of at most this many terms (6 MB) are kept in the disk cache (``_float_terms``)."""
DISK_CACHE = True
"""Whether ``_float_terms`` reads and writes the disk cache (``numerics.bench.theorem`` turns it off to time the
enumeration's build)."""


def _float_terms(terms, d, p, lo, sizes, tol, max_terms, probs, L):
    """(counts, float weights) of the enumeration, from the disk cache (``theory.cache.file_value``, keyed
    by this module's source, the arguments and the SciPy version, whose Boost negative binomial gives the
    weights and row lengths) or built by ``terms`` and ``_float_weights``: a start that finds them there
    does not import scipy.special (a third of the main job's start-up).  Bit-identical either way."""
    from importlib.metadata import version

    from theory.cache import file_value

    def build():
        counts, _ = terms()
        return counts.shape, counts.tobytes(), _float_weights(counts, float(p), lo, probs, L).tobytes()

    entry = ("float-terms", d, str(p), lo, tuple(sizes), repr(tol), max_terms, version("scipy"), np.__version__)
    shape, counts, weights = (file_value(__name__, entry, build, keep=lambda v: v[0][0] <= FLOAT_CACHE_TERMS)
                              if DISK_CACHE else build())
    return np.frombuffer(counts, dtype=np.int64).reshape(shape).copy(), np.frombuffer(weights, dtype=float).copy()


def _assemble(counts, weights, empty, omitted, ctx) -> _Enumeration:
    """The enumeration of count rows and their weights, with the lean buffers of the two-class path."""
    K = counts.shape[1]
    labels = np.where(counts[:, 0] > 0, 1.0, -1.0)
    E = _Enumeration(counts, weights, labels, empty, omitted)
    if K == 2:
        with ctx:
            E.lean["c"] = ctx.asarray(counts[:, 0])
            E.lean["r"] = ctx.asarray(counts[:, 1])
            E.lean["y"] = ctx.asarray(labels)  # context numbers: no float conversion per operation
        if ctx is FLOAT:
            T = len(counts)
            E.lean["buffers"] = {name: np.empty(T) for name in ("cu", "rr", "f", "w", "g", "loss", "tmp")}
            E.lean["buffers"]["dl"] = np.empty((T, 1))
    return E


@lru_cache(maxsize=8)
def _law_enumeration(d: int, law, sizes: tuple, tol: float, max_terms: int) -> _Enumeration:
    """The series of a length law other than the geometric one (``DiscreteLaw``), float context, two classes
    (the marked symbol, the d - 1 others): lengths n up to the law's cut-off at tol / 2, and per n the marked
    counts c between its binomial quantiles at tol / (4 (N + 1)) on each side; weights P(n) Binomial(n, 1/d)(c).
    The omitted mass is computed afterwards from the weights, as for the geometric law."""
    from scipy.stats import binom

    if len(sizes) != 2:
        raise SettingError(f"the series under {law.describe()} is written for parameters symmetric in the "
                           "unmarked symbols (two classes); group the parameters or use numerics.theorem.montecarlo")
    N = law.cutoff(tol / 2)
    ns = np.arange(max(law.start, 1), N + 1)
    q = tol / (4 * (N + 1))
    cmin = np.maximum(binom.ppf(q, ns, 1.0 / d) - 1, 0).astype(np.int64)
    cmax = np.minimum(binom.isf(q, ns, 1.0 / d), ns).astype(np.int64)
    width = cmax - cmin + 1
    total = int(width.sum())
    if total > max_terms:
        raise SettingError(_too_many(max_terms, len(sizes)))
    n_rows = np.repeat(ns, width)
    c = np.repeat(cmin, width) + np.arange(total) - np.repeat(np.cumsum(width) - width, width)
    pn = np.array([float(law.pmf(int(n))) for n in ns])
    weights = np.repeat(pn, width) * binom.pmf(c, n_rows, 1.0 / d)
    empty = float(law.pmf(0)) if law.start == 0 else 0.0
    omitted = max(1.0 - math.fsum(weights.tolist()) - empty, 0.0)
    return _assemble(np.stack([c, n_rows - c], axis=1).astype(np.int64), weights, empty, omitted, FLOAT)


def _make_context(key: tuple, guard: bool = False):
    """The context of a cache key: ("float",), ("mp", dps) or ("arb", prec_bits); ``guard`` adds 10
    digits (mp) for building weights."""
    if key[0] == "float":
        return FLOAT
    if key[0] == "mp":
        return MPContext(key[1] + (10 if guard else 0))
    return ArbContext(key[1])


def _group(alpha: list, beta: list) -> list[list[int]]:
    """Classes of coordinates with identical (alpha_k, beta_k); class 0 is the marked symbol alone."""
    classes = [[0]]
    keys: dict = {}
    for k in range(1, len(alpha)):
        key = (alpha[k], beta[k])
        if key not in keys:
            keys[key] = len(classes)
            classes.append([])
        classes[keys[key]].append(k)
    return classes


# ------------------------------------------------------------------------------------------------


class SeriesEvaluator:
    """Evaluate R(alpha, beta) and its gradient exactly up to a stated truncation error.

    Parameters
    ----------
    setting : the Setting (alphabet, length law, loss).
    tol : target for the omitted probability mass (the bound is computed afterwards, not assumed).
    context : ``"float"`` (numpy, fast; error estimate), ``"mp"`` (mpmath at ``dps`` digits; error
        estimate) or ``"arb"`` (python-flint balls at ``prec_bits`` bits; certified enclosures).
        ``backend`` is accepted as an alias.
    dps : decimal digits of the mp context (and of the arb context when ``prec_bits`` is None).
    prec_bits : working precision of the arb context (default: dps digits plus 32 guard bits).
    max_terms : refuse enumerations larger than this (many distinct parameter values).

    >>> from theory.setting import Setting
    >>> evaluator = SeriesEvaluator(Setting(5))
    >>> result = evaluator.evaluate_symmetric(0.0, 0.0, 0.0, 0.0)   # the zero initialisation
    >>> round(result.risk, 12), result.risk_bound < 1e-11, result.certified
    (0.5, True, False)
    >>> certified = SeriesEvaluator(Setting(5), context="arb", tol=1e-25).evaluate_symmetric(1.0, 0.0, 1.0, -1.0)
    >>> estimate = evaluator.evaluate_symmetric(1.0, 0.0, 1.0, -1.0)
    >>> certified.certified, certified.risk.rad() < 1e-23           # a ball that contains the exact risk
    (True, True)
    >>> abs(float(certified.risk.mid()) - estimate.risk) <= estimate.risk_bound
    True
    """

    def __init__(self, setting: Setting, *, tol: float = 1e-12, context: str = "float", dps: int = 30,
                 prec_bits: int | None = None, max_terms: int = 3_000_000, backend: str | None = None):
        context = backend if backend is not None else context
        check_choice("context (backend)", context, CONTEXTS)
        tol = check_real("tol", tol, 0, 1)
        dps = check_int("dps", dps, 15)
        if context == "float" and tol < 1e-15:
            raise SettingError("the float context cannot resolve tol < 1e-15; use context='mp' or 'arb'")
        if context != "float" and not setting.geometric:
            raise SettingError(f"under {setting.law.describe()} the series runs in the float context only "
                               "(its weights are not exact rationals)")
        max_terms = check_int("max_terms", max_terms)
        if prec_bits is None:
            prec_bits = math.ceil(dps * math.log2(10)) + 32
        self.setting = setting
        self.tol = tol
        self.context = context
        self.dps = dps
        self.prec_bits = prec_bits
        self.max_terms = max_terms
        self._key = {"float": ("float",), "mp": ("mp", dps), "arb": ("arb", prec_bits)}[context]
        self.ctx = _make_context(self._key)  # validates prec_bits
        self._model = Model(H=1, D=2, K=1)

    @property
    def backend(self) -> str:
        """Alias of ``context``, the name the constructor's ``backend`` argument gives it."""
        return self.context

    def _enum(self, sizes: list[int]) -> _Enumeration:
        if not self.setting.geometric:
            return _law_enumeration(self.setting.d, self.setting.law, tuple(sizes), self.tol, self.max_terms)
        p, lo = _length_law(self.setting)
        return _enumeration(self.setting.d, p, lo, tuple(sizes), self.tol, self._key, self.max_terms)

    # ------------------------------------------------------------------------------------------
    def evaluate(self, alpha: Sequence[Number], beta: Sequence[Number]) -> Evaluation:
        """Risk and full gradients at arbitrary (alpha, beta) in R^d x R^d (per coordinate)."""
        d = self.setting.d
        alpha = check_vector("alpha", alpha, d)
        beta = check_vector("beta", beta, d)
        classes = _group(alpha, beta)
        sizes = [len(c) for c in classes]
        with self.ctx:
            risk, ga, gb, out = self._classes([alpha[c[0]] for c in classes], [beta[c[0]] for c in classes], sizes)
            grad_alpha, grad_beta = [None] * d, [None] * d
            for j, cls in enumerate(classes):
                for k in cls:
                    grad_alpha[k] = ga[j] / sizes[j]
                    grad_beta[k] = gb[j] / sizes[j]
            return self._result(risk, grad_alpha, grad_beta, out)

    def evaluate_symmetric(self, alpha_a: Number, alpha_b: Number, beta_a: Number, beta_b: Number) -> Evaluation:
        """``evaluate`` for parameters symmetric in the unmarked symbols; the gradients are two-element
        lists [marked coordinate, each unmarked coordinate]."""
        d = self.setting.d
        for name, v in (("alpha_a", alpha_a), ("alpha_b", alpha_b), ("beta_a", beta_a), ("beta_b", beta_b)):
            check_vector(name, [v], 1)
        with self.ctx:
            risk, ga, gb, out = self._classes([alpha_a, alpha_b], [beta_a, beta_b], [1, d - 1])
            return self._result(risk, [ga[0], ga[1] / (d - 1)], [gb[0], gb[1] / (d - 1)], out)

    def quadratic_moments(self, alpha_a: Number, alpha_b: Number) -> QuadraticMoments:
        """Moments of the squared-loss risk as a quadratic in the symmetric readout (beta_a, beta_b) at
        fixed symmetric attention (alpha_a on the marked symbol, alpha_b on the others): one series pass,
        after which output-only gradient descent is a linear recurrence.  Squared loss only (the
        quadratic form is the squared loss; logistic risk is not quadratic)."""
        if self.setting.loss != "squared":
            raise SettingError(f"quadratic_moments is for the squared loss, the setting has loss={self.setting.loss!r}")
        check_vector("alpha_a", [alpha_a], 1)
        check_vector("alpha_b", [alpha_b], 1)
        E = self._enum([1, self.setting.d - 1])
        with self.ctx:
            _, g = self._pair_forward(E, alpha_a, alpha_b, 1, 0)
            W = E.weights
            Wg, h = W * g, 1 - g
            Wy = W * E.lean["y"]
            # products summed pairwise (np.dot would call BLAS, whose threads cost 30x on a busy machine)
            sums = [(Wg * g).sum(), (Wg * h).sum(), (W * h * h).sum(), (Wy * g).sum(), (Wy * h).sum()]
            tail = self._tail(E)
            if self.context == "arb":
                sums = [v + self._ball(tail) for v in sums]
                bound = max(float(v.rad()) for v in sums)
            else:
                bound = tail + self._allowance()
            const = self.ctx.number(Fraction(1, 2))
            return QuadraticMoments([[sums[0], sums[1]], [sums[1], sums[2]]], [sums[3], sums[4]], const,
                                    bound, self.context == "arb")

    def _allowance(self) -> float:
        return FLOAT_ROUNDING_ALLOWANCE if self.context == "float" else 10.0 ** (-self.dps + 2)

    def _tail(self, E: _Enumeration):
        """Upper bound of the omitted mass: a float (estimate), or the upper end of the arb ball."""
        if self.context == "arb":
            return max(E.omitted.upper(), 0)
        return max(float(E.omitted), 0.0)

    @staticmethod
    def _ball(radius):
        """The arb ball [-radius, radius]."""
        from flint import arb

        return arb(0, radius)

    def _sup(self, cb):
        """(sup |loss|, sup |gradient integrand|) over all strings, as context numbers (upper bounds)."""
        ctx = self.ctx
        if self.context == "arb":  # rigorous also for parameters given as balls
            B = ctx.number(0)
            for b in cb:
                B = B.max(ctx.number(b).abs_upper())
        else:
            B = ctx.number(max(abs(float(b)) for b in cb))
        one = ctx.number(1)
        if self.setting.loss == "squared":
            sup_loss, sup_dl = (B + 1) ** 2 / 2, B + 1
        else:
            sup_loss, sup_dl = ctx.log1pexp(np.array([B]))[0], one
        two_b = 2 * B
        return sup_loss, sup_dl * (two_b if float(two_b) > 1 else one)

    def _classes(self, ca, cb, sizes):
        """Class sums (risk, dR/dalpha_class, dR/dbeta_class) and the enumeration."""
        E = self._enum(sizes)
        if len(sizes) == 2:
            risk, ga, gb = self._pair_sums(E, ca, cb)
        else:
            risk, ga, gb = self._model_sums(E.counts, E.labels, E.weights, ca, cb)
        if self.setting.lengths == "nonnegative":
            r0, ga0, gb0 = self._model_sums(np.zeros((1, len(sizes)), dtype=np.int64), np.array([-1.0]),
                                            np.array([E.empty_weight], dtype=self.ctx.dtype), ca, cb)
            risk = risk + r0
            ga = [a + b for a, b in zip(ga, ga0)]
            gb = [a + b for a, b in zip(gb, gb0)]
        return risk, ga, gb, (E, cb)

    def _model_sums(self, counts, labels, weights, ca, cb):
        """The generic path: ``Model.risk_and_grad`` on bags of class tokens (counts as multiplicities)."""
        ctx = self.ctx
        K = len(ca)
        params = Params(ctx.asarray([ca]), ctx.asarray([cb]).reshape(1, K, 1))
        risk, grad, _ = Model(H=1, D=K, K=1).risk_and_grad(
            params, np.eye(K), labels[:, None], counts, loss=self.setting.loss, weights=weights, ctx=ctx)
        return risk, list(grad.alpha[0]), list(grad.B[0, :, 0])

    def _scaled_counts(self, E: _Enumeration, alpha_a, alpha_b):
        """(c e^gap, r) or (c, r e^-gap), whichever keeps the factor <= 1 (float: into the reused buffers)."""
        ctx = self.ctx
        gap = ctx.number(alpha_a) - ctx.number(alpha_b)
        c, r = E.lean["c"], E.lean["r"]
        buf = E.lean.get("buffers")
        if buf is not None:  # the factor is kept >= the smallest subnormal: 0/0 would give nan at |gap| > 745
            if gap <= 0:
                return np.multiply(c, max(math.exp(gap), _TINY), out=buf["cu"]), r
            return c, np.multiply(r, max(math.exp(-gap), _TINY), out=buf["rr"])
        if float(gap) <= 0:
            return c * ctx.exp(np.array([gap]))[0], r
        return c, r * ctx.exp(np.array([-gap]))[0]

    def _pair_forward(self, E: _Enumeration, alpha_a, alpha_b, beta_a, beta_b):
        """(f, w) of ``attend_pair`` on every non-empty term (float: into the reused buffers)."""
        cu, rr = self._scaled_counts(E, alpha_a, alpha_b)
        ba, bb = self.ctx.number(beta_a), self.ctx.number(beta_b)
        buf = E.lean.get("buffers")
        return attend_pair(cu, rr, ba, bb, out=None if buf is None else (buf["f"], buf["w"]))

    def _pair_sums(self, E: _Enumeration, ca, cb):
        """The lean two-class path: ``attend_pair``, ``loss_terms`` and the two-token backward pass
        (float and squared loss: their fused form ``pair_squared_sums``)."""
        buf = E.lean.get("buffers")
        if buf is not None and self.setting.loss == "squared":
            cu, rr = self._scaled_counts(E, ca[0], ca[1])
            risk, gw, g_total, ga = pair_squared_sums(cu, rr, E.lean["y"], E.weights, float(cb[0]), float(cb[1]), buf)
            return risk, *self._alpha_beta(ga, gw, g_total)
        f, w = self._pair_forward(E, ca[0], ca[1], cb[0], cb[1])
        out = None if buf is None else (buf["loss"], buf["dl"])
        loss, dl = loss_terms(self.setting.loss, f[:, None], E.lean["y"][:, None], self.ctx, out=out)
        W = E.weights
        ba = self.ctx.number(cb[0])
        if buf is None:
            g = W * dl[:, 0]
            gw = np.dot(g, w)
            return np.dot(W, loss), *self._alpha_beta(np.dot(g * w, ba - f), gw, g.sum())
        tmp, g = buf["tmp"], buf["g"]
        risk = np.multiply(W, loss, out=tmp).sum()  # pairwise sums, no BLAS threads
        np.multiply(W, dl[:, 0], out=g)
        gw = np.multiply(g, w, out=tmp).sum()
        g_total = g.sum()
        ga = np.multiply(tmp, np.subtract(ba, f, out=f), out=tmp).sum()
        return risk, *self._alpha_beta(ga, gw, g_total)

    @staticmethod
    def _alpha_beta(ga, gw, g_total):
        """Class gradients of the two-token backward pass: alpha (a, -a), beta (sum w g, sum (1 - w) g)."""
        return [ga, -ga], [gw, g_total - gw]

    def _result(self, risk, grad_alpha, grad_beta, out) -> Evaluation:
        E, cb = out
        sup_loss, sup_grad = self._sup(cb)
        tail = self._tail(E)
        terms = len(E.weights) + (self.setting.lengths == "nonnegative")
        if self.context == "arb":
            risk = risk + self._ball((sup_loss * tail).upper())
            gpad = self._ball((sup_grad * tail).upper())
            grad_alpha = [g + gpad for g in grad_alpha]
            grad_beta = [g + gpad for g in grad_beta]
            rb = float(risk.rad())
            gbnd = max(float(g.rad()) for g in grad_alpha + grad_beta)
            return Evaluation(risk, grad_alpha, grad_beta, rb, gbnd, float(tail), terms, True)
        slack = tail + self._allowance()
        if self.context == "float":
            risk, grad_alpha, grad_beta = float(risk), [float(g) for g in grad_alpha], [float(g) for g in grad_beta]
        return Evaluation(risk, grad_alpha, grad_beta, float(sup_loss) * slack, float(sup_grad) * slack,
                          float(tail), terms)
