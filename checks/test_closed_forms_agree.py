"""The SymPy closed forms agree with the exact series (within its bound) and with Monte Carlo.

Each closed form is evaluated by mpmath; the series evaluator knows nothing of the closed forms, so
agreement inside the series' own truncation bound is an independent confirmation.
"""
from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, lengths_st, setting
from numerics.theorem.closed_forms import ClosedForms, to_mpf
from numerics.theorem.montecarlo import estimate
from numerics.theorem.series import SeriesEvaluator
from theory import symbolic
general_p = st.floats(min_value=0.05, max_value=0.95)


def _direct_sum(fn, p, lengths, N=4000):
    """sum_n P(n) fn(n) by brute force in mpmath (terms decay geometrically; N large)."""
    with mpmath.workdps(40):
        p = to_mpf(p)
        lo = 1 if lengths == "positive" else 0
        return mpmath.fsum(p * (1 - p) ** (n - lo) * fn(n) for n in range(lo, N))


@given(d=st.integers(2, 60), lengths=lengths_st)
@examples(15)
def test_balanced_p_balances_classes(d, lengths):
    s = setting(d, lengths)
    if float(s.p_value) == 1.0:  # d = 2, default law: every string has length 1
        assert d == 2 and lengths == "positive"
        return
    N = int(70 / -math.log1p(-float(s.p_value))) + 10
    pneg = _direct_sum(lambda n: mpmath.mpf(d - 1) ** n / mpmath.mpf(d) ** n, s.p_value, lengths, N=N)
    with mpmath.workdps(40):
        assert abs(pneg - mpmath.mpf(1) / 2) < mpmath.mpf(10) ** -25
    # the derived value is the one the spec states
    assert s.p_value == (Fraction(1, d - 1) if lengths == "positive" else Fraction(1, d + 1))


@given(s_=st.integers(1, 4), p=general_p, lengths=lengths_st)
def test_inverse_length_moments_match_series_with_tail_bound(s_, p, lengths):
    st_ = setting(5, lengths, p=p)
    with mpmath.workdps(40):
        cf = ClosedForms(st_, dps=40)
        closed = cf.expr(symbolic.inverse_length_moment(s_, lengths))
        N = max(1, math.ceil(15 * math.log(10) / -math.log1p(-p)))  # tail about 1e-15, far above precision
        partial, tail = cf.inverse_length_moment_series(s_, N)
        slack = mpmath.mpf(10) ** -35
        assert partial <= closed + slack
        assert closed - partial <= tail + slack
        # and the bound is not vacuous: a longer sum closes the gap further, still inside its bound
        partial2, tail2 = cf.inverse_length_moment_series(s_, 3 * N)
        assert abs(closed - partial2) <= tail2 + slack and tail2 < tail
        assert closed - partial > tail2  # the first partial sum really was short by more than the second bound


@given(k=st.integers(1, 3), d=st.integers(2, 9), p=st.floats(0.15, 0.95), lengths=lengths_st)
@examples(10)
def test_share_moments_match_brute_force(k, d, p, lengths):
    """E[r^k] to 20 digits: also guards against any double-precision leak in the mpmath evaluation."""
    closed = ClosedForms(setting(d, lengths, p=p), dps=40).expr(symbolic.ratio_moment(k, lengths))

    def cond(n):
        if n == 0:
            return mpmath.mpf(0)
        pi = mpmath.mpf(1) / d
        w, total = (1 - pi) ** n, mpmath.mpf(0)
        for c in range(n + 1):
            if c:
                w = w * (n - c + 1) / c * pi / (1 - pi)
            total += w * (mpmath.mpf(c) / n) ** k
        return total

    brute = _direct_sum(cond, p, lengths, N=int(50 / -math.log1p(-p)) + 10)  # tail below e^-50
    with mpmath.workdps(40):
        assert abs(closed - brute) < mpmath.mpf(10) ** -20


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@given(d=st.integers(3, 9), p=general_p, lengths=lengths_st)
@examples(25)
def test_zero_init_gradients(loss, d, p, lengths):
    ev = evaluator(d, lengths, loss, p)
    res = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0)
    zg = symbolic.zero_init_gradients(lengths, loss)
    cf = ClosedForms(setting(d, lengths, loss, p))
    assert abs(float(res.grad_beta[0]) - float(cf.expr(zg["grad_beta_a"]))) <= res.grad_bound
    assert abs(float(res.grad_beta[1]) - float(cf.expr(zg["grad_beta_b"]))) <= res.grad_bound
    assert res.grad_alpha[0] == 0.0 and res.grad_alpha[1] == 0.0
    expected_risk = 0.5 if loss == "squared" else math.log(2)
    assert abs(float(res.risk) - expected_risk) <= res.risk_bound


