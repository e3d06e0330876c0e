"""Certificates in ball arithmetic: the arb balls enclose the exact closed forms, a shrunk enclosure is
caught, and ``occ-companion prove`` runs at d = 50.

The reference values are mpmath evaluations at 60 significant digits (``mp_reference``, the one place
that calls the mpmath closed forms); the balls are computed at 128 bits (about 38 digits), so a
correct ball must contain the reference and a ball shifted by 1e-25 must not.
"""
from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import pytest
from flint import arb, ctx

from app.commands.prove import main as prove_main
from numerics.theorem import certify
from theory import catalogue
from theory import symbolic
from theory.setting import Setting

MP_DPS = 60
PREC = 128
# exact doubles for the symbols the closed forms need (eta_1 inside (0, eta1_max) for every d here)
VALUES = {"eta_1": 1.25, "eta_2": 7.5, "epsilon": 0.001, "beta_a": 0.75, "beta_b": -0.625}


def mp_reference(expr, setting: Setting, **values):
    """The mpmath value of a closed form at MP_DPS digits."""
    from numerics.theorem.closed_forms import ClosedForms

    return ClosedForms(setting, dps=MP_DPS).expr(expr, **values)


def contains_mp(ball: arb, value) -> bool:
    """Does the ball contain the 60-digit reference (entered as a 400-bit point)?"""
    with ctx.workprec(400):
        return ball.contains(arb(mpmath.nstr(value, MP_DPS + 5, strip_zeros=False)))


def _needed(expr):
    free = {str(s) for s in expr.free_symbols} - {"d", "p"}
    return {k: v for k, v in VALUES.items() if k in free}


@pytest.mark.parametrize("d", [3, 5, 50])
def test_every_closed_form_ball_contains_the_60_digit_value(d):
    setting = Setting(d)
    cf = certify.ArbClosedForms(setting, PREC)
    exprs = [(der.key, der.expr) for der in catalogue.all_derivations("positive")]
    exprs += [("eta1_max", symbolic.eta1_max("positive")), ("eta2_min", symbolic.eta2_min("positive")), ("u_min", symbolic.u_min("positive"))]
    for key, expr in exprs:
        expr = expr if hasattr(expr, "free_symbols") else symbolic.sp.sympify(expr)
        vals = _needed(expr)
        ball = cf.expr(expr, **vals)
        assert ball.is_finite() and ball.rad() < arb(2) ** -100 * (1 + abs(ball)), (key, ball)
        assert contains_mp(ball, mp_reference(expr, setting, **vals)), (key, ball)


def test_alpha0_risk_quadratic_contains_the_60_digit_value():
    setting = Setting(10)
    cf = certify.ArbClosedForms(setting, PREC)
    ball = cf.risk_alpha0(VALUES["beta_a"], VALUES["beta_b"])
    ref = mp_reference(symbolic.uniform_attention_risk("positive"), setting, beta_a=VALUES["beta_a"], beta_b=VALUES["beta_b"])
    assert contains_mp(ball, ref)


def test_a_shifted_zero_radius_ball_is_caught():
    setting = Setting(50)
    cf = certify.ArbClosedForms(setting, PREC)
    for expr in (symbolic.uniform_attention_min_risk("positive"), symbolic.attention_gap_rate("positive"), symbolic.inverse_length_moment(2, "positive")):
        vals = _needed(expr)
        ball = cf.expr(expr, **vals)
        ref = mp_reference(expr, setting, **vals)
        assert contains_mp(ball, ref)
        with ctx.workprec(PREC):
            shrunk = arb(ball.mid() + arb("1e-25"))  # radius 0, midpoint off by 1e-25
        assert not contains_mp(shrunk, ref)


def test_a_shrunk_floor_makes_the_trajectory_certificate_fail():
    """Raise c(d) by the smallest margin of the trajectory: UNDECIDED; by twice that: FAIL."""
    setting = Setting(3)
    cf = certify.ArbClosedForms(setting, PREC)
    plan = certify.choose_plan(setting, cf, Fraction(1, 1000), steps=20)
    c = cf.output_only_floor(balanced=True)
    good = certify._trajectory_above_floor("output_only", 3, cf, plan.trajectories["output_only"], c)
    assert good.status == "PASS"
    with ctx.workprec(PREC):
        edge_c, bad_c = c + good.ball.mid(), c + 2 * good.ball.mid()
    edge = certify._trajectory_above_floor("output_only", 3, cf, plan.trajectories["output_only"], edge_c)
    assert edge.status == "UNDECIDED"  # the worst margin straddles 0: not decided either way
    bad = certify._trajectory_above_floor("output_only", 3, cf, plan.trajectories["output_only"], bad_c)
    assert bad.status == "FAIL"


def test_to_arb_refuses_inexact_constants_and_unknown_nodes():
    with pytest.raises(certify.SettingError):
        certify.to_arb(symbolic.sp.Float(0.1) * symbolic.d, {symbolic.d: arb(3)})
    with pytest.raises(certify.SettingError):
        certify.to_arb(symbolic.sp.gamma(symbolic.d), {symbolic.d: arb(3)})
    with pytest.raises(certify.SettingError):
        certify.to_arb(symbolic.d + symbolic.p, {symbolic.d: arb(3)})


class _StandIn:
    """A stand-in for the arb series built on the mp evaluator with balls mid +- its bound.

    Its bound is an estimate, not an enclosure: this exercises the certificate logic only.  ``shrink``
    replaces every ball by a zero-radius ball shifted by ``shift``.
    """

    def __init__(self, setting, shift=None):
        from numerics.theorem.series import SeriesEvaluator

        self.ev = SeriesEvaluator(setting, backend="mp", tol=1e-15, dps=40)
        self.shift = shift

    def _ball(self, v, r):
        with ctx.workprec(PREC):
            if self.shift is not None:
                return arb(mpmath.nstr(v, 40)) + arb(self.shift)
            return arb(mpmath.nstr(v, 40), r)

    def evaluate_symmetric(self, aa, ab, ba, bb):
        res = self.ev.evaluate_symmetric(aa, ab, ba, bb)

        class R:
            risk = self._ball(res.risk, res.risk_bound)
            grad_beta = [self._ball(g, res.grad_bound) for g in res.grad_beta]
        return R()


def test_series_items_pass_with_balls_and_fail_when_shifted():
    setting = Setting(3)
    eps = Fraction(1, 1000)
    cf = certify.ArbClosedForms(setting, PREC)
    plan = certify.choose_plan(setting, cf, eps, steps=5)
    ok = certify.certify_series_items(setting, eps, plan, cf, _StandIn(setting))
    assert [c.status for c in ok] == ["PASS", "PASS"], [c.line() for c in ok]
    shifted = certify.certify_series_items(setting, eps, plan, cf, _StandIn(setting, shift=float(eps)))
    assert shifted[1].status == "FAIL"


def test_series_items_with_the_arb_series_of_this_checkout():
    """With the arb series of this checkout the end point and T_min are certified (balls, PASS)."""
    setting = Setting(3)
    eps = Fraction(1, 1000)
    cf = certify.ArbClosedForms(setting, PREC)
    plan = certify.choose_plan(setting, cf, eps, steps=5)
    items = certify.certify_series_items(setting, eps, plan, cf, certify.arb_series_evaluator(setting, PREC))
    assert [c.status for c in items] == ["PASS", "PASS"], [c.line() for c in items]
    assert all(isinstance(c.ball, arb) for c in items)


