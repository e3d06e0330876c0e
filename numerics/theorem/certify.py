"""Certificates in ball arithmetic (python-flint ``arb``) for the claims of ``theory.claims``.

Two layers:

* ``to_arb`` translates a SymPy expression of ``theory.symbolic`` (rationals, + * /, powers, log,
  polylog Li_s, exp, sqrt, Max/Min) node by node into arb operations; ``ArbClosedForms`` evaluates the
  closed forms of a setting that way, with the geometric parameter p entered as an exact rational.
  Every returned ball contains the exact value of the closed form: the enclosure comes from the
  library's own rounding control, no error budget is added by hand.
* ``certify_claims`` computes, at one alphabet size d, one ``Certificate`` per item of each claim
  (the balancing p, gradient signs, the step-size regime, the output-only floor and the trajectories
  above it, the attention-only risk) and says PASS, FAIL or UNDECIDED.  Items that need the population series at
  a point with alpha != 0 (T_min, the three-phase end point) are computed in ``certify_series_items``
  against the ball-arithmetic series evaluator (``SeriesEvaluator(setting, context="arb",
  prec_bits=...)``).

Status words, three-valued: PASS (the ball inequality holds at every point of the ball: certified), FAIL
(its negation holds at every point: certified false), UNDECIDED (the ball straddles the threshold: too
wide to decide at this precision; ``certify_claims`` retries at doubled precision up to a cap), and SKIP
(the claim is statistical, not a closed-form statement; see its check module).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy as sp
from flint import arb, ctx, fmpq

from numerics.theorem.closed_forms import ClosedFormsBase, require_geometric
from theory import symbolic
from theory.arb_forms import arb_of, to_arb
from theory.claims import CLAIMS
from theory.setting import Setting
from theory.validation import SettingError, check_epsilon

STATUSES = ("PASS", "FAIL", "UNDECIDED", "SKIP")
DEFAULT_PREC_BITS = 128
MAX_PREC_BITS = 1024  # cap of the automatic precision retry
FLOAT_PLAN_NOTE = ("the plan was run in double precision (numerics.theorem.training): this verdict is about the end "
                   "point it reached, not about exact gradient descent")
ETA2_MARGIN = 1e-9  # relative margin of eta_2 above eta2_min (see choose_plan)

_SYMBOLS = {"eta_1": symbolic.eta1, "eta_2": symbolic.eta2, "eta_3": symbolic.eta3, "epsilon": symbolic.eps, "u": symbolic.u,
            "beta_a": symbolic.beta_a, "beta_b": symbolic.beta_b}


@lru_cache(maxsize=None)
def _alpha0_risk_coefficients(lengths: str):
    """R(0, beta) for symmetric beta as {(i, j): coefficient of beta_a^i beta_b^j} (a quadratic)."""
    poly = sp.Poly(sp.expand(symbolic.uniform_attention_risk(lengths)), symbolic.beta_a, symbolic.beta_b)
    return tuple((monom, coeff) for monom, coeff in poly.terms())


class ArbClosedForms(ClosedFormsBase):
    """The closed forms of ``theory.symbolic`` at one setting, as arb balls (p exact rational): the named
    forms of ``ClosedFormsBase`` with ``expr`` in ball arithmetic.

    >>> cf = ArbClosedForms(Setting(5))
    >>> cf.balanced_p().contains(fmpq(1, 4))
    True
    """

    def __init__(self, setting: Setting, prec_bits: int = DEFAULT_PREC_BITS):
        if not (isinstance(prec_bits, int) and not isinstance(prec_bits, bool) and prec_bits >= 53):
            raise SettingError(f"prec_bits must be an integer >= 53, got {prec_bits!r}")
        if setting.loss != "squared":
            raise SettingError("the closed forms certified here are derived for the squared loss")
        require_geometric(setting, "the closed forms certified here are")
        pv = setting.p_value
        if not isinstance(pv, Fraction):
            pv = Fraction(pv)  # a float p is a dyadic rational: entered exactly
        if pv == 1:
            raise SettingError("closed forms are stated for p < 1 (at p = 1 every string has length 1)")
        self.setting = setting
        self.prec_bits = prec_bits
        self.p_exact = pv
        self._coeffs = None

    def expr(self, expr, **symbols) -> arb:
        """Ball of a SymPy expression in d, p and the named symbols (eta_1, epsilon, beta_a, ...)."""
        unknown = set(symbols) - set(_SYMBOLS)
        if unknown:
            raise SettingError(f"unknown symbol(s) {sorted(unknown)}; expected some of {sorted(_SYMBOLS)}")
        with ctx.workprec(self.prec_bits):
            values = {symbolic.d: arb(self.setting.d), symbolic.p: arb_of(self.p_exact)}
            values.update({_SYMBOLS[k]: arb_of(v) for k, v in symbols.items()})
            return to_arb(expr, values)

    def risk_alpha0(self, beta_a, beta_b) -> arb:
        """R(0, beta) for symmetric beta from the closed-form quadratic: exact for alpha = 0."""
        if self._coeffs is None:
            self._coeffs = [((i, j), self.expr(c)) for (i, j), c in _alpha0_risk_coefficients(self.setting.lengths)]
        with ctx.workprec(self.prec_bits):
            ba, bb = arb_of(beta_a), arb_of(beta_b)
            out = arb(0)
            for (i, j), c in self._coeffs:
                out += c * ba**i * bb**j
            return out


# ----------------------------------------------------------------------------------------------
# certificates


@dataclass(frozen=True)
class Certificate:
    """One certified (or not) item of a claim at one d.

    ``ball`` is the arb enclosure the verdict rests on (None when nothing was enclosed); ``test``
    says what was compared (e.g. "< 0", "contains 1/2"); ``note`` explains SKIP and FAIL verdicts.
    """

    claim: str
    item: str
    d: int
    ball: arb | None
    test: str
    status: str
    note: str = ""
    prec_bits: int | None = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def line(self) -> str:
        """One printable line: claim, d, the ball, the test, the verdict."""
        shown = "-" if self.ball is None else self.ball.str(12, radius=True)
        tail = f"  ({self.note})" if self.note else ""
        return f"{self.claim:<22} d={self.d:<4} {self.item:<40} {shown:<40} {self.test:<28} {self.status}{tail}"

    def as_json(self) -> dict:
        return {"claim": self.claim, "item": self.item, "d": self.d, "ball": ball_json(self.ball),
                "test": self.test, "status": self.status, "note": self.note, "prec_bits": self.prec_bits}


def ball_json(x: arb | None):
    """[mid, rad] as floats with rad rounded up so that [mid - rad, mid + rad] still encloses x."""
    if x is None:
        return None
    if not x.is_finite():
        return [None, None]
    mid = float(x.mid())
    with ctx.workprec(max(ctx.prec, 128)):
        rad = float((x - arb(mid)).abs_upper())
    return [mid, math.nextafter(rad, math.inf) if rad else 0.0]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def decide(holds: bool, fails: bool) -> str:
    """PASS when the inequality holds at every point of its ball, FAIL when its negation does, else
    UNDECIDED (the ball straddles the threshold)."""
    if holds:
        return "PASS"
    return "FAIL" if fails else "UNDECIDED"


def below(ball: arb, threshold) -> str:
    """Three-valued ``ball < threshold`` (arb comparisons are true only for every point of the balls).

    >>> below(arb(1, 0.5), 2), below(arb(3, 0.5), 2), below(arb(2, 0.5), 2)
    ('PASS', 'FAIL', 'UNDECIDED')
    """
    threshold = arb_of(threshold)
    return decide(ball < threshold, ball >= threshold)


def above(ball: arb, threshold) -> str:
    """Three-valued ``ball > threshold``."""
    threshold = arb_of(threshold)
    return decide(ball > threshold, ball <= threshold)


def both(*statuses: str) -> str:
    """The conjunction of three-valued verdicts: FAIL if any fails, else UNDECIDED if any is, else PASS."""
    if "FAIL" in statuses:
        return "FAIL"
    return "UNDECIDED" if "UNDECIDED" in statuses else "PASS"


def _float_upper(x: arb) -> float:
    """The smallest double above every point of the ball x."""
    up = float(x.upper())
    return up if arb(up) > x else math.nextafter(up, math.inf)


@dataclass(frozen=True)
class Plan:
    """The step sizes ``prove`` runs, chosen inside the certified regime, and the float trajectories."""

    eta_1: float
    eta_2: float
    eta_3: float
    T: int
    trajectories: dict


def choose_plan(setting: Setting, cf: ArbClosedForms, epsilon: Fraction, steps: int, evaluator=None) -> Plan:
    """eta_1 = eta1_max / 2, eta_2 = the top of the eta2_min ball times (1 + ETA2_MARGIN), eta_3 = 1,
    T = the float T_min; then the four plans are run in float by numerics.theorem.training (exact population
    gradients from ``numerics.theorem.evaluators.population_evaluator``: the float series, or the integral from
    d = INTEGRAL_FROM_D on, whose balls are rounded to floats by the trainer).  The margin absorbs the rounding of the float attention step, so that the gap
    reached, alpha_a - alpha_b, still certifiably exceeds log u_min (checked in certify_series_items)."""
    from numerics.theorem import training
    from numerics.theorem.evaluators import population_evaluator
    from numerics.theorem.regime import three_phase_regime

    eta_1 = float(cf.eta1_max().mid()) / 2
    eta_2 = _float_upper(cf.eta2_min(epsilon, eta_1) * (1 + arb(ETA2_MARGIN)))
    ev = evaluator or population_evaluator(setting)
    reg = three_phase_regime(setting, float(epsilon), eta_1, eta_2=eta_2, eta_3=1.0, evaluator=ev)
    if reg.T_min is None:
        raise SettingError("the float regime found no positive phase-3 curvature; cannot choose T")
    tr = training.Trainer(ev)
    trajectories = {
        "three_phase": tr.run(training.three_phase(eta_1, eta_2, 1.0, reg.T_min)),
        "output_only": tr.run(training.output_only(1.0, steps)),
        "attention_then_output": tr.run(training.attention_then_output(eta_2, 1.0, steps)),
        "attention_only": tr.run(training.attention_only(eta_2, steps)),
    }
    return Plan(eta_1, eta_2, 1.0, reg.T_min, trajectories)


def _trajectory_above_floor(claim: str, d: int, cf: ArbClosedForms, traj, c: arb) -> Certificate:
    """Every point of an alpha = 0 trajectory has its closed-form risk ball strictly above c(d)."""
    if any(pt.alpha_a != 0.0 or pt.alpha_b != 0.0 for pt in traj.points):
        return Certificate(claim, "trajectory risk > c(d)", d, None, "alpha = 0 at every point", "FAIL",
                           "alpha left 0, so the closed-form quadratic does not apply")
    with ctx.workprec(cf.prec_bits):
        margins = [cf.risk_alpha0(pt.beta_a, pt.beta_b) - c for pt in traj.points]
        worst = min(margins, key=lambda m: float(m.lower()))
        status = both(*(above(m, 0) for m in margins))
    return Certificate(claim, f"min over {len(margins)} points of R - c(d)", d, worst, "> 0", status)


def floor_is_infimum(cf: ArbClosedForms) -> tuple[str, arb]:
    """c(d, p) = inf over symmetric beta of R(0, beta), at the setting's p: the quadratic's Hessian is
    positive definite (H_11 > 0, det H > 0, in arb) and its minimum q0 - b.H^-1 b / 2 overlaps the
    closed form c(d, p).  (The infimum over all of R^d is over symmetric beta by convexity and symmetry:
    theory.proofs.prove_floor_is_infimum.)  Returns the verdict and the ball of the minimum."""
    if cf._coeffs is None:
        cf.risk_alpha0(0, 0)
    co = dict(cf._coeffs)
    zero = arb(0)
    with ctx.workprec(cf.prec_bits):
        h11, h12, h22 = 2 * co.get((2, 0), zero), co.get((1, 1), zero), 2 * co.get((0, 2), zero)
        b1, b2 = -co.get((1, 0), zero), -co.get((0, 1), zero)
        det = h11 * h22 - h12 * h12
        x1 = (h22 * b1 - h12 * b2) / det
        x2 = (h11 * b2 - h12 * b1) / det
        minimum = co.get((0, 0), zero) - (b1 * x1 + b2 * x2) / 2
        c = cf.output_only_floor()
        status = both(above(h11, 0), above(det, 0), "PASS" if minimum.overlaps(c) else "FAIL")
    return status, minimum


def certify_closed_form_items(setting: Setting, epsilon: Fraction, plan: Plan,
                              prec_bits: int = DEFAULT_PREC_BITS) -> list[Certificate]:
    """Every item that the closed forms decide (no series), default length law: see the module docstring."""
    if setting.lengths != "positive":
        raise SettingError("the certificates are stated for the default length law (lengths='positive')")
    d = setting.d
    cf = ArbClosedForms(setting, prec_bits)
    out: list[Certificate] = []
    add = out.append
    tp = "three_phase"
    with ctx.workprec(prec_bits):
        p_star = fmpq(1, d - 1)
        pb = cf.balanced_p()
        add(Certificate(tp, "balancing p", d, pb, f"contains {p_star}", _verdict(pb.contains(p_star))))
        pp = cf.prob_positive()
        add(Certificate(tp, "P(y=+1) at p", d, pp, "contains 1/2", _verdict(pp.contains(fmpq(1, 2)))))
        g0 = cf.zero_gradients()
        add(Certificate(tp, "phase 1: dR/dbeta_a at 0", d, g0["grad_beta_a"], "< 0", below(g0["grad_beta_a"], 0)))
        add(Certificate(tp, "phase 1: dR/dbeta_b at 0", d, g0["grad_beta_b"], "> 0", above(g0["grad_beta_b"], 0)))
        e1max = cf.eta1_max()
        add(Certificate(tp, "eta1_max", d, e1max, f"> eta_1 = {plan.eta_1:g} > 0",
                        both(above(e1max, plan.eta_1), _verdict(plan.eta_1 > 0))))
        g2a, g2b = cf.phase2_gradient(plan.eta_1)
        add(Certificate(tp, "phase 2: dR/dalpha_a at (0, beta1)", d, g2a, "< 0", below(g2a, 0)))
        add(Certificate(tp, "phase 2: dR/dalpha_b at (0, beta1)", d, g2b, "> 0", above(g2b, 0)))
        kap = cf.kappa(plan.eta_1)
        add(Certificate(tp, "kappa(eta_1)", d, kap, "> 0", above(kap, 0)))
        umin = cf.u_min(epsilon)
        log_u = umin.log()
        add(Certificate(tp, "log u_min(epsilon)", d, log_u, "sign decided (<= 0: eta2_min = 0)",
                        decide(log_u > 0 or log_u <= 0, False)))
        e2min = cf.eta2_min(epsilon, plan.eta_1)
        add(Certificate(tp, "eta2_min", d, e2min, f">= 0, <= eta_2 = {plan.eta_2:.6g}",
                        both(decide(e2min >= 0, e2min < 0), decide(e2min <= arb_of(plan.eta_2),
                                                                    e2min > arb_of(plan.eta_2)))))

        oo = "output_only"
        c_bal, c_gen = cf.output_only_floor(balanced=True), cf.output_only_floor()
        add(Certificate(oo, "c(d) (balanced closed form)", d, c_bal, "> 0, overlaps c(d, p)",
                        both(above(c_bal, 0), _verdict(c_bal.overlaps(c_gen)))))
        inf_status, minimum = floor_is_infimum(cf)
        add(Certificate(oo, "min of R(0, beta) (Hessian > 0)", d, minimum, "overlaps c(d, p)", inf_status))
        add(_trajectory_above_floor(oo, d, cf, plan.trajectories["output_only"], c_bal))

        ato = "attention_then_output"
        ga0 = [g0["grad_alpha_a"], g0["grad_alpha_b"]]
        stayed = plan.trajectories["attention_then_output"].points[1]
        exact_zero = all(g.is_exact() and g == 0 for g in ga0) and stayed.alpha_a == stayed.alpha_b == 0.0
        add(Certificate(ato, "dR/dalpha at beta = 0", d, ga0[0], "exactly 0; alpha stays 0", _verdict(exact_zero)))
        add(_trajectory_above_floor(ato, d, cf, plan.trajectories["attention_then_output"], c_bal))

        ao = "attention_only"
        r00 = cf.risk_zero()
        beta_zero = all(pt.beta_a == 0.0 and pt.beta_b == 0.0 for pt in plan.trajectories["attention_only"].points)
        add(Certificate(ao, "R(0,0); beta = 0 at every point", d, r00, "contains 1/2 (f = 0)",
                        _verdict(r00.contains(fmpq(1, 2)) and beta_zero)))
    return out


# ----------------------------------------------------------------------------------------------
# items that need the ball-arithmetic series


def series_tol(epsilon, prec_bits: int) -> float:
    """The omitted-mass target of the arb series for a certificate at ``epsilon``: a thousandth of
    epsilon (so the truncation radius cannot hide the verdict), at most 1e-12, and not below what
    ``prec_bits`` resolves."""
    return max(min(1e-12, float(epsilon) / 1000), 2.0 ** -prec_bits)


def arb_series_evaluator(setting: Setting, prec_bits: int, tol: float = 1e-12):
    """The ball-arithmetic series evaluator at ``prec_bits`` with omitted-mass target ``tol``."""
    from numerics.theorem.series import SeriesEvaluator

    return SeriesEvaluator(setting, context="arb", prec_bits=prec_bits, tol=tol)


def arb_evaluator(setting: Setting, prec_bits: int, tol: float = 1e-12):
    """Balls at ``prec_bits`` by the rule of ``numerics.theorem.evaluators``: the arb series below
    INTEGRAL_FROM_D (omitted mass ``tol``), the integral representation from there on (its cost does
    not grow with d; its tail is bounded at the working precision)."""
    from numerics.theorem.evaluators import choose_method
    from numerics.theorem.integral import IntegralEvaluator

    if choose_method(setting) == "integral":
        return IntegralEvaluator(setting, prec_bits=prec_bits)
    return arb_series_evaluator(setting, prec_bits, tol)


def _is_ball(x) -> bool:
    return isinstance(x, arb)


def phase3_curvature(ev_arb, d: int, alpha_a, alpha_b, prec_bits: int) -> tuple[arb, arb]:
    """Balls of (lambda_min, lambda_max) of S = D^1/2 M D^1/2, from three arb gradient evaluations at alpha^(2).

    The per-coordinate output gradient at (alpha, beta) is D (M beta - m) (theory.symbolic.phase3_series),
    so M's columns are D^-1 (G(e_j) - G(0)); balls of differences contain the exact differences.
    """
    g0 = ev_arb.evaluate_symmetric(alpha_a, alpha_b, 0.0, 0.0).grad_beta
    g1 = ev_arb.evaluate_symmetric(alpha_a, alpha_b, 1.0, 0.0).grad_beta
    g2 = ev_arb.evaluate_symmetric(alpha_a, alpha_b, 0.0, 1.0).grad_beta
    with ctx.workprec(prec_bits):
        scale = [arb(1), arb(d - 1)]  # D^-1
        M = [[(g1[i] - g0[i]) * scale[i], (g2[i] - g0[i]) * scale[i]] for i in range(2)]
        root = arb(d - 1).sqrt()
        s11, s22 = M[0][0], M[1][1] / (d - 1)
        s12 = (M[0][1] + M[1][0]) / (2 * root)  # M is symmetric: the mean of both balls encloses the entry
        root_disc = ((s11 - s22) ** 2 + 4 * s12**2).sqrt()
        return (s11 + s22 - root_disc) / 2, (s11 + s22 + root_disc) / 2


def certify_series_items(setting: Setting, epsilon: Fraction, plan: Plan, cf: ArbClosedForms,
                         ev_arb) -> list[Certificate]:
    """T_min and the three-phase end point, certified with the arb series (UNDECIDED if it gives no balls).

    T_min is certified for exact output gradient descent from the phase-3 start point the float run
    reached: its gap alpha_a - alpha_b >= log u_min (so inf_beta R <= floor + epsilon/2), the curvature
    balls from the arb series, and the excess R(start) - floor.  The end-point item certifies the risk
    of the float run's actual end point, which is the claim as run.
    """
    d = setting.d
    tp = "three_phase"
    final = plan.trajectories["three_phase"].final
    prec = cf.prec_bits
    # the float plan ran from its own (double-rounded) phase-2 point: certify at that very point
    start = plan.trajectories["three_phase"].points[2]
    lam, lam_max = phase3_curvature(ev_arb, d, start.alpha_a, start.alpha_b, prec)
    r0 = ev_arb.evaluate_symmetric(start.alpha_a, start.alpha_b, start.beta_a, start.beta_b).risk
    rT = ev_arb.evaluate_symmetric(final.alpha_a, final.alpha_b, final.beta_a, final.beta_b).risk
    if not (_is_ball(lam) and _is_ball(r0) and _is_ball(rT)):
        note = "series returned non-ball values: nothing is certified"
        return [Certificate(tp, "T_min", d, None, "T >= T_min", "UNDECIDED", note),
                Certificate(tp, "end-point risk", d, None, "< epsilon", "UNDECIDED", note)]
    out = []
    with ctx.workprec(prec):
        floor = cf.risk_floor()
        eps = arb_of(epsilon)
        # inf_beta R(alpha, beta) <= floor + epsilon/2 needs the gap of the point actually reached
        gap = arb_of(start.alpha_a) - arb_of(start.alpha_b)
        log_u = cf.u_min(epsilon).log()
        gap_status = decide(gap >= log_u, gap < log_u)
        # excess contracts by (1 - eta_3 lambda_min)^2 per step when 0 < eta_3 lambda <= 1 for every eigenvalue
        eta3 = arb_of(plan.eta_3)
        curv_status = both(above(lam, 0), decide(lam_max * eta3 <= 1, lam_max * eta3 > 1))
        t_ball, t_need, t_status = lam, None, "UNDECIDED"
        if curv_status == "PASS":
            t_ball = ((r0 - floor) / (eps / 2)).log() / (-2 * (1 - eta3 * lam).log())
            if t_ball.is_finite():
                t_need = max(0, math.ceil(float(t_ball.upper())))
                t_status = "PASS" if plan.T >= t_need else "UNDECIDED"
        elif curv_status == "FAIL":
            t_status = "FAIL"
        status = both(gap_status, t_status)
        note = "" if status == "PASS" else (
            f"gap >= log u_min: {gap_status}; curvature 0 < lambda_min, eta_3 lambda_max <= 1: {curv_status}")
        out.append(Certificate(tp, f"T_min (plan T = {plan.T})", d, t_ball,
                               f"T >= ceil(upper) = {t_need}, gap >= log u_min", status, note))
        end = below(rT, floor + eps)
        out.append(Certificate(tp, "end-point risk", d, rT, f"< floor + epsilon = {float(epsilon):g}", end,
                               FLOAT_PLAN_NOTE if end == "FAIL" else ""))
    return out


# ----------------------------------------------------------------------------------------------


def claim_verdict(items: list[Certificate]) -> str:
    """One verdict per claim: FAIL if an item fails, else UNDECIDED if one is undecided, SKIP if all
    skip, else PASS."""
    statuses = {c.status for c in items}
    if "FAIL" in statuses:
        return "FAIL"
    if "UNDECIDED" in statuses:
        return "UNDECIDED"
    return "SKIP" if statuses == {"SKIP"} else "PASS"


def certify_claims(d: int, epsilon, *, steps: int = 300, prec_bits: int = DEFAULT_PREC_BITS,
                   max_prec_bits: int = MAX_PREC_BITS, series_evaluator=None,
                   lag_crossover: bool = False) -> list[Certificate]:
    """All certificates at one d under the default length law, ordered as the claims table.

    An item left UNDECIDED at ``prec_bits`` is certified again at doubled precision (the arb series'
    omitted mass following it, ``series_tol``) until it is decided or the precision would exceed
    ``max_prec_bits``; each certificate records the precision its verdict was reached at.

    (Under the nonnegative-length variant some items state other facts, e.g. dR/dbeta_b(0) = 0 at its
    balancing p = 1/(d+1); ``prove`` covers the default law only.)

    ``series_evaluator`` is a factory ``(setting, prec_bits, tol) -> evaluator`` of arb balls; by default
    ``arb_evaluator`` (the arb series, or the integral representation from d = INTEGRAL_FROM_D on).  The
    finite-sample claim is statistical and reported as SKIP; the lag claim's item is the certified lag ratio of
    ``numerics.theorem.lag`` (its own precision retry, from ``prec_bits`` up to ``max_prec_bits``).  The
    crossover claim's item (``numerics.theorem.lag.crossover_certificate``: a float search and at least two
    certified trajectories) is certified only with ``lag_crossover``, and SKIP otherwise.
    """
    setting = Setting(d)
    if setting.d < 3:
        raise SettingError(f"--d: the claims are stated for d >= 3, got {d}")
    epsilon = Fraction(epsilon) if not isinstance(epsilon, Fraction) else epsilon
    check_epsilon(float(epsilon))
    prec = prec_bits
    while True:
        items = _certify_at(setting, epsilon, steps, prec, series_evaluator)
        undecided = [i for i, c in enumerate(items) if c.status == "UNDECIDED"]
        if not undecided or 2 * prec > max_prec_bits:
            break
        prec *= 2
    if undecided:
        note = f"undecided at {prec} bits (the retry cap is {max_prec_bits}): raise --prec-bits or --max-prec-bits"
        items = [Certificate(**{**c.__dict__, "note": "; ".join(filter(None, [c.note, note]))})
                 if c.status == "UNDECIDED" else c for c in items]
    by_claim = {c.key: [] for c in CLAIMS}
    for it in items:
        by_claim[it.claim].append(it)
    by_claim["finite_sample"].append(Certificate(
        "finite_sample", "held-out risk with N = ceil(30 d ln d)", d, None, "statistical", "SKIP",
        "a sampling claim: estimated in checks/test_finite_sample.py, not certified"))
    from numerics.theorem.lag import lag_certificate

    by_claim["lag_from_zero"].append(lag_certificate(d, prec_bits=prec_bits, max_prec_bits=max_prec_bits))
    if lag_crossover:
        from numerics.theorem.lag import crossover_certificate

        by_claim["lag_crossover"].append(crossover_certificate(d, prec_bits=prec_bits, max_prec_bits=max_prec_bits))
    else:
        by_claim["lag_crossover"].append(Certificate(
            "lag_crossover", "crossover rho* of the lag ratio", d, None, "certified on request", "SKIP",
            "not requested: occ-companion prove --lag-crossover certifies it"))
    return [it for c in CLAIMS for it in by_claim[c.key]]


def _certify_at(setting: Setting, epsilon: Fraction, steps: int, prec: int, series_evaluator) -> list[Certificate]:
    cf = ArbClosedForms(setting, prec)
    plan = choose_plan(setting, cf, epsilon, steps)
    items = certify_closed_form_items(setting, epsilon, plan, prec)
    ev_arb = (series_evaluator or arb_evaluator)(setting, prec, series_tol(epsilon, prec))
    items += certify_series_items(setting, epsilon, plan, cf, ev_arb)
    return [Certificate(**{**c.__dict__, "prec_bits": prec}) for c in items]
