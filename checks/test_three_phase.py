"""Check of the claim ``three_phase`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('three_phase'))"`` and rendered in README.md).

The plan is run with exact series gradients (not with the closed forms that define the regime), and
the final risk is the series value plus its truncation bound.
"""
from __future__ import annotations

import dataclasses
import math

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import evaluator, examples, floor_c, lengths_st, setting
from numerics.theorem.closed_forms import ClosedForms
from numerics.theorem.regime import regime_plan, three_phase_regime
from numerics.theorem.series import SeriesEvaluator
from numerics.theorem.training import Trainer, three_phase
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
    with pytest.raises(SettingError, match="^step size eta_1 must be > 0, got 0.0$"):
        three_phase_regime(s, 1e-2, 0.0)  # the regime's eta_1 interval is open at 0
    with pytest.raises(SettingError, match="eta_3"):
        three_phase_regime(s, 1e-2, 1.0, eta_2=100.0, eta_3=1.5)
    with pytest.raises(SettingError, match=r"^the three-phase theorem needs d >= 3 \(at d = 2"):
        three_phase_regime(setting(2), 1e-2, 0.5)
    with pytest.raises(SettingError, match="^the three-phase regime is derived for the squared loss$"):
        three_phase_regime(setting(5, loss="logistic"), 1e-2, 0.5)
    with pytest.raises(SettingError, match=r"^eta1_frac must be a finite number in \(0, 1\), got 1.0$"):
        regime_plan(s, 1e-2, eta1_frac=1.0)
    with pytest.raises(SettingError, match=r"^eta2_factor must be a finite number in \[1, inf\), got 0.5$"):
        regime_plan(s, 1e-2, eta2_factor=0.5)


def test_regime_plan_uses_the_evaluator_it_is_given():
    """A coarser series (tol 1e-4 instead of the default 1e-13) widens the moments' and the start risk's error
    bounds, so the plan's lambda_min_lower drops and its excess rises by about that much."""
    fine = regime_plan(setting(5), 1e-2, evaluator=evaluator(5, tol=1e-13))
    coarse = regime_plan(setting(5), 1e-2, evaluator=evaluator(5, tol=1e-4))
    assert coarse.lambda_min_lower < fine.lambda_min_lower - 1e-5
    assert coarse.initial_excess_upper > fine.initial_excess_upper + 1e-5


# ---- the regime's numbers, deterministically (not through the finite-sample check's statistics) ----------


@pytest.mark.parametrize("d,eps,eta1_frac,eta2_factor,eta_3,lengths", [
    (3, 1e-3, 0.5, 1.0, 1.0, "positive"), (5, 1e-2, 0.25, 1.5, 0.5, "positive"), (8, 3e-2, 0.9, 1.0, 0.8, "positive"),
    (3, 0.3, 0.5, 1.0, 1.0, "positive"),    # excess in (eps/2, eps]
    (3, 0.5, 0.5, 1.0, 1.0, "positive"),    # excess <= eps/2: T_min 0
    (3, 0.5, 0.5, 1.0, 0.01, "positive"),   # the same with a slow contraction (a T_min < 0 would pass as "<= eps/2")
    (4, 1e-2, 0.5, 1.0, 1.0, "nonnegative")])  # floor P(n = 0)/2 = 0.1, not 0
def test_regime_T_min_is_the_contraction_count_from_the_phase3_start(d, eps, eta1_frac, eta2_factor, eta_3, lengths):
    """lambda_min_lower is a lower bound of the smallest curvature of phase 3 (arb balls from gradient
    differences, ``certify.phase3_curvature``, not the moments the regime uses) and is tight to it (so it is
    not the largest); initial_excess_upper bounds R(start) - floor for the start the series trainer reaches;
    T_min is the smallest T with excess x (1 - eta_3 lambda)^(2T) <= epsilon/2 (half of epsilon for the
    contraction, half for inf_beta R; ``certify.certify_series_items``)."""
    from numerics.theorem import certify
    reg = regime_plan(setting(d, lengths), eps, eta1_frac=eta1_frac, eta2_factor=eta2_factor, eta_3=eta_3,
                      evaluator=evaluator(d, lengths))
    # the start of phase 3 by the closed forms the regime uses, and as the series trainer reaches it (their
    # gradients differ by the series' truncation, 1e-12, times the step sizes)
    cf = ClosedForms(setting(d, lengths))
    (a2a, a2b), (b1a, b1b) = ((float(x) for x in pair) for pair in (cf.phase2_alpha(reg.eta_1, reg.eta_2),
                                                                     cf.phase1_beta(reg.eta_1)))
    start = Trainer(evaluator(d, lengths), record_every=None).run(three_phase(reg.eta_1, reg.eta_2, eta_3, 0)).final
    assert max(abs(u - v) for u, v in [(a2a, start.alpha_a), (a2b, start.alpha_b), (b1a, start.beta_a),
                                        (b1b, start.beta_b)]) < 1e-10
    ev = certify.arb_series_evaluator(setting(d, lengths), 128, tol=1e-25)
    lo, hi = certify.phase3_curvature(ev, d, a2a, a2b, 128)
    assert float(hi.lower()) - float(lo.upper()) > 1e-3  # distinct: the largest could not pass for the smallest
    assert float(lo.upper()) - 1e-9 <= reg.lambda_min_lower <= float(lo.lower())
    r0 = ev.evaluate_symmetric(a2a, a2b, b1a, b1b).risk
    assert float(r0.upper()) - reg.floor <= reg.initial_excess_upper <= float(r0.lower()) - reg.floor + 1e-9
    with mpmath.workdps(50):
        def left(T):
            return mpmath.mpf(reg.initial_excess_upper) * (1 - mpmath.mpf(eta_3) * reg.lambda_min_lower) ** (2 * T)
        assert left(reg.T_min) <= mpmath.mpf(eps) / 2 and (reg.T_min == 0 or mpmath.mpf(eps) / 2 < left(reg.T_min - 1))
    assert reg.T_min >= 0 and reg.floor == float(cf.risk_floor())
    assert reg.eta_1 == eta1_frac * reg.eta1_max and reg.eta_2 == eta2_factor * reg.eta2_min


