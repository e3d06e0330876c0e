"""Check of the claim ``finite_sample`` of theory/claims.py (its statement is printed by
``python3 -c "from theory.claims import claim; print(claim('finite_sample'))"`` and rendered in README.md).

Checked here: (1) the sample gradients are unbiased, so phase 1 lands within a few standard errors of
the population beta^(1); (2) at the O(d ln d) scale and the population regime for epsilon, every seed
reaches held-out risk <= epsilon (held-out mean + 3 standard errors); (3) control: with a handful of
strings the same criterion fails.
"""
from __future__ import annotations

import numpy as np
import pytest

from checks.strategies import evaluator, setting
from numerics.theorem.finite_sample import d_log_d, three_phase_finite
from numerics.theorem.montecarlo import estimate, sample_counts
from numerics.theorem.regime import regime_plan
from theory.claims import claim
from theory.validation import SettingError

CLAIM = claim("finite_sample")

EPS = 1e-2


def population_plan(d, eps=EPS):
    reg = regime_plan(setting(d), eps, eta1_frac=0.5, evaluator=evaluator(d))
    return setting(d), reg.eta_1, reg.eta_2, reg.T_min


@pytest.mark.parametrize("d", [5, 20])
def test_phase1_is_unbiased(d):
    s, eta_1, eta_2, T = population_plan(d)
    run = three_phase_finite(s, eta_1, eta_2, 1.0, 0, 20_000, 10, seed=3, test_size=10)
    pop = evaluator(d).evaluate_symmetric(0.0, 0.0, 0.0, 0.0)
    # same strings as the run (same seed, same draw order) give the standard errors of its gradient
    _, c1 = sample_counts(s, 20_000, np.random.default_rng(3))
    se = estimate(s, np.zeros(d), np.zeros(d), counts=c1).grad_beta_se
    expected = -eta_1 * np.array([float(pop.grad_beta[0])] + [float(pop.grad_beta[1])] * (d - 1))
    z = np.abs(run.beta_phase1 - expected) / (eta_1 * se)
    assert z.max() < 5


@pytest.mark.parametrize("d", [5, 10, 20, 50])
def test_d_log_d_samples_reach_epsilon(d):
    s, eta_1, eta_2, T = population_plan(d)
    N = d_log_d(d, 30)
    for seed in range(5):
        run = three_phase_finite(s, eta_1, eta_2, 1.0, T, N, N, seed=seed, test_size=50_000)
        assert run.test_risk + 3 * run.test_se <= EPS, (d, seed, run.test_risk)


def test_control_a_handful_of_strings_misses_epsilon():
    d = 10
    s, eta_1, eta_2, T = population_plan(d)
    misses = [three_phase_finite(s, eta_1, eta_2, 1.0, T, 3, 3, seed=k, test_size=50_000) for k in range(5)]
    assert sum(r.test_risk - 3 * r.test_se > EPS for r in misses) >= 4


def test_finite_sample_input_errors():
    s = setting(5)
    with pytest.raises(SettingError, match="N_1"):
        three_phase_finite(s, 1.0, 1.0, 1.0, 1, 0, 10)
    with pytest.raises(SettingError, match="eta_2"):
        three_phase_finite(s, 1.0, -1.0, 1.0, 1, 10, 10)
    with pytest.raises(SettingError, match="constant"):
        d_log_d(5, 0)
    with pytest.raises(SettingError, match="squared"):
        three_phase_finite(setting(5, loss="logistic"), 1.0, 1.0, 1.0, 1, 10, 10)