def test_series_items_with_the_integral_representation_agree_with_the_arb_series():
    """The integral evaluator in place of the arb series: the same verdicts, and T_min and end-point
    balls that overlap the series' balls."""
    from numerics.theorem.integral import IntegralEvaluator

    setting = Setting(5)
    eps = Fraction(1, 1000)
    cf = certify.ArbClosedForms(setting, PREC)
    plan = certify.choose_plan(setting, cf, eps, steps=5)
    series = certify.certify_series_items(setting, eps, plan, cf, certify.arb_series_evaluator(setting, PREC))
    integral = certify.certify_series_items(setting, eps, plan, cf, IntegralEvaluator(setting, prec_bits=PREC))
    assert [c.status for c in integral] == [c.status for c in series] == ["PASS", "PASS"]
    for a, b in zip(integral, series):
        assert a.ball.overlaps(b.ball) and a.ball.rad() <= b.ball.rad() * 10


def test_prove_at_large_d_runs_on_the_integral_representation(tmp_path, capsys):
    """From d = INTEGRAL_FROM_D on the series items use the integral (d-independent cost)."""
    from numerics.theorem.evaluators import INTEGRAL_FROM_D

    rc = prove_main(["--d", str(INTEGRAL_FROM_D * 4), "--steps", "20", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "certificate.json").read_text())
    assert rc == 0 and data["all_pass"] and data["counts"]["FAIL"] == 0
    assert {c["claim"] for c in data["claims"] if c["status"] == "PASS"} >= {"three_phase", "output_only"}


def test_ball_json_encloses_the_ball():
    with ctx.workprec(PREC):
        x = arb(1) / 3
        mid, rad = certify.ball_json(x)
        assert arb(mid, rad).contains(x)


def test_prove_at_d50_writes_the_certificate(tmp_path, capsys):
    rc = prove_main(["--d", "50", "--steps", "40", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "certificate.json").read_text())
    assert rc == 0 and data["all_pass"] and data["d"] == [50] and data["epsilon_exact"] == "1/1000"
    assert data["counts"]["FAIL"] == 0 and data["counts"]["PASS"] >= 15
    keys = {c["claim"] for c in data["certificates"]}
    assert keys == {"three_phase", "output_only", "attention_then_output", "attention_only", "finite_sample",
                    "lag_from_zero", "lag_crossover"}
    for c in data["certificates"]:
        assert c["status"] in certify.STATUSES
        if c["status"] == "PASS" and c["ball"] is not None:
            assert len(c["ball"]) == 2 and c["ball"][1] >= 0
    assert out.count("\n") >= len(data["certificates"])
    verdicts = {c["claim"]: c["status"] for c in data["claims"]}
    assert verdicts["finite_sample"] == "SKIP" and verdicts["output_only"] == "PASS"
    assert verdicts["three_phase"] == "PASS" and verdicts["lag_from_zero"] == "PASS"
    assert verdicts["lag_crossover"] == "SKIP"  # certified only with --lag-crossover


def test_claim_verdict_is_the_worst_item():
    def item(status):
        return certify.Certificate("output_only", "x", 3, None, "-", status)
    assert certify.claim_verdict([item("PASS"), item("FAIL"), item("SKIP")]) == "FAIL"
    assert certify.claim_verdict([item("SKIP")]) == "SKIP"
    assert certify.claim_verdict([item("PASS"), item("SKIP")]) == "PASS"


@pytest.mark.parametrize("argv, flag", [(["--d", "2"], "--d"), (["--d", "3,x"], "--d"),
                                        (["--epsilon", "0"], "--epsilon"), (["--epsilon", "nan"], "--epsilon"),
                                        (["--steps", "-1"], "--steps"), (["--prec-bits", "20"], "--prec-bits")])
def test_prove_refuses_bad_flags_before_work(argv, flag, tmp_path, capsys):
    assert prove_main([*argv, "--out", str(tmp_path)]) == 2
    assert flag in capsys.readouterr().err
    assert not (tmp_path / "certificate.json").exists()


# ----------------------------------------------------------------------------------------------
# three-valued verdicts, and the mutations they must catch


def test_three_valued_comparisons():
    with ctx.workprec(PREC):
        assert [certify.below(arb(1, 0.5), 2), certify.below(arb(3, 0.5), 2), certify.below(arb(2, 0.5), 2)] == \
            ["PASS", "FAIL", "UNDECIDED"]
        assert [certify.above(arb(3, 0.5), 2), certify.above(arb(1, 0.5), 2), certify.above(arb(2, 0.5), 2)] == \
            ["PASS", "FAIL", "UNDECIDED"]
        # an exact point on the threshold: the strict inequality is certainly false
        assert certify.below(arb(2), 2) == "FAIL" and certify.above(arb(2), 2) == "FAIL"
    assert certify.both("PASS", "UNDECIDED") == "UNDECIDED" and certify.both("UNDECIDED", "FAIL") == "FAIL"
    assert certify.both("PASS", "PASS") == "PASS"

    def item(status):
        return certify.Certificate("output_only", "x", 3, None, "-", status)
    assert certify.claim_verdict([item("PASS"), item("UNDECIDED"), item("SKIP")]) == "UNDECIDED"
    assert certify.claim_verdict([item("FAIL"), item("UNDECIDED")]) == "FAIL"


class _EndPointBall:
    """The arb series, except that the risk at the plan's end point is replaced by ``ball``."""

    def __init__(self, setting, final, ball):
        self.ev = certify.arb_series_evaluator(setting, PREC)
        self.final, self.ball = (final.alpha_a, final.alpha_b, final.beta_a, final.beta_b), ball

    def evaluate_symmetric(self, *point):
        res = self.ev.evaluate_symmetric(*point)
        if point == self.final:
            class R:
                risk = self.ball
                grad_beta = res.grad_beta
            return R()
        return res


@pytest.fixture(scope="module")
def plan3():
    setting = Setting(3)
    eps = Fraction(1, 1000)
    cf = certify.ArbClosedForms(setting, PREC)
    return setting, eps, cf, certify.choose_plan(setting, cf, eps, steps=5)


def test_an_end_point_ball_straddling_floor_plus_epsilon_is_undecided(plan3):
    """A ball that only overlaps floor + epsilon decides nothing: UNDECIDED, never PASS; a ball wholly
    above is FAIL, wholly below PASS."""
    setting, eps, cf, plan = plan3
    final = plan.trajectories["three_phase"].final
    e = float(eps)
    expect = {(e, e / 10): "UNDECIDED", (e * 0.95, e / 10): "UNDECIDED", (e * 1.2, e / 10): "FAIL",
              (e * 0.8, e / 10): "PASS"}
    for (mid, rad), status in expect.items():
        with ctx.workprec(PREC):
            ball = arb(mid, rad)
        items = certify.certify_series_items(setting, eps, plan, cf, _EndPointBall(setting, final, ball))
        assert items[1].status == status, (mid, rad, items[1].line())


