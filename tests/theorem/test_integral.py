"""The integral representation (numerics.theorem.integral) against the series, and its identities in SymPy.

The series in the arb context is the reference: at every point both give balls of radius < 1e-24
and the balls must overlap, so any wrong coefficient, sign or constant in the integral route (or in
the series) is caught at the 1e-24 level.
"""
import math
from contextlib import contextmanager
from fractions import Fraction

import pytest
import sympy as sp
from flint import arb
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics.theorem.integral import IntegralEvaluator, li_neg
from numerics.theorem.series import SeriesEvaluator
from theory.setting import Setting
from theory.validation import SettingError

TIGHT = 1e-24


def _series(setting, tol=1e-27):
    return SeriesEvaluator(setting, context="arb", tol=tol, dps=30)


def _assert_same(a, b):
    """Every value of the two evaluations: tight balls that overlap."""
    pairs = [(a.risk, b.risk)] + list(zip(a.grad_alpha, b.grad_alpha)) + list(zip(a.grad_beta, b.grad_beta))
    for x, y in pairs:
        assert x.rad() < TIGHT and y.rad() < TIGHT
        assert x.overlaps(y), (x, y)


POINTS = [(0.0, 0.0, 0.0, 0.0), (1.0, 0.0, 1.0, -1.0), (2.3, -0.1, 1.5, -0.9), (-3.0, 0.5, 0.3, -0.2),
          (9.0, 0.0, 1.0, -1.0), (0.25, 0.0, -2.0, 3.0)]


@pytest.mark.parametrize("d, lengths, p", [(3, "positive", None), (5, "positive", None), (4, "nonnegative", None),
                                           (6, "positive", 0.3), (5, "nonnegative", 0.125)])
def test_agrees_with_the_arb_series(d, lengths, p):
    setting = Setting(d, p=p, lengths=lengths)
    integral, series = IntegralEvaluator(setting), _series(setting)
    for point in POINTS:
        _assert_same(integral.evaluate_symmetric(*point), series.evaluate_symmetric(*point))


def test_agrees_with_the_arb_series_at_d_50():
    setting = Setting(50)
    point = (2.3, -0.1, 1.5, -0.9)
    _assert_same(IntegralEvaluator(setting).evaluate_symmetric(*point), _series(setting, 1e-25).evaluate_symmetric(*point))


@given(aa=st.floats(-4, 6), ba=st.floats(-3, 3), bb=st.floats(-3, 3), d=st.integers(3, 7),
       lengths=st.sampled_from(["positive", "nonnegative"]))
@settings(max_examples=12, deadline=None)
def test_agrees_with_the_arb_series_at_random_points(aa, ba, bb, d, lengths):
    setting = Setting(d, lengths=lengths)
    point = (aa, 0.0, ba, bb)
    _assert_same(IntegralEvaluator(setting).evaluate_symmetric(*point), _series(setting).evaluate_symmetric(*point))


@pytest.mark.parametrize("lengths", ["positive", "nonnegative"])
def test_quadratic_moments_agree_with_the_series(lengths):
    setting = Setting(5, lengths=lengths)
    a = IntegralEvaluator(setting).quadratic_moments(1.7, -0.2)
    b = _series(setting).quadratic_moments(1.7, -0.2)
    for x, y in [(a.M[0][0], b.M[0][0]), (a.M[0][1], b.M[0][1]), (a.M[1][1], b.M[1][1]), (a.m[0], b.m[0]),
                 (a.m[1], b.m[1])]:
        assert x.rad() < TIGHT and x.overlaps(y)
    assert a.certified and a.risk(0.4, -0.6).overlaps(IntegralEvaluator(setting).evaluate_symmetric(1.7, -0.2, 0.4, -0.6).risk)