@given(d=st.integers(3, 9), p=general_p, lengths=lengths_st, eta_1=st.floats(0.01, 6.0))
@examples(30)
def test_phase2_attention_gradient(d, p, lengths, eta_1):
    """Closed-form phase-1 weights and phase-2 attention gradient vs the series at (0, beta^(1))."""
    cf = ClosedForms(setting(d, lengths, p=p))
    ev = evaluator(d, lengths, "squared", p)
    b1a, b1b = (float(x) for x in cf.phase1_beta(eta_1))
    z = ev.evaluate_symmetric(0.0, 0.0, 0.0, 0.0)
    assert abs(b1a - (-eta_1 * float(z.grad_beta[0]))) <= eta_1 * z.grad_bound
    assert abs(b1b - (-eta_1 * float(z.grad_beta[1]))) <= eta_1 * z.grad_bound
    res = ev.evaluate_symmetric(0.0, 0.0, b1a, b1b)
    ga, gb = symbolic.phase2_attention_gradient(lengths)
    assert abs(float(res.grad_alpha[0]) - float(cf.expr(ga, eta_1=eta_1))) <= res.grad_bound + 1e-14
    assert abs(float(res.grad_alpha[1]) - float(cf.expr(gb, eta_1=eta_1))) <= res.grad_bound + 1e-14
    # the uniform-attention risk quadratic at beta^(1)
    R = cf.expr(symbolic.uniform_attention_risk(lengths), beta_a=b1a, beta_b=b1b)
    assert abs(float(res.risk) - float(R)) <= res.risk_bound + 1e-14


@given(d=st.integers(3, 5), lengths=lengths_st,
       beta=st.lists(st.floats(-2, 2), min_size=3, max_size=3))
@examples(15)
def test_uniform_attention_quadratic_for_nonsymmetric_beta(d, lengths, beta):
    """R(0, beta) for beta with three distinct values (marked, one unmarked, the rest) vs the series."""
    full = [beta[0], beta[1]] + [beta[2]] * (d - 2)
    ev = evaluator(d, lengths)
    res = ev.evaluate([0.0] * d, full)
    a_i, a_1, b_a, b_b = (float(x) for x in ClosedForms(setting(d, lengths)).uniform_attention_quadratic())
    A = a_i * np.eye(d) + a_1 * np.ones((d, d))
    b = np.array([b_a] + [b_b] * (d - 1))
    bt = np.array(full)
    assert abs(0.5 * bt @ A @ bt - b @ bt + 0.5 - float(res.risk)) <= res.risk_bound + 1e-13
    grad = A @ bt - b
    assert np.all(np.abs(grad - np.array([float(g) for g in res.grad_beta])) <= res.grad_bound + 1e-13)


@given(lengths=lengths_st, p=general_p)
@examples(20)
def test_shifted_second_length_moment(lengths, p):
    closed = ClosedForms(setting(4, lengths, p=p), dps=40).value("B2")
    brute = _direct_sum(lambda n: mpmath.mpf(max(n - 1, 0)) ** 2 if n >= 1 else mpmath.mpf(0), p, lengths,
                        N=int(80 / -math.log1p(-p)) + 10)
    with mpmath.workdps(40):
        assert abs(closed - brute) < mpmath.mpf(10) ** -25 * max(1, abs(closed))


