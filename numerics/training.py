"""Population gradient descent from zero initialisation: the training plans of the paper.

Every plan starts at (alpha, beta) = (0, 0).  Because the data law is symmetric in the d - 1 unmarked
symbols, gradient descent keeps alpha = (alpha_a, alpha_b, ..., alpha_b) and likewise beta; plans are
therefore run on the four numbers (alpha_a, alpha_b, beta_a, beta_b) with the exact series gradients
(per coordinate, as in R^d).

Plans: ``three_phase`` (output step eta_1, attention step eta_2, T output steps eta_3), ``output_only``,
``attention_only``, ``attention_then_output`` and ``joint``.  ``three_phase_regime`` certifies step sizes
and a step count T that guarantee risk <= floor + epsilon (floor = 0 under the default length law).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath
import numpy as np

from theory import symbolic as S
from theory.setting import Setting
from theory.validation import SettingError, check_epsilon, check_step, check_steps_count

from .closed_forms import evaluate
from .series import SeriesEvaluator


@dataclass
class Point:
    step: int
    phase: str
    alpha_a: float
    alpha_b: float
    beta_a: float
    beta_b: float
    risk: float
    risk_bound: float


@dataclass
class Trajectory:
    plan: str
    points: list = field(default_factory=list)

    @property
    def final(self) -> Point:
        return self.points[-1]

    def risks(self):
        return np.array([pt.risk for pt in self.points])

    def min_certified_risk(self):
        """min over recorded points of (risk - bound): a certified lower envelope of the trajectory."""
        return min(pt.risk - pt.risk_bound for pt in self.points)


class _NoBar:
    """Progress bar stand-in when no ``progress`` factory is given."""

    def update(self, n=1):
        pass

    def close(self):
        pass


class Trainer:
    """Runs the plans with one SeriesEvaluator; ``record_every`` thins the stored trajectory."""

    def __init__(self, evaluator: SeriesEvaluator, *, record_every: int = 1, progress=None):
        self.ev = evaluator
        self.d = evaluator.setting.d
        self.record_every = max(1, int(record_every))
        self.progress = progress  # None, or make(desc, total) -> bar with .update(n) and .close() (tqdm works)
        self._last = (None, None)  # (state, evaluation) of the latest series evaluation

    # --------------------------------------------------------------------------------------
    def _eval(self, st):
        """Evaluate at st, reusing the last evaluation when st is unchanged (record then step)."""
        key = tuple(float(x) for x in st)
        if self._last[0] != key:
            self._last = (key, self.ev.evaluate_symmetric(*key))
        return self._last[1]

    def _record(self, traj, step, phase, st, ev=None, force=False):
        if not force and step % self.record_every:
            return
        ev = ev or self._eval(st)
        traj.points.append(Point(step, phase, *[float(x) for x in st], float(ev.risk), ev.risk_bound))

    def _steps(self, traj, st, eta, T, step0, phase, layer):
        """T gradient steps of size eta on one layer ("output" or "attention"), the other frozen."""
        bar = self._bar(f"{traj.plan}: {phase}", T)
        aa, ab, ba, bb = st
        for t in range(1, T + 1):
            ev = self._eval((aa, ab, ba, bb))
            if layer == "output":
                ba, bb = ba - eta * float(ev.grad_beta[0]), bb - eta * float(ev.grad_beta[1])
            else:
                aa, ab = aa - eta * float(ev.grad_alpha[0]), ab - eta * float(ev.grad_alpha[1])
            self._record(traj, step0 + t, phase, (aa, ab, ba, bb), force=(t == T))
            bar.update(1)
        bar.close()
        return (aa, ab, ba, bb)

    def _bar(self, desc, total):
        """A progress bar from the ``progress`` factory, or one that does nothing."""
        return self.progress(desc, total) if self.progress is not None else _NoBar()

    def _start(self, plan):
        """A new trajectory at the zero initialisation, with its first point recorded."""
        traj = Trajectory(plan)
        st = (0.0, 0.0, 0.0, 0.0)
        self._record(traj, 0, "init", st, force=True)
        return traj, st

    # --------------------------------------------------------------------------------------
    def three_phase(self, eta_1, eta_2, eta_3, T) -> Trajectory:
        check_step("eta_1", eta_1)
        check_step("eta_2", eta_2)
        check_step("eta_3", eta_3)
        T = check_steps_count("T", T)
        traj, st = self._start("three-phase")
        st = self._steps(traj, st, float(eta_1), 1, 0, "phase 1 (output)", "output")
        st = self._steps(traj, st, float(eta_2), 1, 1, "phase 2 (attention)", "attention")
        self._steps(traj, st, float(eta_3), T, 2, "phase 3 (output)", "output")
        return traj

    def output_only(self, eta, T) -> Trajectory:
        check_step("eta", eta)
        T = check_steps_count("T", T)
        traj, st = self._start("output-only")
        self._steps(traj, st, float(eta), T, 0, "output", "output")
        return traj

    def attention_only(self, eta, T) -> Trajectory:
        check_step("eta", eta)
        T = check_steps_count("T", T)
        traj, st = self._start("attention-only")
        self._steps(traj, st, float(eta), T, 0, "attention", "attention")
        return traj

    def attention_then_output(self, eta_att, eta_out, T) -> Trajectory:
        check_step("eta_att", eta_att)
        check_step("eta_out", eta_out)
        T = check_steps_count("T", T)
        traj, st = self._start("attention-then-output")
        st = self._steps(traj, st, float(eta_att), 1, 0, "attention step", "attention")
        self._steps(traj, st, float(eta_out), T, 1, "output fine-tuning", "output")
        return traj

    def joint(self, eta, T, *, eta_attention=None) -> Trajectory:
        """Joint GD on both layers (same step for both unless ``eta_attention`` is given)."""
        check_step("eta", eta)
        eta_att = float(eta if eta_attention is None else check_step("eta_attention", eta_attention))
        T = check_steps_count("T", T)
        traj, (aa, ab, ba, bb) = self._start("joint")
        bar = self._bar("joint", T)
        for t in range(1, T + 1):
            ev = self._eval((aa, ab, ba, bb))
            aa, ab = aa - eta_att * float(ev.grad_alpha[0]), ab - eta_att * float(ev.grad_alpha[1])
            ba, bb = ba - eta * float(ev.grad_beta[0]), bb - eta * float(ev.grad_beta[1])
            self._record(traj, t, "joint", (aa, ab, ba, bb), force=(t == T))
            bar.update(1)
        bar.close()
        return traj


# ------------------------------------------------------------------------------------------------
# the step-size regime of the three-phase theorem (squared loss)


@dataclass(frozen=True)
class Regime:
    """Certified sufficient conditions for three-phase risk <= floor + epsilon.

    eta_1 in (0, eta1_max), eta_2 >= eta2_min, eta_3 in (0, 1], T >= T_min(eta_2).
    ``T_min`` is None when it was not asked for (no eta_2 / eta_3 given).
    """

    epsilon: float
    floor: float
    eta_1: float
    eta1_max: float
    kappa: float
    gap_needed: float  # log u_min
    eta2_min: float
    eta_2: float | None = None
    eta_3: float | None = None
    lambda_min_lower: float | None = None
    initial_excess_upper: float | None = None
    T_min: int | None = None

    def contains(self, eta_1, eta_2, eta_3, T) -> bool:
        return (0 < eta_1 < self.eta1_max and eta_2 >= self.eta2_min and 0 < eta_3 <= 1
                and self.T_min is not None and T >= self.T_min)


def eta1_max(setting: Setting, *, dps: int = 50) -> float:
    """Supremum of the admissible eta_1 (the closed form ``theory.symbolic.eta1_max``)."""
    return float(evaluate(S.eta1_max(setting.lengths), setting, dps=dps))


def three_phase_regime(setting: Setting, epsilon, eta_1, *, eta_2=None, eta_3=None,
                       evaluator: SeriesEvaluator | None = None, dps: int = 50) -> Regime:
    """Certify the regime.  With eta_2 and eta_3 also given, compute T_min for them.

    eta2_min = max(log u_min, 0) / kappa(eta_1) comes from the closed forms.  T_min uses the series
    (certified M, m): after phase 2, output GD is gradient descent on a quadratic whose Hessian
    restricted to the symmetric subspace, in orthonormal coordinates, is S = D^1/2 M D^1/2 with
    eigenvalues in (0, 1]; so for eta_3 <= 1 the excess risk contracts by (1 - eta_3 lambda_min(S))^2
    per step.
    """
    if setting.loss != "squared":
        raise SettingError("the three-phase regime is derived for the squared loss")
    if setting.d < 3:
        raise SettingError("the three-phase theorem needs d >= 3 (at d = 2 with p = 1 every string has length 1)")
    epsilon = float(check_epsilon(epsilon))
    eta_1 = float(check_step("eta_1", eta_1, allow_zero=False))
    floor = float(evaluate(S.risk_floor(setting.lengths), setting, dps=dps))
    e1max = eta1_max(setting, dps=dps)
    if not eta_1 < e1max:
        raise SettingError(f"eta_1 = {eta_1} is outside the regime (0, {e1max:.6g})")
    kappa = evaluate(S.attention_gap_rate(setting.lengths), setting, dps=dps, eta_1=eta_1)
    if not kappa > 0:  # pragma: no cover - excluded by eta_1 < eta1_max for p < 1
        raise SettingError(f"attention gap rate kappa = {kappa} is not positive at eta_1 = {eta_1}")
    u_min = evaluate(S.gap_needed(setting.lengths), setting, dps=dps, epsilon=epsilon)
    gap = max(float(mpmath.log(u_min)), 0.0)  # u = e^gap >= 1 always, so u_min < 1 needs no attention step
    e2min = gap / float(kappa)
    base = (epsilon, floor, eta_1, e1max, float(kappa), gap, e2min)
    if eta_2 is None or eta_3 is None:
        return Regime(*base)
    eta_2 = float(check_step("eta_2", eta_2))
    eta_3 = float(check_step("eta_3", eta_3, allow_zero=False))
    if eta_3 > 1:
        raise SettingError(f"eta_3 = {eta_3} is outside the regime (0, 1]")
    ev = evaluator or SeriesEvaluator(setting, tol=1e-13)
    # phase 1 and 2 parameters from the closed forms
    b1a = evaluate(S.phase1_beta(setting.lengths)[0], setting, dps=dps, eta_1=eta_1)
    b1b = evaluate(S.phase1_beta(setting.lengths)[1], setting, dps=dps, eta_1=eta_1)
    a2a = evaluate(S.phase2_alpha(setting.lengths)[0], setting, dps=dps, eta_1=eta_1, eta_2=eta_2)
    a2b = evaluate(S.phase2_alpha(setting.lengths)[1], setting, dps=dps, eta_1=eta_1, eta_2=eta_2)
    M, m, mb = ev.phase3_moments(float(a2a - a2b))
    d = setting.d
    s_off = float(M[0][1]) / math.sqrt(d - 1)
    Smat = np.array([[float(M[0][0]), s_off], [s_off, float(M[1][1]) / (d - 1)]])
    lam_lower = float(np.linalg.eigvalsh(Smat)[0]) - 2 * mb - 1e-15
    r0 = ev.evaluate_symmetric(float(a2a), float(a2b), float(b1a), float(b1b))
    excess = float(r0.risk) + r0.risk_bound - floor
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
    eta_2 = eta2_factor * eta2_min(epsilon, eta_1); returns the certified Regime (with T_min)."""
    if not (isinstance(eta1_frac, (int, float)) and 0 < eta1_frac < 1):
        raise SettingError(f"eta1_frac must lie in (0, 1), got {eta1_frac!r}")
    if not (isinstance(eta2_factor, (int, float)) and math.isfinite(eta2_factor) and eta2_factor >= 1):
        raise SettingError(f"eta2_factor must be a finite number >= 1, got {eta2_factor!r}")
    eta_1 = eta1_frac * eta1_max(setting, dps=dps)
    eta_2 = eta2_factor * three_phase_regime(setting, epsilon, eta_1, dps=dps).eta2_min
    return three_phase_regime(setting, epsilon, eta_1, eta_2=eta_2, eta_3=eta_3, evaluator=evaluator, dps=dps)