def _independent_S_eigenvalues(setting, alpha_a, alpha_b):
    """Eigenvalues of S = D^1/2 M D^1/2 from the mp series' quadratic moments and numpy."""
    import numpy as np

    from numerics.theorem.series import SeriesEvaluator

    mom = SeriesEvaluator(setting, backend="mp", tol=1e-20, dps=30).quadratic_moments(alpha_a, alpha_b)
    (m_aa, m_ab), (_, m_bb) = mom.M
    d = setting.d
    off = float(m_ab) / (d - 1) ** 0.5
    return np.linalg.eigvalsh(np.array([[float(m_aa), off], [off, float(m_bb) / (d - 1)]]))


@pytest.mark.parametrize("d", [3, 5])
def test_phase3_curvature_balls_are_the_smallest_and_largest_eigenvalues(d, plan3):
    setting = Setting(d)
    cf = certify.ArbClosedForms(setting, PREC)
    plan = plan3[3] if d == 3 else certify.choose_plan(setting, cf, Fraction(1, 1000), steps=2)
    start = plan.trajectories["three_phase"].points[2]
    lo, hi = certify.phase3_curvature(certify.arb_series_evaluator(setting, PREC), d, start.alpha_a, start.alpha_b, PREC)
    ref = _independent_S_eigenvalues(setting, start.alpha_a, start.alpha_b)
    assert ref[1] - ref[0] > 1e-3  # distinct, so swapping them cannot go unnoticed
    assert abs(float(lo.mid()) - ref[0]) < 1e-9 and abs(float(hi.mid()) - ref[1]) < 1e-9, (lo, hi, ref)


def test_T_min_ball_uses_lambda_min(plan3):
    """The T_min ball is log((R0 - floor)/(epsilon/2)) / (-2 log(1 - eta_3 lambda_min)), with lambda_min
    computed independently; with lambda_max in its place it would be far smaller."""
    import math

    setting, eps, cf, plan = plan3
    start = plan.trajectories["three_phase"].points[2]
    items = certify.certify_series_items(setting, eps, plan, cf, certify.arb_series_evaluator(setting, PREC))
    lam = _independent_S_eigenvalues(setting, start.alpha_a, start.alpha_b)[0]
    r0 = float(certify.arb_series_evaluator(setting, PREC).evaluate_symmetric(
        start.alpha_a, start.alpha_b, start.beta_a, start.beta_b).risk.mid())
    t_ref = math.log(r0 / (float(eps) / 2)) / (-2 * math.log(1 - plan.eta_3 * lam))
    t_ball = items[0].ball
    assert items[0].status == "PASS" and abs(float(t_ball.mid()) - t_ref) < 1e-6 * t_ref, (t_ball, t_ref)


def test_T_min_needs_the_gap_of_the_point_reached(plan3):
    """A phase-3 start whose attention gap is below log u_min violates the lemma the T_min certificate
    rests on: the certificate must FAIL even though the curvature and the step count are fine."""
    import dataclasses

    setting, eps, cf, plan = plan3
    traj = plan.trajectories["three_phase"]
    pts = list(traj.points)
    pts[2] = dataclasses.replace(pts[2], alpha_a=pts[2].alpha_a / 4, alpha_b=pts[2].alpha_b / 4)
    with ctx.workprec(PREC):
        assert arb(pts[2].alpha_a - pts[2].alpha_b) < cf.u_min(eps).log()
    short = dataclasses.replace(plan, trajectories={**plan.trajectories,
                                                    "three_phase": dataclasses.replace(traj, points=pts)})
    items = certify.certify_series_items(setting, eps, short, cf, certify.arb_series_evaluator(setting, PREC))
    assert items[0].status == "FAIL", items[0].line()


def test_floor_is_infimum_certificate_fails_for_a_wrong_floor():
    setting = Setting(5)
    cf = certify.ArbClosedForms(setting, PREC)
    status, minimum = certify.floor_is_infimum(cf)
    assert status == "PASS" and minimum.overlaps(cf.output_only_floor())
    with ctx.workprec(PREC):  # the minimum over beta of the quadratic, checked at its minimiser and nearby
        assert cf.risk_alpha0(0, 0) > minimum

    class Shifted(certify.ArbClosedForms):
        def output_only_floor(self, balanced=False):
            with ctx.workprec(PREC):
                return super().output_only_floor(balanced) + arb("1e-20")
    assert certify.floor_is_infimum(Shifted(setting, PREC))[0] == "FAIL"


def test_prove_exit_statuses_follow_the_verdicts(tmp_path, monkeypatch, capsys):
    """0 when everything passes, 1 on a FAIL, 3 on UNDECIDED without a FAIL (app/exitcodes.py)."""
    from app import exitcodes

    def fake(status):
        def certify_claims(d, eps, **kw):
            return [certify.Certificate(cl.key, "x", d, None, "-", status) for cl in certify.CLAIMS]
        return certify_claims
    for status, code in (("PASS", exitcodes.DONE), ("FAIL", exitcodes.CLAIM_FAILED),
                         ("UNDECIDED", exitcodes.UNDECIDED)):
        monkeypatch.setattr(certify, "certify_claims", fake(status))
        assert prove_main(["--d", "3", "--out", str(tmp_path)]) == code, status
        data = json.loads((tmp_path / "certificate.json").read_text())
        assert data["exit_status"] == code and data["all_pass"] == (status == "PASS")


@pytest.mark.parametrize("argv", [["--epsilon", "1e-14"], ["--prec-bits", "53"]])
def test_prove_decides_what_a_wider_ball_left_open(argv, tmp_path, capsys):
    """At epsilon = 1e-14 (the series' omitted mass follows epsilon) and at 53 bits (retried at doubled
    precision) every item at d = 3 is decided, and the claims PASS: they are true."""
    rc = prove_main(["--d", "3", *argv, "--out", str(tmp_path)])
    data = json.loads((tmp_path / "certificate.json").read_text())
    assert rc == 0 and data["counts"]["FAIL"] == 0 and data["counts"]["UNDECIDED"] == 0, capsys.readouterr().out
    if argv[0] == "--prec-bits":
        assert max(c["prec_bits"] for c in data["certificates"] if c["prec_bits"]) > 53


