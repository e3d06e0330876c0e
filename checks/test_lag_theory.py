"""Checks of the claim ``lag_from_zero`` (stated in theory/claims.toml, printed by
``python3 -c "from theory.claims import claim; print(claim('lag_from_zero'))"`` and rendered in README.md).

Under joint GD from zero the attention gradient vanishes while the readout is 0, so the readout moves at first
order in the step sizes and the attention at second order: proved symbolically for every d (the SymPy
derivations of ``theory.symbolic``: ``joint_first_steps``, ``joint_leading_rates``), with the sign of the
gap's coefficient proved for every d >= 3.  The lag ratio over the default budget is certified per d in arb
balls (``numerics.theorem.lag``).  Controls: from a non-zero readout start the attention moves at the first
step, at first order, so the gating criterion fails there; with a much larger attention step the certified
ratio is not above 1.
"""
from __future__ import annotations

import math

import pytest
import sympy as sp
from flint import ctx

from numerics.theorem import lag
from theory import symbolic
from theory.claims import claim

CLAIM = claim("lag_from_zero")
LENGTHS = ("positive", "nonnegative")


def is_zero(expr: sp.Expr) -> bool:
    """Whether an expression in d, p, the step sizes, the readout start, logarithms and polylogarithms is
    identically 0: a polynomial in the step sizes, the start and the transcendental atoms (independent of one
    another) whose coefficients are rational functions of d and p, all 0."""
    expr = sp.expand(sp.expand_log(sp.sympify(expr), force=True))
    atoms = sorted(expr.atoms(sp.log, sp.polylog), key=sp.default_sort_key)
    gens = [g for g in (symbolic.eta_att, symbolic.eta_out, symbolic.beta0_a, symbolic.beta0_b, *atoms) if expr.has(g)]
    if not gens:
        return sp.cancel(sp.together(expr)) == 0
    return all(sp.cancel(sp.together(c)) == 0 for c in sp.Poly(expr, *gens).coeffs())


def gated(first_move: sp.Expr, second_move: sp.Expr) -> bool:
    """The gating criterion on the attention's moves of steps 1 and 2 (polynomials in the step sizes): no move at
    step 1, and a move at step 2 of exact order 2, eta_att eta_out times a coefficient that is not 0."""
    return (is_zero(first_move) and symbolic.step_order(second_move) == 2
            and not is_zero(symbolic.step_coefficient(second_move, 1, 1)))


@pytest.mark.parametrize("lengths", LENGTHS)
def test_attention_first_move_is_second_order_for_all_d(lengths):
    steps = symbolic.joint_first_steps(lengths)
    rates = symbolic.joint_leading_rates(lengths)
    # the readout: first order, with a non-zero coefficient on a (1/d under the default law)
    assert symbolic.step_order(steps["beta1_a"]) == 1 and symbolic.step_order(steps["beta1_b"]) == 1
    assert not is_zero(rates["beta_a"])
    # the attention: 0 at step 1, then eta_att eta_out (k + eta_out k2) at step 2 and nothing else
    assert steps["alpha1_a"] == 0 and steps["alpha1_b"] == 0
    move = steps["dalpha2_a"]
    assert is_zero(move - symbolic.eta_att * symbolic.eta_out * (rates["alpha_a"] + symbolic.eta_out * rates["alpha_a_2"]))
    assert gated(steps["alpha1_a"], move)
    # the same move as the three-phase plan's attention step, which was derived on its own path
    a2a, _ = symbolic.phase2_alpha(lengths)
    assert is_zero(a2a.subs({symbolic.eta1: symbolic.eta_out, symbolic.eta2: symbolic.eta_att}) - move)
    # the gap's coefficient is the slope at 0 of the phase-2 gap rate kappa(eta_1)
    kappa = symbolic.attention_gap_rate(lengths)
    assert is_zero(sp.diff(kappa, symbolic.eta1).subs(symbolic.eta1, 0) - rates["gap"])
    # shift invariance: the moves on the d - 1 unmarked symbols sum to minus the move on a
    assert is_zero(steps["dalpha2_a"] + (symbolic.d - 1) * steps["dalpha2_b"])


@pytest.mark.parametrize("lengths", LENGTHS)
def test_control_nonzero_readout_start_moves_attention_at_first_order(lengths):
    """From alpha = 0 and beta_0 = (beta_0a, beta_0b) with beta_0a != beta_0b the criterion fails: the attention
    moves at the first step, at first order in eta_att."""
    control = symbolic.joint_first_step_from(lengths)
    move = control["dalpha1_a"]
    assert symbolic.step_order(move) == 1
    assert not gated(move, move)
    at = {symbolic.beta0_a: sp.Rational(1, 2), symbolic.beta0_b: -sp.Rational(1, 2), symbolic.d: 5}
    p_star = symbolic.balanced_p(lengths).subs(symbolic.d, 5)
    assert sp.N(symbolic.step_coefficient(move, 1, 0).subs(at).subs(symbolic.p, p_star)) != 0
    # with beta_0 = 0 the same formula gives no move
    assert is_zero(move.subs({symbolic.beta0_a: 0, symbolic.beta0_b: 0}))