def test_full_vector_interface_and_its_refusals():
    d = 4
    integral = IntegralEvaluator(Setting(d))
    full = integral.evaluate([0.4] + [-0.1] * (d - 1), [1.1] + [-0.7] * (d - 1))
    sym = integral.evaluate_symmetric(0.4, -0.1, 1.1, -0.7)
    # every coordinate against the arb series' full-vector evaluation, and the bounds of the symmetric call
    assert len(full.grad_alpha) == len(full.grad_beta) == d
    _assert_same(full, _series(Setting(d)).evaluate([0.4] + [-0.1] * (d - 1), [1.1] + [-0.7] * (d - 1)))
    assert (full.risk_bound, full.grad_bound, full.omitted_mass, full.terms, full.certified) == \
        (sym.risk_bound, sym.grad_bound, 0.0, 0, True) and full.risk_bound > 0 and full.grad_bound > 0
    # d = 2 (p < 1): the marked and the one unmarked coordinate
    two = Setting(2, p=0.5)
    _assert_same(IntegralEvaluator(two).evaluate([0.3, -0.2], [0.5, 0.1]), _series(two).evaluate([0.3, -0.2], [0.5, 0.1]))
    with pytest.raises(SettingError, match=r"^the integral representation needs parameters symmetric in the unmarked "
                                           r"symbols \(alpha_k, beta_k equal for k >= 2\); use "
                                           r"numerics.theorem.series.SeriesEvaluator$"):
        integral.evaluate([0.4, 0.1, 0.2, 0.2], [0.0] * d)
    with pytest.raises(SettingError, match="^alpha must have length d = 4, got length 3$"):
        integral.evaluate([0.0] * 3, [0.0] * d)
    with pytest.raises(SettingError, match="^beta must have length d = 4, got length 5$"):
        integral.evaluate([0.0] * d, [0.0] * 5)
    for name, args in [("alpha_a", (math.nan, 0.0)), ("alpha_b", (0.0, math.inf))]:
        with pytest.raises(SettingError, match=rf"^{name}\[0\] must be finite"):
            integral.quadratic_moments(*args)
    with pytest.raises(SettingError, match="squared loss"):
        IntegralEvaluator(Setting(4, loss="logistic"))
    with pytest.raises(SettingError, match="p < 1"):
        IntegralEvaluator(Setting(2))
    for gap in (math.inf, math.nan, 701.0, -701.0):
        with pytest.raises(SettingError, match="alpha_a"):
            integral.evaluate_symmetric(gap, 0.0, 0.0, 0.0)
    for i, name in enumerate(("alpha_a", "alpha_b", "beta_a", "beta_b")):
        with pytest.raises(SettingError, match=rf"^{name}\[0\] must be finite, got nan$"):
            integral.evaluate_symmetric(*[math.nan if j == i else 0.0 for j in range(4)])
    for gap in (700.0, -700.0):  # MAX_GAP itself is taken
        assert integral.evaluate_symmetric(gap, 0.0, 0.0, 0.0).risk_bound < 1e-20
    # the symmetric evaluation's own bounds: the largest radii, nothing omitted, certified
    assert sym.risk_bound == float(sym.risk.rad()) > 0
    assert sym.grad_bound == max(float(g.rad()) for g in sym.grad_alpha + sym.grad_beta) > 0
    assert (sym.omitted_mass, sym.terms, sym.certified) == (0.0, 0, True) and type(sym.terms) is int


def test_large_d_agrees_with_the_float_series():
    """d = 500 (845k series terms): the float estimate lies within its bound of the ball; d = 10^6
    (out of the series' reach) still gives a tight ball."""
    setting = Setting(500)
    point = (2.3, -0.1, 1.5, -0.9)
    ball = IntegralEvaluator(setting).evaluate_symmetric(*point)
    est = SeriesEvaluator(setting).evaluate_symmetric(*point)
    assert abs(est.risk - float(ball.risk.mid())) <= est.risk_bound
    for x, y in zip(ball.grad_alpha + ball.grad_beta, est.grad_alpha + est.grad_beta):
        assert abs(y - float(x.mid())) <= est.grad_bound
    huge = IntegralEvaluator(Setting(10**6)).evaluate_symmetric(*point)
    assert huge.risk_bound < 1e-28 and 0 < float(huge.risk.mid()) < 1


def test_a_short_integration_range_widens_the_ball_and_still_encloses():
    """With the tail cut at 2^-12 the tail term is most of the radius; the ball must still contain
    the series value (a tail bound that is too small would exclude it)."""
    setting = Setting(5)
    point = (-1.0, 0.0, 1.0, -1.0)
    coarse = IntegralEvaluator(setting, tail_bits=12).evaluate_symmetric(*point)
    fine = _series(setting).evaluate_symmetric(*point)
    assert 1e-8 < coarse.risk_bound < 1e-2
    for x, y in [(coarse.risk, fine.risk), (coarse.grad_alpha[0], fine.grad_alpha[0])]:
        assert x.overlaps(y) and x.contains(y.mid())


