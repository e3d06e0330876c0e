"""The lag of attention behind the readout under joint GD from zero: exact population trajectories in arb balls.

Joint gradient descent from (alpha, beta) = (0, 0) with step sizes eta_att (attention) and eta_out (readout):
alpha_{t+1} = alpha_t - eta_att grad_alpha R, beta_{t+1} = beta_t - eta_out grad_beta R, on the four numbers
(alpha_a, alpha_b, beta_a, beta_b) that symmetry leaves (per coordinate of R^d, as ``numerics.theorem.training``).
Every state is an arb ball that encloses the exact population trajectory: the gradients are arb enclosures at
ball inputs (the arb series of ``numerics.theorem.series`` below ``INTEGRAL_FROM_D``, whose omitted mass is
added to the radius; the integral representation of ``numerics.theorem.integral`` from there on, whose cost
does not depend on d), and the update is done in ball arithmetic at the same precision.  The radii grow
along the run (each step feeds the previous radius through the gradient), which is why the precision is
a parameter and a comparison the balls cannot decide stays undecided.

The lag measure is the displacement measure of ``numerics.experiments.lag``: with |.| the Euclidean norm in
R^d (so |alpha - alpha_0|^2 = (alpha_a - alpha_0a)^2 + (d - 1)(alpha_b - alpha_0b)^2), r_P(t) =
|P_t - P_0| / |P_T - P_0| over the budget of T steps, and t_half(P) is the first step with r_P >= 1/2,
i.e. 4 |P_t - P_0|^2 >= |P_T - P_0|^2.  ``half_time`` decides each of these comparisons on the balls; the
first step is then known to lie in [low, high].  The lag ratio is t_half(attention) / t_half(readout), and
``LagResult.verdict`` says whether it is > 1: "holds" when every ratio the bounds allow is > 1, "does not hold"
when every one is <= 1, "undecided" otherwise.  The result depends on the budget T (``DEFAULT_STEPS``; a
budget long enough for the unmarked readout weights to travel turns the ratio below 1 at large d, as
docs/lag.md shows), so T is recorded with every result.

The crossover: with eta_out = 1 and eta_att = rho, the ratio falls as rho grows, and ``certify_crossover``
brackets where it crosses 1 on the grid rho = (5/4)^k by two certified runs, one certified > 1 and the next
certified <= 1 (a float search places the bracket; only certified verdicts decide it).  How rho* grows with d is
fitted by ``crossover_fit``, an estimate; ``linear_gap`` is the quantity of its leading-order law.

>>> res = certify_lag(3, steps=12)
>>> (res.attention.low, res.attention.high, res.readout.low, res.readout.high, res.verdict)
(7, 7, 3, 3, 'holds')
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

from theory.setting import Setting
from theory.validation import SettingError, check_int

DEFAULT_STEPS = 50
"""The budget T of joint GD steps over which displacements are normalised (r_P(T) = 1)."""
DEFAULT_ETA = Fraction(1)
"""The shared step size of both blocks (eta_att = eta_out) unless given: the largest step that is stable for
the readout alone (the curvature of the output quadratic in orthonormal coordinates is at most 1)."""
DEFAULT_PREC_BITS = 128
MAX_PREC_BITS = 512
RADIUS_CAP = 2.0 ** -20
"""The widest state ball a trajectory may carry on.  Ball arithmetic overestimates how a step propagates the
radius (each occurrence of a ball in the gradient is widened on its own), and once the attention gap has opened
the radii multiply by about 2^8 a step; a trajectory whose balls pass this width is abandoned for a higher
precision at once, both because its half-time comparisons would no longer be decided and because arb's
integrals over wide balls subdivide at length before they give up."""
INTEGRAL_FROM_D = 20
"""From this d on the gradients come from the integral representation (three arb integrals a step, the same
cost at every d); below it from the arb series, whose radii grow more slowly there along a run."""
SERIES_TOL = 1e-30
"""Omitted probability mass of the arb series (added to every gradient's radius at every step)."""
GRID = (3, 4, 5, 7, 20, 50, 100, 200, 500, 1000)
"""The d at which docs/lag.md certifies the lag ratio."""


class PrecisionLost(SettingError):
    """The balls of a trajectory grew wider than ``RADIUS_CAP``: the run needs a higher precision."""


def _ball(x):
    from flint import arb, fmpq

    if isinstance(x, arb):
        return x
    x = Fraction(x)
    return arb(fmpq(x.numerator, x.denominator))


def evaluator(setting: Setting, prec_bits: int):
    """The arb evaluator of the gradients at ``setting``: the series below ``INTEGRAL_FROM_D``, the integral from it."""
    if setting.d >= INTEGRAL_FROM_D:
        from numerics.theorem.integral import IntegralEvaluator

        return IntegralEvaluator(setting, prec_bits=prec_bits)
    from numerics.theorem.series import SeriesEvaluator

    return SeriesEvaluator(setting, context="arb", prec_bits=prec_bits, tol=SERIES_TOL)


@dataclass(frozen=True)
class BallTrajectory:
    """The states (alpha_a, alpha_b, beta_a, beta_b) of joint GD at steps 0..T as arb balls."""

    d: int
    eta_att: Fraction
    eta_out: Fraction
    steps: int
    prec_bits: int
    method: str  # "series" or "integral"
    states: tuple

    def squared_displacement(self, block: str, t: int):
        """|P_t - P_0|^2 in R^d for P = "attention" or "readout" (a ball)."""
        i = {"attention": 0, "readout": 2}[block]
        s, s0 = self.states[t], self.states[0]
        from flint import ctx

        with ctx.workprec(self.prec_bits):
            da, db = s[i] - s0[i], s[i + 1] - s0[i + 1]
            return da * da + (self.d - 1) * db * db


def ball_trajectory(d: int, *, eta_att=DEFAULT_ETA, eta_out=DEFAULT_ETA, steps: int = DEFAULT_STEPS,
                    beta0=(0, 0), prec_bits: int = DEFAULT_PREC_BITS) -> BallTrajectory:
    """Joint GD from alpha = 0 and beta = ``beta0`` (the zero start by default) for ``steps`` steps, in balls."""
    from flint import ctx

    setting = Setting(d)
    steps = check_int("steps", steps, 1)
    prec_bits = check_int("prec_bits", prec_bits, 53)
    eta_att, eta_out = Fraction(eta_att), Fraction(eta_out)
    if eta_att <= 0 or eta_out <= 0:
        raise SettingError(f"the step sizes must be > 0, got eta_att={eta_att}, eta_out={eta_out}")
    ev = evaluator(setting, prec_bits)
    with ctx.workprec(prec_bits):
        ea, eo = _ball(eta_att), _ball(eta_out)
        state = (_ball(0), _ball(0), _ball(beta0[0]), _ball(beta0[1]))
    states = [state]
    for _ in range(steps):
        g = ev.evaluate_symmetric(*state)
        with ctx.workprec(prec_bits):
            state = (state[0] - ea * g.grad_alpha[0], state[1] - ea * g.grad_alpha[1],
                     state[2] - eo * g.grad_beta[0], state[3] - eo * g.grad_beta[1])
        if not all(x.is_finite() and x.rad() <= RADIUS_CAP for x in state):
            raise PrecisionLost(f"the balls of joint GD at d = {d} grew wider than {RADIUS_CAP:g} at step "
                                f"{len(states)} at {prec_bits} bits: raise prec_bits")
        states.append(state)
    method = "integral" if d >= INTEGRAL_FROM_D else "series"
    return BallTrajectory(d, eta_att, eta_out, steps, prec_bits, method, tuple(states))


@dataclass(frozen=True)
class HalfTime:
    """Where the first step with r_P >= 1/2 lies: in [low, high] (decided when they are equal).

    ``low`` is the first step whose comparison 4 |P_t - P_0|^2 >= |P_T - P_0|^2 is not decided false; ``high``
    the first step where it is decided true (None if none is, which the balls leave possible only when
    |P_T - P_0| is not decided > 0)."""

    low: int
    high: int | None

    @property
    def decided(self) -> bool:
        return self.high is not None and self.low == self.high


def half_time(traj: BallTrajectory, block: str) -> HalfTime:
    """t_half of ``block`` ("attention" or "readout") over the budget of ``traj``, decided on the balls."""
    from flint import ctx

    end = traj.squared_displacement(block, traj.steps)
    low = high = None
    with ctx.workprec(traj.prec_bits):
        for t in range(traj.steps + 1):
            diff = 4 * traj.squared_displacement(block, t) - end
            if low is None and not diff < 0:
                low = t
            if diff >= 0 and end > 0:
                high = t
                break
    return HalfTime(low if low is not None else traj.steps, high)


@dataclass(frozen=True)
class LagResult:
    """The lag ratio t_half(attention) / t_half(readout) of joint GD from zero at one d, with what decided it."""

    d: int
    eta_att: Fraction
    eta_out: Fraction
    steps: int
    prec_bits: int
    method: str
    attention: HalfTime
    readout: HalfTime
    evaluations: int  # gradient evaluations (one per step)
    cpu_seconds: float

    @property
    def ratio_bounds(self) -> tuple[Fraction, Fraction | None]:
        """The smallest and the largest lag ratio the half-time bounds allow (None: unbounded)."""
        att, out = self.attention, self.readout
        lo = Fraction(att.low, out.high) if out.high else Fraction(0)
        hi = Fraction(att.high, out.low) if att.high is not None and out.low > 0 else None
        return lo, hi

    @property
    def verdict(self) -> str:
        """"holds" (ratio > 1 for every value the bounds allow), "does not hold" (<= 1 for every one), or
        "undecided"."""
        att, out = self.attention, self.readout
        if out.high is not None and att.low > out.high:
            return "holds"
        if att.high is not None and att.high <= out.low:
            return "does not hold"
        return "undecided"


def certify_lag(d: int, *, eta_att=DEFAULT_ETA, eta_out=DEFAULT_ETA, steps: int = DEFAULT_STEPS,
                prec_bits: int = DEFAULT_PREC_BITS, max_prec_bits: int = MAX_PREC_BITS) -> LagResult:
    """The lag ratio at d over a budget of ``steps`` joint GD steps from zero, certified in balls; an undecided
    verdict (or balls wider than ``RADIUS_CAP``) is computed again at doubled precision up to ``max_prec_bits``."""
    start = time.process_time()
    prec = prec_bits
    while True:
        try:
            traj = ball_trajectory(d, eta_att=eta_att, eta_out=eta_out, steps=steps, prec_bits=prec)
            res = LagResult(d, traj.eta_att, traj.eta_out, steps, prec, traj.method, half_time(traj, "attention"),
                            half_time(traj, "readout"), steps, 0.0)
        except PrecisionLost:
            if 2 * prec > max_prec_bits:
                raise
            prec *= 2
            continue
        if res.verdict != "undecided" or 2 * prec > max_prec_bits:
            break
        prec *= 2
    return LagResult(**{**res.__dict__, "cpu_seconds": time.process_time() - start})


def float_lag(d: int, *, eta_att: float = 1.0, eta_out: float = 1.0, steps: int = DEFAULT_STEPS) -> tuple[int, int]:
    """(t_half(attention), t_half(readout)) of joint GD from zero by the float evaluator of
    ``numerics.theorem.evaluators`` (an estimate, not certified: its comparisons are not checked against the
    evaluator's error)."""
    from numerics.theorem.evaluators import population_evaluator

    ev = population_evaluator(Setting(d))
    aa = ab = ba = bb = 0.0
    att, out = [0.0], [0.0]
    for _ in range(check_int("steps", steps, 1)):
        g = ev.evaluate_symmetric(aa, ab, ba, bb)
        ga, gb = [float(x) for x in g.grad_alpha], [float(x) for x in g.grad_beta]
        aa, ab, ba, bb = aa - eta_att * ga[0], ab - eta_att * ga[1], ba - eta_out * gb[0], bb - eta_out * gb[1]
        att.append(math.hypot(aa, math.sqrt(d - 1) * ab))
        out.append(math.hypot(ba, math.sqrt(d - 1) * bb))
    return (next(t for t, v in enumerate(att) if 2 * v >= att[-1]), next(t for t, v in enumerate(out) if 2 * v >= out[-1]))


def lag_certificate(d: int, *, prec_bits: int = DEFAULT_PREC_BITS, max_prec_bits: int = MAX_PREC_BITS):
    """The item of the claim ``lag_from_zero`` at d for ``occ-companion prove``: PASS when the lag ratio over the
    default budget and shared step is certified > 1, FAIL when certified <= 1, UNDECIDED otherwise; the ball
    spans the ratios the half-time bounds allow (None when they leave it unbounded)."""
    from flint import arb, ctx, fmpq

    from numerics.theorem.certify import Certificate

    res = certify_lag(d, prec_bits=prec_bits, max_prec_bits=max_prec_bits)
    lo, hi = res.ratio_bounds
    ball = None
    if hi is not None:
        with ctx.workprec(res.prec_bits):
            a, b = arb(fmpq(lo.numerator, lo.denominator)), arb(fmpq(hi.numerator, hi.denominator))
            ball = a.union(b)
    status = {"holds": "PASS", "does not hold": "FAIL", "undecided": "UNDECIDED"}[res.verdict]
    att, out = res.attention, res.readout
    note = (f"t_half(attention) in [{att.low}, {att.high}], t_half(readout) in [{out.low}, {out.high}] "
            f"({res.method}, eta = {res.eta_out}, T = {res.steps})")
    return Certificate("lag_from_zero", f"lag ratio over T = {res.steps} joint GD steps", d, ball,
                       "t_half ratio > 1", status, note, res.prec_bits)


CROSSOVER_FACTOR = Fraction(5, 4)
"""The ratio of neighbouring points of the log grid rho = factor^k on which the crossover is bracketed: the
bracket [rho_low, rho_high] has rho_high / rho_low = factor."""
CROSSOVER_MAX_K = 64
"""The largest grid exponent searched (rho up to (5/4)^64, about 1.6e6)."""
CROSSOVER_MAX_PREC_BITS = 2048
"""The precision cap of the crossover's certified runs: past the crossover the attention gap opens within the
budget and the balls lose about 8 bits a step (``RADIUS_CAP``)."""
CROSSOVER_FIT_FROM_D = 200
"""The smallest d of the power-law fit of rho*(d): from it on the linear gap at the crossover (``linear_gap``)
is close to its large-d value, while at smaller d the readout's own saturation within the budget still moves
the crossover, so the law is not yet a power there (docs/lag.md shows both)."""


def gap_rate(d: int) -> float:
    """kappa_1(d) = ((d - 2) - ln(d - 1)) / (d (d - 1) (d - 2)) at the balancing p: the gap alpha_a - alpha_b
    opens by eta_att eta_out kappa_1 at step 2, and by binomial(t, 2) eta_att eta_out kappa_1 after t small steps
    (``theory.symbolic.joint_gap_rate_balanced``)."""
    d = check_int("d", d, 3)
    return ((d - 2) - math.log(d - 1)) / (d * (d - 1) * (d - 2))


def linear_gap(d: int, rho, steps: int = DEFAULT_STEPS) -> float:
    """The gap the small-step law predicts at the end of the budget with eta_att = rho, eta_out = 1:
    G = binomial(T, 2) rho kappa_1(d).  While G is small both blocks move along fixed directions and the ratio
    is near sqrt(2) whatever rho is; the crossover needs G of order 1 (the attention saturating)."""
    return math.comb(steps, 2) * float(rho) * gap_rate(d)


def float_above_one(d: int, rho, *, steps: int = DEFAULT_STEPS) -> bool:
    """Whether the float estimate of the lag ratio at eta_att = rho, eta_out = 1 is > 1 (not certified)."""
    att, out = float_lag(d, eta_att=float(rho), eta_out=1.0, steps=steps)
    return att > out


def locate_crossover(d: int, *, factor: Fraction = CROSSOVER_FACTOR, steps: int = DEFAULT_STEPS,
                     max_k: int = CROSSOVER_MAX_K) -> tuple[int, int] | None:
    """Grid exponents (k, k + 1) with the float ratio > 1 at rho = factor^k and <= 1 at factor^(k + 1), by an
    exponential search from k = 0 and a bisection (a crossing, the first only when the ratio is monotone in
    rho); None when the float ratio is not > 1 at rho = 1 or stays > 1 up to ``max_k``."""
    return _locate(d, factor, steps, max_k)[0]


def _locate(d: int, factor: Fraction, steps: int, max_k: int) -> tuple[tuple[int, int] | None, int]:
    """``locate_crossover`` and the number of float trajectories it ran."""
    runs = 0

    def above(k: int) -> bool:
        nonlocal runs
        runs += 1
        return float_above_one(d, factor ** k, steps=steps)

    if not above(0):
        return None, runs
    lo, span, hi = 0, 1, None
    while hi is None:
        k = min(lo + span, max_k)
        if above(k):
            if k == max_k:
                return None, runs
            lo, span = k, 2 * span
        else:
            hi = k
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return (lo, hi), runs


@dataclass(frozen=True)
class Crossover:
    """The crossover rho* of the lag ratio in rho = eta_att / eta_out (eta_out = 1) at one d, bracketed on the
    grid rho = factor^k by certified lag ratios: ``low`` (at factor^k_low) and ``high`` (at factor^k_high).

    ``status``: "PASS" when the ratio is certified > 1 at rho_low and <= 1 at rho_high = factor rho_low, so it
    crosses 1 in between; "UNDECIDED" when a certified run the bracket needs stays undecided (or its balls
    outgrow the precision cap); "FAIL" when no crossing is found up to factor^max_k or the ratio at rho = 1 is
    certified not above 1."""

    d: int
    factor: Fraction
    steps: int
    k_low: int | None
    k_high: int | None
    low: LagResult | None
    high: LagResult | None
    status: str
    certified_runs: int
    float_runs: int
    cpu_seconds: float

    @property
    def bracket(self) -> tuple[Fraction, Fraction] | None:
        """(rho_low, rho_high), exact rationals, when the status is PASS."""
        if self.status != "PASS":
            return None
        return self.factor ** self.k_low, self.factor ** self.k_high

    @property
    def prec_bits(self) -> int:
        """The highest precision a certified run of the bracket needed."""
        return max((r.prec_bits for r in (self.low, self.high) if r is not None), default=DEFAULT_PREC_BITS)


def certify_crossover(d: int, *, factor: Fraction = CROSSOVER_FACTOR, steps: int = DEFAULT_STEPS,
                      prec_bits: int = DEFAULT_PREC_BITS, max_prec_bits: int = CROSSOVER_MAX_PREC_BITS,
                      max_k: int = CROSSOVER_MAX_K) -> Crossover:
    """The crossover at d bracketed by certified ratios on the grid rho = factor^k.

    The float trajectory locates a bracket (``locate_crossover``: about 2 log2(k) float runs); only its two ends
    are certified in balls.  Should a certified verdict disagree with the float one, the bracket is widened on
    that side by doubling spans and bisected again on certified verdicts alone, so the result rests only on
    certified runs whatever the float runs said."""
    start = time.process_time()
    factor = Fraction(factor)
    if factor <= 1:
        raise SettingError(f"the grid factor must be > 1, got {factor}")
    runs: dict[int, LagResult | None] = {}

    def run(k: int) -> LagResult | None:
        if k not in runs:
            try:
                runs[k] = certify_lag(d, eta_att=factor ** k, eta_out=1, steps=steps, prec_bits=prec_bits,
                                      max_prec_bits=max_prec_bits)
            except PrecisionLost:
                runs[k] = None
        return runs[k]

    def verdict(k: int) -> str:
        res = run(k)
        return "undecided" if res is None else res.verdict

    def result(lo, hi, status) -> Crossover:
        return Crossover(d, factor, steps, lo, hi, runs.get(lo) if lo is not None else None,
                         runs.get(hi) if hi is not None else None, status, len(runs), floats,
                         time.process_time() - start)

    located, floats = _locate(d, factor, steps, max_k)
    lo, hi = located if located is not None else (0, max_k)
    span = 1
    while (v := verdict(lo)) != "holds":  # walk the lower end down until the ratio is certified > 1
        if v == "undecided":
            return result(lo, None, "UNDECIDED")
        if lo == 0:
            return result(None, None, "FAIL")
        hi, lo, span = lo, max(0, lo - span), 2 * span
    span = 1
    while (v := verdict(hi)) != "does not hold":  # and the upper end up until it is certified <= 1
        if v == "undecided":
            return result(lo, hi, "UNDECIDED")
        if hi == max_k:
            return result(None, None, "FAIL")
        lo, hi, span = hi, min(max_k, hi + span), 2 * span
    while hi - lo > 1:
        mid = (lo + hi) // 2
        v = verdict(mid)
        if v == "undecided":
            return result(lo, hi, "UNDECIDED")
        lo, hi = (mid, hi) if v == "holds" else (lo, mid)
    return result(lo, hi, "PASS")


def crossover_fit(points: dict[int, tuple[float, float]], *, from_d: int = CROSSOVER_FIT_FROM_D,
                  steps: int = DEFAULT_STEPS) -> dict[str, float]:
    """An ESTIMATE of the growth of rho*(d), not certified: least squares of ln rho_mid = ln C + a ln d over the
    d >= ``from_d`` of ``points`` ({d: (rho_low, rho_high)}, rho_mid their geometric mean), and the linear gap
    G* = binomial(T, 2) rho_mid kappa_1(d) at the largest d (``linear_gap``), the constant of the leading-order
    law rho* ~ G* / (binomial(T, 2) kappa_1(d)) ~ 2 G* d^2 / T^2."""
    pts = sorted((d, math.sqrt(lo * hi)) for d, (lo, hi) in points.items() if d >= from_d)
    if len(pts) < 2:
        raise SettingError(f"the fit needs two d >= {from_d}, got {[d for d, _ in pts]}")
    xs, ys = [math.log(d) for d, _ in pts], [math.log(r) for _, r in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    resid = max(abs(y - (my + slope * (x - mx))) for x, y in zip(xs, ys))
    d_last, r_last = pts[-1]
    return {"exponent": slope, "constant": math.exp(my - slope * mx), "max_log_residual": resid,
            "from_d": float(pts[0][0]), "to_d": float(d_last), "gap_at_largest_d": linear_gap(d_last, r_last, steps)}


def crossover_certificate(d: int, *, prec_bits: int = DEFAULT_PREC_BITS, max_prec_bits: int = CROSSOVER_MAX_PREC_BITS):
    """The item of the claim ``lag_crossover`` at d for ``occ-companion prove``: PASS when the ratio is certified
    > 1 at rho_low and <= 1 at rho_high = (5/4) rho_low (the ball spans [rho_low, rho_high]), FAIL when no
    crossing is found, UNDECIDED when a needed run stays undecided."""
    from flint import arb, ctx, fmpq

    from numerics.theorem.certify import Certificate

    res = certify_crossover(d, prec_bits=prec_bits, max_prec_bits=max_prec_bits)
    ball, note = None, "no crossing certified up to rho = (5/4)^%d" % CROSSOVER_MAX_K
    if res.bracket is not None:
        lo, hi = res.bracket
        with ctx.workprec(res.prec_bits):
            ball = arb(fmpq(lo.numerator, lo.denominator)).union(arb(fmpq(hi.numerator, hi.denominator)))
    if res.low is not None or res.high is not None:
        parts = []
        for k, r in ((res.k_low, res.low), (res.k_high, res.high)):
            if r is not None:
                parts.append(f"rho = (5/4)^{k}: t_half {_span(r.attention)} vs {_span(r.readout)}, {r.verdict} "
                             f"({r.prec_bits} bits)")
        method = res.low.method if res.low else res.high.method
        note = "; ".join(parts) + (f" ({method}, T = {res.steps}; {res.certified_runs} certified and {res.float_runs} "
                                   f"float trajectories, {res.cpu_seconds:.1f} CPU s)")
    return Certificate("lag_crossover", f"crossover rho* of the lag ratio over T = {res.steps} steps", d, ball,
                       "ratio > 1 at rho_low, <= 1 at rho_high = 5/4 rho_low", res.status, note, res.prec_bits)


def _span(h: HalfTime) -> str:
    return str(h.low) if h.decided else f"[{h.low}, {h.high}]"
