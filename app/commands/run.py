"""The main job, ``occ-companion run``: the three-phase plan in its step-size regime beside the
output-only, attention-only, attention-then-output and joint plans, with exact population gradients.

Artifacts in ``--out``: ``summary.json`` (everything needed to rebuild the run: every option, the
version, the git commit, timestamp and wall time) and ``risk_curves.png`` (unless ``--no-plot``).
The three-phase regime is derived for the squared loss; under ``--loss logistic`` the comparison
plans run and the three-phase plan is skipped (the JSON and the output say so).
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
import warnings
from dataclasses import dataclass
from fractions import Fraction
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from numerics.theorem.evaluators import (  # light: the evaluators are imported when used
    INTEGRAL_FROM_D,
    METHODS,
    integral_applies,
)
from theory.setting import Setting
from theory.validation import SettingError

from app import __version__, exitcodes
from app.checkout import git_commit
from app.io import OutputFolder
from app.options import (
    HelpFormatter,
    UsageError,
    EXACT_NOTE,
    add_setting_options,
    exact_inputs,
    exact_positive,
    float_in,
    fraction,
    int_at_least,
    json_option,
    positive,
    positive_int,
    setting_from_args,
)
from app.progress import ProgressFactory, progress_factory

if TYPE_CHECKING:  # numerics is imported when a run starts, so that --help stays fast
    from numerics.theorem.regime import Regime
    from numerics.theorem.training import Trajectory

SUMMARY = "summary.json"
FIGURE = "risk_curves.png"
ARTIFACTS = (SUMMARY, FIGURE)
THREE_PHASE = "three-phase"
MAX_PLAN_STEPS = 10_000_000
"""Longest three-phase plan ``run`` starts: T_min beyond it (d around 10^6 at epsilon = 1e-3) means hours."""
MAX_STEPS = 1_000_000
CERTIFY_DPS = 25
MAX_POINTS = 400
"""A phase longer than this records about this many log-spaced steps (the three-phase plan's phase 3
has about 6.4 d steps, computed in closed form; only the recorded ones are evaluated and kept)."""
MAX_CERTIFY_DPS = 100  # cap of the automatic precision retry of an undecided end-point verdict
NOT_COVERED = ("the three-phase step-size regime is derived for the squared loss only; "
               "under the logistic loss the three-phase plan is skipped")


RUN_DESCRIPTION = (
    "The main job: compute the three-phase step sizes for --epsilon, run the three-phase plan there and the "
    "output-only, attention-only, attention-then-output and joint plans beside it with exact population "
    "gradients; write summary.json and risk_curves.png into --out and print a table.  The verdict on the "
    "target is PASS, FAIL or UNDECIDED: from the float series' error estimate when it decides, else from an "
    "arb enclosure of the end point's risk (always with --certify), retried at higher precision up to "
    f"{MAX_CERTIFY_DPS} digits.  Exit status: 0 target reached, 1 missed, 3 undecided, 2 bad usage, 130 "
    "interrupted.  The regime is derived for the squared loss: under --loss logistic "
    "only the comparison plans run.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``run`` (the main job) on the subcommand parser ``sub``."""
    r = sub.add_parser("run", help="main job: three-phase plan vs output-only / attention-only / attention-first / joint",
                       description=RUN_DESCRIPTION, formatter_class=HelpFormatter)
    add_setting_options(r, 50, d_min=3, p_one=False)
    r.add_argument("--epsilon", type=exact_positive, default=exact_positive("1e-3"),
                   help=f"target risk above the floor for the three-phase plan, {EXACT_NOTE}")
    r.add_argument("--eta1-frac", type=fraction, default=0.5,
                   help="phase-1 output step eta_1 as a fraction of eta1_max, in (0, 1)")
    r.add_argument("--eta2-factor", type=float_in(1, None, low_open=False), default=1.0,
                   help="phase-2 attention step eta_2 as a multiple (>= 1) of eta2_min(epsilon, eta_1)")
    r.add_argument("--eta3", type=float_in(0, 1, high_open=False), default=1.0,
                   help="phase-3 and output-only step size, in (0, 1]")
    r.add_argument("--attention-eta", type=positive, default=None,
                   help="attention step of the attention-only and attention-then-output plans "
                        "(default: eta_2 of the three-phase regime; 1 under --loss logistic)")
    r.add_argument("--steps", type=int_at_least(1, MAX_STEPS), default=300,
                   help=f"steps of the comparison plans, in [1, {MAX_STEPS}]")
    r.add_argument("--joint-eta", type=positive, default=1.0, help="step size of joint GD (both layers)")
    r.add_argument("--evaluator", choices=METHODS, default="auto",
                   help="exact population evaluator: the float series, or the integral representation (arb balls, "
                        f"cost independent of d; squared loss); auto takes the integral from d = {INTEGRAL_FROM_D} on")
    r.add_argument("--tol", type=float_in(1e-15, 1, low_open=False), default=1e-12,
                   help="target for the omitted probability mass of the exact series, in [1e-15, 1)")
    r.add_argument("--max-terms", type=positive_int, default=3_000_000,
                   help="largest series enumeration allowed (small --p means long strings and many terms)")
    r.add_argument("--certify", action="store_true",
                   help=f"re-evaluate the three-phase end point in ball arithmetic (python-flint arb, the integral "
                        f"representation at {CERTIFY_DPS} digits, more if undecided): an enclosure of its exact "
                        "risk, printed, stored, and the verdict on the target (done anyway when the float "
                        "estimate cannot decide it)")
    r.add_argument("--no-plot", action="store_true", help=f"do not draw {FIGURE} (an old one is removed)")
    r.add_argument("--out", default="results", help="output folder")
    r.add_argument("--quiet", action="store_true", help="no progress bars (they appear only on a terminal)")
    r.set_defaults(func=run_command)


