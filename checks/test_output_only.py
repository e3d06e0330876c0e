"""Check of the claim ``output_only`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('output_only'))"`` and rendered in README.md).

c(d, p) is the infimum over *all* output weights in R^d of R(0, beta): checked against a full series
minimisation over R^d, and every output-only trajectory, with any step sizes, stays above it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, floor_c, lengths_st, setting, step_st
from numerics.theorem.closed_forms import ClosedForms
from numerics.theorem.training import Trainer, output_only
from theory.claims import claim

CLAIM = claim("output_only")


def c_formula(d):
    """The hand-derived statement of the floor at the balancing p (default length law)."""
    return 0.5 * (1 - (d - 2) / ((d - 1) * math.log(d - 1)))


@given(d=st.integers(3, 400))
def test_floor_is_explicit_and_positive(d):
    c = floor_c(d)
    assert abs(c - c_formula(d)) < 1e-14
    assert c > 0


def series_minimum_over_R_d(ev, d):
    """Minimise the full d x d quadratic R(0, .), built from series evaluations at beta = 0 and at
    beta = e_k (no symmetry assumed); returns (minimum, minimiser)."""
    alpha = [0.0] * d
    g0 = ev.evaluate(alpha, [0.0] * d)
    b = -np.array([float(x) for x in g0.grad_beta])  # the gradient at 0 is -b
    A = np.zeros((d, d))
    for k in range(d):
        e = [0.0] * d
        e[k] = 1.0
        A[:, k] = np.array([float(x) for x in ev.evaluate(alpha, e).grad_beta]) + b
    A = (A + A.T) / 2
    beta_star = np.linalg.solve(A, b)
    return float(g0.risk) - 0.5 * b @ beta_star, beta_star


@pytest.mark.parametrize("d,lengths", [(3, "positive"), (4, "positive"), (5, "positive"),
                                       (3, "nonnegative"), (4, "nonnegative")])
def test_floor_is_the_minimum_over_all_of_R_d(d, lengths):
    """c(d) at the balancing p is the minimum of the series risk over all of R^d."""
    ev = evaluator(d, lengths)
    min_risk, beta_star = series_minimum_over_R_d(ev, d)
    c = floor_c(d, lengths)
    assert abs(min_risk - c) < 1e-9
    # and the minimiser is symmetric in the unmarked symbols
    assert np.ptp(beta_star[1:]) < 1e-8
    # the series risk at the minimiser equals the floor
    at_min = ev.evaluate_symmetric(0.0, 0.0, beta_star[0], float(np.mean(beta_star[1:])))
    assert abs(float(at_min.risk) - c) <= at_min.risk_bound + 1e-9


@given(d=st.integers(3, 5), p=st.floats(0.2, 0.8), lengths=lengths_st)
@examples(10)
def test_general_p_floor_is_the_minimum_over_all_of_R_d(d, p, lengths):
    """c(d, p) for unbalanced classes, against the same minimisation of the series."""
    min_risk, _ = series_minimum_over_R_d(evaluator(d, lengths, p=p), d)
    c = float(ClosedForms(setting(d, lengths, p=p)).output_only_floor())
    assert abs(min_risk - c) < 1e-9
    assert c > 0


@given(d=st.integers(3, 60), lengths=lengths_st,
       seed=st.integers(0, 2**32 - 1), scale=st.floats(0.01, 10))
def test_no_output_weights_beat_the_floor(d, lengths, seed, scale):
    """Arbitrary (non-symmetric) beta in R^d, closed-form quadratic risk at alpha = 0."""
    beta = np.random.default_rng(seed).normal(0, scale, d)
    assert float(ClosedForms(setting(d, lengths), dps=30).uniform_attention_risk(beta)) >= floor_c(d, lengths) - 1e-12


@given(d=st.integers(3, 6), values=st.lists(st.floats(-3, 3), min_size=3, max_size=3))
@examples(12)
def test_no_output_weights_beat_the_floor_series(d, values):
    """Same, with the exact series (three distinct output weights, no symmetry)."""
    beta = [values[0], values[1]] + [values[2]] * (d - 2)
    res = evaluator(d).evaluate([0.0] * d, beta)
    assert float(res.risk) + res.risk_bound >= floor_c(d)


@given(d=st.integers(3, 20), eta=step_st, T=st.integers(0, 60), lengths=lengths_st)
@examples(30)
def test_output_only_trajectories_stay_above_the_floor(d, eta, T, lengths):
    traj = Trainer(evaluator(d, lengths)).run(output_only(eta, T))
    c = floor_c(d, lengths)
    for pt in traj.points:
        assert pt.alpha_a == 0.0 and pt.alpha_b == 0.0
        assert np.isfinite(pt.risk) and pt.risk + pt.risk_bound >= c


def test_converged_output_only_reaches_the_floor_but_not_below():
    """Long output-only GD approaches c(d) (so the bound is tight), never crosses it."""
    d = 4
    traj = Trainer(evaluator(d), record_every=50).run(output_only(1.0, 3000))
    c = floor_c(d)
    assert traj.final.risk - c < 1e-6
    assert min(traj.risks()) >= c - 1e-12


def test_floor_is_not_a_bound_once_attention_moves():
    """Control: the floor is specific to frozen attention; with attention moved, risk goes below it."""
    d = 5
    ev = evaluator(d)
    res = ev.evaluate_symmetric(4.0, 0.0, 1.0, -1.0)
    assert float(res.risk) + res.risk_bound < floor_c(d)
