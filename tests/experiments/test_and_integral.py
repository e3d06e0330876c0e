"""The integral representation of AND's population risk (``and_integral``) equals an exhaustive sum over the
count vectors at d = 3 and 4 (every symbol its own parameters at d = 4) and the engine's class population at
d = 6, for one to three heads and parameters far from uniform attention, and so does its gradient (the
exhaustive sums' by the complex step, the sums' own complex-step derivative, the engine's); both keep their
accuracy at small p (against the same sums in long double), the risk under a constant added to a head's scores
and the gradient up to its spread limit; the error estimate is the sum at twice the step; bad input is refused
before any work."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln

from numerics.experiments import engine
from numerics.experiments import and_integral
from numerics.experiments.and_integral import population_risk, population_risk_and_grad
from numerics.experiments.population import expand, population
from numerics.experiments.tasks import length_parameter
from theory.validation import SettingError


def _exhaustive(alpha, B, p, tail=1e-18):  # float or complex parameters (complex-step derivatives)
    """sum over lengths n (to a tail mass of ``tail``) and count vectors c of the d = alpha.shape[1] symbols of
    P(n) P(c | n) (f(c) - y(c))^2 / 2: f depends on the counts only."""
    e, q, d = np.exp(alpha), 1.0 - p, alpha.shape[1]
    total, n = 0.0, 1
    while p * q ** (n - 1) >= tail or n < 5:
        grids = np.meshgrid(*[np.arange(n + 1)] * (d - 1), indexing="ij")
        keep = sum(grids) <= n
        c = np.stack([g[keep] for g in grids] + [n - sum(g[keep] for g in grids)]).astype(float)
        weight = p * q ** (n - 1) * np.exp(gammaln(n + 1) - gammaln(c + 1).sum(0) - n * np.log(float(d)))
        f = sum((c * (e[h] * B[h])[:, None]).sum(0) / (c * e[h][:, None]).sum(0) for h in range(len(e)))
        y = np.where((c[0] > 0) & (c[1] > 0), 1.0, -1.0)
        total = total + np.sum(weight * (f - y) ** 2) / 2
        n += 1
    return total


@pytest.mark.parametrize("heads", [1, 2, 3])
@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_the_integral_is_the_exhaustive_sum_at_d_3(heads, scale):
    rng = np.random.default_rng([heads, int(10 * scale)])
    p = 0.3
    for _ in range(2):
        alpha, B = scale * rng.standard_normal((heads, 3)), rng.standard_normal((heads, 3))
        got = population_risk(alpha, B, 3, p=p)
        want = _exhaustive(alpha, B, p)
        assert abs(got.risk - want) <= 1e-13


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_the_integral_is_the_exhaustive_sum_at_d_4_with_unequal_unmarked_symbols(heads):
    """Every symbol its own scores and readout (no class reduction holds): each symbol's own terms count."""
    rng = np.random.default_rng([4, heads])
    alpha, B = 2.0 * rng.standard_normal((heads, 4)), rng.standard_normal((heads, 4))
    assert abs(population_risk(alpha, B, 4, p=0.5).risk - _exhaustive(alpha, B, 0.5)) <= 1e-13


def test_the_error_estimate_is_the_sum_at_twice_the_step_and_covers_a_coarse_sums_error():
    rng = np.random.default_rng(11)
    alpha, B = 2.0 * rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    want = _exhaustive(alpha, B, 0.3)
    fine, coarse = population_risk(alpha, B, 3, p=0.3), population_risk(alpha, B, 3, p=0.3, step=0.4)
    assert fine.error_estimate == pytest.approx(abs(fine.risk - coarse.risk), abs=1e-15)  # the two sums rounded
    assert fine.error_estimate > 0 and coarse.error_estimate >= abs(coarse.risk - want) > 1e-13