def test_regime_contains_its_boundaries():
    reg = regime_plan(setting(5), 1e-2, evaluator=evaluator(5))
    e1, e2, T = reg.eta_1, reg.eta2_min, reg.T_min
    assert reg.eta_1 == 0.5 * reg.eta1_max and reg.eta_2 == reg.eta2_min and reg.eta_3 == 1.0
    assert reg.contains(e1, e2, 1.0, T) and reg.contains(e1, e2, 0.5, T + 1)
    for args in [(reg.eta1_max, e2, 1.0, T), (0.0, e2, 1.0, T), (e1, e2 * (1 - 1e-12), 1.0, T), (e1, e2, 0.0, T),
                 (e1, e2, 1.0 + 1e-12, T), (e1, e2, 1.0, T - 1)]:
        assert not reg.contains(*args), args
    assert not dataclasses.replace(reg, T_min=None).contains(e1, e2, 1.0, T)
    assert regime_plan(setting(5), 1e-2, eta2_factor=3.0, evaluator=evaluator(5)).eta_2 == 3.0 * e2


def test_regime_without_phase3_steps_and_without_positive_curvature():
    """Without eta_3 (or without eta_2) there is no T_min; a series too coarse to bound the phase-3 curvature
    away from 0 (tol 0.5: lambda_min_lower < 0) gives T_min None, and then nothing is in the regime."""
    s = setting(5)
    eta_1 = 0.5 * float(ClosedForms(s).eta1_max())
    for kwargs in [{}, {"eta_2": 1.0}, {"eta_3": 1.0}]:
        reg = three_phase_regime(s, 1e-2, eta_1, evaluator=evaluator(5), **kwargs)
        assert reg.T_min is None and reg.eta_2 is None and reg.eta_3 is None and reg.lambda_min_lower is None
    coarse = regime_plan(s, 1e-2, evaluator=evaluator(5, tol=0.5))
    assert coarse.lambda_min_lower < 0 and coarse.T_min is None
    assert not coarse.contains(coarse.eta_1, coarse.eta_2, 1.0, 10 ** 6)
    with pytest.raises(SettingError, match="^step size eta_2 must be >= 0, got -1.0$"):
        three_phase_regime(s, 1e-2, eta_1, eta_2=-1.0, eta_3=1.0)
    with pytest.raises(SettingError, match="^step size eta_3 must be > 0, got 0.0$"):
        three_phase_regime(s, 1e-2, eta_1, eta_2=1.0, eta_3=0.0)


def test_regime_default_evaluator_is_the_series_at_tol_1e_13():
    """Without an evaluator the regime uses ``population_evaluator(setting, tol=1e-13)``: the same numbers."""
    s = setting(5)
    assert regime_plan(s, 1e-2) == regime_plan(s, 1e-2, evaluator=evaluator(5, tol=1e-13))
    assert regime_plan(s, 1e-2) != regime_plan(s, 1e-2, evaluator=evaluator(5, tol=1e-12))


@pytest.mark.parametrize("eps", [3.0, 20.0])
def test_regime_log_u_min_is_the_log_of_u_min_or_zero(eps):
    """log_u_min = max(ln u_min(eps), 0): at d = 3, u_min(3) = 2 (0 < ln 2 < 1) and u_min(20) < 1 (no phase 2
    needed); eta2_min = log_u_min / kappa(eta_1)."""
    cf = ClosedForms(setting(3))
    reg = three_phase_regime(setting(3), eps, 1.0)
    with mpmath.workdps(30):
        log_u = float(mpmath.log(cf.u_min(eps)))
    assert (0 < log_u < 1) if eps == 3.0 else log_u < 0
    assert reg.log_u_min == max(log_u, 0.0)
    assert math.isclose(reg.eta2_min * reg.kappa, reg.log_u_min, rel_tol=1e-12, abs_tol=0.0)