@dataclass
class JobResult:
    """What the main job computed: the summary (as written to JSON), the trajectories, the exit code."""

    summary: dict[str, Any]
    plans: dict[str, Trajectory]
    verdict: str  # PASS, FAIL or UNDECIDED for the three-phase target; PASS when there is no target

    @property
    def ok(self) -> bool:
        return self.verdict == "PASS"


def run_command(args: argparse.Namespace) -> int:
    """``occ-companion run``: check --out, compute, write the artifacts, print the table."""
    started = time.time()
    setting = setting_from_args(args)
    if args.evaluator == "integral" and not integral_applies(setting):
        raise UsageError("--evaluator integral covers --loss squared with p < 1; use --evaluator series or auto")
    with OutputFolder(args.out, result="run", owns=ARTIFACTS) as out:  # unwritable or busy --out: refused here
        print(f"setting: {setting.describe()}", file=sys.stderr)
        result = main_job(setting, args, progress_factory(args.quiet))
        result.summary["run"]["wall_seconds"] = round(time.time() - started, 2)
        write_artifacts(out, result, setting, args)
    print_table(result, setting)
    written = [str(out.path / SUMMARY)] + ([] if args.no_plot else [str(out.path / FIGURE)])
    print("wrote " + " and ".join(written))
    return VERDICT_EXIT[result.verdict]


VERDICT_EXIT = {"PASS": exitcodes.DONE, "FAIL": exitcodes.CLAIM_FAILED, "UNDECIDED": exitcodes.UNDECIDED}