@pytest.mark.parametrize("d,loss,lengths", [(3, "squared", "positive"), (5, "logistic", "positive"),
                                            (4, "squared", "nonnegative"), (50, "squared", "positive")])
def test_series_matches_monte_carlo(d, loss, lengths):
    """Series vs an independent Monte Carlo estimate (200k strings, fixed seed) within 5 standard errors."""
    rng = np.random.default_rng(1234 + d)
    alpha = rng.normal(0, 1, d)
    beta = rng.normal(0, 1, d)
    alpha_s = [alpha[0]] + [alpha[1]] * (d - 1)
    beta_s = [beta[0]] + [beta[1]] * (d - 1)
    res = evaluator(d, lengths, loss).evaluate(alpha_s, beta_s)
    mc = estimate(setting(d, lengths, loss), alpha_s, beta_s, size=200_000, seed=7)
    assert abs(mc.risk - float(res.risk)) <= 5 * mc.risk_se + res.risk_bound
    ga = np.array([float(x) for x in res.grad_alpha])
    gb = np.array([float(x) for x in res.grad_beta])
    # unmarked coordinates are exchangeable: compare their average, whose SE is smaller
    for ser, est, se in ((ga, mc.grad_alpha, mc.grad_alpha_se), (gb, mc.grad_beta, mc.grad_beta_se)):
        assert abs(est[0] - ser[0]) <= 5 * se[0] + res.grad_bound
        assert abs(est[1:].mean() - ser[1:].mean()) <= 5 * se[1:].max() + res.grad_bound


def test_float_estimate_covers_its_distance_to_the_arb_enclosure_at_d50():
    """At d = 50, the largest alphabet used, the float context's error estimate (truncation + rounding
    allowance) covers its distance to the certified arb ball, whose radius is negligible beside it
    (every context on every variant: checks/test_backends.py)."""
    point = (2.3, -0.1, 1.5, -0.9)
    f = evaluator(50, tol=1e-15).evaluate_symmetric(*point)
    ball = SeriesEvaluator(setting(50), context="arb", tol=1e-18).evaluate_symmetric(*point)
    assert ball.certified and ball.risk_bound < 1e-16
    for a, b in zip([f.risk] + f.grad_alpha + f.grad_beta, [ball.risk] + ball.grad_alpha + ball.grad_beta):
        assert abs(a - float(b.mid())) <= f.grad_bound + float(b.rad())


def test_quadratic_moments_give_the_squared_risk_and_gradient():
    """R(beta) = 1/2 beta^T M beta - m^T beta + 1/2 and its gradient M beta - m, from one series pass at
    fixed attention, against the evaluator at several beta (float), and as a certified ball (arb)."""
    for lengths in ("positive", "nonnegative"):
        ev = evaluator(7, lengths)
        q = ev.quadratic_moments(1.4, -0.2)
        for beta in ((0.0, 0.0), (1.2, -0.8), (-2.0, 3.0)):
            res = ev.evaluate_symmetric(1.4, -0.2, *beta)
            assert abs(q.risk(*beta) - res.risk) <= res.risk_bound + 20 * q.bound
            grad = np.array(q.M) @ np.array(beta) - np.array(q.m)
            assert abs(grad[0] - res.grad_beta[0]) <= res.grad_bound + 10 * q.bound
            assert abs(grad[1] / 6 - res.grad_beta[1]) <= res.grad_bound + 10 * q.bound
        qa = SeriesEvaluator(setting(7, lengths), context="arb", tol=1e-20).quadratic_moments(1.4, -0.2)
        assert qa.certified and qa.bound < 1e-18
        ball = SeriesEvaluator(setting(7, lengths), context="arb", tol=1e-20).evaluate_symmetric(1.4, -0.2, 1.2, -0.8)
        assert qa.risk(1.2, -0.8).overlaps(ball.risk)
        assert abs(float(qa.M[0][1].mid()) - q.M[0][1]) <= q.bound + 1e-18