def test_control_in_balls_the_zero_start_waits_and_a_readout_start_does_not():
    zero = lag.ball_trajectory(5, steps=2)
    start = lag.ball_trajectory(5, steps=2, beta0=(sp.Rational(1, 2), -sp.Rational(1, 2)))
    assert zero.states[1][0].contains(0) and not zero.states[2][0].contains(0)
    assert not start.states[1][0].contains(0)  # moved at the first step


def _positive_beyond_one(g: sp.Expr, x: sp.Symbol) -> bool:
    """g(x) > 0 for every x > 1, shown as g(1) = 0 and g'(1 + y) > 0 for every y > 0 (SymPy decides the sign)."""
    y = sp.Symbol("y", positive=True)
    return sp.simplify(g.subs(x, 1)) == 0 and bool(sp.simplify(sp.diff(g, x).subs(x, 1 + y)).is_positive)


def test_gap_coefficient_is_positive_for_all_d():
    """At the balancing p the gap's coefficient is ((d - 2) - ln(d - 1)) / (d (d - 1) (d - 2)); with x = d - 1 > 1
    its numerator is x - 1 - ln x > 0, so the attention's first move opens the gap towards a for every d >= 3."""
    x = sp.Symbol("x", positive=True)
    d = symbolic.d
    coeff = symbolic.joint_gap_rate_balanced("positive")
    numerator = sp.simplify(coeff * d * (d - 1) * (d - 2))
    assert sp.simplify(sp.expand_log(numerator - ((d - 2) - sp.log(d - 1)), force=True)) == 0
    assert _positive_beyond_one(numerator.subs(d, x + 1), x)
    # the procedure can say no: it refutes the opposite sign
    assert not _positive_beyond_one(-numerator.subs(d, x + 1), x)
    # the general-p coefficient at the balancing p is the same
    general = symbolic.joint_leading_rates("positive")["gap"].subs(symbolic.p, symbolic.balanced_p("positive"))
    for dv in (3, 10, 1000):
        assert abs(sp.N(general.subs(d, dv) - coeff.subs(d, dv), 30)) < 1e-25


def test_small_step_leading_terms_match_the_trajectory():
    """For small steps the readout has moved by t eta_out g and the gap by binomial(t, 2) eta_att eta_out kappa_1
    (float series at d = 5, eta = 1e-4): relative errors of order eta t."""
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.theorem.evaluators import population_evaluator
    from theory.setting import Setting

    d, eta, T = 5, 1e-4, 6
    cf = ClosedForms(Setting(d), dps=30)
    g, kappa = float(cf.value("joint_beta_rate_a")), float(cf.value("joint_gap_rate"))
    ev = population_evaluator(Setting(d))
    aa = ab = ba = bb = 0.0
    for t in range(1, T + 1):
        e = ev.evaluate_symmetric(aa, ab, ba, bb)
        aa, ab = aa - eta * e.grad_alpha[0], ab - eta * e.grad_alpha[1]
        ba, bb = ba - eta * e.grad_beta[0], bb - eta * e.grad_beta[1]
        assert abs(ba / (t * eta * g) - 1) < 10 * eta * t
        if t >= 2:
            assert abs((aa - ab) / (math.comb(t, 2) * eta * eta * kappa) - 1) < 10 * eta * t
    # a wrong law (t^2 instead of t(t - 1)/2) is far off
    assert abs((aa - ab) / (T * T * eta * eta * kappa) - 1) > 0.4


@pytest.mark.parametrize("d", [3, 50, 1000])
def test_lag_ratio_certified_above_one_on_the_grid(d):
    """The certified verdict at three d of the grid (series at d = 3, integral at 50 and 1000); the whole grid is
    the slow test below."""
    res = lag.certify_lag(d)
    assert res.steps == lag.DEFAULT_STEPS and res.eta_att == res.eta_out == 1
    assert res.attention.decided and res.readout.decided
    assert res.verdict == "holds" and res.ratio_bounds[0] > 1
    assert res.method == ("series" if d < lag.INTEGRAL_FROM_D else "integral")


@pytest.mark.slow
def test_lag_ratio_certified_above_one_on_the_whole_grid():
    for d in lag.GRID:
        assert lag.certify_lag(d).verdict == "holds", d


def test_control_a_much_larger_attention_step_is_not_lagging():
    """eta_att = 50 eta_out at d = 5: the attention reaches half its displacement first; certified not above 1."""
    res = lag.certify_lag(5, eta_att=50, eta_out=1)
    assert res.verdict == "does not hold" and res.ratio_bounds[1] is not None and res.ratio_bounds[1] <= 1


def test_half_time_is_undecided_when_the_balls_are_too_wide():
    """A trajectory whose balls are widened until they cannot tell r = 1/2 apart gives an undecided half time."""
    traj = lag.ball_trajectory(3, steps=12)
    from flint import arb

    with ctx.workprec(traj.prec_bits):
        wide = tuple(tuple(x + arb(0, 0.5) for x in s) for s in traj.states)
    blurred = lag.BallTrajectory(**{**traj.__dict__, "states": wide})
    half = lag.half_time(blurred, "attention")
    assert not half.decided
    res = lag.LagResult(3, traj.eta_att, traj.eta_out, 12, traj.prec_bits, traj.method, half,
                        lag.half_time(blurred, "readout"), 12, 0.0)
    assert res.verdict == "undecided"