@pytest.mark.parametrize("gap", [30.0, 250.0, -250.0])
def test_large_attention_gaps_keep_their_digits(gap):
    """u = e^30 or e^250: J_{j,k} ~ u^-(k+1) is computed to relative accuracy and scaled back by
    u^(k+1); u = e^-250: the integration range grows like 1/u.  Both keep the requested digits."""
    res = IntegralEvaluator(Setting(50)).evaluate_symmetric(gap, 0.0, 1.0, -1.0)
    assert res.risk_bound < 1e-30 and res.grad_bound < 1e-30
    if abs(gap) < 100:
        return
    # the limits, which e^-250 misses by far less than 1e-30:
    # u -> inf: f = beta_a = +1 wherever the marked symbol occurs, f = beta_b = -1 elsewhere: risk 0;
    # u -> 0: f = -1 except on the all-marked strings (w = 1, f = +1): risk 2 (P(c >= 1) - P(r = 0)),
    # with P(c >= 1) = 1/2 and P(r = 0) = sum_n p q^(n-1) pi^n = p pi / (1 - q pi)
    p, pi = Fraction(1, 49), Fraction(1, 50)
    limit = 0 if gap > 0 else 1 - 2 * p * pi / (1 - (1 - p) * pi)
    from flint import ctx

    with ctx.workprec(128):
        assert (res.risk - arb(limit.numerator) / limit.denominator).abs_upper() < 1e-30


@pytest.mark.parametrize("d, gap", [(3, -2.0), (3, 0.0), (5, 1.5), (50, -1.0), (50, 3.0), (1000, 0.5)])
@pytest.mark.parametrize("j, k", [(1, 0), (2, 1), (3, 2), (5, 4), (8, 7)])  # the last two: Taylor models'
def test_tail_bound_exceeds_the_tail_it_drops(d, gap, j, k):
    """tail_bound(V) >= the integral of the integrand over [V, 200 V] (the rest beyond 200 V is positive
    too, so this direction is the one that matters), at V where the tail is still substantial."""
    from flint import acb

    from numerics.contexts import ArbContext
    from numerics.theorem.integral import integrand, tail_bound

    with ArbContext(128) as ctx:
        _, qpi, x, X, _ = IntegralEvaluator(Setting(d))._constants(ctx)
        u = arb(gap).exp()
        for V in (arb(1) / 64, arb(1) / 4, arb(2), arb(20) / u):
            dropped = acb.integral(integrand(j, k, u, qpi, x), V, 200 * V).real
            bound = tail_bound(j, k, u, x, X, V)
            assert bound >= dropped, (V, bound, dropped)


@pytest.mark.parametrize("j", [1, 2, 3])
@pytest.mark.parametrize("k", [0, 1, 2])
def test_integrand_is_the_stated_formula(j, k):
    """The integrand's written-out rational functions are (v^k / k!) Li_{-j}(z) / (1 - x e^-v) through
    ``li_neg``, at real and complex points (acb.integral evaluates it on complex balls): overlapping tight
    balls, so a wrong coefficient, power or factorial in either is caught."""
    from flint import acb

    from numerics.contexts import ArbContext
    from numerics.theorem.integral import integrand

    with ArbContext(128) as ctx:
        _, qpi, x, _, _ = IntegralEvaluator(Setting(7))._constants(ctx)
        u = arb("1.7")
        f = integrand(j, k, u, qpi, x)
        for v in (acb("0.3"), acb(2, "0.5"), acb("0.01", "-1.3"), acb(5)):
            den = 1 - x * (-v).exp()
            want = v ** k * li_neg(j, qpi * (-u * v).exp() / den) / den / math.factorial(k)
            got = f(v, False)
            assert abs(got - want).mid() < 1e-30 * abs(want).mid() and got.overlaps(want), (j, k, v, got, want)
    with pytest.raises(ValueError):
        integrand(0, 0, u, qpi, x)  # j = 0 has no integrand here (J_{0,k} is not one of the sums)


# ------------------------------------------------------------------------------------------------
# the identities behind the representation, in SymPy


