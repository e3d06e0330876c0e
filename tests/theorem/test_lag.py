"""numerics.theorem.lag: the ball trajectory of joint GD encloses the float one, the half times and the verdict
follow the definitions (first step with r >= 1/2; holds only when every allowed ratio is above 1), the series
and the integral agree where both run, and the certificate item of ``prove`` carries the verdict."""
from __future__ import annotations

from fractions import Fraction

import pytest
from flint import arb, ctx, fmpq

from numerics.theorem import lag
from numerics.theorem.evaluators import population_evaluator
from theory.setting import Setting
from theory.validation import SettingError


def _fake(states, d=3) -> lag.BallTrajectory:
    """A trajectory with given (alpha_a, beta_a) pairs (alpha_b = beta_b = 0) as exact balls."""
    with ctx.workprec(128):
        balls = tuple((arb(a), arb(0), arb(b), arb(0)) for a, b in states)
    return lag.BallTrajectory(d, Fraction(1), Fraction(1), len(states) - 1, 128, "series", balls)


def test_half_time_is_the_first_step_at_half_the_final_displacement():
    traj = _fake([(0, 0), (0.1, 0.6), (0.49, 0.8), (0.5, 0.9), (1, 1)])
    assert lag.half_time(traj, "attention") == lag.HalfTime(3, 3)  # 0.5 >= 1/2 exactly: the comparison is >=
    assert lag.half_time(traj, "readout") == lag.HalfTime(1, 1)
    res = lag.LagResult(3, Fraction(1), Fraction(1), 4, 128, "series", lag.half_time(traj, "attention"),
                        lag.half_time(traj, "readout"), 4, 0.0)
    assert res.ratio_bounds == (Fraction(3), Fraction(3)) and res.verdict == "holds"


def test_displacement_is_the_euclidean_norm_in_R_d():
    with ctx.workprec(128):
        states = ((arb(0), arb(0), arb(0), arb(0)), (arb(1), arb(2), arb(3), arb(-1)))
    traj = lag.BallTrajectory(10, Fraction(1), Fraction(1), 1, 128, "series", states)
    assert traj.squared_displacement("attention", 1) == 1 + 9 * 4
    assert traj.squared_displacement("readout", 1) == 9 + 9 * 1


def test_verdicts_from_the_half_time_bounds():
    def res(att, out):
        return lag.LagResult(3, Fraction(1), Fraction(1), 9, 128, "series", lag.HalfTime(*att), lag.HalfTime(*out), 9, 0.0)

    assert res((5, 5), (4, 4)).verdict == "holds"
    assert res((4, 4), (4, 4)).verdict == "does not hold"  # ratio 1 is not above 1
    assert res((3, 6), (4, 4)).verdict == "undecided"
    assert res((5, 9), (2, 4)).verdict == "holds"  # every allowed ratio >= 5/4
    assert res((2, 3), (3, 5)).verdict == "does not hold"
    assert res((5, None), (2, None)).verdict == "undecided"
    assert res((3, 6), (4, 4)).ratio_bounds == (Fraction(3, 4), Fraction(3, 2))


def test_ball_trajectory_encloses_the_float_trajectory():
    traj = lag.ball_trajectory(4, steps=8)
    ev = population_evaluator(Setting(4))
    aa = ab = ba = bb = 0.0
    for t in range(1, 9):
        e = ev.evaluate_symmetric(aa, ab, ba, bb)
        aa, ab, ba, bb = (aa - e.grad_alpha[0], ab - e.grad_alpha[1], ba - e.grad_beta[0], bb - e.grad_beta[1])
        for ball, x in zip(traj.states[t], (aa, ab, ba, bb)):
            assert abs(float(ball.mid()) - x) < 1e-9
            assert ball.rad() < 1e-20
    # alpha stays at 0 for one step, then sums to 0 over the d coordinates
    assert traj.states[1][0].contains(0)
    with ctx.workprec(128):
        assert (traj.states[5][0] + 3 * traj.states[5][1]).contains(0)


def test_series_and_integral_agree_where_both_run():
    d = lag.INTEGRAL_FROM_D
    from numerics.theorem.integral import IntegralEvaluator
    from numerics.theorem.series import SeriesEvaluator

    series = SeriesEvaluator(Setting(d), context="arb", prec_bits=128, tol=1e-25)
    integral = IntegralEvaluator(Setting(d), prec_bits=128)
    state = lag.ball_trajectory(d, steps=3).states[3]
    a, b = series.evaluate_symmetric(*state), integral.evaluate_symmetric(*state)
    for x, y in zip(a.grad_alpha + a.grad_beta, b.grad_alpha + b.grad_beta):
        assert x.overlaps(y)
    assert isinstance(lag.evaluator(Setting(d), 128), IntegralEvaluator)
    assert isinstance(lag.evaluator(Setting(d - 1), 128), SeriesEvaluator)


def test_too_little_precision_is_retried_and_recorded(monkeypatch):
    """At 53 bits the balls of 50 steps at d = 3 grow wider than the cap; the run is repeated at 106 bits."""
    low = lag.certify_lag(3, steps=50, prec_bits=53)
    assert low.verdict == "holds" and low.prec_bits == 106 and low.attention.decided
    with pytest.raises(lag.PrecisionLost, match="grew wider than"):
        lag.certify_lag(3, steps=50, prec_bits=53, max_prec_bits=53)
    # with no cap on the radii, a short run is decided at 53 bits, where its half times are intervals, and is
    # not repeated: a decided verdict stops the retries
    monkeypatch.setattr(lag, "RADIUS_CAP", float("inf"))
    short = lag.certify_lag(3, steps=30, prec_bits=53)
    assert short.prec_bits == 53 and short.verdict == "holds" and not short.attention.decided