@given(d=st.integers(3, 8), eta_1=st.floats(0.2, 2.5), eta_2=st.floats(0.0, 200.0), eta_3=st.floats(0.1, 1.0),
       T=st.integers(0, 40))
@examples(15)
def test_phase3_closed_form_matches_iterated_descent(d, eta_1, eta_2, eta_3, T):
    """beta_T = beta* + (I - eta_3 D M)^T (beta_0 - beta*) with M, m from the series, against the
    plan run step by step with series gradients."""
    import sympy as sp

    from numerics.theorem.training import Trainer, three_phase

    ev = evaluator(d)
    traj = Trainer(ev).run(three_phase(eta_1, eta_2, eta_3, T))
    after2 = traj.points[2]
    q = ev.quadratic_moments(after2.alpha_a, after2.alpha_b)
    Mn, mn = np.array(q.M, float), np.array(q.m, float)
    D = np.diag([1.0, 1.0 / (d - 1)])
    b0 = np.array([[after2.beta_a], [after2.beta_b]])

    def closed(expr):
        fn = sp.lambdify([*symbolic.phase3_symbols(), symbolic.eta3], expr, modules="numpy")
        return np.asarray(fn(Mn, mn.reshape(2, 1), D, b0, eta_3)).ravel()

    fin = traj.final
    assert np.allclose(closed(symbolic.phase3_closed_form(sp.Integer(T))), [fin.beta_a, fin.beta_b], rtol=1e-9, atol=1e-9)
    # the per-coordinate output gradient there, closed form vs the series
    res = ev.evaluate_symmetric(fin.alpha_a, fin.alpha_b, fin.beta_a, fin.beta_b)
    grad_T = closed(symbolic.phase3_gradient(sp.Integer(T)))
    assert np.allclose(grad_T, [float(g) for g in res.grad_beta], rtol=0, atol=1e-9)


@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
@given(d=st.integers(3, 6), gap=st.floats(-3.0, 8.0))
@examples(8)
def test_phase3_series_matches_the_evaluator(lengths, d, gap):
    """SymPy's double series for M and m (theory.symbolic.phase3_series), summed term by term over
    n <= N, against SeriesEvaluator.quadratic_moments; entries lie in [-1, 1], so the omitted tail of the
    SymPy sum is at most P(n > N)."""
    import sympy as sp
    from scipy.special import binom

    p = float(setting(d, lengths).p_value)
    N = math.ceil(45 / -math.log1p(-p))
    tail = (1 - p) ** N
    n_grid, c_grid = (a.ravel() for a in np.meshgrid(np.arange(1, N + 1), np.arange(0, N + 1), indexing="ij"))
    keep = c_grid <= n_grid
    n_grid, c_grid = n_grid[keep].astype(float), c_grid[keep].astype(float)
    M, m = symbolic.phase3_series(lengths)
    q = evaluator(d, lengths).quadratic_moments(gap, 0.0)
    Mn, mn, bound = q.M, q.m, q.bound
    for entry, value in ((M[0, 0], Mn[0][0]), (M[0, 1], Mn[0][1]), (M[1, 1], Mn[1][1]), (m[0], mn[0]), (m[1], mn[1])):
        summand = entry
        while isinstance(summand, sp.Sum):
            summand = summand.function
        fn = sp.lambdify((symbolic.n_, symbolic.c_, symbolic.d, symbolic.p, symbolic.u), summand, modules=[{"binomial": binom}, "numpy"])
        total = float(np.sum(fn(n_grid, c_grid, d, p, math.exp(gap))))
        assert abs(total - float(value)) <= bound + tail + 1e-13
