"""Every number context of the series (float, mp, arb) on every variant, against an independent value.

The independent value is a naive double sum over the length n and the count c of the marked symbol,
written here in a few lines of mpmath at 36 digits (it shares no code with numerics.theorem.series or
numerics.model), truncated where the omitted mass is below 1e-27.  Each context is held to the precision
it claims: the arb ball contains the naive value, mp agrees to its own bound (< 1e-25), float to its
stated estimate; the variants are lengths positive/nonnegative (with the empty string's term),
squared/logistic loss, balancing and non-balancing p.  A large tolerance makes the omitted tail matter,
so a radius shrunk below the tail is caught too.
"""
from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import pytest
from flint import arb

from numerics.contexts import ArbContext
from numerics.theorem.series import SeriesEvaluator
from theory.setting import Setting

POINT = (0.9, -0.4, 1.3, -0.7)  # alpha_a, alpha_b, beta_a, beta_b
# balancing p at d = 2 (p = 1 under positive lengths: every string has one token; 1/3 under nonnegative)
# and a non-balancing p at d = 3: short strings keep the naive sum fast
VARIANTS = [(d, lengths, loss, p) for lengths in ("positive", "nonnegative") for loss in ("squared", "logistic")
            for d, p in ((2, None), (3, 0.45))]
NAIVE_TAIL = 1e-27


@lru_cache(maxsize=None)
def naive(d: int, lengths: str, loss: str, p, point=POINT):
    """(risk, [grad_alpha_a, grad_alpha_b], [grad_beta_a, grad_beta_b]) per coordinate, and the bound on
    the omitted tail: sum over n <= N, c = 0..n of P(n) Bin(c; n, 1/d) times the integrand."""
    s = Setting(d, p=p, lengths=lengths, loss=loss)
    lo = 1 if lengths == "positive" else 0
    with mpmath.workdps(36):
        pm = mpmath.mpf(s.p_value.numerator) / s.p_value.denominator if p is None else mpmath.mpf(p)
        aa, ab, ba, bb = (mpmath.mpf(v) for v in point)
        ea, eb, q = mpmath.exp(aa), mpmath.exp(ab), mpmath.mpf(1) / d
        N = lo if pm == 1 else math.ceil(math.log(NAIVE_TAIL) / math.log(1 - float(pm))) + lo
        risk, gaa, gab, gba, gbb = (mpmath.mpf(0) for _ in range(5))
        for n in range(lo, N + 1):
            w = pm * (1 - pm) ** (n - lo) * (1 - q) ** n  # P(n) Bin(0; n, q), then the ratio recurrence
            for c in range(n + 1):
                if c:
                    w = w * (n - c + 1) / c * q / (1 - q)
                y = 1 if c > 0 else -1
                if n == 0:
                    wa = wb = f = mpmath.mpf(0)
                else:
                    S = c * ea + (n - c) * eb
                    wa, wb = c * ea / S, (n - c) * eb / S
                    f = ba * wa + bb * wb
                if loss == "squared":
                    risk += w * (f - y) ** 2 / 2
                    dl = f - y
                else:
                    risk += w * mpmath.log(1 + mpmath.exp(-y * f))
                    dl = -y / (1 + mpmath.exp(y * f))
                wdl = w * dl
                gba += wdl * wa
                gbb += wdl * wb
                gaa += wdl * wa * (ba - f)
                gab += wdl * wb * (bb - f)
        B = max(abs(ba), abs(bb))
        sup = max((B + 1) ** 2 / 2, (B + 1) * max(1, 2 * B)) if loss == "squared" else max(
            mpmath.log(1 + mpmath.exp(B)), max(1, 2 * B))
        tail = (1 - pm) ** (N + 1 - lo) * sup
        return risk, [gaa, gab / (d - 1)], [gba, gbb / (d - 1)], tail


def _values(res):
    return [res.risk] + list(res.grad_alpha) + list(res.grad_beta)


def _naive_values(*args, point=POINT):
    risk, ga, gb, tail = naive(*args, point=point)
    return [risk] + ga + gb, tail


def _contains(ball, value, slack) -> bool:
    """The ball, widened by the other value's own error (tail bound, plus 1e-32 for its rounding at 36+
    digits), contains that value (compared at 200 bits)."""
    with ArbContext(200):
        return (ball + arb(0, float(slack) * 1.01 + 1e-32)).contains(arb(mpmath.nstr(value, 45)))