def main_job(setting: Setting, args: argparse.Namespace, progress: ProgressFactory | None = None) -> JobResult:
    """Run every plan for ``setting`` with the options of ``run`` (see ``add_parser``)."""
    from numerics.theorem import training
    from numerics.theorem.evaluators import choose_method, population_evaluator
    from numerics.theorem.regime import regime_plan

    method = choose_method(setting, args.evaluator)
    evaluator = population_evaluator(setting, method, tol=args.tol, max_terms=args.max_terms)
    print(f"evaluator: {method}" + (" (arb integrals, certified balls)" if method == "integral" else
                                    f" (float series, tol {args.tol:g})"), file=sys.stderr)
    squared = setting.loss == "squared"
    reg: Regime | None = None
    if squared:
        reg = regime_plan(setting, args.epsilon, eta1_frac=args.eta1_frac, eta2_factor=args.eta2_factor,
                          eta_3=args.eta3, evaluator=evaluator)
        if reg.T_min is None:
            raise SettingError("no positive lower bound on the phase-3 curvature was found at this setting; "
                               + ("lower --tol" if method == "series" else "use a larger --p or a smaller --d"))
        if reg.T_min > MAX_PLAN_STEPS:
            raise UsageError(f"the three-phase plan needs T_min = {reg.T_min:.3g} phase-3 steps here, more than "
                             f"{MAX_PLAN_STEPS:.0e} (hours of computing); use a smaller --d or a larger --epsilon")
        print(f"regime: eta_1={reg.eta_1:.6g} < {reg.eta1_max:.6g}, eta_2={reg.eta_2:.6g} >= {reg.eta2_min:.6g}, "
              f"eta_3={args.eta3}, T_min={reg.T_min}", file=sys.stderr)
    else:
        print(f"note: {NOT_COVERED}", file=sys.stderr)
    attention_eta = args.attention_eta or (reg.eta_2 if reg is not None else 1.0)
    trainer = training.Trainer(evaluator, record_every=1, max_points=MAX_POINTS, progress=progress)
    plans: dict[str, Trajectory] = {}
    if reg is not None:
        plans[THREE_PHASE] = trainer.run(training.three_phase(reg.eta_1, reg.eta_2, args.eta3, reg.T_min))
    diverged: dict[str, str] = {}
    comparisons = (("output-only", lambda: training.output_only(args.eta3, args.steps), "--eta3"),
                   ("attention-only", lambda: training.attention_only(attention_eta, args.steps), "--attention-eta"),
                   ("attention-then-output",
                    lambda: training.attention_then_output(attention_eta, args.eta3, args.steps), "--attention-eta"),
                   ("joint", lambda: training.joint(args.joint_eta, args.steps), "--joint-eta"))
    for name, plan, flag in comparisons:
        try:
            with warnings.catch_warnings():  # overflow on the way out of the doubles is reported below instead
                warnings.simplefilter("ignore", RuntimeWarning)
                traj = trainer.run(plan())
            fin = traj.final
            if not all(math.isfinite(x) for x in (fin.risk, fin.risk_bound, fin.alpha_a, fin.alpha_b, fin.beta_a,
                                                  fin.beta_b)):
                raise OverflowError("non-finite end point")
            plans[name] = traj
        except (SettingError, OverflowError, FloatingPointError) as exc:  # a comparison plan that blew up
            if not isinstance(exc, (OverflowError, FloatingPointError)) and "must be finite" not in str(exc):
                raise
            diverged[name] = f"diverged: the parameters left the doubles (step size {flag} too large?)"
            print(f"note: the {name} plan {diverged[name]}", file=sys.stderr)
    summary = _summary(setting, args, reg, plans, attention_eta)
    for name, why in diverged.items():
        summary["plans"][name] = {"diverged": True, "reason": why, "steps": args.steps}
    summary["evaluator"] = method
    if method == "integral":  # what rebuilds the run's numbers: the integral's digits and Taylor models
        summary["evaluator_settings"] = {"dps": evaluator.dps, "taylor_order": evaluator.taylor_order,
                                         "integrals_computed": evaluator.integrals_computed}
    verdict = "PASS"
    if reg is not None:
        fin = plans[THREE_PHASE].final
        target = float(args.epsilon) + reg.floor
        verdict = float_verdict(fin.risk, fin.risk_bound, target)
        summary["three_phase_verdict_float"] = verdict
        if args.certify or verdict == "UNDECIDED":
            certified = certify_end_point(setting, plans[THREE_PHASE], args.epsilon)
            summary["plans"][THREE_PHASE]["certified"] = certified
            verdict = certified["verdict"]
        summary["three_phase_verdict"] = verdict
        summary["three_phase_reaches_target"] = {"PASS": True, "FAIL": False}.get(verdict)
    return JobResult(summary, plans, verdict)


