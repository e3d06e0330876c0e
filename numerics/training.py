"""Population gradient descent from zero initialisation: the simulator of the training plans.

A plan is a list of phases, each a number of gradient steps of one size on one layer ("output",
"attention", or "joint" for both).  Every plan starts at (alpha, beta) = (0, 0).  Because the data law
is symmetric in the d - 1 unmarked symbols, gradient descent keeps alpha = (alpha_a, alpha_b, ..., alpha_b)
and likewise beta; plans therefore run on the four numbers (alpha_a, alpha_b, beta_a, beta_b) with the
exact series gradients (per coordinate, as in R^d).

Output phases under the squared loss are gradient descent on a quadratic in beta at fixed attention:
one series pass gives its moments (M, m) and the phase is iterated in closed form,
beta <- beta - eta D (M beta - m) with D = diag(1, 1/(d-1)), R = beta^T M beta / 2 - m^T beta + 1/2.
Attention and joint phases evaluate the series at every step; the last point of every phase is a
fresh series evaluation.

The step-size regime of the three-phase theorem is in ``numerics.regime``.

>>> from numerics.series import SeriesEvaluator
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

from .series import SeriesEvaluator

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


class Trainer:
    """Runs plans with one SeriesEvaluator.

    ``record_every``: keep every k-th step (None keeps only the start and the end of each phase);
    ``progress``: a progress factory (see ``ProgressFactory``), or None.
    """

    def __init__(self, evaluator: SeriesEvaluator, *, record_every: int | None = 1,
                 progress: ProgressFactory | None = None):
        if record_every is not None:
            record_every = check_int("record_every (or None)", record_every)
        self.evaluator = evaluator
        self.setting = evaluator.setting
        self.record_every = record_every
        self.progress = progress
        self._last = (None, None)  # (state, evaluation) of the latest series evaluation

    # --------------------------------------------------------------------------------------
    def _evaluation(self, state):
        """The series at ``state``, reusing the last evaluation when the state is unchanged."""
        key = tuple(float(x) for x in state)
        if self._last[0] != key:
            self._last = (key, self.evaluator.evaluate_symmetric(*key))
        return self._last[1]

    def _keep(self, t: int, T: int) -> bool:
        return t == T or (self.record_every is not None and t % self.record_every == 0)

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
        for t in range(1, phase.steps + 1):
            here = self._evaluation((aa, ab, ba, bb))
            ga, gb = [float(x) for x in here.grad_alpha], [float(x) for x in here.grad_beta]
            if phase.layer in ("attention", "joint"):
                aa, ab = aa - eta_att * ga[0], ab - eta_att * ga[1]
            if phase.layer in ("output", "joint"):
                ba, bb = ba - phase.eta * gb[0], bb - phase.eta * gb[1]
            if self._keep(t, phase.steps):
                now = self._evaluation((aa, ab, ba, bb))
                traj.points.append(Point(step0 + t, phase.name, aa, ab, ba, bb, *_risk_and_bound(now)))
            bar.update(1)
        return (aa, ab, ba, bb)

    def _output_closed_form(self, traj, state, phase, step0, bar):
        """Output GD at fixed attention as iteration of the exact quadratic (squared loss)."""
        aa, ab, ba, bb = state
        if phase.steps == 0:
            return state
        moments = self.evaluator.quadratic_moments(aa, ab)
        M = np.array([[float(x) for x in row] for row in moments.M])
        m = np.array([float(x) for x in moments.m])
        moment_bound = moments.bound
        scale = max(np.abs(M).max(), np.abs(m).max())
        D = np.array([1.0, 1.0 / (self.setting.d - 1)])
        beta = np.array([ba, bb])
        for t in range(1, phase.steps + 1):
            with np.errstate(over="ignore", invalid="ignore"):
                beta = beta - phase.eta * D * (M @ beta - m)
                risk = 0.5 * beta @ M @ beta - m @ beta + 0.5
            if not np.all(np.isfinite(beta)):
                raise SettingError(f"output steps of size {phase.eta} diverged (non-finite weights)")
            if t == phase.steps:  # the end of the phase: a fresh series evaluation, not the quadratic
                end = self._evaluation((aa, ab, beta[0], beta[1]))
                risk, bound = _risk_and_bound(end)
            elif self._keep(t, phase.steps):
                size = abs(beta[0]) + abs(beta[1])
                with np.errstate(over="ignore"):  # moment errors, plus the float rounding of M, m and the form
                    bound = (moment_bound + FLOAT_ALLOWANCE * scale) * (0.5 * size * size + size) \
                        + FLOAT_ALLOWANCE * (abs(risk) + 0.5)
            else:
                bar.update(1)
                continue
            traj.points.append(Point(step0 + t, phase.name, aa, ab, float(beta[0]), float(beta[1]),
                                     float(risk), bound))
            bar.update(1)
        return (aa, ab, float(beta[0]), float(beta[1]))

