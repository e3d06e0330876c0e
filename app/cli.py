"""occ-companion: proof companion for the occurrence language with geometric lengths.

run: the main job (three-phase plan in its certified regime vs the impossibility plans and joint GD);
finite: the finite-sample plan; values / evaluate: closed forms and exact series at a point;
docs / latex: regenerate docs/derivations.md, export LaTeX."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from theory.validation import SettingError


def _setting(args):
    from theory.setting import Setting

    return Setting(args.d, p=args.p, lengths=args.lengths, loss=getattr(args, "loss", "squared"))


def _add_setting(sp, d_default):
    sp.add_argument("--d", type=int, default=d_default, help=f"alphabet size (default {d_default})")
    sp.add_argument("--p", type=float, default=None, help="geometric parameter (default: the balancing value)")
    sp.add_argument("--lengths", choices=["positive", "nonnegative"], default="positive",
                    help="length law: n on {1,2,...} (default) or {0,1,...}")


def cmd_run(args):
    """The main job: the three-phase plan in its certified regime against the impossibility plans."""
    from numerics.closed_forms import output_only_floor
    from numerics.series import SeriesEvaluator
    from numerics.training import Trainer, regime_plan

    setting = _setting(args)
    log = sys.stderr
    print(f"setting: {setting.describe()}", file=log)
    ev = SeriesEvaluator(setting, tol=args.tol)
    c_d = float(output_only_floor(setting))
    reg = regime_plan(setting, args.epsilon, eta1_frac=args.eta1_frac, eta2_factor=args.eta2_factor,
                      eta_3=args.eta3, evaluator=ev)
    eta_1, eta_2 = reg.eta_1, reg.eta_2
    if reg.T_min is None:
        raise SettingError("could not certify a positive curvature for phase 3; tighten --tol")
    print(f"regime: eta_1={eta_1:.6g} < {reg.eta1_max:.6g}, eta_2={eta_2:.6g} >= {reg.eta2_min:.6g}, "
          f"eta_3={args.eta3}, T_min={reg.T_min}", file=log)
    trainer = Trainer(ev, record_every=1, progress=log)
    t0 = time.time()
    plans = {
        "three-phase": trainer.three_phase(eta_1, eta_2, args.eta3, reg.T_min),
        "output-only": trainer.output_only(args.eta3, args.steps),
        "attention-only": trainer.attention_only(eta_2, args.steps),
        "attention-then-output": trainer.attention_then_output(eta_2, args.eta3, args.steps),
        "joint": trainer.joint(args.joint_eta, args.steps),
    }
    summary = {
        "setting": {"d": setting.d, "p": float(setting.p_value), "lengths": setting.lengths, "loss": setting.loss},
        "epsilon": args.epsilon, "risk_floor": reg.floor, "output_only_floor_c": c_d,
        "regime": {"eta_1": eta_1, "eta1_max": reg.eta1_max, "eta_2": eta_2, "eta2_min": reg.eta2_min,
                   "eta_3": args.eta3, "T_min": reg.T_min, "lambda_min_lower": reg.lambda_min_lower},
        "plans": {k: {"final_risk": v.final.risk, "bound": v.final.risk_bound,
                      "min_certified_risk": v.min_certified_risk(), "steps": v.final.step,
                      "final_params": [v.final.alpha_a, v.final.alpha_b, v.final.beta_a, v.final.beta_b]}
                  for k, v in plans.items()},
        "seconds": round(time.time() - t0, 2),
    }
    if args.certify:
        from numerics.series import SeriesEvaluator as SE

        fp = plans["three-phase"].final
        print("certifying the three-phase end point with mpmath ...", file=log)
        cert = SE(setting, backend="mp", tol=1e-15, dps=30).evaluate_symmetric(fp.alpha_a, fp.alpha_b, fp.beta_a, fp.beta_b)
        summary["plans"]["three-phase"]["certified_mp"] = {"risk": str(cert.risk), "bound": cert.risk_bound}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if not args.no_plot:
        from numerics.plotting import plot_plans

        plot_plans(plans, c_d, args.epsilon + reg.floor, out / "risk_curves.png", title=setting.describe())
    print(f"{'plan':<24}{'steps':>7}{'final risk':>14}{'bound':>10}")
    for k, v in plans.items():
        print(f"{k:<24}{v.final.step:>7}{v.final.risk:>14.6g}{v.final.risk_bound:>10.1e}")
    target = args.epsilon + reg.floor
    ok = plans["three-phase"].final.risk + plans["three-phase"].final.risk_bound <= target
    goal = f"epsilon = {target:.3g}" if reg.floor == 0 else f"floor + epsilon = {reg.floor:.3g} + {args.epsilon:.3g}"
    print(f"three-phase reaches risk <= {goal}: {'yes' if ok else 'NO'};  output-only floor c(d) = {c_d:.6g}")
    print(f"wrote {out / 'summary.json'}" + ("" if args.no_plot else f" and {out / 'risk_curves.png'}"))
    return 0 if ok else 1


def cmd_finite(args):
    """Finite-sample three-phase plan at N_1 = N_3 = ceil(C d ln d) (or given sizes)."""
    from numerics.finite_sample import d_log_d, three_phase_finite
    from numerics.series import SeriesEvaluator
    from numerics.training import regime_plan

    setting = _setting(args)
    reg = regime_plan(setting, args.epsilon, eta1_frac=args.eta1_frac, evaluator=SeriesEvaluator(setting))
    eta_1, eta_2, T = reg.eta_1, reg.eta_2, reg.T_min
    N_1 = args.n1 or d_log_d(setting.d, args.constant)
    N_3 = args.n3 or d_log_d(setting.d, args.constant)
    print(f"setting: {setting.describe()}; eta_1={eta_1:.4g}, eta_2={eta_2:.4g}, eta_3=1, T={T}, "
          f"N_1={N_1}, N_3={N_3}", file=sys.stderr)
    rows = []
    for k in range(args.seeds):
        run = three_phase_finite(setting, eta_1, eta_2, 1.0, T, N_1, N_3, seed=args.seed + k, test_size=args.test_size)
        rows.append(run)
        print(f"seed {run.seed}: held-out risk {run.test_risk:.5g} +- {run.test_se:.2g} (train {run.train_risk:.5g})")
    hits = sum(r.test_risk + 3 * r.test_se <= args.epsilon for r in rows)
    print(f"{hits}/{len(rows)} seeds reach risk <= {args.epsilon} (held-out mean + 3 SE)")
    return 0


def cmd_docs(args):
    from numerics.report import derivations_markdown

    text = derivations_markdown()
    path = Path(args.out)
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `occ-companion docs`", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0


def cmd_latex(args):
    from theory.latex import latex_document

    keys = [k for k in args.only.split(",") if k] if args.only else None
    text = latex_document(args.lengths, keys)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    return 0


def cmd_values(args):
    import mpmath

    from numerics.closed_forms import evaluate_all

    setting = _setting(args)
    given = {k: v for k, v in (("eta_1", args.eta1), ("eta_2", args.eta2), ("epsilon", args.epsilon)) if v is not None}
    print(f"setting: {setting.describe()}; {args.dps} significant digits")
    for key, title, val, missing in evaluate_all(setting, dps=args.dps, **given):
        shown = "(needs " + ", ".join("--" + m.replace("_", "") for m in missing) + ")" if val is None \
            else mpmath.nstr(val, args.dps)
        print(f"{key:<18} {shown}    # {title}")
    return 0


def _floats(text, name):
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise SettingError(f"--{name} must be comma-separated numbers, got {text!r}") from None


def cmd_evaluate(args):
    from numerics.series import SeriesEvaluator

    setting = _setting(args)
    d = setting.d
    alpha = _floats(args.alpha, "alpha") if args.alpha else [0.0] * d
    beta = _floats(args.beta, "beta") if args.beta else [0.0] * d
    ev = SeriesEvaluator(setting, backend=args.backend, tol=args.tol, dps=args.dps)
    res = ev.evaluate(alpha, beta)
    print(f"setting: {setting.describe()}")
    import mpmath

    digits = args.dps if args.backend == "mp" else 17
    show = lambda x: mpmath.nstr(mpmath.mpf(x), digits)  # noqa: E731
    print(f"risk = {show(res.risk)}  (|error| <= {res.risk_bound:.3e}, {res.terms} terms)")
    print("grad_alpha = [" + ", ".join(show(x) for x in res.grad_alpha) + "]")
    print("grad_beta  = [" + ", ".join(show(x) for x in res.grad_beta) + "]")
    print(f"every gradient coordinate: |error| <= {res.grad_bound:.3e}")
    if args.mc:
        from numerics.montecarlo import estimate

        mc = estimate(setting, alpha, beta, size=args.mc, seed=args.seed)
        print(f"Monte Carlo ({args.mc} strings, seed {args.seed}): risk = {mc.risk:.6g} +- {mc.risk_se:.2g}")
    return 0


def build_parser():
    ap = argparse.ArgumentParser(prog="occ-companion", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="main job: three-phase plan vs output-only / attention-only / attention-first / joint")
    _add_setting(r, 50)
    r.add_argument("--epsilon", type=float, default=1e-3, help="target risk above the floor (default 1e-3)")
    r.add_argument("--eta1-frac", type=float, default=0.5, help="eta_1 as a fraction of eta1_max (default 0.5)")
    r.add_argument("--eta2-factor", type=float, default=1.0, help="eta_2 as a multiple of eta2_min (default 1)")
    r.add_argument("--eta3", type=float, default=1.0, help="phase-3 and output-only step size, in (0, 1] (default 1)")
    r.add_argument("--steps", type=int, default=300, help="steps for the comparison plans (default 300)")
    r.add_argument("--joint-eta", type=float, default=1.0, help="joint GD step size (default 1)")
    r.add_argument("--tol", type=float, default=1e-12, help="series truncation target (default 1e-12)")
    r.add_argument("--certify", action="store_true", help="re-evaluate the end point with mpmath")
    r.add_argument("--no-plot", action="store_true")
    r.add_argument("--out", default="results", help="output folder (default results/)")
    r.set_defaults(func=cmd_run)

    fs = sub.add_parser("finite", help="finite-sample three-phase plan (N_1, N_3 = C d ln d by default)")
    _add_setting(fs, 50)
    fs.add_argument("--epsilon", type=float, default=1e-2)
    fs.add_argument("--eta1-frac", type=float, default=0.5)
    fs.add_argument("--constant", type=float, default=30.0, help="C in N = ceil(C d ln d) (default 30)")
    fs.add_argument("--n1", type=int, default=None)
    fs.add_argument("--n3", type=int, default=None)
    fs.add_argument("--seeds", type=int, default=5)
    fs.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    fs.add_argument("--test-size", type=int, default=100_000)
    fs.set_defaults(func=cmd_finite)

    dc = sub.add_parser("docs", help="regenerate docs/derivations.md (or --check it is current)")
    dc.add_argument("--out", default="docs/derivations.md")
    dc.add_argument("--check", action="store_true")
    dc.set_defaults(func=cmd_docs)

    lx = sub.add_parser("latex", help="export the gradient formulas as a standalone LaTeX document")
    lx.add_argument("--lengths", choices=["positive", "nonnegative"], default="positive")
    lx.add_argument("--only", default="", help="comma-separated derivation keys (default: all)")
    lx.add_argument("--out", default="-", help="file to write (default: stdout)")
    lx.set_defaults(func=cmd_latex)

    va = sub.add_parser("values", help="every derived expression evaluated by mpmath at a chosen precision")
    _add_setting(va, 50)
    va.add_argument("--dps", type=int, default=30, help="significant digits (default 30)")
    va.add_argument("--eta1", type=float, default=None)
    va.add_argument("--eta2", type=float, default=None)
    va.add_argument("--epsilon", type=float, default=None)
    va.set_defaults(func=cmd_values)

    ev = sub.add_parser("evaluate", help="exact series risk and gradients at a parameter point")
    _add_setting(ev, 5)
    ev.add_argument("--loss", choices=["squared", "logistic"], default="squared")
    ev.add_argument("--alpha", help="comma-separated, length d (default zeros)")
    ev.add_argument("--beta", help="comma-separated, length d (default zeros)")
    ev.add_argument("--backend", choices=["float", "mp"], default="float")
    ev.add_argument("--tol", type=float, default=1e-12)
    ev.add_argument("--dps", type=int, default=30)
    ev.add_argument("--mc", type=int, default=0, help="also a Monte Carlo estimate from this many strings")
    ev.add_argument("--seed", type=int, default=0)
    ev.set_defaults(func=cmd_evaluate)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SettingError as exc:
        print(f"occ-companion: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
