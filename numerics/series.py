"""Exact series evaluation of the population risk and gradients, with a rigorous truncation bound.

The population risk is E_n E_{counts | n}[loss(f(X), y)], a series over the length n and the token
counts.  Symbols are grouped into classes with equal (alpha_k, beta_k) -- the marked symbol is always
a class of its own -- so f depends on the counts per class only, which are multinomial given n.
The series is enumerated term by term (length by length, counts by conditional binomials) and
truncated; the error bound is then computed *a posteriori*:

    |true - computed| <= sup |integrand| * (1 - total probability of the enumerated terms)

which holds whatever truncation rule was used, since every term is a probability weight times a
bounded integrand.  Bounds used: |f| <= B = max_k |beta_k|; squared loss <= (B+1)^2/2 with
|dloss/df| <= B+1; logistic loss <= log(1 + e^B) with |dloss/df| <= 1; attention weights lie in [0, 1]
and |beta_k - f| <= 2B.  The enumerated mass is summed exactly in the ``mp`` backend (at the working
precision) and with ``math.fsum`` in the ``float`` backend, whose bound adds a rounding allowance of
``FLOAT_ROUNDING_ALLOWANCE`` times the integrand bound.  That allowance covers, relative to the integrand
bound: the weights (binomial pmf to a few ulp, length pmf to O(log n) ulp), the integrand (a dozen
operations), and pairwise summation (at most about (128 + log2 terms) ulp) -- a few hundred ulp, about
5e-14, in all.  It is an error budget for IEEE double arithmetic, not an interval-arithmetic proof;
the ``mp`` backend carries 10 guard digits instead and is the one to use for certification.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import mpmath
import numpy as np

from theory.setting import Setting
from theory.validation import SettingError, check_vector

FLOAT_ROUNDING_ALLOWANCE = 1e-13
BACKENDS = ("float", "mp")


@dataclass(frozen=True)
class Evaluation:
    """Population risk and gradient at one parameter point, with truncation bounds.

    ``risk_bound``/``grad_bound`` bound |exact - computed| for the risk and for every gradient
    coordinate.  Gradients are per coordinate of alpha and beta in R^d.
    """

    risk: object
    grad_alpha: list
    grad_beta: list
    risk_bound: float
    grad_bound: float
    omitted_mass: float
    terms: int

    def risk_interval(self):
        return float(self.risk) - self.risk_bound, float(self.risk) + self.risk_bound


def _group(alpha, beta):
    """Classes of coordinates with identical (alpha_k, beta_k); class 0 is the marked symbol alone."""
    classes = [[0]]
    keys = {}
    for k in range(1, len(alpha)):
        key = (alpha[k], beta[k])
        if key not in keys:
            keys[key] = len(classes)
            classes.append([])
        classes[keys[key]].append(k)
    return classes


@dataclass
class _Table:
    weights: object  # np.ndarray (float) or list of mpf
    n: np.ndarray
    counts: np.ndarray  # terms x K
    omitted: float


def _len_pmf(n, p, lengths):
    """P(n) in double precision: p (1-p)^(n-1) (or p (1-p)^n), a relative error of O(log n) ulp."""
    k = n - 1 if lengths == "positive" else n
    if p >= 1:
        return 1.0 if k == 0 else 0.0
    return p * (1.0 - p) ** k


@lru_cache(maxsize=64)
def _table(d, p, lengths, sizes, tol, backend, dps, max_terms):
    """Enumerate (weight, n, counts) for class sizes ``sizes`` (sizes[0] == 1: the marked class)."""
    K = len(sizes)
    lo = 1 if lengths == "positive" else 0
    p_f = float(p)
    # each of the K-1 conditional binomial levels may drop at most level_tol of conditional mass,
    # and the length tail drops at most tol/2, so the omitted mass stays below tol
    level_tol = tol / (2 * max(K - 1, 1))
    Ns, Cs, Ws = [], [], []
    # choose N with P(n > N) <= tol / 2
    if p_f >= 1:
        N = lo
    else:
        N = max(lo, math.ceil(math.log(tol / 2) / math.log1p(-p_f)) + 1)
    if backend == "mp":
        with mpmath.workdps(dps + 10):
            pm = mpmath.mpf(p.numerator) / p.denominator if isinstance(p, Fraction) else mpmath.mpf(p)
            probs = [mpmath.mpf(s) / d for s in sizes]
            total = mpmath.mpf(0)
            for n in range(lo, N + 1):
                ln = pm * (1 - pm) ** (n - lo)
                for comp, w in _compositions_mp(n, probs, level_tol):
                    Ns.append(n)
                    Cs.append(comp)
                    Ws.append(ln * w)
                    total += ln * w
                if len(Ws) > max_terms:
                    raise SettingError(_too_many(max_terms, K))
            omitted = float(max(1 - total, 0))
    else:
        probs = [s / d for s in sizes]
        count = 0
        for n in range(lo, N + 1):
            ln = _len_pmf(n, p_f, lengths)
            for comp, w in _compositions_float(n, probs, level_tol):
                Ns.append(np.full(len(w), n))
                Cs.append(comp)
                Ws.append(ln * w)
                count += len(w)
            if count > max_terms:
                raise SettingError(_too_many(max_terms, K))
        Ns = np.concatenate(Ns)
        Cs = np.concatenate(Cs, axis=0)
        Ws = np.concatenate(Ws)
        omitted = max(1.0 - math.fsum(Ws.tolist()), 0.0)
    counts = np.array(Cs, dtype=np.int64).reshape(-1, K)
    return _Table(Ws, np.asarray(Ns, dtype=np.int64), counts, omitted)


def _too_many(max_terms, K):
    return (f"series enumeration exceeds max_terms={max_terms} ({K} parameter classes); group equal "
            "parameters, loosen tol, or use numerics.montecarlo for this point")


def _compositions_mp(n, probs, level_tol):
    """Yield (counts, multinomial probability) with conditional-binomial truncation (mp)."""
    K = len(probs)
    if K == 1:
        yield (n,), mpmath.mpf(1)
        return
    rest = sum(probs[1:])
    q = probs[0] / (probs[0] + rest)
    ratio = q / (1 - q)
    cum = mpmath.mpf(0)
    w = (1 - q) ** n
    for c in range(0, n + 1):
        if c:
            w = w * (n - c + 1) / c * ratio
        cum += w
        for sub, ws in _compositions_mp(n - c, probs[1:], level_tol):
            yield (c,) + sub, w * ws
        if 1 - cum < level_tol:
            break


def _compositions_float(n, probs, level_tol):
    """Yield (counts array [m x K], probabilities [m]) with the last level vectorised.

    Binomial weights come from scipy.stats.binom.pmf (Loader's saddle-point method: a few ulp of
    relative error, unlike exp of lgamma differences, which loses about n * eps).
    """
    from scipy.stats import binom

    K = len(probs)
    if K == 1:
        yield np.array([[n]]), np.ones(1)
        return
    q = probs[0] / sum(probs)
    c = np.arange(n + 1)
    w = binom.pmf(c, n, q)
    tail_after = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])  # sum_{c' > c} w[c']
    stop = int(np.argmax(tail_after < level_tol)) + 1
    if K == 2:
        comps = np.stack([c[:stop], n - c[:stop]], axis=1)
        yield comps, w[:stop]
        return
    for ci in range(stop):
        if w[ci] == 0:
            continue
        for sub, ws in _compositions_float(n - ci, probs[1:], level_tol):
            comps = np.concatenate([np.full((len(ws), 1), ci), sub], axis=1)
            yield comps, w[ci] * ws


def _psum(x):
    """Pairwise sum over the first axis (numpy sums contiguous data pairwise: error O(log n) ulp)."""
    x = np.asarray(x)
    if x.ndim == 1:
        return float(x.sum())
    return np.ascontiguousarray(x.T).sum(axis=1)


class SeriesEvaluator:
    """Evaluate R(alpha, beta) and its gradient exactly up to a stated truncation bound.

    Parameters
    ----------
    setting : Setting
    tol : target for the omitted probability mass (the bound is reported, not assumed).
    backend : ``"float"`` (numpy, fast) or ``"mp"`` (mpmath at ``dps`` digits).
    max_terms : refuse enumerations larger than this (many distinct parameter values).
    """

    def __init__(self, setting: Setting, *, tol: float = 1e-12, backend: str = "float", dps: int = 30,
                 max_terms: int = 3_000_000):
        if backend not in BACKENDS:
            raise SettingError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if not (isinstance(tol, (int, float)) and 0 < tol < 1):
            raise SettingError(f"tol must be a number in (0, 1), got {tol!r}")
        if not (isinstance(dps, int) and dps >= 15):
            raise SettingError(f"dps must be an integer >= 15, got {dps!r}")
        if backend == "float" and tol < 1e-15:
            raise SettingError("the float backend cannot certify tol < 1e-15; use backend='mp'")
        self.setting = setting
        self.tol = tol
        self.backend = backend
        self.dps = dps
        self.max_terms = max_terms

    # ------------------------------------------------------------------------------------------
    def _tab(self, sizes):
        s = self.setting
        p = s.p_value if isinstance(s.p_value, Fraction) else s.p_value
        return _table(s.d, p, s.lengths, tuple(sizes), self.tol, self.backend, self.dps, self.max_terms)

    def evaluate(self, alpha, beta) -> Evaluation:
        """Risk and full gradients at arbitrary (alpha, beta) in R^d x R^d."""
        d = self.setting.d
        alpha = check_vector("alpha", alpha, d)
        beta = check_vector("beta", beta, d)
        classes = _group(alpha, beta)
        ca = [alpha[c[0]] for c in classes]
        cb = [beta[c[0]] for c in classes]
        sizes = [len(c) for c in classes]
        risk, ga_cls, gb_cls, rb, gbnd, om, terms = self._evaluate_classes(ca, cb, sizes)
        grad_alpha = [None] * d
        grad_beta = [None] * d
        for j, cls in enumerate(classes):
            for k in cls:
                grad_alpha[k] = ga_cls[j] / sizes[j]
                grad_beta[k] = gb_cls[j] / sizes[j]
        return Evaluation(risk, grad_alpha, grad_beta, rb, gbnd, om, terms)

    def evaluate_symmetric(self, alpha_a, alpha_b, beta_a, beta_b) -> Evaluation:
        """Same as ``evaluate`` for parameters symmetric in the unmarked symbols; the returned
        gradients are two-element lists [marked coordinate, each unmarked coordinate]."""
        d = self.setting.d
        for name, v in (("alpha_a", alpha_a), ("alpha_b", alpha_b), ("beta_a", beta_a), ("beta_b", beta_b)):
            check_vector(name, [v], 1)
        risk, ga, gb, rb, gbnd, om, terms = self._evaluate_classes([alpha_a, alpha_b], [beta_a, beta_b], [1, d - 1])
        return Evaluation(risk, [ga[0], ga[1] / (d - 1)], [gb[0], gb[1] / (d - 1)], rb, gbnd, om, terms)

    # ------------------------------------------------------------------------------------------
    def _bounds(self, cb, omitted):
        B = max(abs(float(b)) for b in cb)
        if self.setting.loss == "squared":
            sup_loss, sup_dl = (B + 1) ** 2 / 2, B + 1
        else:
            sup_loss, sup_dl = math.log1p(math.exp(B)) if B < 700 else B, 1.0
        sup_grad = sup_dl * max(1.0, 2 * B)
        allowance = FLOAT_ROUNDING_ALLOWANCE if self.backend == "float" else 10.0 ** (-self.dps + 2)
        risk_bound = sup_loss * (omitted + allowance)
        grad_bound = sup_grad * (omitted + allowance)
        return risk_bound, grad_bound

    def _evaluate_classes(self, ca, cb, sizes):
        tab = self._tab(sizes)
        if self.backend == "float":
            out = self._eval_float(tab, [float(a) for a in ca], [float(b) for b in cb])
        else:
            with mpmath.workdps(self.dps):
                out = self._eval_mp(tab, [mpmath.mpf(a) for a in ca], [mpmath.mpf(b) for b in cb])
        risk, ga, gb = out
        rb, gbnd = self._bounds(cb, tab.omitted)
        return risk, ga, gb, rb, gbnd, tab.omitted, len(tab.n)

    def _eval_float(self, tab, ca, cb):
        a = np.array(ca) - max(ca)
        e = np.exp(a)
        b = np.array(cb)
        C = tab.counts.astype(float)
        W = tab.weights
        nonempty = tab.n > 0
        S0 = C @ e
        S0safe = np.where(nonempty, S0, 1.0)
        att = (C * e) / S0safe[:, None]  # per-class attention mass, terms x K
        att[~nonempty] = 0.0
        f = att @ b
        y = np.where(tab.counts[:, 0] > 0, 1.0, -1.0)
        if self.setting.loss == "squared":
            loss = 0.5 * (f - y) ** 2
            dl = f - y
        else:
            z = -y * f
            loss = np.logaddexp(0.0, z)
            dl = -y * _sigmoid(z)
        risk = _psum(W * loss)
        watt = att * (W * dl)[:, None]
        gb = _psum(watt)
        ga = _psum(watt * (b[None, :] - f[:, None]))
        return risk, [float(v) for v in ga], [float(v) for v in gb]

    def _eval_mp(self, tab, ca, cb):
        K = len(ca)
        amax = max(ca)
        e = [mpmath.exp(a - amax) for a in ca]
        risk = mpmath.mpf(0)
        ga = [mpmath.mpf(0)] * K
        gb = [mpmath.mpf(0)] * K
        squared = self.setting.loss == "squared"
        for w, n, comp in zip(tab.weights, tab.n, tab.counts):
            y = 1 if comp[0] > 0 else -1
            if n == 0:
                f = mpmath.mpf(0)
                risk += w * (mpmath.mpf(1) / 2 if squared else mpmath.log(2))
                continue
            ce = [int(comp[j]) * e[j] for j in range(K)]
            S0 = mpmath.fsum(ce)
            att = [x / S0 for x in ce]
            f = mpmath.fsum(att[j] * cb[j] for j in range(K))
            if squared:
                risk += w * (f - y) ** 2 / 2
                dl = f - y
            else:
                z = -y * f
                risk += w * mpmath.log1p(mpmath.exp(z))
                dl = -y / (1 + mpmath.exp(-z))
            wdl = w * dl
            for j in range(K):
                if att[j]:
                    gb[j] += wdl * att[j]
                    ga[j] += wdl * att[j] * (cb[j] - f)
        return risk, ga, gb

    # ------------------------------------------------------------------------------------------
    def phase3_moments(self, gap):
        """M = E[phi phi^T], m = E[y phi] for phi = (g, 1 - g) on n >= 1 (phi = 0 on the empty string),
        g the attention mass on the marked symbol when alpha_a - alpha_b = ``gap``.  Returns
        (M as 2x2 nested list, m as list, bound on every entry)."""
        d = self.setting.d
        tab = self._tab([1, d - 1])
        allowance = FLOAT_ROUNDING_ALLOWANCE if self.backend == "float" else 10.0 ** (-self.dps + 2)
        bound = tab.omitted + allowance
        if self.backend == "float":
            u = math.exp(min(float(gap), 700.0))
            c = tab.counts[:, 0].astype(float)
            n = tab.n.astype(float)
            nonempty = n > 0
            denom = np.where(nonempty, c * u + (n - c), 1.0)
            g = np.where(nonempty, c * u / denom, 0.0)
            h = np.where(nonempty, 1.0 - g, 0.0)
            y = np.where(c > 0, 1.0, -1.0)
            W = tab.weights
            M = [[_psum(W * g * g), _psum(W * g * h)], [_psum(W * g * h), _psum(W * h * h)]]
            m = [_psum(W * y * g), _psum(W * y * h)]
            return M, m, bound
        with mpmath.workdps(self.dps):
            uu = mpmath.exp(mpmath.mpf(gap))
            acc = [mpmath.mpf(0)] * 5
            for w, n, comp in zip(tab.weights, tab.n, tab.counts):
                if n == 0:
                    continue
                c = int(comp[0])
                g = c * uu / (c * uu + (n - c))
                h = 1 - g
                y = 1 if c > 0 else -1
                acc[0] += w * g * g
                acc[1] += w * g * h
                acc[2] += w * h * h
                acc[3] += w * y * g
                acc[4] += w * y * h
            return [[acc[0], acc[1]], [acc[1], acc[2]]], [acc[3], acc[4]], bound


def _sigmoid(z):
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))