def test_closed_form_items_are_named_and_rest_on_their_balls(plan3):
    """Each closed-form certificate at d = 3 under its name (the JSON's ``item`` and ``test``, which ``prove``'s
    readers select by), with the ball its verdict rests on; the verdict re-read from that ball."""
    setting, eps, cf, plan = plan3
    items = certify.certify_closed_form_items(setting, eps, plan, PREC)
    half, zero = arb(1) / 2, arb(0)
    e1, e2 = plan.eta_1, plan.eta_2
    expected = [  # claim, item, test, what the ball must satisfy
        ("three_phase", "balancing p", "contains 1/2", lambda b: b.contains(half)),
        ("three_phase", "P(y=+1) at p", "contains 1/2", lambda b: b.contains(half)),
        ("three_phase", "phase 1: dR/dbeta_a at 0", "< 0", lambda b: b < 0),
        ("three_phase", "phase 1: dR/dbeta_b at 0", "> 0", lambda b: b > 0),
        ("three_phase", "eta1_max", f"> eta_1 = {e1:g} > 0", lambda b: b > e1),
        ("three_phase", "phase 2: dR/dalpha_a at (0, beta1)", "< 0", lambda b: b < 0),
        ("three_phase", "phase 2: dR/dalpha_b at (0, beta1)", "> 0", lambda b: b > 0),
        ("three_phase", "kappa(eta_1)", "> 0", lambda b: b > 0),
        ("three_phase", "log u_min(epsilon)", "sign decided (<= 0: eta2_min = 0)", lambda b: b > 0 or b <= 0),
        ("three_phase", "eta2_min", f">= 0, <= eta_2 = {e2:.6g}", lambda b: b >= 0 and b <= e2),
        ("output_only", "c(d) (balanced closed form)", "> 0, overlaps c(d, p)",
         lambda b: b > 0 and b.overlaps(cf.output_only_floor())),
        ("output_only", "min of R(0, beta) (Hessian > 0)", "overlaps c(d, p)", lambda b: b.overlaps(cf.output_only_floor())),
        ("output_only", f"min over {len(plan.trajectories['output_only'].points)} points of R - c(d)", "> 0",
         lambda b: b > 0),
        ("attention_then_output", "dR/dalpha at beta = 0", "exactly 0; alpha stays 0", lambda b: b.is_exact() and b == zero),
        ("attention_then_output",
         f"min over {len(plan.trajectories['attention_then_output'].points)} points of R - c(d)", "> 0", lambda b: b > 0),
        ("attention_only", "R(0,0); beta = 0 at every point", "contains 1/2 (f = 0)", lambda b: b.contains(half)),
    ]
    assert [(c.claim, c.item, c.test) for c in items] == [e[:3] for e in expected]
    with ctx.workprec(PREC):
        for c, (*_, holds) in zip(items, expected):
            assert isinstance(c.ball, arb) and holds(c.ball) and c.status == "PASS", c.line()
    assert certify._verdict(True) == "PASS" and certify._verdict(False) == "FAIL"
    with pytest.raises(certify.SettingError, match=r"^the certificates are stated for the default length law "
                                             r"\(lengths='positive'\)$"):
        certify.certify_closed_form_items(Setting(3, lengths="nonnegative"), eps, plan, PREC)


def test_closed_form_items_fail_when_their_balls_cross_the_threshold(plan3, monkeypatch):
    """Controls: each sign item's ball replaced by one a thousandth on the wrong side of its threshold (eta1_max
    just below eta_1, eta2_min just above eta_2) must FAIL, and the items that do not move must still PASS; a
    plan with eta_1 = 0 fails its "eta_1 > 0" part."""
    import dataclasses

    setting, eps, cf, plan = plan3
    small = Fraction(1, 1000)
    wrong = {"phase 1: dR/dbeta_a at 0": small, "phase 1: dR/dbeta_b at 0": -small,
             "phase 2: dR/dalpha_a at (0, beta1)": small, "phase 2: dR/dalpha_b at (0, beta1)": -small,
             "kappa(eta_1)": -small, "eta1_max": plan.eta_1 - small, "eta2_min": plan.eta_2 + small}
    zero_gradients = certify.ArbClosedForms.zero_gradients
    with ctx.workprec(PREC):
        ball = {k: certify.arb_of(v) for k, v in wrong.items()}
    monkeypatch.setattr(certify.ArbClosedForms, "zero_gradients", lambda self: {
        **zero_gradients(self), "grad_beta_a": ball["phase 1: dR/dbeta_a at 0"],
        "grad_beta_b": ball["phase 1: dR/dbeta_b at 0"]})
    monkeypatch.setattr(certify.ArbClosedForms, "phase2_gradient", lambda self, eta_1: (
        ball["phase 2: dR/dalpha_a at (0, beta1)"], ball["phase 2: dR/dalpha_b at (0, beta1)"]))
    monkeypatch.setattr(certify.ArbClosedForms, "kappa", lambda self, eta_1: ball["kappa(eta_1)"])
    monkeypatch.setattr(certify.ArbClosedForms, "eta1_max", lambda self: ball["eta1_max"])
    monkeypatch.setattr(certify.ArbClosedForms, "eta2_min", lambda self, epsilon, eta_1: ball["eta2_min"])
    status = {c.item: c.status for c in certify.certify_closed_form_items(setting, eps, plan, PREC)}
    assert {k: status[k] for k in wrong} == dict.fromkeys(wrong, "FAIL")
    assert all(s == "PASS" for k, s in status.items() if k not in wrong), status
    for eta_1, expect in [(0.0, "FAIL"), (0.5, "PASS")]:  # eta1_max's ball (plan.eta_1 - 1/1000) is above both
        items = certify.certify_closed_form_items(setting, eps, dataclasses.replace(plan, eta_1=eta_1), PREC)
        assert [c.status for c in items if c.item == "eta1_max"] == [expect]


class _Log:
    """Stands in for u_min(epsilon): its log is the given ball."""

    def __init__(self, ball):
        self.ball = ball

    def log(self):
        return self.ball


def _items_with(monkeypatch, plan3, **balls):
    """The closed-form items at d = 3 with some closed forms replaced by the given balls (as (lo, hi) pairs of
    dyadic rationals), as {item: status}."""
    setting, eps, cf, plan = plan3

    def ball(lo, hi):  # exact end points (the upper one when hi = 0, else the lower; arb rounds radii up)
        with ctx.workprec(PREC):
            if lo == hi:
                return certify.arb_of(lo)
            x = arb(0, float(Fraction(hi - lo) / 2))
            return x - x.rad() + certify.arb_of(hi) if hi == 0 else x + x.rad() + certify.arb_of(lo)

    with monkeypatch.context() as m:
        if "log_u" in balls:
            m.setattr(certify.ArbClosedForms, "u_min", lambda self, epsilon: _Log(ball(*balls["log_u"])))
            m.setattr(certify.ArbClosedForms, "eta2_min", lambda self, epsilon, eta_1: certify.arb_of(plan.eta_2 / 2))
        if "eta2_min" in balls:
            m.setattr(certify.ArbClosedForms, "eta2_min", lambda self, epsilon, eta_1: ball(*balls["eta2_min"]))
        if "c" in balls:
            c_bal, c_gen = (ball(*b) for b in balls["c"])
            m.setattr(certify.ArbClosedForms, "output_only_floor", lambda self, balanced=False: c_bal if balanced else c_gen)
        if "grad_alpha" in balls:
            zero_gradients = certify.ArbClosedForms.zero_gradients
            g = ball(*balls["grad_alpha"])
            m.setattr(certify.ArbClosedForms, "zero_gradients", lambda self: {**zero_gradients(self), "grad_alpha_a": g})
        return {c.item: c.status for c in certify.certify_closed_form_items(setting, eps, plan, PREC)}


