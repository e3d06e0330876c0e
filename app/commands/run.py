"""The main job, ``occ-companion run``: the three-phase plan in its step-size regime beside the
output-only, attention-only, attention-then-output and joint plans, with exact population gradients.

The computation is ``numerics.theorem.job.run``; this module parses the flags into a Setting and a
``JobOptions``, calls it once, and writes and prints its ``JobResult``.  Artifacts in ``--out``:
``summary.json`` (everything needed to rebuild the run: every option, the version, the git commit,
timestamp and wall time) and ``risk_curves.png`` (unless ``--no-plot``).  The three-phase regime is
derived for the squared loss; under ``--loss logistic`` the comparison plans run and the three-phase
plan is skipped (the JSON and the output say so).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from numerics.theorem import job
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
from app.progress import progress_factory

if TYPE_CHECKING:
    from numerics.theorem.regime import Regime
    from numerics.theorem.training import Trajectory

SUMMARY = "summary.json"
FIGURE = "risk_curves.png"
ARTIFACTS = (SUMMARY, FIGURE)
THREE_PHASE = job.THREE_PHASE
MAX_STEPS = 1_000_000
DEFAULTS = job.JobOptions()
"""The defaults of the flags that are ``JobOptions`` fields (--epsilon is typed exactly, as its decimal)."""


RUN_DESCRIPTION = (
    "The main job: compute the three-phase step sizes for --epsilon, run the three-phase plan there and the "
    "output-only, attention-only, attention-then-output and joint plans beside it with exact population "
    "gradients; write summary.json and risk_curves.png into --out and print a table.  The verdict on the "
    "target is PASS, FAIL or UNDECIDED: from the plans' evaluator when it decides (the float series' error "
    "estimate, or the integral evaluator's arb ball: --evaluator integral, chosen by auto from d = 1000 on), "
    "else from an arb enclosure of "
    "the end point's risk (always with --certify), retried at higher precision up to "
    f"{job.MAX_CERTIFY_DPS} digits.  Exit status: 0 target reached, 1 missed, 3 undecided, 2 bad usage, 130 "
    "interrupted.  The regime is derived for the squared loss: under --loss logistic "
    "only the comparison plans run.")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``run`` (the main job) on the subcommand parser ``sub``."""
    r = sub.add_parser("run", help="main job: three-phase plan vs output-only / attention-only / attention-first / joint",
                       description=RUN_DESCRIPTION, formatter_class=HelpFormatter)
    add_setting_options(r, 50, d_min=3, p_one=False)
    r.add_argument("--epsilon", type=exact_positive, default=exact_positive("1e-3"),
                   help=f"target risk above the floor for the three-phase plan, {EXACT_NOTE}")
    r.add_argument("--eta1-frac", type=fraction, default=DEFAULTS.eta1_frac,
                   help="phase-1 output step eta_1 as a fraction of eta1_max, in (0, 1)")
    r.add_argument("--eta2-factor", type=float_in(1, None, low_open=False), default=DEFAULTS.eta2_factor,
                   help="phase-2 attention step eta_2 as a multiple (>= 1) of eta2_min(epsilon, eta_1)")
    r.add_argument("--eta3", type=float_in(0, 1, high_open=False), default=DEFAULTS.eta3,
                   help="phase-3 and output-only step size, in (0, 1]")
    r.add_argument("--attention-eta", type=positive, default=DEFAULTS.attention_eta,
                   help="attention step of the attention-only and attention-then-output plans "
                        "(default: eta_2 of the three-phase regime; 1 under --loss logistic)")
    r.add_argument("--steps", type=int_at_least(1, MAX_STEPS), default=DEFAULTS.steps,
                   help=f"steps of the comparison plans, in [1, {MAX_STEPS}]")
    r.add_argument("--joint-eta", type=positive, default=DEFAULTS.joint_eta, help="step size of joint GD (both layers)")
    r.add_argument("--evaluator", choices=METHODS, default=DEFAULTS.evaluator,
                   help="exact population evaluator: the float series, or the integral representation (arb balls, "
                        f"cost independent of d; squared loss); auto takes the integral from d = {INTEGRAL_FROM_D} on")
    r.add_argument("--tol", type=float_in(1e-15, 1, low_open=False), default=DEFAULTS.tol,
                   help="target for the omitted probability mass of the exact series, in [1e-15, 1)")
    r.add_argument("--max-terms", type=positive_int, default=DEFAULTS.max_terms,
                   help="largest series enumeration allowed (small --p means long strings and many terms)")
    r.add_argument("--certify", action="store_true",
                   help=f"re-evaluate the three-phase end point in ball arithmetic (python-flint arb, the integral "
                        f"representation at {job.CERTIFY_DPS} digits, more if undecided): an enclosure of its exact "
                        "risk, printed, stored, and the verdict on the target (done anyway when the float "
                        "estimate cannot decide it)")
    r.add_argument("--no-plot", action="store_true", help=f"do not draw {FIGURE} (an old one is removed)")
    r.add_argument("--out", default="results", help="output folder")
    r.add_argument("--quiet", action="store_true", help="no progress bars (they appear only on a terminal)")
    r.set_defaults(func=run_command)