def test_partial_fractions_in_the_attention_weight():
    """With w = c u / (r + c u), f - y = B + Delta w on the strings with c >= 1; the risk and gradient
    integrands are the polynomials in w that numerics.theorem.integral combines."""
    r, c, u, B, Delta = sp.symbols("r c u B Delta", positive=True)
    w = c * u / (r + c * u)
    f_minus_y = B + Delta * w
    beta_b, beta_a = B + 1, B + 1 + Delta
    f = (beta_a * c * u + beta_b * r) / (c * u + r)  # the model's output on such a string, y = +1
    assert sp.simplify(f - 1 - f_minus_y) == 0
    assert sp.expand(f_minus_y ** 2 - (B ** 2 + 2 * B * Delta * w + Delta ** 2 * w ** 2)) == 0
    assert sp.expand(f_minus_y * w - (B * w + Delta * w ** 2)) == 0
    assert sp.expand(f_minus_y * w * (1 - w) - (B * w + (Delta - B) * w ** 2 - Delta * w ** 3)) == 0
    # d f / d gap = Delta w (1 - w)
    gap = sp.symbols("g", real=True)
    f_gap = f.subs(u, sp.exp(gap))
    assert sp.simplify(sp.diff(f_gap, gap) - (Delta * w * (1 - w)).subs(u, sp.exp(gap))) == 0


@pytest.mark.parametrize("j", [0, 1, 2, 3, 4, 5, 8])  # written out to 3; Eulerian polynomials from 4 (Taylor models)
def test_polylogarithms_of_negative_order(j):
    z = sp.symbols("z")
    series = sp.series(li_neg(j, z), z, 0, 12).removeO()
    assert sp.expand(series - sum(c ** j * z ** c for c in range(1, 12))) == 0
    assert li_neg(j, arb(1) / 3).overlaps(sum(arb(c) ** j / arb(3) ** c for c in range(1, 300)))


@pytest.mark.parametrize("k", [0, 1, 2])
def test_inverse_powers_as_integrals(k):
    v, a = sp.symbols("v a", positive=True)
    assert sp.simplify(sp.integrate(v ** k * sp.exp(-a * v), (v, 0, sp.oo)) / sp.factorial(k) - a ** -(k + 1)) == 0


def test_negative_binomial_generating_function():
    t = sp.symbols("t")
    for c in range(4):
        series = sp.series((1 - t) ** -(c + 1), t, 0, 10).removeO()
        assert sp.expand(series - sum(sp.binomial(c + r, c) * t ** r for r in range(10))) == 0


def test_constructor_precisions_and_refusals():
    """dps >= 15 (working precision dps digits plus 32 guard bits), prec_bits >= 53 instead, tail_bits >= 1:
    each refused below its minimum under its own name; the geometric law and p < 1 only."""
    from numerics.theorem.integral import GUARD_BITS
    from theory.setting import ShiftedPoissonLaw

    s = Setting(5)
    assert IntegralEvaluator(s).prec_bits == math.ceil(30 * math.log2(10)) + GUARD_BITS == 132
    assert IntegralEvaluator(s, dps=15).prec_bits == math.ceil(15 * math.log2(10)) + GUARD_BITS
    assert IntegralEvaluator(s, dps=40, prec_bits=53).prec_bits == 53
    assert IntegralEvaluator(s, tail_bits=1).tail_bits == 1 and IntegralEvaluator(s).tail_bits is None
    for kwargs, message in [({"dps": 14}, "dps must be an integer >= 15, got 14"),
                            ({"prec_bits": 52}, "prec_bits must be an integer >= 53, got 52"),
                            ({"tail_bits": 0}, "tail_bits must be a positive integer, got 0")]:
        with pytest.raises(SettingError, match=f"^{message}$"):
            IntegralEvaluator(s, **kwargs)
    with pytest.raises(SettingError, match=r"^the integral representation needs p < 1 \(at p = 1 every string has "
                                           r"length 1\); use numerics.theorem.series.SeriesEvaluator$"):
        IntegralEvaluator(Setting(2))
    with pytest.raises(SettingError, match="^the integral representation is derived for the geometric length law"):
        IntegralEvaluator(Setting(5, length_law=ShiftedPoissonLaw(2.0)))


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("u, V", [(0.37, 3), (1.0, 5), (2.5, 2), (7.0, 1)])
def test_tail_bound_is_K_times_the_upper_incomplete_gamma(k, u, V):
    """tail_bound = K int_V^inf v^k e^(-u v) dv = K Gamma(k + 1, u V) / u^(k+1) exactly (mpmath's incomplete
    gamma, independent of the finite sum the code uses), K = Li_{-j}(X) / ((1 - x) k!); at u != 1 this
    tells apart every power of u in the sum (mutmut's u^-(k+1+i) for u^-(k+1-i), which only shrinks the
    bound, survived the majorant test above)."""
    import mpmath

    from numerics.theorem.integral import tail_bound

    j, x, X = 1, arb(0.3), arb(0.2)
    K = li_neg(j, X) / (1 - x) / math.factorial(k)
    got = tail_bound(j, k, arb(u), x, X, arb(V)) / K
    with mpmath.workdps(40):
        want = mpmath.gammainc(k + 1, u * V) / mpmath.mpf(u) ** (k + 1)
        assert abs(mpmath.mpf(got.mid().str(40, radius=False)) - want) <= 1e-12 * want, (got, want)