@pytest.mark.parametrize("d,lengths,loss,p", VARIANTS)
def test_every_context_agrees_with_the_naive_double_sum(d, lengths, loss, p):
    s = Setting(d, p=p, lengths=lengths, loss=loss)
    exact, tail = _naive_values(d, lengths, loss, p)
    ball = SeriesEvaluator(s, context="arb", tol=1e-27).evaluate_symmetric(*POINT)
    assert ball.certified and ball.risk_bound < 1e-24 and ball.grad_bound < 1e-24
    for b, v in zip(_values(ball), exact):
        assert _contains(b, v, tail)
    mp = SeriesEvaluator(s, context="mp", tol=1e-27, dps=32).evaluate_symmetric(*POINT)
    assert not mp.certified and mp.risk_bound < 1e-25 and mp.grad_bound < 1e-25
    for m, v in zip(_values(mp), exact):
        assert abs(m - v) <= mp.grad_bound + mp.risk_bound + tail
    fl = SeriesEvaluator(s, context="float", tol=1e-13).evaluate_symmetric(*POINT)
    for f, v in zip(_values(fl), exact):
        assert abs(f - float(v)) <= fl.grad_bound + tail


@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
def test_arb_contains_mp_at_60_digits_at_a_larger_alphabet(lengths):
    """d = 4 (longer strings, the count cut active): the arb ball contains the mp value computed at 60
    digits with a negligible tail; float lies within its estimate of it."""
    d, point = 4, (2.1, -0.3, 1.7, -1.1)
    s = Setting(d, lengths=lengths)
    mp = SeriesEvaluator(s, context="mp", dps=60, tol=1e-34).evaluate_symmetric(*point)
    ball = SeriesEvaluator(s, context="arb", tol=1e-24).evaluate_symmetric(*point)
    assert mp.risk_bound < 1e-32 and ball.risk_bound < 1e-22
    fl = SeriesEvaluator(s, tol=1e-14).evaluate_symmetric(*point)
    for b, m, f in zip(_values(ball), _values(mp), _values(fl)):
        assert _contains(b, m, mp.grad_bound + mp.risk_bound)
        assert abs(f - float(m)) <= fl.grad_bound


@pytest.mark.parametrize("lengths,loss", [("positive", "squared"), ("nonnegative", "logistic")])
def test_the_tail_bound_covers_a_truncation_that_matters(lengths, loss):
    """At tol = 1e-4 the omitted tail moves every value by far more than rounding: the arb ball still
    contains the exact value, the float estimate still covers it, and neither bound is vacuous."""
    d, p = 3, 0.45
    s = Setting(d, p=p, lengths=lengths, loss=loss)
    exact, tail = _naive_values(d, lengths, loss, p)
    ball = SeriesEvaluator(s, context="arb", tol=1e-4).evaluate_symmetric(*POINT)
    fl = SeriesEvaluator(s, context="float", tol=1e-4).evaluate_symmetric(*POINT)
    assert 1e-9 < ball.omitted_mass <= 1e-4
    err = abs(float(ball.risk.mid()) - float(exact[0]))
    assert err > 1e-3 * ball.risk_bound  # the truncation really shows
    assert ball.risk_bound < 100 * err  # and the radius is not vacuous
    for b, f, v in zip(_values(ball), _values(fl), exact):
        assert _contains(b, v, tail)
        assert abs(f - float(v)) <= fl.grad_bound + tail


def test_the_empty_string_term():
    """Lengths on {0, 1, ...} at beta = 0: the risk is exactly 1/2 (squared) and log 2 (logistic) for every
    string, the empty one included; at attention gap 30 and beta = (1, -1) the risk tends to P(n = 0)/2."""
    for loss, value in (("squared", mpmath.mpf(1) / 2), ("logistic", mpmath.log(2))):
        s = Setting(3, lengths="nonnegative", loss=loss)
        for ctx in ("float", "mp", "arb"):
            res = SeriesEvaluator(s, context=ctx, tol=1e-14).evaluate_symmetric(0.3, 0.0, 0.0, 0.0)
            assert abs(float(res.risk) - float(value)) <= res.risk_bound + 1e-16
    s = Setting(3, lengths="nonnegative")
    floor = float(s.p_value) / 2
    for ctx in ("float", "mp", "arb"):
        res = SeriesEvaluator(s, context=ctx, tol=1e-14).evaluate_symmetric(60.0, 0.0, 1.0, -1.0)
        assert abs(float(res.risk) - floor) < 1e-12