@pytest.mark.parametrize("heads", [1, 2])
def test_small_p_keeps_its_accuracy(heads):
    """At p = 1e-6 the same sums in 80-bit long double agree (1 - q w formed as p + q (1 - w): formed directly it
    lost eps / p, 1e-11 here)."""
    if np.finfo(np.longdouble).eps >= np.finfo(float).eps:
        pytest.skip("long double is double on this platform")
    rng = np.random.default_rng([6, heads])
    alpha, B = rng.standard_normal((heads, 3)), rng.standard_normal((heads, 3))
    got = population_risk(alpha, B, 3, p=1e-6)
    want = population_risk(alpha, B, 3, p=1e-6, dtype=np.longdouble)
    assert abs(got.risk - want.risk) <= 1e-13
    al, Bf, p, (s, jac) = and_integral._checked(alpha, B, 3, 1e-6, and_integral.STEP)
    _, ga, gB = and_integral._sums(al, Bf, p, s, and_integral.STEP * jac, grad=True)
    _, la, lB = and_integral._sums(al, Bf, p, s, and_integral.STEP * jac, dtype=np.longdouble, grad=True)
    assert np.abs(ga - la).max() <= 1e-13 and np.abs(gB - lB).max() <= 1e-13


def test_the_gradient_holds_to_its_spread_limit_and_refuses_beyond():
    rng = np.random.default_rng(12)
    alpha, B = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    alpha[0, 3] = alpha[0].max() - 0.99 * and_integral.GRAD_MAX_SPREAD
    al, Bf, p, (s, jac) = and_integral._checked(alpha, B, 4, 0.3, and_integral.STEP)
    _, ga, gB = population_risk_and_grad(alpha, B, 4, p=0.3)
    want_a, want_B = _complex_step(lambda a, b: and_integral._sums(a, b, p, s, and_integral.STEP * jac, dtype=complex), al, Bf)
    assert np.abs(ga - want_a).max() <= 1e-14 and np.abs(gB - want_B).max() <= 1e-14
    alpha[0, 3] = alpha[0].max() - 1.01 * and_integral.GRAD_MAX_SPREAD
    with pytest.raises(SettingError, match="spread"):
        population_risk_and_grad(alpha, B, 4, p=0.3)
    assert np.isfinite(population_risk(alpha, B, 4, p=0.3).risk)  # the risk alone goes to MAX_SPREAD


def test_a_constant_added_to_a_heads_scores_changes_nothing():
    rng = np.random.default_rng(5)
    alpha, B = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    base = population_risk(alpha, B, 3, p=0.3).risk
    # (the scores plus 360 and less 500 are themselves rounded to a spacing of 6e-14 and 1.1e-13; without
    # the shift by each head's maximum the sums overflow to NaN)
    assert abs(population_risk(alpha + np.array([[360.0], [-500.0]]), B, 3, p=0.3).risk - base) <= 1e-13


def test_the_integral_is_the_engines_class_population_at_d_6():
    """Parameters equal on the unmarked symbols (the class population's assumption), two heads and one."""
    d = 6
    tb = engine.from_batch(population("AND", d, 1e-16, 1e-16, merged=False))
    rng = np.random.default_rng(7)
    for heads, scale in ((2, 1.0), (2, 4.0), (1, 2.0)):
        a3, b3 = scale * rng.standard_normal((heads, 3, 1)), rng.standard_normal((heads, 3, 1))
        alpha, B = expand(a3, d, 2)[..., 0], expand(b3, d, 2)
        want = engine.risk(alpha[None], B[None], tb, "squared")[0]
        got = population_risk(alpha, B, d)
        assert abs(got.risk - want) <= 1e-13, (heads, scale, got.risk - want)


def test_the_risk_moves_with_each_symbol_and_the_default_length_law():
    """Asymmetric parameters change the risk (every symbol counts, not only a, b and the rest as a class), and
    the default p is AND's balancing one."""
    d = 7
    rng = np.random.default_rng(2)
    alpha, B = rng.standard_normal((2, d)), rng.standard_normal((2, d))
    base = population_risk(alpha, B, d).risk
    assert base == population_risk(alpha, B, d, p=length_parameter("AND", d)).risk
    for t in (0, 1, d - 1):
        moved = B.copy()
        moved[1, t] += 0.5
        assert abs(population_risk(alpha, moved, d).risk - base) > 1e-6


def _complex_step(fn, alpha, B, h=1e-30):
    """d fn / d alpha and d fn / d B by the complex step (exact to rounding for an analytic fn)."""
    ga, gB = np.zeros(alpha.shape), np.zeros(B.shape)
    for i in np.ndindex(*alpha.shape):
        A, Bc = alpha.astype(complex), B.astype(complex)
        A[i] += 1j * h
        ga[i] = fn(A, B.astype(complex)).imag / h
        Bc[i] += 1j * h
        gB[i] = fn(alpha.astype(complex), Bc).imag / h
    return ga, gB