def test_closed_form_items_are_three_valued_at_their_thresholds(plan3, monkeypatch):
    """Balls on, at and across each threshold (end points exact): a ball touching a strict threshold or
    straddling any is UNDECIDED, a ball ending exactly at a non-strict one decides it."""
    F = Fraction
    eta_2 = F(plan3[3].eta_2)
    small = F(1, 1024)
    cases = [  # (closed form, (lo, hi)), item, status
        ("log_u", (-small, small), "log u_min(epsilon)", "UNDECIDED"),
        ("log_u", (F(0), 2 * small), "log u_min(epsilon)", "UNDECIDED"),
        ("log_u", (F(0), F(0)), "log u_min(epsilon)", "PASS"),
        ("log_u", (F(1, 2), F(1, 2)), "log u_min(epsilon)", "PASS"),
        ("log_u", (F(-1, 2), F(-1, 2)), "log u_min(epsilon)", "PASS"),
        ("eta2_min", (-small, -small), "eta2_min", "FAIL"),
        ("eta2_min", (-2 * small, F(0)), "eta2_min", "UNDECIDED"),
        ("eta2_min", (-small, small), "eta2_min", "UNDECIDED"),
        ("eta2_min", (F(0), F(0)), "eta2_min", "PASS"),
        ("eta2_min", (F(1, 2), F(1, 2)), "eta2_min", "PASS"),
        ("eta2_min", (eta_2, eta_2), "eta2_min", "PASS"),
        ("eta2_min", (eta_2, eta_2 + 2 * small), "eta2_min", "UNDECIDED"),
        ("eta2_min", (eta_2 + small, eta_2 + small), "eta2_min", "FAIL"),
        ("c", ((-small, -small), (-small, -small)), "c(d) (balanced closed form)", "FAIL"),
        ("c", ((F(1, 4), F(1, 4)), (F(1, 8), F(1, 8))), "c(d) (balanced closed form)", "FAIL"),
        ("grad_alpha", (small, small), "dR/dalpha at beta = 0", "FAIL"),
    ]
    got = [_items_with(monkeypatch, plan3, **{name: b})[item] for name, b, item, _ in cases]
    assert got == [c[3] for c in cases], [(c[:3], g) for c, g in zip(cases, got) if g != c[3]]


def test_certificate_line_json_and_ball_json():
    """What a certificate prints and writes: the ball at 12 digits with its radius ("-" without one), the note
    in parentheses only when there is one; the JSON keys; ball_json's [mid, rad] tight and enclosing, an exact
    ball with radius 0."""
    with ctx.workprec(PREC):
        third = arb(1) / 3
    c = certify.Certificate("output_only", "item", 3, third, "> 0", "PASS", prec_bits=PREC)
    assert c.line().split() == ["output_only", "d=3", "item", *third.str(12, radius=True).split(), ">", "0", "PASS"]
    assert "+/-" in c.line() and c.line().endswith("PASS")
    noted = certify.Certificate("output_only", "item", 3, None, "> 0", "FAIL", "why")
    assert noted.line().split()[3] == "-" and noted.line().endswith("FAIL  (why)")
    assert c.as_json() == {"claim": "output_only", "item": "item", "d": 3, "ball": certify.ball_json(third), "test": "> 0",
                           "status": "PASS", "note": "", "prec_bits": PREC}
    mid, rad = certify.ball_json(third)
    assert mid == 1 / 3 and 0 < rad < 1e-16 and arb(mid, rad).contains(third)
    assert certify.ball_json(certify.arb_of(Fraction(3, 4))) == [0.75, 0.0] and certify.ball_json(None) is None
    with pytest.raises(ValueError, match="status"):
        certify.Certificate("output_only", "item", 3, None, "> 0", "pass")


def test_trajectory_certificate_refuses_a_moving_alpha_and_reports_the_worst_point(plan3):
    """_trajectory_above_floor: a trajectory whose alpha left 0 (in either coordinate) FAILs without a ball;
    otherwise the ball reported is the margin R - c(d) with the lowest lower end."""
    import dataclasses

    setting, eps, cf, plan = plan3
    traj = plan.trajectories["output_only"]
    c = cf.output_only_floor(balanced=True)
    for moved in [{"alpha_a": 1e-3}, {"alpha_b": -1e-3}]:
        points = [traj.points[0], dataclasses.replace(traj.points[1], **moved), *traj.points[2:]]
        cert = certify._trajectory_above_floor("output_only", 3, cf, dataclasses.replace(traj, points=points), c)
        assert (cert.claim, cert.item, cert.d, cert.ball, cert.test, cert.status) == (
            "output_only", "trajectory risk > c(d)", 3, None, "alpha = 0 at every point", "FAIL") and cert.note
    cert = certify._trajectory_above_floor("output_only", 3, cf, traj, c)
    with ctx.workprec(PREC):
        margins = [cf.risk_alpha0(pt.beta_a, pt.beta_b) - c for pt in traj.points]
    assert len({float(m.lower()) for m in margins}) == len(margins) > 2
    assert float(cert.ball.lower()) == min(float(m.lower()) for m in margins) and cert.test == "> 0"


@pytest.mark.parametrize("coeffs", [{(2, 0): -1, (0, 2): -1}, {(2, 0): 1, (0, 2): -1}])
def test_floor_is_infimum_needs_a_positive_definite_hessian(coeffs):
    """A quadratic with no linear terms whose constant is c(d) itself, so its critical value overlaps c(d):
    with H_11 < 0, or with det H < 0, it has no minimum and the certificate must FAIL."""
    cf = certify.ArbClosedForms(Setting(3), PREC)
    c = cf.output_only_floor()
    cf._coeffs = [((2, 0), arb(coeffs[(2, 0)])), ((1, 1), arb(0)), ((0, 2), arb(coeffs[(0, 2)])),
                  ((1, 0), arb(0)), ((0, 1), arb(0)), ((0, 0), c)]
    status, minimum = certify.floor_is_infimum(cf)
    assert minimum.overlaps(c) and status == "FAIL"


def test_series_tol_and_arb_evaluator_precision():
    """series_tol: epsilon / 1000, at most 1e-12, at least 2^-prec_bits; arb_evaluator keeps the precision it is
    asked for (the integral representation from d = INTEGRAL_FROM_D on) and its default omitted mass 1e-12."""
    from numerics.theorem.evaluators import INTEGRAL_FROM_D
    from numerics.theorem.integral import IntegralEvaluator

    assert certify.series_tol(Fraction(1, 1000), 128) == 1e-12 and certify.series_tol(1e-12, 128) == 1e-12 / 1000
    assert certify.series_tol(Fraction(1, 10**300), 128) == 2.0 ** -128 and certify.series_tol(1e-12, 30) == 2.0 ** -30
    big = certify.arb_evaluator(Setting(INTEGRAL_FROM_D), 200)
    assert isinstance(big, IntegralEvaluator) and big.prec_bits == 200
    small = certify.arb_evaluator(Setting(5), 200)
    assert (small.context, small.prec_bits, small.tol) == ("arb", 200, 1e-12)


class _NotBalls:
    """The arb series with plain floats in place of the balls of one call (``which``: 3 the start risk, 4 the
    end-point risk; floats in the curvature evaluations 0-2 still give balls, as they meet arb constants)."""

    def __init__(self, setting, which):
        self.ev, self.which, self.calls = certify.arb_series_evaluator(setting, PREC), which, 0

    def evaluate_symmetric(self, *point):
        res, self.calls = self.ev.evaluate_symmetric(*point), self.calls + 1
        if self.calls - 1 != self.which:
            return res

        class R:
            risk = float(res.risk.mid())
            grad_beta = [float(g.mid()) for g in res.grad_beta]
        return R()