def job_options(args: argparse.Namespace) -> job.JobOptions:
    """The ``JobOptions`` the parsed flags give (each field is the flag of the same name)."""
    return job.JobOptions(**{field.name: getattr(args, field.name) for field in dataclasses.fields(job.JobOptions)})


def run_command(args: argparse.Namespace) -> int:
    """``occ-companion run``: check --out, compute, write the artifacts, print the table."""
    started = time.time()
    setting = setting_from_args(args)
    options = job_options(args)
    if options.evaluator == "integral" and not integral_applies(setting):
        raise UsageError("--evaluator integral covers --loss squared with p < 1; use --evaluator series or auto")
    with OutputFolder(args.out, result="run", owns=ARTIFACTS) as out:  # unwritable or busy --out: refused here
        print(f"setting: {setting.describe()}", file=sys.stderr)
        try:
            result = job.run(setting, options, progress_factory(args.quiet), _StderrListener())
        except job.NoCurvatureBound as exc:
            raise SettingError("no positive lower bound on the phase-3 curvature was found at this setting; "
                               + ("lower --tol" if exc.method == "series" else "use a larger --p or a smaller --d")
                               ) from exc
        except job.PlanTooLong as exc:
            raise UsageError(f"the three-phase plan needs T_min = {exc.T_min:.3g} phase-3 steps here, more than "
                             f"{job.MAX_PLAN_STEPS:.0e} (hours of computing); use a smaller --d or a larger "
                             "--epsilon") from exc
        summary = summary_record(result, setting, options, args)
        summary["run"]["wall_seconds"] = round(time.time() - started, 2)
        write_artifacts(out, result, summary, setting, args)
    print_table(result, summary)
    written = [str(out.path / SUMMARY)] + ([] if args.no_plot else [str(out.path / FIGURE)])
    print("wrote " + " and ".join(written))
    return VERDICT_EXIT[result.verdict]


VERDICT_EXIT = {"PASS": exitcodes.DONE, "FAIL": exitcodes.CLAIM_FAILED, "UNDECIDED": exitcodes.UNDECIDED}


def option_flag(option: str) -> str:
    """The flag of a ``JobOptions`` field.

    >>> option_flag("joint_eta")
    '--joint-eta'
    """
    return "--" + option.replace("_", "-")


def diverged_reason(option: str) -> str:
    """Why a comparison plan has no result: its step size (the ``JobOptions`` field ``option``) took
    its parameters out of the doubles."""
    return f"diverged: the parameters left the doubles (step size {option_flag(option)} too large?)"


class _StderrListener(job.Listener):
    """The job's progress in words, on stderr."""

    def evaluator_chosen(self, method: str, tol: float) -> None:
        print(f"evaluator: {method}" + (" (arb integrals, certified balls)" if method == "integral" else
                                        f" (float series, tol {tol:g})"), file=sys.stderr)

    def regime_found(self, regime: Regime, eta_3: float) -> None:
        print(f"regime: eta_1={regime.eta_1:.6g} < {regime.eta1_max:.6g}, eta_2={regime.eta_2:.6g} >= "
              f"{regime.eta2_min:.6g}, eta_3={eta_3}, T_min={regime.T_min}", file=sys.stderr)

    def not_covered(self) -> None:
        print(f"note: {job.NOT_COVERED}", file=sys.stderr)

    def plan_diverged(self, plan: str, option: str) -> None:
        print(f"note: the {plan} plan {diverged_reason(option)}", file=sys.stderr)

    def certifying(self) -> None:
        print("certifying the three-phase end point in ball arithmetic (arb) ...", file=sys.stderr)