def test_inputs_are_checked():
    with pytest.raises(SettingError, match="step sizes must be > 0"):
        lag.ball_trajectory(3, eta_att=0)
    with pytest.raises(SettingError):
        lag.ball_trajectory(3, steps=0)


def test_certificate_item_carries_the_verdict():
    item = lag.lag_certificate(3)
    assert (item.claim, item.status, item.prec_bits) == ("lag_from_zero", "PASS", 128)
    with ctx.workprec(128):
        assert item.ball.overlaps(arb(fmpq(14, 3))) and item.ball.rad() < 1e-30
    assert "T = 50" in item.item and "[14, 14]" in item.note


def test_a_trajectory_is_abandoned_as_soon_as_its_balls_pass_the_cap(monkeypatch):
    """The first state wider than ``RADIUS_CAP`` stops the run (it does not carry on to the end with balls too wide
    to decide anything), and ``certify_lag`` doubles the precision: with the cap at 2^-40 the 12 steps at d = 3
    pass it at 64 bits (radii near 1e-12 by step 11) and not at 128, with the verdict and half times of the
    default run."""
    plain = lag.certify_lag(3, steps=12)
    monkeypatch.setattr(lag, "RADIUS_CAP", 2.0 ** -40)
    with pytest.raises(lag.PrecisionLost, match="at step 1[01] at 64 bits"):
        lag.ball_trajectory(3, steps=12, prec_bits=64)
    tight = lag.certify_lag(3, steps=12, prec_bits=64)
    assert tight.prec_bits == 128 and (tight.attention, tight.readout, tight.verdict) == (
        plain.attention, plain.readout, plain.verdict)


def test_crossover_search_and_certificate_at_d3():
    """The float search brackets a crossing where the certified runs do too, and the certificate's ball is the
    bracket [(5/4)^k, (5/4)^(k + 1)]."""
    k = lag.locate_crossover(3)
    assert k is not None and k[1] == k[0] + 1
    assert lag.float_above_one(3, lag.CROSSOVER_FACTOR ** k[0]) and not lag.float_above_one(3, lag.CROSSOVER_FACTOR ** k[1])
    item = lag.crossover_certificate(3)
    assert (item.claim, item.d, item.status) == ("lag_crossover", 3, "PASS")
    lo, hi = (lag.CROSSOVER_FACTOR ** j for j in k)
    with ctx.workprec(128):
        assert item.ball.contains(arb(fmpq(lo.numerator, lo.denominator)))
        assert item.ball.contains(arb(fmpq(hi.numerator, hi.denominator)))
        assert not item.ball.contains(arb(fmpq(hi.numerator, hi.denominator)) * 1.01)
    assert f"(5/4)^{k[0]}: t_half" in item.note and "does not hold" in item.note


def test_crossover_walks_the_bracket_when_the_float_search_is_wrong(monkeypatch):
    """Only certified verdicts decide: a float search that brackets the wrong place is corrected by walking down
    (its lower end certified not above 1) or up (its upper end certified above 1)."""
    right = lag.locate_crossover(3)
    for wrong in ((right[0] + 3, right[0] + 4), (right[0] - 3, right[0] - 2)):
        monkeypatch.setattr(lag, "_locate", lambda *args, w=wrong: (w, 0))
        res = lag.certify_crossover(3)
        assert res.status == "PASS" and (res.k_low, res.k_high) == right and res.certified_runs > 2


def test_no_crossing_up_to_the_search_limit_fails():
    res = lag.certify_crossover(3, max_k=3)
    assert res.status == "FAIL" and res.bracket is None


def test_crossover_fit_recovers_a_power_law():
    """The fit of ln rho_mid on ln d recovers the exponent and constant of an exact power law, ignores d below
    ``from_d``, and needs two points."""
    points = {d: (0.9 * 0.002 * d ** 1.75, 0.002 * d ** 1.75 / 0.9) for d in (200, 600, 2000)}
    points[lag.CROSSOVER_FIT_FROM_D - 1] = (1.0, 1.25)
    fit = lag.crossover_fit(points)
    assert abs(fit["exponent"] - 1.75) < 1e-12 and abs(fit["constant"] / 0.002 - 1) < 1e-12
    assert fit["max_log_residual"] < 1e-12 and fit["from_d"] == 200 == lag.CROSSOVER_FIT_FROM_D
    with pytest.raises(SettingError, match="two d"):
        lag.crossover_fit({10: (1.0, 1.25), 1000: (500.0, 625.0)})


def test_linear_gap_is_the_small_step_gap():
    """G = binomial(T, 2) rho kappa_1(d), and kappa_1 ~ 1/d^2 for large d."""
    assert lag.linear_gap(50, 3, steps=10) == 45 * 3 * lag.gap_rate(50)
    assert abs(lag.gap_rate(10 ** 6) * 10 ** 12 - 1) < 1e-4


@pytest.mark.slow
def test_a_fast_attention_at_d50_is_certified_at_higher_precision():
    """At d = 50 and eta_att = 20 the balls lose about 8 bits a step once the gap opens: the 128- and 256-bit runs
    pass the radius cap part-way and are abandoned, and the 512-bit run decides the half times (19 and 23, the
    float trajectory's)."""
    res = lag.certify_lag(50, eta_att=20, eta_out=1)
    assert res.prec_bits == 512 and res.verdict == "does not hold"
    assert (res.attention.low, res.readout.low) == lag.float_lag(50, eta_att=20.0) == (19, 23)
    assert res.attention.decided and res.readout.decided