@pytest.mark.parametrize("which", [3, 4])
def test_series_items_refuse_values_that_are_not_balls(plan3, which):
    setting, eps, cf, plan = plan3
    items = certify.certify_series_items(setting, eps, plan, cf, _NotBalls(setting, which))
    assert [(c.claim, c.item, c.d, c.ball, c.test, c.status) for c in items] == [
        ("three_phase", "T_min", 3, None, "T >= T_min", "UNDECIDED"),
        ("three_phase", "end-point risk", 3, None, "< epsilon", "UNDECIDED")]
    assert all(c.note == "series returned non-ball values: nothing is certified" for c in items)


def test_float_upper_and_the_closed_forms_refusals():
    """_float_upper: the smallest double above every point of the ball (one step up when the ball's upper end is
    itself a double); ArbClosedForms refuses, by name, what its closed forms are not derived for."""
    with ctx.workprec(PREC):
        for x in (arb(1) / 3, -arb(1) / 3, -arb(1) / 5, arb(2) / 3 + arb(0, 1e-30), arb(0.5, 0.25), arb(-0.5, 0.25)):
            up = certify._float_upper(x)
            assert arb(up) > x and not arb(math.nextafter(up, -math.inf)) > x
        assert certify._float_upper(arb(0.5)) == math.nextafter(0.5, math.inf)
        assert certify._float_upper(arb(-0.5)) == math.nextafter(-0.5, math.inf)  # a negative upper end that is a double
    for bad in (52, 53.0, True):
        with pytest.raises(certify.SettingError, match=rf"^prec_bits must be an integer >= 53, got {bad!r}$"):
            certify.ArbClosedForms(Setting(3), bad)
    with pytest.raises(certify.SettingError, match="^the closed forms certified here are derived for the squared loss$"):
        certify.ArbClosedForms(Setting(3, loss="logistic"))
    with pytest.raises(certify.SettingError, match=r"^closed forms are stated for p < 1 \(at p = 1 every string has length 1\)$"):
        certify.ArbClosedForms(Setting(2))
    with pytest.raises(certify.SettingError, match=r"^unknown symbol\(s\) \['zeta'\]; expected some of \["):
        certify.ArbClosedForms(Setting(3)).expr(symbolic.d, zeta=1)
    quarter = certify.ArbClosedForms(Setting(3, p=0.25)).p_exact
    assert quarter == Fraction(1, 4) and type(quarter) is Fraction
    assert certify.ArbClosedForms(Setting(3, p=Fraction(1, 3))).p_exact == Fraction(1, 3)


def test_T_min_certificate_is_three_valued_in_its_curvature_and_gap(plan3, monkeypatch):
    """The T_min item with the phase-3 curvature balls, eta_3, the gap's threshold log u_min and the plan's T
    replaced: eta_3 lambda_max <= 1 and lambda_min > 0 and gap >= log u_min each decide PASS, FAIL or UNDECIDED
    at their own threshold (end points exact); a T below the certified count is UNDECIDED; the note is empty
    exactly when the item passes, and the end-point item carries FLOAT_PLAN_NOTE exactly when it fails."""
    import dataclasses

    setting, eps, cf, plan = plan3
    start = plan.trajectories["three_phase"].points[2]
    F = Fraction
    with ctx.workprec(PREC):
        gap = certify.arb_of(start.alpha_a) - certify.arb_of(start.alpha_b)
        lam0, lam_max0 = certify.phase3_curvature(certify.arb_series_evaluator(setting, PREC), 3, start.alpha_a, start.alpha_b,
                                            PREC)
    a = F(1, 1024)

    def ball(lo, hi):  # the lower end point exact (eta_3 lambda_max rounds the upper one up)
        with ctx.workprec(PREC):
            if lo == hi:
                return certify.arb_of(lo)
            x = arb(0, float(F(hi - lo) / 2))
            return x + x.rad() + certify.arb_of(lo)

    def T_min(lam=None, lam_max=None, eta_3=1.0, log_u=None, T=None):
        with monkeypatch.context() as m:
            m.setattr(certify, "phase3_curvature", lambda *args: (lam if lam is not None else lam0,
                                                            lam_max if lam_max is not None else lam_max0))
            if log_u is not None:
                m.setattr(certify.ArbClosedForms, "u_min", lambda self, epsilon: _Log(log_u))
            p = dataclasses.replace(plan, eta_3=eta_3, T=plan.T if T is None else T)
            return certify.certify_series_items(setting, eps, p, cf, certify.arb_series_evaluator(setting, PREC))[0]

    expect = [  # the replaced quantities, the T_min item's status
        ({"lam_max": ball(F(1), F(1))}, "PASS"),
        ({"lam_max": ball(F(1), 1 + 2 * a)}, "UNDECIDED"),
        ({"lam_max": ball(F(3, 2), F(3, 2))}, "FAIL"),
        ({"lam_max": ball(F(3, 2), F(3, 2)), "eta_3": 0.5, "T": 1000}, "PASS"),
        ({"lam_max": ball(F(3), F(3)), "eta_3": 0.5}, "FAIL"),
        ({"lam_max": ball(F(15, 8), F(17, 8)), "eta_3": 0.5}, "UNDECIDED"),
        ({"lam": ball(-a, -a)}, "FAIL"),
        ({"lam": ball(-a, a)}, "UNDECIDED"),
        ({"log_u": gap}, "PASS"),
        ({"log_u": gap + arb(0, 1e-3)}, "UNDECIDED"),
        ({"log_u": gap + 1}, "FAIL"),
        ({"T": 0}, "UNDECIDED"),
    ]
    for replaced, status in expect:
        item = T_min(**replaced)
        assert item.status == status, (replaced, item.line())
        assert (item.note == "") == (status == "PASS"), item.line()
        if status != "PASS":
            assert item.note.startswith("gap >= log u_min: "), item.note
    # the end point: FLOAT_PLAN_NOTE exactly on FAIL
    final = plan.trajectories["three_phase"].final
    for mid, status in [(float(eps) * 1.2, "FAIL"), (float(eps) * 0.8, "PASS")]:
        with ctx.workprec(PREC):
            b = arb(mid, float(eps) / 10)
        end = certify.certify_series_items(setting, eps, plan, cf, _EndPointBall(setting, final, b))[1]
        assert end.status == status and end.note == (certify.FLOAT_PLAN_NOTE if status == "FAIL" else "")