@pytest.mark.parametrize("heads,d,p", [(1, 3, 0.3), (2, 3, 0.3), (3, 3, 0.5), (2, 4, 0.5)])
def test_the_gradient_is_the_exhaustive_sums(heads, d, p):
    """The gradient (each term differentiated under the integral) equals the exhaustive sum's, by the complex
    step, and each head's score gradient sums to 0."""
    rng = np.random.default_rng([heads, d])
    alpha, B = 2.0 * rng.standard_normal((heads, d)), rng.standard_normal((heads, d))
    risk, ga, gB = population_risk_and_grad(alpha, B, d, p=p)
    assert risk == pytest.approx(population_risk(alpha, B, d, p=p).risk, rel=1e-15, abs=1e-15)  # to rounding
    want_a, want_B = _complex_step(lambda a, b: _exhaustive(a, b, p), alpha, B)
    assert np.abs(ga - want_a).max() <= 1e-14 and np.abs(gB - want_B).max() <= 1e-14
    assert np.abs(ga.sum(axis=1)).max() <= 1e-14 * max(1.0, np.abs(ga).max())


def test_the_gradient_is_the_derivative_of_the_sums_themselves():
    """At d = 7 with three heads (every pair's cross term): the analytic derivative of the trapezoid sums equals
    their complex-step derivative."""
    rng = np.random.default_rng(9)
    d, p = 7, 0.2
    alpha, B = rng.standard_normal((3, d)), rng.standard_normal((3, d))
    al, Bf, p, (s, jac) = and_integral._checked(alpha, B, d, p, and_integral.STEP)
    _, ga, gB = and_integral._sums(al, Bf, p, s, and_integral.STEP * jac, grad=True)
    want_a, want_B = _complex_step(lambda a, b: and_integral._sums(a, b, p, s, and_integral.STEP * jac, dtype=complex), al, Bf)
    assert np.abs(ga - want_a).max() <= 1e-14 and np.abs(gB - want_B).max() <= 1e-14


def test_the_gradient_is_the_engines_on_its_class_population():
    """Equal on the unmarked symbols, d = 6: the engine's gradient on the class population (its own sums over
    1.1e6 classes round at about 1e-13 here; the exhaustive checks above are the tighter ones)."""
    d = 6
    tb = engine.from_batch(population("AND", d, 1e-16, 1e-16, merged=False))
    rng = np.random.default_rng(8)
    a3, b3 = 2.0 * rng.standard_normal((2, 3, 1)), rng.standard_normal((2, 3, 1))
    alpha, B = expand(a3, d, 2)[..., 0], expand(b3, d, 2)
    r, ga, gB, _ = engine.risk_and_grad(alpha[None], B[None], tb, "squared")
    risk, gai, gBi = population_risk_and_grad(alpha, B, d)
    assert gBi.shape == B.shape  # B's own shape, (H, d, 1) here
    assert abs(r[0] - risk) <= 1e-12 and np.abs(ga[0] - gai).max() <= 1e-12 and np.abs(gB[0] - gBi).max() <= 1e-12


@pytest.mark.parametrize("alpha,B,d,kw", [
    (np.zeros((2, 5)), np.zeros((2, 4)), 5, {}),
    (np.zeros((2, 2)), np.zeros((2, 2)), 2, {}),
    (np.full((1, 4), np.nan), np.zeros((1, 4)), 4, {}),
    (np.zeros((1, 4)), np.zeros((1, 4)), 4, {"p": 0.0}),
    (np.zeros((1, 4)), np.zeros((1, 4)), 4, {"step": 0.0}),
    (np.zeros((1, 4)), np.zeros((1, 4)), 4, {"p": 1.5}),
    (np.zeros((1, 4)), np.zeros((1, 4)), 4, {"step": 0.6}),
    (np.zeros((0, 4)), np.zeros((0, 4)), 4, {}),
    (np.array([[0.0, -301.0, 0.0, 0.0]]), np.zeros((1, 4)), 4, {}),
    (np.zeros((1, 2)), np.zeros((1, 2)), 2, {"p": 0.5}),
])
def test_bad_input_is_refused(alpha, B, d, kw):
    with pytest.raises(SettingError):
        population_risk(alpha, B, d, **kw)
    with pytest.raises(SettingError):
        population_risk_and_grad(alpha, B, d, **{k: v for k, v in kw.items()})


