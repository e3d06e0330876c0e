"""The main job as a domain function: the three-phase plan in its step-size regime beside the
output-only, attention-only, attention-then-output and joint plans, with exact population gradients,
and the verdict on the three-phase target.

``run(setting, options)`` picks the evaluator, derives the regime (squared loss only; under the
logistic loss the comparison plans run alone), runs the five plans, records the comparison plans
that leave the doubles instead of failing, and decides risk <= floor + epsilon at the three-phase end
point: from the float series' error estimate when it decides, else (and always with ``certify``)
from an arb enclosure, retried at doubled digits up to ``MAX_CERTIFY_DPS``.  It returns a
``JobResult``; writing and printing it are the caller's.  What happens along the way (the evaluator
chosen, the regime, a diverged plan, the start of the certification) is told to a ``Listener``.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from theory.setting import Setting
from theory.validation import SettingError

if TYPE_CHECKING:  # the numerical modules are imported when a job starts, so that importing this stays light
    from numerics.theorem.regime import Regime
    from numerics.theorem.training import ProgressFactory, Trajectory

THREE_PHASE = "three-phase"
MAX_PLAN_STEPS = 10_000_000
"""Longest three-phase plan a job starts: a T_min beyond it (d around 10^6 at epsilon = 1e-3) is
refused (``PlanTooLong``) rather than run for hours."""
CERTIFY_DPS = 25
"""Digits of the first arb re-evaluation of the three-phase end point."""
MAX_CERTIFY_DPS = 100
"""Cap of the automatic precision retry of an undecided end-point verdict."""
MAX_POINTS = 400
"""A phase longer than this records about this many log-spaced steps (the three-phase plan's phase 3
has about 6.4 d steps, computed in closed form; only the recorded ones are evaluated and kept)."""
NOT_COVERED = ("the three-phase step-size regime is derived for the squared loss only; "
               "under the logistic loss the three-phase plan is skipped")


@dataclass(frozen=True)
class JobOptions:
    """Every option the main job reads (the defaults are those of ``occ-companion run``).

    ``epsilon``: target risk above the floor (exact: a Fraction or a decimal kept exactly);
    ``eta1_frac``: phase-1 output step as a fraction of eta1_max; ``eta2_factor``: phase-2 attention
    step as a multiple of eta2_min; ``eta3``: phase-3 and output-only step; ``attention_eta``: the
    attention step of the attention-only and attention-then-output plans (None: the regime's eta_2,
    1 without a regime); ``steps``: steps of the comparison plans; ``joint_eta``: step of joint GD;
    ``evaluator``: one of ``numerics.theorem.evaluators.METHODS``; ``tol``, ``max_terms``: the float
    series' omitted mass and largest enumeration; ``certify``: re-evaluate the end point in arb even
    when the float estimate decides.
    """

    epsilon: Any = Fraction(1, 1000)
    eta1_frac: float = 0.5
    eta2_factor: float = 1.0
    eta3: float = 1.0
    attention_eta: float | None = None
    steps: int = 300
    joint_eta: float = 1.0
    evaluator: str = "auto"
    tol: float = 1e-12
    max_terms: int = 3_000_000
    certify: bool = False


VERDICT_SOURCES = {"series": "float series estimate", "integral": "arb ball of the integral evaluator"}
"""``JobResult.verdict_source`` of a verdict the plans' own evaluator decided, by ``JobResult.method``."""


@dataclass(frozen=True)
class JobResult:
    """What the main job computed.

    ``method``: the evaluator used ("series" or "integral"), with ``evaluator_settings`` (the
    integral's digits, Taylor order and integral count; None for the series); ``regime``: the
    three-phase regime (None under the logistic loss); ``output_only_floor``: c(d) (None under the
    logistic loss); ``attention_eta``: the attention step the comparison plans used; ``plans``: the
    trajectories of the plans that finished, in the order run; ``diverged``: plan name -> the
    ``JobOptions`` field of the step size that made it leave the doubles; ``target``: floor +
    epsilon as a float; ``float_verdict``: the float estimate's verdict; ``certified``: the arb
    re-evaluation of the end point (``certify_end_point``) when it was made; ``verdict``: PASS, FAIL
    or UNDECIDED for the target, PASS when there is no target.
    """

    method: str
    evaluator_settings: dict[str, Any] | None
    regime: Regime | None
    output_only_floor: float | None
    attention_eta: float
    plans: dict[str, Trajectory]
    diverged: dict[str, str]
    target: float | None
    float_verdict: str | None
    certified: dict[str, Any] | None
    verdict: str

    @property
    def ok(self) -> bool:
        return self.verdict == "PASS"

    @property
    def verdict_source(self) -> str | None:
        """What decided ``verdict``, in words: "arb enclosure" when the end point was re-evaluated
        (``certified``); else the evaluator the plans ran with, whose values at the end point the float
        verdict compares: "arb ball of the integral evaluator" (its radius plus the rounding of the midpoint to
        a float) or "float series estimate".  None when there is no target (no regime)."""
        if self.regime is None:
            return None
        if self.certified is not None:
            return "arb enclosure"
        return VERDICT_SOURCES[self.method]