def test_certify_claims_retries_only_what_is_undecided():
    """At d = 3, epsilon = 1/1000 every item is decided at the default precision, so none is retried: each records
    DEFAULT_PREC_BITS; at 53 bits an item left open is certified again at doubled precision (106, 212, ...) and
    records the precision that decided it.  The finite-sample row is the statistical SKIP."""
    items = certify.certify_claims(3, Fraction(1, 1000), steps=5)
    skipped = ("finite_sample", "lag_crossover")  # the statistical claim; the crossover without lag_crossover=True
    assert {c.prec_bits for c in items if c.claim not in skipped} == {certify.DEFAULT_PREC_BITS}
    assert all(c.status == "PASS" for c in items if c.claim not in skipped)
    assert [c.status for c in items if c.claim == "lag_crossover"] == ["SKIP"]
    fs = [c for c in items if c.claim == "finite_sample"]
    assert [(c.item, c.d, c.ball, c.test, c.status, c.note) for c in fs] == [
        ("held-out risk with N = ceil(30 d ln d)", 3, None, "statistical", "SKIP",
         "a sampling claim: estimated in checks/test_finite_sample.py, not certified")]
    low = certify.certify_claims(3, Fraction(1, 10**14), steps=5, prec_bits=53)
    precs = {c.prec_bits for c in low if c.claim not in skipped}
    assert precs <= {53 * 2 ** k for k in range(6)} and max(precs) > 53
    assert all(c.status != "UNDECIDED" or "undecided at" in c.note for c in low)


# ----------------------------------------------------------------------------------------------
# the plan, the retry loop and the precision (docs/mutation.md: the certify survivors of mutmut's rerun)


def test_choose_plan_takes_the_documented_step_sizes_and_runs_them():
    """eta_1 = eta1_max / 2 and eta_2 = the smallest double above eta2_min (1 + ETA2_MARGIN), against the 50-digit
    mpmath closed forms; eta_3 = 1; and the trajectories take those steps: the first output step of size 1 from
    beta = 0 at alpha = 0 is phase1_beta(1) (output-only, and attention-then-output after its attention step, which
    moves nothing at beta = 0), the three-phase run's phase 1 and 2 points are phase1_beta(eta_1) and
    phase2_alpha(eta_1, eta_2), and its first phase-3 step is beta - eta_3 D (M beta - m) with the mp series'
    moments at that alpha.  (The plan is built here, not taken from the module fixture: mutmut credits a call
    made while a fixture is built to the first test that uses it, and runs a mutant of choose_plan only against
    the tests it credits.)"""
    from numerics.theorem.closed_forms import ClosedForms
    from numerics.theorem.series import SeriesEvaluator

    setting, eps = Setting(3), Fraction(1, 1000)
    plan = certify.choose_plan(setting, certify.ArbClosedForms(setting, PREC), eps, steps=5)
    mp_cf = ClosedForms(setting, dps=50)
    e1max = float(mp_cf.eta1_max())
    assert abs(plan.eta_1 - e1max / 2) <= 1e-15 * e1max, (plan.eta_1, e1max)
    e2min = float(mp_cf.eta2_min(eps, plan.eta_1))
    assert e2min > 1  # the margin is visible: eta2_min > 0 at d = 3, epsilon = 1/1000
    assert e2min * (1 + certify.ETA2_MARGIN) <= plan.eta_2 <= e2min * (1 + certify.ETA2_MARGIN) * (1 + 1e-14), (plan.eta_2, e2min)
    assert plan.eta_3 == 1.0

    def close(x, y):
        return abs(x - y) <= 1e-9 * max(abs(y), 1e-3)

    one = [float(b) for b in mp_cf.phase1_beta(1.0)]
    for name, k in [("output_only", 1), ("attention_then_output", 2)]:
        pt = plan.trajectories[name].points[k]
        assert pt.alpha_a == pt.alpha_b == 0.0 and close(pt.beta_a, one[0]) and close(pt.beta_b, one[1]), (name, pt)
    tp = plan.trajectories["three_phase"].points
    b1 = [float(b) for b in mp_cf.phase1_beta(plan.eta_1)]
    a2 = [float(a) for a in mp_cf.phase2_alpha(plan.eta_1, plan.eta_2)]
    assert close(tp[1].beta_a, b1[0]) and close(tp[1].beta_b, b1[1]) and tp[1].alpha_a == tp[1].alpha_b == 0.0
    assert close(tp[2].alpha_a, a2[0]) and close(tp[2].alpha_b, a2[1])
    mom = SeriesEvaluator(setting, backend="mp", tol=1e-20, dps=30).quadratic_moments(tp[2].alpha_a, tp[2].alpha_b)
    M = [[float(x) for x in row] for row in mom.M]
    m = [float(x) for x in mom.m]
    D = [1.0, 1.0 / (setting.d - 1)]
    beta = [tp[2].beta_a, tp[2].beta_b]
    step = [beta[i] - plan.eta_3 * D[i] * (M[i][0] * beta[0] + M[i][1] * beta[1] - m[i]) for i in range(2)]
    assert close(tp[3].beta_a, step[0]) and close(tp[3].beta_b, step[1]), (tp[3], step)


class _ScaledCurvature:
    """A population evaluator whose output quadratic's M is multiplied by ``factor`` (the risk values unchanged):
    a stand-in that moves the phase-3 curvature the regime reads."""

    def __init__(self, setting, factor):
        from numerics.theorem.evaluators import population_evaluator

        self.ev, self.factor, self.setting = population_evaluator(setting), factor, setting

    def evaluate_symmetric(self, *point):
        return self.ev.evaluate_symmetric(*point)

    def quadratic_moments(self, alpha_a, alpha_b):
        import dataclasses

        mom = self.ev.quadratic_moments(alpha_a, alpha_b)
        return dataclasses.replace(mom, M=[[self.factor * x for x in row] for row in mom.M])


def test_choose_plan_takes_T_from_the_evaluator_it_is_given(plan3):
    """The plan's T is the regime's T_min computed with the evaluator handed to choose_plan (half the curvature:
    a larger T than the default evaluator's), and an evaluator with no positive curvature is refused by name."""
    from numerics.theorem.regime import three_phase_regime

    setting, eps, cf, plan = plan3
    half = _ScaledCurvature(setting, 0.5)
    slow = certify.choose_plan(setting, cf, eps, 2, evaluator=half)
    T = three_phase_regime(setting, float(eps), slow.eta_1, eta_2=slow.eta_2, eta_3=1.0, evaluator=half).T_min
    assert slow.T == T > plan.T, (slow.T, T, plan.T)
    with pytest.raises(certify.SettingError, match=r"^the float regime found no positive phase-3 curvature; cannot choose T$"):
        certify.choose_plan(setting, cf, eps, 2, evaluator=_ScaledCurvature(setting, -1.0))


def test_attention_only_item_needs_beta_to_stay_zero(plan3):
    """The attention-only item certifies R(0, 0) = 1/2 *and* beta = 0 at every point: a trajectory whose beta_a
    or beta_b moved (R(0,0) still contains 1/2) must FAIL."""
    import dataclasses

    setting, eps, cf, plan = plan3
    traj = plan.trajectories["attention_only"]
    item = "R(0,0); beta = 0 at every point"
    for moved in [{"beta_a": 1e-3}, {"beta_b": -1e-3}]:
        points = [traj.points[0], dataclasses.replace(traj.points[1], **moved), *traj.points[2:]]
        p = dataclasses.replace(plan, trajectories={**plan.trajectories,
                                                    "attention_only": dataclasses.replace(traj, points=points)})
        status = {c.item: c.status for c in certify.certify_closed_form_items(setting, eps, p, PREC)}
        assert status[item] == "FAIL", moved
    assert {c.item: c.status for c in certify.certify_closed_form_items(setting, eps, plan, PREC)}[item] == "PASS"


