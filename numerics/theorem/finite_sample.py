"""Finite-sample three-phase plan: phases 1-2 on N_1 strings, phase 3 on N_3 fresh strings.

With finitely many samples the gradients are no longer symmetric in the unmarked symbols, so the
parameters live in R^d.  The population risk of the result is estimated on an independent test sample
(with its standard error); for small d the exact series can evaluate it instead (``numerics.theorem.series``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.setting import Setting
from theory.validation import (
    SettingError,
    check_int,
    check_real,
    check_step,
    check_steps_count,
)

from numerics.model import attention_weights
from numerics.theorem.montecarlo import estimate, sample_counts


@dataclass(frozen=True)
class FiniteSampleRun:
    """The end point of one finite-sample run, its train and held-out risks (estimates) and sizes."""

    alpha: np.ndarray
    beta: np.ndarray
    beta_phase1: np.ndarray
    train_risk: float  # empirical risk on the N_3 sample at the end
    test_risk: float
    test_se: float
    N_1: int
    N_3: int
    seed: int


def d_log_d(d: int, constant: float = 1.0) -> int:
    """ceil(constant * d * ln d): the O(d ln d) sample size scale of the finite-sample theorem."""
    constant = check_real("constant", constant, 0, None)
    return max(1, math.ceil(constant * d * math.log(d)))


def three_phase_finite(setting: Setting, eta_1, eta_2, eta_3, T, N_1, N_3, *, seed: int = 0,
                       test_size: int = 200_000, progress=None) -> FiniteSampleRun:
    """Run the three-phase plan on samples; seeds make the run reproducible.

    The N_1 sample gives the phase-1 output gradient at 0 and the phase-2 attention gradient at
    (0, beta^(1)); a fresh N_3 sample drives the T phase-3 output steps.  The test risk is the mean
    loss on ``test_size`` further strings.  ``progress`` is a progress factory
    (``make(desc=..., total=...)``, see ``numerics.theorem.training.ProgressFactory``) or None.
    """
    if setting.loss != "squared":
        raise SettingError("the finite-sample plan is stated for the squared loss")
    for name, eta in (("eta_1", eta_1), ("eta_2", eta_2), ("eta_3", eta_3)):
        check_step(name, eta)
    T = check_steps_count("T", T)
    N_1, N_3, test_size = check_int("N_1", N_1), check_int("N_3", N_3), check_int("test_size", test_size)
    d = setting.d
    rng = np.random.default_rng(seed)
    _, c1 = sample_counts(setting, N_1, rng)
    _, c3 = sample_counts(setting, N_3, rng)
    _, ctest = sample_counts(setting, test_size, rng)
    alpha = np.zeros(d)
    beta = np.zeros(d)
    g = estimate(setting, alpha, beta, counts=c1)
    beta = beta - float(eta_1) * g.grad_beta
    beta1 = beta.copy()
    g = estimate(setting, alpha, beta, counts=c1)
    alpha = alpha - float(eta_2) * g.grad_alpha
    # phase 3: the empirical squared risk at fixed alpha is the quadratic beta' M beta / 2 - m' beta + 1/2
    # with M = W'W / N_3, m = W'y / N_3 (W the attention weights per string), so each step
    # beta <- beta - eta_3 (M beta - m) is exactly the sample-gradient step
    weights = attention_weights(np.broadcast_to(alpha, c3.shape), c3)
    M = weights.T @ weights / N_3
    m = weights.T @ setting.label(c3[:, 0]) / N_3
    bar = progress(desc=f"finite-sample phase 3 (seed {seed})", total=T) if progress else None
    for _ in range(T):
        beta = beta - float(eta_3) * (M @ beta - m)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    train = estimate(setting, alpha, beta, counts=c3).risk
    test = estimate(setting, alpha, beta, counts=ctest)
    return FiniteSampleRun(alpha, beta, beta1, train, test.risk, test.risk_se, N_1, N_3, seed)