class Listener:
    """What a job tells while it runs; every method here does nothing (a silent job).  A caller that
    reports progress in words overrides them."""

    def evaluator_chosen(self, method: str, tol: float) -> None:
        """The evaluator is built (``tol`` is the float series' target omitted mass)."""

    def regime_found(self, regime: Regime, eta_3: float) -> None:
        """The three-phase regime is derived, with its T_min."""

    def not_covered(self) -> None:
        """No regime at this loss (``NOT_COVERED``): only the comparison plans run."""

    def plan_diverged(self, plan: str, option: str) -> None:
        """A comparison plan left the doubles; ``option`` is the ``JobOptions`` field of its step size."""

    def certifying(self) -> None:
        """The arb re-evaluation of the three-phase end point starts."""


class NoCurvatureBound(SettingError):
    """No positive lower bound on the phase-3 curvature was found, so no T_min; ``method`` is the
    evaluator whose error bound was too wide (a tighter series tolerance may help) or "integral"."""

    def __init__(self, method: str):
        self.method = method
        super().__init__(f"no positive lower bound on the phase-3 curvature was found at this setting "
                         f"(evaluator {method})")


class PlanTooLong(SettingError):
    """The three-phase plan would take more than ``MAX_PLAN_STEPS`` phase-3 steps (``T_min``)."""

    def __init__(self, T_min: int):
        self.T_min = T_min
        super().__init__(f"the three-phase plan needs T_min = {T_min:.3g} phase-3 steps here, more than "
                         f"{MAX_PLAN_STEPS:.0e}")


def run(setting: Setting, options: JobOptions, progress: ProgressFactory | None = None,
        listener: Listener | None = None) -> JobResult:
    """Run every plan of the main job for ``setting`` with ``options``.

    ``progress``: a progress factory for the trainer (``numerics.theorem.training.ProgressFactory``:
    ``make(desc=..., total=...)`` returning a bar with ``update`` and ``close``), or None;
    ``listener``: told what happens along the way (default: nobody).  Raises ``NoCurvatureBound`` or
    ``PlanTooLong`` when the three-phase plan cannot be set up, and a SettingError the evaluators
    raise; a comparison plan that leaves the doubles is recorded in ``JobResult.diverged``.
    """
    from numerics.theorem import training
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.theorem.evaluators import choose_method, population_evaluator
    from numerics.theorem.regime import regime_plan

    listener = listener if listener is not None else Listener()
    method = choose_method(setting, options.evaluator)
    evaluator = population_evaluator(setting, method, tol=options.tol, max_terms=options.max_terms)
    listener.evaluator_chosen(method, options.tol)
    reg: Regime | None = None
    if setting.loss == "squared":
        reg = regime_plan(setting, options.epsilon, eta1_frac=options.eta1_frac, eta2_factor=options.eta2_factor,
                          eta_3=options.eta3, evaluator=evaluator)
        if reg.T_min is None:
            raise NoCurvatureBound(method)
        if reg.T_min > MAX_PLAN_STEPS:
            raise PlanTooLong(reg.T_min)
        listener.regime_found(reg, options.eta3)
    else:
        listener.not_covered()
    attention_eta = options.attention_eta or (reg.eta_2 if reg is not None else 1.0)
    trainer = training.Trainer(evaluator, record_every=1, max_points=MAX_POINTS, progress=progress)
    plans: dict[str, Trajectory] = {}
    if reg is not None:
        plans[THREE_PHASE] = trainer.run(training.three_phase(reg.eta_1, reg.eta_2, options.eta3, reg.T_min))
    steps = options.steps
    comparisons = (("output-only", lambda: training.output_only(options.eta3, steps), "eta3"),
                   ("attention-only", lambda: training.attention_only(attention_eta, steps), "attention_eta"),
                   ("attention-then-output",
                    lambda: training.attention_then_output(attention_eta, options.eta3, steps), "attention_eta"),
                   ("joint", lambda: training.joint(options.joint_eta, steps), "joint_eta"))
    diverged: dict[str, str] = {}
    for name, plan, option in comparisons:
        traj = _comparison(trainer, plan)
        if traj is None:
            diverged[name] = option
            listener.plan_diverged(name, option)
        else:
            plans[name] = traj
    evaluator_settings = None
    if method == "integral":  # what rebuilds the run's numbers: the integral's digits and Taylor models
        evaluator_settings = {"dps": evaluator.dps, "taylor_order": evaluator.taylor_order,
                              "integrals_computed": evaluator.integrals_computed}
    floor_c = target = first = certified = None
    verdict = "PASS"
    if reg is not None:
        floor_c = float(ClosedForms(setting).output_only_floor())
        fin = plans[THREE_PHASE].final
        target = float(options.epsilon) + reg.floor
        verdict = first = float_verdict(fin.risk, fin.risk_bound, target)
        if options.certify or first == "UNDECIDED":
            listener.certifying()
            certified = certify_end_point(setting, plans[THREE_PHASE], options.epsilon)
            verdict = certified["verdict"]
    return JobResult(method, evaluator_settings, reg, floor_c, attention_eta, plans, diverged, target, first,
                     certified, verdict)