@pytest.mark.parametrize("d, p", [(50, None), (200, None), (20, 1e-6), (7, 0.9)])
def test_the_node_map_gives_the_sums_of_equal_steps_in_log_s(d, p):
    """The map s = exp(t - e^{t0 - t}) crosses the tail below s ~ p in a few nodes: risk and gradient equal
    the trapezoid sums at half the step in x = log s over the whole range from 1e-19 p (the representation
    before the map) to rounding, with far fewer nodes."""
    rng = np.random.default_rng([d, 3])
    for scale in (0.3, 4.0):
        alpha, B = scale * rng.standard_normal((2, d)), rng.standard_normal((2, d))
        al, Bf, pp, (s, jac) = and_integral._checked(alpha, B, d, p, and_integral.STEP)
        lo = np.log(1e-19 * pp)  # (np.arange would space the nodes by its first difference, not 0.1)
        x = lo + 0.1 * np.arange(int(np.ceil((np.log(45.0) - al.min() - lo) / 0.1)) + 1)
        want = and_integral._sums(al, Bf, pp, np.exp(x), 0.1 * np.exp(x), grad=True)
        got = and_integral._sums(al, Bf, pp, s, and_integral.STEP * jac, grad=True)
        scale_B = (1 + np.abs(Bf).max(axis=1).sum()) ** 2
        for g, w in zip(got, want):
            assert np.max(np.abs(g - w)) <= 5e-16 * scale_B
        assert s.size < x.size / 1.5 and population_risk(alpha, B, d, p=p).nodes == s.size


@pytest.mark.parametrize("d", [4, 50, 1000])
def test_parameters_equal_on_the_unmarked_symbols_take_three_columns_with_the_same_numbers(d, monkeypatch):
    """Scores and readouts equal on the d - 2 unmarked symbols (every Table 1 row's): the sums run over the
    classes a, b and the rest, weighted by their sizes, and give the risk, the error estimate and every
    symbol's gradient of the sums over all d symbols, to rounding; a single unmarked symbol off the others
    takes the sums over all d."""
    from numerics.experiments.population import expand

    rng = np.random.default_rng([d, 9])
    a3, b3 = 2.0 * rng.standard_normal((2, 3, 1)), rng.standard_normal((2, 3, 1))
    alpha, B = expand(a3, d, 2)[..., 0], expand(b3, d, 2)[..., 0]
    al, Bf, p, (s, jac) = and_integral._checked(alpha, B, d, None, and_integral.STEP)
    want = and_integral._sums(al, Bf, p, s, and_integral.STEP * jac, grad=True)
    ws = np.zeros((2, s.size))
    ws[0], ws[1, ::2] = and_integral.STEP * jac, 2 * and_integral.STEP * jac[::2]
    want_fine, want_coarse = and_integral._sums(al, Bf, p, s, ws)
    seen = []
    sums = and_integral._sums

    def spy(*a, **k):
        seen.append((a[0].shape, k.get("mult")))
        return sums(*a, **k)

    monkeypatch.setattr(and_integral, "_sums", spy)
    risk, ga, gB = population_risk_and_grad(alpha, B, d)
    est = population_risk(alpha, B, d)
    assert [sh for sh, _ in seen] == [(2, 3), (2, 3)] and all(list(m) == [1, 1, d - 2] for _, m in seen)
    scale = (1 + np.abs(B).max(axis=1).sum()) ** 2
    assert abs(risk - want[0]) <= 1e-15 * scale and abs(est.risk - want_fine) <= 1e-15 * scale
    assert abs(est.error_estimate - abs(want_fine - want_coarse)) <= 1e-15 * scale
    assert np.abs(ga - want[1]).max() <= 1e-15 * scale and np.abs(gB - want[2]).max() <= 1e-15 * scale
    assert ga.shape == gB.shape == (2, d)
    seen.clear()
    off = alpha.copy()
    off[1, d - 1] += 0.5
    population_risk_and_grad(off, B, d)
    population_risk(alpha, np.where(np.arange(d) == 2, B + 0.5, B), d)
    assert [m for _, m in seen] == [None, None] and [sh for sh, _ in seen] == [(2, d)] * 2
