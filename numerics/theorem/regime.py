"""The step-size regime of the three-phase theorem (squared loss), apart from the simulator.

``three_phase_regime`` checks a choice of (eta_1, eta_2, eta_3) against the theorem's hypotheses and
computes the number of phase-3 steps T_min after which risk <= floor + epsilon; ``regime_plan`` picks
step sizes relative to the bounds.  The statement itself lives in ``theory.claims`` (key ``three_phase``).

>>> from theory.setting import Setting
>>> reg = regime_plan(Setting(5), 1e-2)
>>> reg.eta_1 == reg.eta1_max / 2, reg.T_min > 0
(True, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from theory.setting import Setting
from theory.validation import SettingError, check_epsilon, check_real, check_step

from numerics.theorem.closed_forms import ClosedForms
from numerics.theorem.evaluators import population_evaluator
from numerics.theorem.series import SeriesEvaluator


@dataclass(frozen=True)
class Regime:
    """Sufficient conditions for three-phase risk <= floor + epsilon.

    eta_1 in (0, eta1_max), eta_2 >= eta2_min, eta_3 in (0, 1], T >= T_min(eta_2).
    ``T_min`` is None when it was not asked for (no eta_2 / eta_3 given) or when no positive phase-3
    curvature could be bounded.  ``log_u_min`` is the log-attention gap phase 2 must reach.
    """

    epsilon: float
    floor: float
    eta_1: float
    eta1_max: float
    kappa: float
    log_u_min: float
    eta2_min: float
    eta_2: float | None = None
    eta_3: float | None = None
    lambda_min_lower: float | None = None
    initial_excess_upper: float | None = None
    T_min: int | None = None

    def contains(self, eta_1, eta_2, eta_3, T) -> bool:
        """Whether (eta_1, eta_2, eta_3, T) satisfies the theorem's hypotheses as computed here."""
        return (0 < eta_1 < self.eta1_max and eta_2 >= self.eta2_min and 0 < eta_3 <= 1
                and self.T_min is not None and T >= self.T_min)


def _check_regime_setting(setting: Setting) -> None:
    if setting.loss != "squared":
        raise SettingError("the three-phase regime is derived for the squared loss")
    if setting.d < 3:
        raise SettingError("the three-phase theorem needs d >= 3 (at d = 2 with p = 1 every string has length 1)")


def three_phase_regime(setting: Setting, epsilon, eta_1, *, eta_2=None, eta_3=None,
                       evaluator: SeriesEvaluator | None = None, dps: int = 50) -> Regime:
    """The regime at eta_1; with eta_2 and eta_3 also given, T_min for them.

    eta2_min = max(log u_min, 0) / kappa(eta_1) comes from the closed forms.  T_min uses the series
    moments (M, m) of phase 3: output GD at fixed attention is gradient descent on a quadratic whose
    Hessian restricted to the symmetric subspace, in orthonormal coordinates, is S = D^1/2 M D^1/2
    with eigenvalues in (0, 1]; so for eta_3 <= 1 the excess risk contracts by (1 - eta_3 lambda_min(S))^2
    per step.  lambda_min is bounded below using the moments' error bound.
    """
    _check_regime_setting(setting)
    epsilon = float(check_epsilon(epsilon))
    eta_1 = float(check_step("eta_1", eta_1, allow_zero=False))
    cf = ClosedForms(setting, dps=dps)
    floor = float(cf.risk_floor())
    e1max = float(cf.eta1_max())
    if not eta_1 < e1max:
        raise SettingError(f"eta_1 = {eta_1} is outside the regime (0, {e1max:.6g})")
    kappa = cf.kappa(eta_1)
    if not kappa > 0:  # pragma: no cover - excluded by eta_1 < eta1_max for p < 1
        raise SettingError(f"attention gap rate kappa = {kappa} is not positive at eta_1 = {eta_1}")
    log_u_min = max(float(mpmath.log(cf.u_min(epsilon))), 0.0)  # u >= 1 always: u_min < 1 needs no step
    base = (epsilon, floor, eta_1, e1max, float(kappa), log_u_min, float(cf.eta2_min(epsilon, eta_1)))
    if eta_2 is None or eta_3 is None:
        return Regime(*base)
    eta_2 = float(check_step("eta_2", eta_2))
    eta_3 = float(check_step("eta_3", eta_3, allow_zero=False))
    if eta_3 > 1:
        raise SettingError(f"eta_3 = {eta_3} is outside the regime (0, 1]")
    evaluator = evaluator or population_evaluator(setting, tol=1e-13)
    b1a, b1b = (float(x) for x in cf.phase1_beta(eta_1))
    a2a, a2b = (float(x) for x in cf.phase2_alpha(eta_1, eta_2))
    moments = evaluator.quadratic_moments(a2a, a2b)
    (m_aa, m_ab), (_, m_bb) = moments.M
    d = setting.d
    s_off = float(m_ab) / math.sqrt(d - 1)
    S_mat = np.array([[float(m_aa), s_off], [s_off, float(m_bb) / (d - 1)]])
    lam_lower = float(np.linalg.eigvalsh(S_mat)[0]) - 2 * moments.bound - 1e-15
    start = evaluator.evaluate_symmetric(a2a, a2b, b1a, b1b)
    excess = float(start.risk) + start.risk_bound - floor
    if lam_lower <= 0:
        T_min = None
    elif excess <= epsilon / 2:
        T_min = 0
    else:
        rho = 1 - eta_3 * lam_lower
        T_min = math.ceil(math.log(excess / (epsilon / 2)) / (-2 * math.log(rho)))
    return Regime(*base, eta_2, eta_3, lam_lower, excess, T_min)


def regime_plan(setting: Setting, epsilon, *, eta1_frac: float = 0.5, eta2_factor: float = 1.0,
                eta_3: float = 1.0, evaluator: SeriesEvaluator | None = None, dps: int = 50) -> Regime:
    """Step sizes inside the regime, chosen relative to its bounds: eta_1 = eta1_frac * eta1_max,
    eta_2 = eta2_factor * eta2_min(epsilon, eta_1); returns the Regime with T_min."""
    eta1_frac = check_real("eta1_frac", eta1_frac, 0, 1)
    eta2_factor = check_real("eta2_factor", eta2_factor, 1, None, closed="low")
    _check_regime_setting(setting)
    eta_1 = eta1_frac * float(ClosedForms(setting, dps=dps).eta1_max())
    eta_2 = eta2_factor * three_phase_regime(setting, epsilon, eta_1, dps=dps).eta2_min
    return three_phase_regime(setting, epsilon, eta_1, eta_2=eta_2, eta_3=eta_3, evaluator=evaluator, dps=dps)