def float_verdict(risk: float, bound: float, target: float) -> str:
    """The float series' verdict on risk <= target: PASS when risk + bound <= target, FAIL when
    risk - bound > target, UNDECIDED when the bound straddles the target (an estimate, not an enclosure:
    ``--certify`` or an undecided verdict brings in the arb enclosure).

    >>> float_verdict(1e-3, 1e-12, 2e-3), float_verdict(3e-3, 1e-12, 2e-3), float_verdict(2e-3, 1e-12, 2e-3)
    ('PASS', 'FAIL', 'UNDECIDED')
    """
    if risk + bound <= target:
        return "PASS"
    return "FAIL" if risk - bound > target else "UNDECIDED"


def certify_end_point(setting: Setting, traj: Trajectory, epsilon=None) -> dict[str, Any]:
    """The end point of ``traj`` re-evaluated in ball arithmetic (python-flint arb) by the integral
    representation at CERTIFY_DPS digits (``numerics.theorem.integral``; any d, and the three-phase plan runs
    only under the squared loss with p < 1, where it applies).  A ball that encloses the exact population
    risk there (truncation tail and rounding included), stored as its midpoint, radius and the
    outward-rounded ends risk_lower <= exact risk <= risk_upper.

    With ``epsilon`` (exact), also the verdict on risk < floor + epsilon by the same three-valued test
    as ``occ-companion prove`` (``numerics.theorem.certify.below``), the floor and epsilon entered exactly; an
    UNDECIDED verdict is retried at doubled digits up to MAX_CERTIFY_DPS."""
    from numerics.theorem.certify import ArbClosedForms, below
    from numerics.theorem.integral import IntegralEvaluator
    from theory.arb_forms import arb_of

    print("certifying the three-phase end point in ball arithmetic (arb) ...", file=sys.stderr)
    fin = traj.final
    dps, verdict = CERTIFY_DPS, None
    while True:
        ball = IntegralEvaluator(setting, dps=dps).evaluate_symmetric(
            fin.alpha_a, fin.alpha_b, fin.beta_a, fin.beta_b).risk
        if epsilon is None:
            break
        from flint import ctx

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


def _summary(setting: Setting, args: argparse.Namespace, reg: Regime | None, plans: dict[str, Trajectory],
             attention_eta: float) -> dict[str, Any]:
    from numerics.theorem.closed_forms import ClosedForms

    squared = setting.loss == "squared"
    c_d = float(ClosedForms(setting).output_only_floor()) if squared else None
    summary: dict[str, Any] = {
        "run": run_record(args),
        "setting": {"d": setting.d, "p": float(setting.p_value), "lengths": setting.lengths, "loss": setting.loss},
        "epsilon": float(args.epsilon),
        "exact_inputs": exact_inputs(args),
        "risk_floor": reg.floor if reg is not None else None,
        "output_only_floor_c": c_d,
        "attention_eta": attention_eta,
    }
    if reg is not None:
        summary["regime"] = {"eta_1": reg.eta_1, "eta1_max": reg.eta1_max, "eta_2": reg.eta_2,
                             "eta2_min": reg.eta2_min, "eta_3": args.eta3, "T_min": reg.T_min,
                             "lambda_min_lower": reg.lambda_min_lower}
    else:
        summary["regime"] = None
        summary["not_covered"] = NOT_COVERED
    summary["plans"] = {name: _plan_record(traj) for name, traj in plans.items()}
    return summary


def _plan_record(traj: Trajectory) -> dict[str, Any]:
    fin = traj.final
    return {"final_risk": fin.risk, "bound": fin.risk_bound, "min_risk_lower": traj.min_risk_lower(),
            "steps": fin.step,
            "final_params": {"alpha_a": fin.alpha_a, "alpha_b": fin.alpha_b, "beta_a": fin.beta_a,
                             "beta_b": fin.beta_b}}