# ------------------------------------------------------------------------------------------------
# the Taylor models in u (taylor_order)

@contextmanager
def _law_constants(d, prec):
    """(an evaluator at ``prec`` bits, q pi, x, X) for Setting(d), inside an arb context of ``prec`` bits."""
    from numerics.contexts import ArbContext

    with ArbContext(prec) as ctx:
        ev = IntegralEvaluator(Setting(d), prec_bits=prec)
        _, qpi, x, X, _ = ev._constants(ctx)
        yield ev, qpi, x, X


@pytest.mark.parametrize("j", [1, 2, 3, 5])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_the_u_derivative_of_an_integrand_is_the_next_integrand(j, k):
    """d/du of J_{j,k}'s integrand is -(k+1) times J_{j+1,k+1}'s (SymPy, on li_neg's rational functions):
    the identity the Taylor models' coefficients rest on."""
    v, u, qpi, x = sp.symbols("v u q x", positive=True)
    expr = lambda jj, kk: v ** kk / sp.factorial(kk) * li_neg(jj, qpi * sp.exp(-u * v) / (1 - x * sp.exp(-v))) \
        / (1 - x * sp.exp(-v))  # noqa: E731
    assert sp.simplify(sp.diff(expr(j, k), u) + (k + 1) * expr(j + 1, k + 1)) == 0


@pytest.mark.parametrize("d", [5, 1000])
def test_the_integrals_decrease_in_u(d):
    """J_{m+1,m} decreases in u (the premise of the models' remainder bound), for the orders a model of
    order 5 uses, at u below, at and above 1."""
    with _law_constants(d, 96) as (ev, qpi, x, X):
        for u in (arb("0.3"), arb(1), arb("2.5")):
            for m in range(9):
                lo, hi = (ev._integral(m + 1, m, w, qpi, x, X, 96) for w in (u, u * arb("1.001")))
                assert lo > hi, (u, m, lo, hi)


@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("side", [1, -1])
def test_a_taylor_model_encloses_the_integrals_and_needs_its_remainder(order, side):
    """A model with a wide radius (r = u0 / 20, so that its remainder is far above the working precision):
    at u = u0 +- 0.8 r its balls overlap the integrals computed directly there, while the Taylor polynomial
    alone misses them.  Kills a dropped remainder, a wrong sign of u - u0, a wrong binomial, and a
    remainder taken at the interval's high end for u > u0 (it is then below the true error)."""
    from numerics.theorem.integral import TaylorModel

    prec = 96
    with _law_constants(50, prec) as (ev, qpi, x, X):
        u0 = arb("1.25")
        model = TaylorModel.build(ev, u0, qpi, x, X, prec, order, [], r=u0 / 20)
        u = u0 + side * arb("0.8") * u0 / 20
        assert model.covers(u) and not model.covers(u0 + u0 / 19)
        got = model.values(u, 3)
        want = [ev._integral(m + 1, m, u, qpi, x, X, prec) for m in range(3)]
        for m in range(3):
            assert got[m].overlaps(want[m]), (m, got[m], want[m])
            poly = got[m].mid()  # the polynomial's value: the remainder is most of the model's radius
            assert abs(arb(poly) - want[m]).lower() > 0 and got[m].rad() > 10 * want[m].rad(), m
            # and the remainder is not vacuous: within a small factor of the polynomial's true error
            assert got[m].rad() < 4 * abs(arb(poly) - want[m]).upper(), (m, got[m].rad() / abs(arb(poly) - want[m]))


