"""Check of the claim ``three_phase`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('three_phase'))"`` and rendered in README.md).

The plan is run with exact series gradients (not with the closed forms that define the regime), and
the final risk is the series value plus its truncation bound.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, floor_c, lengths_st, setting
from numerics.regime import regime_plan, three_phase_regime
from numerics.series import SeriesEvaluator
from numerics.training import Trainer, three_phase
from theory.claims import claim
from theory.validation import SettingError

CLAIM = claim("three_phase")


def run_in_regime(d, lengths, epsilon, eta1_frac, eta2_factor, eta_3, extra_T, p=None):
    reg = regime_plan(setting(d, lengths, p=p), epsilon, eta1_frac=eta1_frac, eta2_factor=eta2_factor,
                      eta_3=eta_3, evaluator=evaluator(d, lengths, p=p))
    assert reg.T_min is not None and reg.contains(reg.eta_1, reg.eta_2, eta_3, reg.T_min + extra_T)
    plan = three_phase(reg.eta_1, reg.eta_2, eta_3, reg.T_min + extra_T)
    traj = Trainer(evaluator(d, lengths, p=p), record_every=None).run(plan)
    return reg, traj


@given(d=st.integers(3, 8), lengths=lengths_st, log_eps=st.floats(math.log(1e-4), math.log(0.3)),
       eta1_frac=st.floats(0.05, 0.95), eta2_factor=st.floats(1.0, 2.0), eta_3=st.floats(0.1, 1.0),
       extra_T=st.integers(0, 10))
@examples(25)
def test_three_phase_reaches_any_requested_risk(d, lengths, log_eps, eta1_frac, eta2_factor, eta_3, extra_T):
    eps = math.exp(log_eps)
    reg, traj = run_in_regime(d, lengths, eps, eta1_frac, eta2_factor, eta_3, extra_T)
    fin = traj.final
    assert fin.risk + fin.risk_bound <= reg.floor + eps
    # the attention really moved, as the theorem's mechanism says
    assert fin.alpha_a - fin.alpha_b >= reg.log_u_min * eta2_factor * (1 - 1e-9)


@pytest.mark.parametrize("d,eps", [(3, 1e-6), (10, 1e-3), (50, 1e-2)])
def test_three_phase_small_targets_and_large_alphabet(d, eps):
    reg, traj = run_in_regime(d, "positive", eps, 0.5, 1.0, 1.0, 0)
    assert traj.final.risk + traj.final.risk_bound <= eps
    assert eps < floor_c(d)  # the impossibility plans cannot get there


def test_three_phase_end_point_certified_in_ball_arithmetic():
    """The float plan's end point, re-evaluated as an arb ball (an enclosure of the exact risk)."""
    d, eps = 4, 1e-3
    reg, traj = run_in_regime(d, "positive", eps, 0.5, 1.0, 1.0, 0)
    fin = traj.final
    ball = SeriesEvaluator(setting(d), context="arb", tol=1e-22).evaluate_symmetric(
        fin.alpha_a, fin.alpha_b, fin.beta_a, fin.beta_b)
    assert ball.certified and ball.risk_bound < 1e-20
    assert ball.risk.upper() <= eps


@given(d=st.integers(3, 6), lengths=lengths_st, p=st.floats(0.1, 0.7), log_eps=st.floats(math.log(1e-3), math.log(0.3)),
       eta1_frac=st.floats(0.05, 0.95), eta_3=st.floats(0.2, 1.0))
@examples(12)
def test_three_phase_without_balanced_classes(d, lengths, p, log_eps, eta1_frac, eta_3):
    """The argument never uses P(y = +1) = 1/2: the regime works for any p in (0, 1)."""
    eps = math.exp(log_eps)
    reg, traj = run_in_regime(d, lengths, eps, eta1_frac, 1.0, eta_3, 0, p=p)
    assert traj.final.risk + traj.final.risk_bound <= reg.floor + eps


# ---- controls: outside the regime the same criterion fails, so the check can fail -----------------

@given(d=st.integers(3, 8), eta1_frac=st.floats(0.05, 0.95), T=st.integers(0, 200))
@examples(10)
def test_control_without_attention_step_risk_stays_above_floor(d, eta1_frac, T):
    """eta_2 = 0 (below eta2_min): the plan degenerates to output-only and stays >= c(d)."""
    eta_1 = eta1_frac * d
    traj = Trainer(evaluator(d), record_every=None).run(three_phase(eta_1, 0.0, 1.0, T))
    assert traj.final.risk + traj.final.risk_bound >= floor_c(d)


def test_control_too_few_phase3_steps_misses_target():
    d, eps = 6, 1e-3
    reg, traj = run_in_regime(d, "positive", eps, 0.5, 1.0, 1.0, 0)
    short = Trainer(evaluator(d)).run(three_phase(reg.eta_1, reg.eta_2, 1.0, 0))
    assert short.final.risk - short.final.risk_bound > eps


def test_regime_refuses_steps_outside_it():
    s = setting(5)
    with pytest.raises(SettingError, match="eta_1"):
        three_phase_regime(s, 1e-2, 5.0)  # eta1_max = d = 5 is excluded
    with pytest.raises(SettingError, match="eta_3"):
        three_phase_regime(s, 1e-2, 1.0, eta_2=100.0, eta_3=1.5)
    with pytest.raises(SettingError, match="d >= 3"):
        three_phase_regime(setting(2), 1e-2, 0.5)
    with pytest.raises(SettingError, match="squared"):
        three_phase_regime(setting(5, loss="logistic"), 1e-2, 0.5)