def run_record(args: argparse.Namespace) -> dict[str, Any]:
    """Provenance of a run: version, git commit, UTC timestamp, every option and the command that rebuilds it."""
    options = {k: json_option(v) for k, v in vars(args).items() if k not in ("func", "cmd")}
    commit, dirty = git_commit()
    return {"version": __version__, "git_commit": commit, "git_dirty": dirty,
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "options": options, "command": rebuild_command(args.cmd, options), "wall_seconds": None}


def rebuild_command(cmd: str, options: dict[str, Any]) -> str:
    """The command line that repeats a run with every option spelled out.

    Shell-quoted, so it can be pasted back whatever the paths hold:

    >>> rebuild_command("run", {"d": 5, "p": None, "no_plot": True, "certify": False, "out": "a b/ü"})
    "occ-companion run --d 5 --no-plot --out 'a b/ü'"
    """
    parts = ["occ-companion", cmd]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value is not None and value is not False:
            parts += [flag, str(value)]
    return shlex.join(parts)


def write_artifacts(out: OutputFolder, result: JobResult, setting: Setting, args: argparse.Namespace) -> None:
    """Stage the figure (unless --no-plot) and summary.json, then commit them as one result
    (``app.io``): the previous run's files stay in place until both new ones are complete, and an old
    figure that this run does not draw is removed at the commit."""
    with out.transaction() as tx:
        _stage_artifacts(tx, result, setting, args)


def _stage_artifacts(tx, result: JobResult, setting: Setting, args: argparse.Namespace) -> None:
    if not args.no_plot:
        from app.render.plotting import plot_plans

        s = result.summary
        regime = s["regime"]
        tx.write(FIGURE, lambda fh: plot_plans(
            result.plans, fh, floor_c=s["output_only_floor_c"], risk_floor=s["risk_floor"],
            target=None if regime is None else float(args.epsilon) + s["risk_floor"],
            phase_ends=None if regime is None else tuple(result.plans[THREE_PHASE].phase_ends[:-1]),
            title=setting.describe(), evaluator=s["evaluator"],
            diverged=tuple(name for name, rec in s["plans"].items() if rec.get("diverged"))))
    tx.write_text(SUMMARY, json.dumps(result.summary, indent=2, allow_nan=False) + "\n")


def print_table(result: JobResult, setting: Setting) -> None:
    """The plans' final risks, the verdict on the target and the arb re-evaluation, on stdout."""
    s = result.summary
    print(f"{'plan':<24}{'steps':>7}{'final risk':>14}{'bound':>10}")
    for name, rec in s["plans"].items():
        if rec.get("diverged"):
            print(f"{name:<24}{rec['steps']:>7}{'diverged':>14}{'':>10}  ({rec['reason']})")
            continue
        print(f"{name:<24}{rec['steps']:>7}{rec['final_risk']:>14.6g}{rec['bound']:>10.1e}")
    if s["regime"] is None:
        print(f"note: {s['not_covered']}")
        return
    floor, eps = s["risk_floor"], s["epsilon"]
    goal = f"epsilon = {eps:.3g}" if floor == 0 else f"floor + epsilon = {floor:.3g} + {eps:.3g}"
    check = s["plans"][THREE_PHASE].get("certified")
    how = "arb enclosure" if check is not None else "float series estimate"
    words = {"PASS": "yes", "FAIL": "NO", "UNDECIDED": "UNDECIDED (the enclosure straddles the target even at "
             f"{MAX_CERTIFY_DPS} digits)"}
    print(f"three-phase reaches risk <= {goal}: {words[result.verdict]} ({how});  "
          f"output-only floor c(d) = {s['output_only_floor_c']:.6g}")
    if check is not None:
        print(f"certified (arb) risk of the three-phase end point: {check['risk_lower']!r} <= R <= "
              f"{check['risk_upper']!r}")
    if result.verdict == "FAIL":
        print("note: the plans run in double precision; the verdict is about the end point reached (the T_min "
              "certificate of `occ-companion prove` is about exact gradient descent)")