def test_an_evaluator_answers_small_steps_from_one_model():
    """With taylor_order, two close calls build a model, and the calls that follow inside it compute no
    integral; every value overlaps the evaluator without models and rounds to the same double; a call far
    away is computed again, and the model's order is refused when it is not a positive integer."""
    plain, modelled = IntegralEvaluator(Setting(1000), dps=16), IntegralEvaluator(Setting(1000), dps=16,
                                                                                    taylor_order=5)
    counts = []
    for g in (0.5, 0.5 + 1e-9, 0.5 + 3e-9, 0.5 + 1e-8, 0.5 + 4e-6, 0.5 - 4e-6, 2.0):
        a, b = plain.evaluate_symmetric(g, 0.0, 1.2, -0.7), modelled.evaluate_symmetric(g, 0.0, 1.2, -0.7)
        for x, y in [(a.risk, b.risk)] + list(zip(a.grad_alpha + a.grad_beta, b.grad_alpha + b.grad_beta)):
            assert x.overlaps(y) and float(x.mid()) == float(y.mid()) and y.rad() < 1e-18
        counts.append(modelled.integrals_computed)
    assert counts == [3, 3 + 3 + 8, 14, 14, 14, 14, 17], counts
    for g in (0.5 + 2e-9, 2.0):  # the moments (two integrals) from the model, and computed
        a, b = plain.quadratic_moments(g, 0.0), modelled.quadratic_moments(g, 0.0)
        for x, y in [(a.M[0][0], b.M[0][0]), (a.M[0][1], b.M[0][1]), (a.M[1][1], b.M[1][1]), (a.m[0], b.m[0]),
                     (a.m[1], b.m[1])]:
            assert x.overlaps(y) and float(x.mid()) == float(y.mid()), (g, x, y)
    # the first from the model; the second computed (2) at the u of the last computed call: a repeat (the
    # moments and the risk at one attention state), not a step, so no model is built
    assert modelled.integrals_computed == 17 + 2 and modelled._model.covers(arb("0.5").exp())
    # a model built after a call that needed two integrals (N + 4 more) serves calls that need three
    ev = IntegralEvaluator(Setting(1000), dps=16, taylor_order=5)
    ev.quadratic_moments(1.0, 0.0)
    ev.quadratic_moments(1.0 + 1e-9, 0.0)
    assert ev.integrals_computed == 2 + 2 + 9
    a, b = plain.evaluate_symmetric(1.0 + 2e-9, 0.0, 0.4, 0.1), ev.evaluate_symmetric(1.0 + 2e-9, 0.0, 0.4, 0.1)
    assert ev.integrals_computed == 13 and a.grad_alpha[0].overlaps(b.grad_alpha[0]) and a.risk.overlaps(b.risk)
    with pytest.raises(SettingError):
        IntegralEvaluator(Setting(10), taylor_order=0)


def test_a_model_is_built_only_for_steps_well_inside_its_radius_and_is_tight_at_its_edge():
    """Two computed calls r/2 apart build no model (the rule asks r/4); at 0.9 r from its centre a model's
    balls stay within a small factor of the integrals computed there (its remainder near the working
    precision, as its radius is chosen for); a ball u reaching past the radius is not covered, even with its
    midpoint at the centre, and the model refuses it."""
    from numerics.contexts import ArbContext
    from numerics.theorem.integral import TaylorModel

    ev = IntegralEvaluator(Setting(1000), dps=16, taylor_order=5)
    prec = ev.prec_bits
    u0 = arb(1)
    r = TaylorModel.radius(u0, 5, prec)
    gap = float((u0 + r / 2).log().mid())
    ev.evaluate_symmetric(0.0, 0.0, 0.4, 0.1)
    ev.evaluate_symmetric(gap, 0.0, 0.4, 0.1)
    assert ev.integrals_computed == 6 and ev._model is None
    with ArbContext(prec) as ctx:
        _, qpi, x, X, _ = ev._constants(ctx)
        model = TaylorModel.build(ev, u0, qpi, x, X, prec, 5, [])
        for side in (1, -1):
            u = u0 + side * arb("0.9") * r
            got = model.values(u, 3)
            want = [ev._integral(m + 1, m, u, qpi, x, X, prec) for m in range(3)]
            for g, w in zip(got, want):
                assert g.overlaps(w) and g.rad() < 4 * w.rad(), (side, g, w)
        wide = arb(u0.mid(), 2 * r)
        assert not model.covers(wide)
        with pytest.raises(ValueError):
            model.values(wide, 3)