def _comparison(trainer, plan) -> Trajectory | None:
    """The trajectory of the comparison plan ``plan()``, or None when its parameters left the doubles
    (an overflow, or a non-finite end point); any other error propagates."""
    try:
        with warnings.catch_warnings():  # overflow on the way out of the doubles is reported as divergence
            warnings.simplefilter("ignore", RuntimeWarning)
            traj = trainer.run(plan())
        fin = traj.final
        if not all(math.isfinite(x) for x in (fin.risk, fin.risk_bound, fin.alpha_a, fin.alpha_b, fin.beta_a,
                                              fin.beta_b)):
            raise OverflowError("non-finite end point")
        return traj
    except (SettingError, OverflowError, FloatingPointError) as exc:
        if not isinstance(exc, (OverflowError, FloatingPointError)) and "must be finite" not in str(exc):
            raise
        return None


def float_verdict(risk: float, bound: float, target: float) -> str:
    """The float series' verdict on risk <= target: PASS when risk + bound <= target, FAIL when
    risk - bound > target, UNDECIDED when the bound straddles the target (an estimate, not an
    enclosure: the certification brings in the arb enclosure).

    >>> float_verdict(1e-3, 1e-12, 2e-3), float_verdict(3e-3, 1e-12, 2e-3), float_verdict(2e-3, 1e-12, 2e-3)
    ('PASS', 'FAIL', 'UNDECIDED')
    """
    if risk + bound <= target:
        return "PASS"
    return "FAIL" if risk - bound > target else "UNDECIDED"


def certify_end_point(setting: Setting, traj: Trajectory, epsilon=None) -> dict[str, Any]:
    """The end point of ``traj`` re-evaluated in ball arithmetic (python-flint arb) by the integral
    representation at CERTIFY_DPS digits (``numerics.theorem.integral``; any d, and the three-phase
    plan runs only under the squared loss with p < 1, where it applies).  A ball that encloses the
    exact population risk there (truncation tail and rounding included), stored as its midpoint,
    radius and the outward-rounded ends risk_lower <= exact risk <= risk_upper.

    With ``epsilon`` (exact), also the verdict on risk < floor + epsilon by the same three-valued test
    as ``occ-companion prove`` (``numerics.theorem.certify.below``), the floor and epsilon entered
    exactly; an UNDECIDED verdict is retried at doubled digits up to MAX_CERTIFY_DPS."""
    from flint import ctx

    from numerics.theorem.certify import ArbClosedForms, below
    from numerics.theorem.integral import IntegralEvaluator
    from theory.arb_forms import arb_of

    fin = traj.final
    dps, verdict = CERTIFY_DPS, None
    while True:
        ball = IntegralEvaluator(setting, dps=dps).evaluate_symmetric(
            fin.alpha_a, fin.alpha_b, fin.beta_a, fin.beta_b).risk
        if epsilon is None:
            break
        with ctx.workprec(int(dps * 3.33) + 16):
            verdict = below(ball, ArbClosedForms(setting).risk_floor() + arb_of(Fraction(epsilon)))
        if verdict != "UNDECIDED" or 2 * dps > MAX_CERTIFY_DPS:
            break
        dps *= 2
    # the ends are exact dyadics; one ulp outward makes the float conversion safe whichever way it rounds
    out = {"risk": float(ball.mid()), "radius": float(ball.rad()),
           "risk_lower": math.nextafter(float(ball.lower()), -math.inf),
           "risk_upper": math.nextafter(float(ball.upper()), math.inf),
           "method": "integral", "dps": dps, "arithmetic": "python-flint arb"}
    if verdict is not None:
        out["verdict"] = verdict
        out["test"] = "risk < floor + epsilon (floor and epsilon exact)"
    return out

