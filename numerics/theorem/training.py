"""Population gradient descent from zero initialisation: the simulator of the training plans.

A plan is a list of phases, each a number of gradient steps of one size on one layer ("output",
"attention", or "joint" for both).  Every plan starts at (alpha, beta) = (0, 0).  Because the data law
is symmetric in the d - 1 unmarked symbols, gradient descent keeps alpha = (alpha_a, alpha_b, ..., alpha_b)
and likewise beta; plans therefore run on the four numbers (alpha_a, alpha_b, beta_a, beta_b) with the
exact series gradients (per coordinate, as in R^d).

Output phases under the squared loss are gradient descent on a quadratic in beta at fixed attention:
one series pass gives its moments (M, m), and the recurrence
beta <- beta - eta D (M beta - m) with D = diag(1, 1/(d-1)), R = beta^T M beta / 2 - m^T beta + 1/2,
is solved in closed form (``output_descent``: the eigen-decomposition of the 2x2 curvature
D^1/2 M D^1/2), so a phase of T steps costs the same for every T and only the recorded steps are
computed.  Attention and joint phases evaluate the series at every step; the last point of every phase
is a fresh series evaluation.  ``Trainer(max_points=k)`` records at most about k log-spaced steps of a
phase (always its last one).

The step-size regime of the three-phase theorem is in ``numerics.theorem.regime``.

>>> from numerics.theorem.series import SeriesEvaluator
>>> from theory.setting import Setting
>>> trainer = Trainer(SeriesEvaluator(Setting(4)))
>>> traj = trainer.run(attention_only(eta=1.0, T=3))
>>> all(pt.alpha_a == pt.alpha_b == 0 and abs(pt.risk - 0.5) < 1e-11 for pt in traj.points)
True
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from theory.validation import (
    SettingError,
    check_choice,
    check_int,
    check_step,
    check_steps_count,
)

from numerics.theorem.series import SeriesEvaluator

LAYERS = ("output", "attention", "joint")


@dataclass(frozen=True)
class Phase:
    """``steps`` gradient steps of size ``eta`` on ``layer``; for "joint", ``eta_attention`` (default
    ``eta``) is the attention step."""

    name: str
    layer: str
    eta: float
    steps: int
    eta_attention: float | None = None

    def __post_init__(self):
        check_choice("layer", self.layer, LAYERS)
        object.__setattr__(self, "eta", float(check_step(f"step size of {self.name}", self.eta)))
        object.__setattr__(self, "steps", check_steps_count(f"steps of {self.name}", self.steps))
        if self.eta_attention is not None:
            object.__setattr__(self, "eta_attention",
                               float(check_step(f"attention step size of {self.name}", self.eta_attention)))


@dataclass(frozen=True)
class Plan:
    """A named list of phases."""

    name: str
    phases: tuple[Phase, ...]


def three_phase(eta_1, eta_2, eta_3, T) -> Plan:
    """One output step eta_1, one attention step eta_2, then T output steps eta_3."""
    return Plan("three-phase", (Phase("phase 1 (output)", "output", eta_1, 1),
                                Phase("phase 2 (attention)", "attention", eta_2, 1),
                                Phase("phase 3 (output)", "output", eta_3, T)))


def output_only(eta, T) -> Plan:
    """T output steps with attention frozen at zero."""
    return Plan("output-only", (Phase("output", "output", eta, T),))


def attention_only(eta, T) -> Plan:
    """T attention steps with the output frozen at zero."""
    return Plan("attention-only", (Phase("attention", "attention", eta, T),))


def attention_then_output(eta_att, eta_out, T) -> Plan:
    """One attention step, then T output steps (fine-tuning)."""
    return Plan("attention-then-output", (Phase("attention step", "attention", eta_att, 1),
                                          Phase("output fine-tuning", "output", eta_out, T)))


def joint(eta, T, *, eta_attention=None) -> Plan:
    """T steps on both layers at once (the same step unless ``eta_attention`` is given)."""
    return Plan("joint", (Phase("joint", "joint", eta, T, eta_attention),))


@dataclass
class Point:
    """One recorded point of a trajectory: parameters, risk and its error bound."""

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
    """The recorded points of one plan, and the step at which each phase ends."""

    plan: str
    points: list = field(default_factory=list)
    phase_ends: list = field(default_factory=list)

    @property
    def final(self) -> Point:
        return self.points[-1]

    def risks(self) -> np.ndarray:
        return np.array([pt.risk for pt in self.points])

    def min_risk_lower(self) -> float:
        """min over recorded points of (risk - bound): a lower envelope of the recorded trajectory
        (a float error estimate unless the evaluator's context is arb)."""
        return min(pt.risk - pt.risk_bound for pt in self.points)


FLOAT_ALLOWANCE = 2.0 ** -50
"""Relative rounding allowance of the trainer's own float arithmetic (a few ulp): added to the bounds of
values it rounds from balls (the integral evaluator) and of the float quadratic between phase ends."""


def _risk_and_bound(evaluation) -> tuple[float, float]:
    """The risk as a float and its bound; a ball's radius gets the rounding of its midpoint to a float."""
    risk = float(evaluation.risk)
    if evaluation.certified:
        return risk, evaluation.risk_bound + abs(risk) * FLOAT_ALLOWANCE
    return risk, evaluation.risk_bound


ProgressFactory = Callable[..., object]
"""``make(desc=..., total=...)`` returning an object with ``update(n)`` and ``close()`` (tqdm fits)."""


class _NoProgress:
    def update(self, n=1):
        pass

    def close(self):
        pass


def output_descent(M, m, D, eta: float, beta0, steps) -> np.ndarray:
    """beta_t for t in ``steps`` (integers >= 0) of gradient descent beta <- beta - eta D (M beta - m)
    from ``beta0``, in closed form; returns an array (len(steps), 2).

    With S = D^1/2 M D^1/2 = Q diag(lambda) Q^T and z = Q^T D^-1/2 beta, each coordinate follows
    z_t = z_0 + (g - lambda z_0) h(t), g = Q^T D^1/2 m, h(t) = (1 - (1 - eta lambda)^t) / lambda
    (= eta t at lambda = 0), evaluated as -expm1(t log1p(-eta lambda)) / lambda where eta lambda < 1,
    so slow contraction (eta lambda near 0, t in the millions) keeps full relative accuracy.

    >>> M, m, D = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, 0.2]), np.array([1.0, 0.5])
    >>> b = np.zeros(2)
    >>> for _ in range(3):
    ...     b = b - 0.3 * D * (M @ b - m)
    >>> bool(np.allclose(output_descent(M, m, D, 0.3, [0.0, 0.0], [3])[0], b, rtol=1e-15, atol=0))
    True
    """
    M, m, D = (np.asarray(x, dtype=float) for x in (M, m, D))
    root = np.sqrt(D)
    S = root[:, None] * M * root[None, :]
    lam, Q = np.linalg.eigh(0.5 * (S + S.T))
    z0 = Q.T @ (np.asarray(beta0, dtype=float) / root)
    g = Q.T @ (root * m)
    t = np.asarray(steps, dtype=float)[:, None]
    x = eta * lam
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        slow = x < 1
        expo = t * np.log1p(-np.where(slow, x, 0.0))
        power = np.where(slow, np.exp(expo), np.power(1.0 - x, t))  # (1 - eta lambda)^t
        one_minus = np.where(slow, -np.expm1(expo), 1.0 - power)   # 1 - (1 - eta lambda)^t
        h = np.where(lam == 0, eta * t, one_minus / np.where(lam == 0, 1.0, lam))
        z = z0 + (g - lam * z0) * h
        return (z @ Q.T) * root


class Trainer:
    """Runs plans with one SeriesEvaluator.

    ``record_every``: keep every k-th step (None keeps only the start and the end of each phase);
    ``max_points``: when a phase would record more than this many steps, keep about this many
    log-spaced ones instead (dense at the start, always the last step; None: no limit);
    ``progress``: a progress factory (see ``ProgressFactory``), or None.
    """

    def __init__(self, evaluator: SeriesEvaluator, *, record_every: int | None = 1,
                 max_points: int | None = None, progress: ProgressFactory | None = None):
        if record_every is not None:
            record_every = check_int("record_every (or None)", record_every)
        if max_points is not None:
            max_points = check_int("max_points (or None)", max_points, 2)
        self.evaluator = evaluator
        self.setting = evaluator.setting
        self.record_every = record_every
        self.max_points = max_points
        self.progress = progress
        self._last = (None, None)  # (state, evaluation) of the latest series evaluation
        self._quadratics: dict = {}  # attention state -> output quadratic (M, m, bound)

    # --------------------------------------------------------------------------------------
    def _evaluation(self, state):
        """The series at ``state``, reusing the last evaluation when the state is unchanged."""
        key = tuple(float(x) for x in state)
        if self._last[0] != key:
            self._last = (key, self.evaluator.evaluate_symmetric(*key))
        return self._last[1]

    def _moments(self, aa: float, ab: float):
        """(M, m, bound) of the output quadratic at attention (aa, ab), as floats; one series pass per
        attention state (plans that share one, as output-only and phase 1 at alpha = 0, reuse it)."""
        key = (float(aa), float(ab))
        if key not in self._quadratics:
            moments = self.evaluator.quadratic_moments(aa, ab)
            self._quadratics[key] = (np.array([[float(x) for x in row] for row in moments.M]),
                                     np.array([float(x) for x in moments.m]), moments.bound)
        return self._quadratics[key]

    def recorded_steps(self, T: int) -> np.ndarray:
        """The steps 1..T of a phase that are recorded, ascending; T is always one of them.

        >>> tr = Trainer.__new__(Trainer); tr.record_every, tr.max_points = 3, None
        >>> tr.recorded_steps(10).tolist()
        [3, 6, 9, 10]
        >>> tr.record_every, tr.max_points = 1, 8
        >>> tr.recorded_steps(10**6).tolist()
        [1, 7, 52, 373, 2683, 19307, 138950, 1000000]
        """
        if T <= 0:
            return np.zeros(0, dtype=np.int64)
        k = self.record_every
        count = 0 if k is None else T // k
        if self.max_points is not None and count + 1 > self.max_points:
            steps = np.unique(np.rint(np.geomspace(1, T, self.max_points)).astype(np.int64))
        else:
            steps = np.arange(k, T + 1, k, dtype=np.int64) if k is not None else np.zeros(0, dtype=np.int64)
        return steps if len(steps) and steps[-1] == T else np.append(steps, np.int64(T))

    def run(self, plan: Plan) -> Trajectory:
        """Run the plan's phases from zero; returns the recorded trajectory."""
        traj = Trajectory(plan.name)
        state = (0.0, 0.0, 0.0, 0.0)
        evaluation = self._evaluation(state)
        traj.points.append(Point(0, "init", *state, *_risk_and_bound(evaluation)))
        step = 0
        for phase in plan.phases:
            bar = self.progress(desc=f"{plan.name}: {phase.name}", total=phase.steps) if self.progress else _NoProgress()
            try:
                if phase.layer == "output" and self.setting.loss == "squared":
                    state = self._output_closed_form(traj, state, phase, step, bar)
                else:
                    state = self._series_steps(traj, state, phase, step, bar)
            finally:
                bar.close()
            step += phase.steps
            traj.phase_ends.append(step)
        return traj

    def _series_steps(self, traj, state, phase, step0, bar):
        aa, ab, ba, bb = state
        eta_att = phase.eta if phase.eta_attention is None else phase.eta_attention
        keep = set(self.recorded_steps(phase.steps).tolist())
        for t in range(1, phase.steps + 1):
            here = self._evaluation((aa, ab, ba, bb))
            ga, gb = [float(x) for x in here.grad_alpha], [float(x) for x in here.grad_beta]
            if phase.layer in ("attention", "joint"):
                aa, ab = aa - eta_att * ga[0], ab - eta_att * ga[1]
            if phase.layer in ("output", "joint"):
                ba, bb = ba - phase.eta * gb[0], bb - phase.eta * gb[1]
            if t in keep:
                now = self._evaluation((aa, ab, ba, bb))
                traj.points.append(Point(step0 + t, phase.name, aa, ab, ba, bb, *_risk_and_bound(now)))
            bar.update(1)
        return (aa, ab, ba, bb)

    def _output_closed_form(self, traj, state, phase, step0, bar):
        """Output GD at fixed attention: the exact quadratic (squared loss), solved in closed form at the
        recorded steps (``output_descent``); the end of the phase is a fresh series evaluation."""
        aa, ab, ba, bb = state
        T = phase.steps
        if T == 0:
            return state
        M, m, moment_bound = self._moments(aa, ab)
        scale = max(np.abs(M).max(), np.abs(m).max())
        D = np.array([1.0, 1.0 / (self.setting.d - 1)])
        steps = self.recorded_steps(T)
        betas = output_descent(M, m, D, phase.eta, [ba, bb], steps)
        if not np.all(np.isfinite(betas)):
            raise SettingError(f"output steps of size {phase.eta} diverged (non-finite weights)")
        with np.errstate(over="ignore", invalid="ignore"):
            risks = 0.5 * np.einsum("ti,ij,tj->t", betas, M, betas) - betas @ m + 0.5
            size = np.abs(betas).sum(axis=1)  # moment errors, plus the float rounding of M, m and the form
            bounds = (moment_bound + FLOAT_ALLOWANCE * scale) * (0.5 * size * size + size) \
                + FLOAT_ALLOWANCE * (np.abs(risks) + 0.5)
        end = self._evaluation((aa, ab, betas[-1, 0], betas[-1, 1]))  # a fresh series evaluation
        risks[-1], bounds[-1] = _risk_and_bound(end)
        traj.points.extend(Point(t + step0, phase.name, aa, ab, b[0], b[1], r, e)
                           for t, b, r, e in zip(steps.tolist(), betas.tolist(), risks.tolist(), bounds.tolist()))
        bar.update(T)
        return (aa, ab, float(betas[-1, 0]), float(betas[-1, 1]))