def test_T_min_count_is_the_ceiling_of_the_upper_end_and_zero_below_half_epsilon(plan3, monkeypatch):
    """The T_min item's count is max(0, ceil(upper end of the T ball)): with a wide lambda_min ball, a plan T at
    the ceiling of the lower end (below that of the upper end) is UNDECIDED and one at the upper's PASSes; with an
    epsilon so large that the start excess is below epsilon/2 the count is 0 and T = 0 PASSes."""
    import dataclasses

    setting, eps, cf, plan = plan3
    start = plan.trajectories["three_phase"].points[2]
    ev = certify.arb_series_evaluator(setting, PREC)
    with ctx.workprec(PREC):
        lam0, lam_max0 = certify.phase3_curvature(ev, 3, start.alpha_a, start.alpha_b, PREC)
        lo, hi = Fraction(float(lam0.mid())) * Fraction(9, 10), Fraction(float(lam0.mid())) * Fraction(11, 10)
        wide = arb(0, float((hi - lo) / 2)) + certify.arb_of((hi + lo) / 2)  # contains [lo, hi]
    with monkeypatch.context() as m:
        m.setattr(certify, "phase3_curvature", lambda *args: (wide, lam_max0))
        t_ball = certify.certify_series_items(setting, eps, plan, cf, ev)[0].ball
        low, high = math.ceil(float(t_ball.lower())), math.ceil(float(t_ball.upper()))
        assert low < high, t_ball
        for T, status in [(low, "UNDECIDED"), (high - 1, "UNDECIDED"), (high, "PASS")]:
            item = certify.certify_series_items(setting, eps, dataclasses.replace(plan, T=T), cf, ev)[0]
            assert item.status == status and item.test == f"T >= ceil(upper) = {high}, gap >= log u_min", (T, item.line())
    big = Fraction(1, 2)
    with ctx.workprec(PREC):
        r0 = ev.evaluate_symmetric(start.alpha_a, start.alpha_b, start.beta_a, start.beta_b).risk
        assert r0 - cf.risk_floor() < certify.arb_of(big / 2)  # the excess at the phase-3 start is below epsilon / 2
    item = certify.certify_series_items(setting, big, dataclasses.replace(plan, T=0), cf, ev)[0]
    assert item.status == "PASS" and item.test == "T >= ceil(upper) = 0, gap >= log u_min", item.line()
    assert item.ball.upper() < 0


def test_certify_claims_works_at_the_precision_it_is_asked_for():
    """At prec_bits = 256 the series items are computed at 256 bits: with the integral representation (whose
    radius follows the working precision) handed in as the series factory, the factory is asked for 256 bits and
    series_tol's omitted mass, and the end-point and T_min balls are about 2^-256 wide (at 128 bits they would be
    about 2^-128 wide); every certificate records 256."""
    from numerics.theorem.integral import IntegralEvaluator

    asked = []

    def factory(setting, prec_bits, tol):
        asked.append((prec_bits, tol))
        return IntegralEvaluator(setting, prec_bits=prec_bits)

    eps = Fraction(1, 1000)
    items = certify.certify_claims(3, eps, steps=5, prec_bits=256, series_evaluator=factory)
    assert asked == [(256, certify.series_tol(eps, 256))]
    series = {c.item.split(" (")[0]: c for c in items if c.item.startswith(("T_min", "end-point"))}
    assert set(series) == {"T_min", "end-point risk"}
    for c in series.values():
        assert c.status == "PASS" and c.ball.rad() < arb(2) ** -220 * abs(c.ball), c.line()
    assert {c.prec_bits for c in items if c.claim not in ("finite_sample", "lag_crossover")} == {256}


class _WideRisk:
    """The arb series with every risk ball widened by +-1 (its gradients untouched): the end-point risk and the
    T_min item (log of the start excess) are undecided at every precision."""

    def __init__(self, setting, prec_bits, tol):
        self.ev = certify.arb_series_evaluator(setting, prec_bits, tol)

    def evaluate_symmetric(self, *point):
        res = self.ev.evaluate_symmetric(*point)

        class R:
            risk = res.risk + arb(0, 1)
            grad_beta = res.grad_beta
        return R()


def test_certify_claims_retries_up_to_the_cap_and_says_so():
    """An item undecided at every precision is retried at doubled precision while the doubled precision stays
    within max_prec_bits (64, 128, 256 for a cap of 256: 256 itself is reached), then reported UNDECIDED with the
    cap note appended to its own note ("; "-joined); decided items are not retried past that and carry no note."""
    asked = []

    def factory(setting, prec_bits, tol):
        asked.append(prec_bits)
        return _WideRisk(setting, prec_bits, tol)

    items = certify.certify_claims(3, Fraction(1, 1000), steps=5, prec_bits=64, max_prec_bits=256, series_evaluator=factory)
    assert asked == [64, 128, 256]
    cap = "undecided at 256 bits (the retry cap is 256): raise --prec-bits or --max-prec-bits"
    undecided = {c.item.split(" (")[0]: c for c in items if c.status == "UNDECIDED"}
    assert set(undecided) == {"T_min", "end-point risk"}, [c.line() for c in items]
    assert undecided["end-point risk"].note == cap
    t_min = undecided["T_min"]
    assert t_min.note == "gap >= log u_min: PASS; curvature 0 < lambda_min, eta_3 lambda_max <= 1: PASS; " + cap
    # the lag item has its own retry (numerics.theorem.lag.certify_lag) and a note with its half times
    rest = [c for c in items if c.status != "UNDECIDED"
            and c.claim not in ("finite_sample", "lag_from_zero", "lag_crossover")]
    assert rest and all(c.status == "PASS" and c.note == "" and c.prec_bits == 256 for c in rest)


def test_certify_claims_takes_epsilon_exactly_and_refuses_d_below_3():
    """An epsilon that is not a Fraction is converted exactly: Decimal("0.001") and the string "1/1000" give the
    certificates of Fraction(1, 1000); d = 2 is refused by name."""
    from decimal import Decimal

    def rows(items):
        return [(c.claim, c.item, c.test, c.status, c.note, certify.ball_json(c.ball)) for c in items]

    exact = rows(certify.certify_claims(3, Fraction(1, 1000), steps=5))
    assert rows(certify.certify_claims(3, Decimal("0.001"), steps=5)) == exact
    assert rows(certify.certify_claims(3, "1/1000", steps=5)) == exact
    with pytest.raises(certify.SettingError, match=r"^--d: the claims are stated for d >= 3, got 2$"):
        certify.certify_claims(2, Fraction(1, 1000))


def test_certify_claims_default_steps_are_proves():
    """certify_claims' default plan length is prove's default --steps (300): the output-only trajectory has
    steps + 1 points, attention-then-output steps + 2."""
    import argparse

    from app.commands.prove import add_parser

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    steps = int(parser.parse_args(["prove"]).steps)
    items = {c.claim: c.item for c in certify.certify_claims(3, Fraction(1, 1000)) if c.item.startswith("min over")}
    assert items == {"output_only": f"min over {steps + 1} points of R - c(d)",
                     "attention_then_output": f"min over {steps + 2} points of R - c(d)"}