def summary_record(result: job.JobResult, setting: Setting, options: job.JobOptions,
                   args: argparse.Namespace) -> dict[str, Any]:
    """``summary.json``: the run's provenance (``run_record``), the setting, the regime, every plan's
    end point (a diverged plan: why), the evaluator and the verdict on the target."""
    reg = result.regime
    summary: dict[str, Any] = {
        "run": run_record(args),
        "setting": {"d": setting.d, "p": float(setting.p_value), "lengths": setting.lengths, "loss": setting.loss},
        "epsilon": float(options.epsilon),
        "exact_inputs": exact_inputs(args),
        "risk_floor": reg.floor if reg is not None else None,
        "output_only_floor_c": result.output_only_floor,
        "attention_eta": result.attention_eta,
    }
    if reg is not None:
        summary["regime"] = {"eta_1": reg.eta_1, "eta1_max": reg.eta1_max, "eta_2": reg.eta_2,
                             "eta2_min": reg.eta2_min, "eta_3": options.eta3, "T_min": reg.T_min,
                             "lambda_min_lower": reg.lambda_min_lower}
    else:
        summary["regime"] = None
        summary["not_covered"] = job.NOT_COVERED
    summary["plans"] = {name: _plan_record(traj) for name, traj in result.plans.items()}
    for name, option in result.diverged.items():
        summary["plans"][name] = {"diverged": True, "reason": diverged_reason(option), "steps": options.steps}
    summary["evaluator"] = result.method
    if result.evaluator_settings is not None:
        summary["evaluator_settings"] = dict(result.evaluator_settings)
    if reg is not None:
        summary["three_phase_verdict_float"] = result.float_verdict
        if result.certified is not None:
            summary["plans"][THREE_PHASE]["certified"] = result.certified
        summary["three_phase_verdict"] = result.verdict
        summary["three_phase_reaches_target"] = {"PASS": True, "FAIL": False}.get(result.verdict)
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


def write_artifacts(out: OutputFolder, result: job.JobResult, summary: dict[str, Any], setting: Setting,
                    args: argparse.Namespace) -> None:
    """Stage the figure (unless --no-plot) and ``summary`` as summary.json, then commit them as one
    result (``app.io``): the earlier run's files stay in place until both new ones are complete, and a
    figure that this run does not draw is removed at the commit."""
    with out.transaction() as tx:
        _stage_artifacts(tx, result, summary, setting, args)


def _stage_artifacts(tx, result: job.JobResult, summary: dict[str, Any], setting: Setting,
                     args: argparse.Namespace) -> None:
    if not args.no_plot:
        from app.render.plotting import plot_plans

        regime = result.regime
        tx.write(FIGURE, lambda fh: plot_plans(
            result.plans, fh, floor_c=result.output_only_floor, risk_floor=None if regime is None else regime.floor,
            target=result.target,
            phase_ends=None if regime is None else tuple(result.plans[THREE_PHASE].phase_ends[:-1]),
            title=setting.describe(), evaluator=result.method, diverged=tuple(result.diverged)))
    tx.write_text(SUMMARY, json.dumps(summary, indent=2, allow_nan=False) + "\n")


def print_table(result: job.JobResult, summary: dict[str, Any]) -> None:
    """The plans' final risks, the verdict on the target and the arb re-evaluation, on stdout."""
    s = summary
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
    check = result.certified
    how = result.verdict_source
    words = {"PASS": "yes", "FAIL": "NO", "UNDECIDED": "UNDECIDED (the enclosure straddles the target even at "
             f"{job.MAX_CERTIFY_DPS} digits)"}
    print(f"three-phase reaches risk <= {goal}: {words[result.verdict]} ({how});  "
          f"output-only floor c(d) = {s['output_only_floor_c']:.6g}")
    if check is not None:
        print(f"certified (arb) risk of the three-phase end point: {check['risk_lower']!r} <= R <= "
              f"{check['risk_upper']!r}")
    if result.verdict == "FAIL":
        print("note: the plans run in double precision; the verdict is about the end point reached (the T_min "
              "certificate of `occ-companion prove` is about exact gradient descent)")
