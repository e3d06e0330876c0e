"""The squared-loss risk and gradient at symmetric parameters as three one-dimensional integrals.

At parameters symmetric in the d - 1 unmarked symbols everything depends on the marked count c and
the unmarked count r of a string.  Write pi = 1/d, q = 1 - p, x = q (1 - pi), u = e^(alpha_a - alpha_b)
and Delta = beta_a - beta_b.  Under the length law P(n) = p q^(n - lo) (lo = 1, or 0 in the variant)

    P(c, r) = pref (q pi)^c x^r C(c + r, c),      pref = p / q^lo.

The attention weight on the marked class is w = c u / (r + c u), so on a string with c >= 1 (label +1)
f - y = B + c u Delta / (r + c u) with B = beta_b - 1, and each quantity the risk and gradient need is a
polynomial in 1 / (r + c u) of degree at most 3 (partial fractions in r; tests/theorem/test_integral.py checks
them with SymPy).  The three sums that remain are turned into integrals with

    1 / (r + a)^(k+1) = (1/k!) int_0^inf v^k e^(-(r + a) v) dv,

after which the sums over r and over c are elementary: sum_r C(c + r, c) (x e^-v)^r = (1 - x e^-v)^-(c+1)
and sum_{c>=1} c^j z^c = Li_{-j}(z), a rational function.  With z(v) = q pi e^(-u v) / (1 - x e^-v):

    J_{j,k} = sum_{c>=1, r>=0} (q pi)^c x^r C(c + r, c) c^j / (r + c u)^(k+1)
            = int_0^inf (v^k / k!) Li_{-j}(z(v)) / (1 - x e^-v) dv,

and the risk and the class gradients are combinations of J_{1,0}, J_{2,1}, J_{3,2} and of the closed
forms sum_{c>=1} (q pi)^c (1-x)^-(c+1) = X / ((1-x)(1-X)) (X = q pi / (1-x), the c >= 1 strings) and
sum_{r>=1} x^r = x / (1-x) (the strings without the marked symbol).  See docs/integral.md.

The integrals are computed by arb's rigorous integration (``acb.integral``; the integrand is
meromorphic, so a ball that meets a pole comes back non-finite and is subdivided), over [0, V] with
the tail beyond V bounded in closed form (Li_{-j}(z) <= Li_{-j}(X) e^(-u v) and 1/(1 - x e^-v) <=
1/(1 - x)) and added to the radius: every value is an enclosure, **certified** like the arb series.
The cost does not depend on d (the same at d = 50 and at d = 10^6); the series of
``numerics.theorem.series`` stays the reference, and the two are compared in tests/theorem/test_integral.py.  With
``taylor_order``, calls near an earlier one are answered from a certified Taylor model in u
(``TaylorModel``; docs/integral.md).

Scope: squared loss, p < 1, parameters symmetric in the unmarked symbols (two classes).  Other
settings go through ``numerics.theorem.series``.

>>> from theory.setting import Setting
>>> result = IntegralEvaluator(Setting(50)).evaluate_symmetric(2.3, -0.1, 1.5, -0.9)
>>> result.certified, result.risk_bound < 1e-30, float(result.risk)
(True, True, 0.415960937055844)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from theory.setting import Setting
from theory.validation import SettingError, check_int, check_vector

from numerics.contexts import ArbContext
from numerics.theorem.series import Evaluation, Number, QuadraticMoments, _group

GUARD_BITS = 32
"""Guard bits above the requested digits."""
MAX_GAP = 700.0
"""Largest |alpha_a - alpha_b| taken (beyond it the marked class has all or none of the attention to
hundreds of digits; the series covers any gap)."""
J_INDICES = ((1, 0), (2, 1), (3, 2))
"""The (j, k) of the three integrals J_{j,k}; the quadratic moments need the first two."""


def eulerian(n: int) -> list[int]:
    """The Eulerian numbers A(n, 0..n-1) (n >= 1): sum_{c>=1} c^n z^c = z sum_m A(n, m) z^m / (1 - z)^(n+1).

    >>> eulerian(3), eulerian(4)
    ([1, 4, 1], [1, 11, 11, 1])
    """
    row = [1]
    for m in range(2, n + 1):  # A(m, i) = (i + 1) A(m-1, i) + (m - i) A(m-1, i-1)
        row = [(i + 1) * (row[i] if i < len(row) else 0) + (m - i) * (row[i - 1] if i >= 1 else 0)
               for i in range(m)]
    return row


def li_neg(j: int, z):
    """Li_{-j}(z) = sum_{c>=1} c^j z^c for j >= 0 (|z| < 1), as a rational function of z (j = 0..3 written
    out; from j = 4 on, z times the Eulerian polynomial of order j over (1 - z)^(j+1))."""
    if j == 0:
        return z / (1 - z)
    if j == 1:
        return z / (1 - z) ** 2
    if j == 2:
        return z * (1 + z) / (1 - z) ** 3
    if j == 3:
        return z * (1 + 4 * z + z * z) / (1 - z) ** 4
    if j > 3:
        poly = 0
        for a in reversed(eulerian(j)):  # Horner
            poly = poly * z + a
        return z * poly / (1 - z) ** (j + 1)
    raise ValueError(f"li_neg is written for j >= 0, got {j}")


def integrand(j: int, k: int, u, qpi, x):
    """The integrand of J_{j,k}: v -> (v^k / k!) Li_{-j}(z(v)) / (1 - x e^-v), z(v) = q pi e^(-u v) / (1 - x e^-v),
    in the form ``acb.integral`` calls (exp, powers and rational operations only: meromorphic).

    ``li_neg``'s rational functions are written out here with 1 - z taken once, and the factor v^k / k!
    as products (k! = 1 or 2, an exact halving): acb.integral calls this some 900 times per integral,
    and the calls are most of an evaluation's time (15 % less than through ``li_neg``; the same enclosures up to
    rounding in the last bits of the balls)."""
    if j < 1 or k < 0:
        raise ValueError(f"integrand is written for j >= 1 and k >= 0, got j = {j}, k = {k}")
    minus_u = -u
    if j > 3 or k > 2:  # the Taylor models' higher integrals (``TaylorModel``): through li_neg
        kfact = math.factorial(k)

        def general(v, _analytic):
            den = 1 - x * (-v).exp()
            return v ** k * li_neg(j, qpi * (minus_u * v).exp() / den) / den / kfact

        return general

    def f(v, _analytic):
        den = 1 - x * (-v).exp()
        z = qpi * (minus_u * v).exp() / den
        w = 1 - z
        if j == 1:
            r = z / (w * w)
        elif j == 2:
            r = z * (1 + z) / (w * w * w)
        else:
            w2 = w * w
            r = z * (1 + z * (4 + z)) / (w2 * w2)
        r = r / den
        if k == 0:
            return r
        return r * v if k == 1 else r * (v * v) / 2

    return f


def tail_bound(j: int, k: int, u, x, X, V):
    """An upper bound (ball) of the integral of J_{j,k}'s integrand over [V, inf):
    Li_{-j}(z) <= Li_{-j}(X) e^(-u v) (Li_{-j}(z)/z increases in z, and z <= X e^(-u v)) and
    1/(1 - x e^-v) <= 1/(1 - x), so the integrand is at most K v^k e^(-u v), K = Li_{-j}(X) / ((1-x) k!),
    and int_V^inf v^k e^(-u v) dv = e^(-u V) sum_i k!/i! V^i / u^(k+1-i)."""
    K = li_neg(j, X) / (1 - x) / math.factorial(k)
    return K * (-u * V).exp() * sum(math.factorial(k) // math.factorial(i) * V ** i / u ** (k + 1 - i)
                                    for i in range(k + 1))


def cut_off(j: int, k: int, u, x, X, target):
    """An integer V >= 1 (exact ball) with ``tail_bound`` below ``target``: first guess from the decay
    e^(-u V), then doubled until the bound holds (computed in arb: no float overflow for small u)."""
    from flint import arb

    K = li_neg(j, X) / (1 - x) / math.factorial(k)
    guess = ((K.max(arb(1)) / target).log() + 10) / u
    V = arb(guess.max(arb(1)).mid()).ceil()
    while not tail_bound(j, k, u, x, X, V).upper() <= target:
        V = 2 * V
    return V


class TaylorModel:
    """J_{1,0}, J_{2,1}, J_{3,2} near a centre u0 as certified Taylor polynomials in u.

    Differentiating under the integral (z' = -v z and z Li_{-j}'(z) = Li_{-j-1}(z)) gives
    d/du J_{j,k} = -(k+1) J_{j+1,k+1}, so with J_m = J_{m+1,m}

        J_m(u) = sum_{n=0..N} (u0 - u)^n C(m+n, n) J_{m+n}(u0) + R,
        |R| <= |u - u0|^(N+1) C(m+N+1, N+1) J_{m+N+1}(u0 - r)    for |u - u0| <= r:

    the Lagrange remainder, bounded with J_{m+N+1} at the low end of the interval because every J_{j,k}
    decreases in u: it is a sum of positive terms (q pi)^c x^r C(c + r, c) c^j / (r + c u)^(k+1), c >= 1.  Each
    J_i(u0) and J_i(u0 - r) is an enclosing ball (``IntegralEvaluator._integral``), so every value is an
    enclosure.  The radius r = u0 2^-ceil((prec + 10) / (N + 1)) keeps the remainder near the working
    precision.  Building a model costs N + 6 - count integrals besides the ``count`` (2 or 3) just computed at
    its centre."""

    def __init__(self, u0, r, order: int, centre: list, low_end: list):
        self.u0, self.r, self.order = u0, r, order
        self.centre = centre    # J_i(u0), i = 0..N+2
        self.low_end = low_end  # upper bounds of J_i(u0 - r), i = N+1..N+3

    @staticmethod
    def radius(u, order: int, prec: int):
        """The model radius around u (an exact ball)."""
        from flint import arb

        return arb(u.mid()) * arb(2) ** -math.ceil((prec + 10) / (order + 1))

    @classmethod
    def build(cls, ev: IntegralEvaluator, u, qpi, x, X, prec: int, order: int, known: list, r=None) -> TaylorModel:
        """The model around u's midpoint; ``known`` holds balls that enclose J_0, J_1, ... at u (and so at
        its midpoint); ``r`` (an exact ball below u) replaces ``radius`` (the tests widen it)."""
        from flint import arb

        u0 = arb(u.mid())
        r = cls.radius(u, order, prec) if r is None else r
        centre = list(known) + [ev._integral(i + 1, i, u0, qpi, x, X, prec) for i in range(len(known), order + 3)]
        low = u0 - r
        low_end = [arb(ev._integral(i + 1, i, low, qpi, x, X, prec).upper()) for i in range(order + 1, order + 4)]
        return cls(u0, r, order, centre, low_end)

    def covers(self, u) -> bool:
        return bool((u - self.u0).abs_upper() <= self.r)

    def values(self, u, count: int) -> list:
        """[J_0(u), ..., J_{count-1}(u)] as balls (u inside the model)."""
        from flint import arb

        if not self.covers(u):
            raise ValueError("a Taylor model answers only for u within its radius of its centre")
        N = self.order
        t = self.u0 - u
        size = arb(t.abs_upper())
        out = []
        for m in range(count):
            value, power = arb(0), arb(1)
            for n in range(N + 1):
                value += power * math.comb(m + n, n) * self.centre[m + n]
                power *= t
            rest = size ** (N + 1) * math.comb(m + N + 1, N + 1) * self.low_end[m]
            out.append(value + arb(0, rest.upper()))
        return out


class IntegralEvaluator:
    """Risk and gradient at symmetric parameters from three integrals (arb; cost independent of d).

    The interface of ``SeriesEvaluator`` for what the training plans and the regime use:
    ``evaluate_symmetric``, ``evaluate`` (parameters symmetric in the unmarked symbols) and
    ``quadratic_moments``; every value is an arb ball that encloses the exact population value.

    Parameters
    ----------
    setting : the Setting; squared loss and p < 1 only.
    dps : digits of the result: the working precision is dps digits plus ``GUARD_BITS``.
    prec_bits : the working precision instead of the one dps gives.
    tail_bits : the integrals stop at the V where the bounded tail drops below 2^-tail_bits (scaled
        by u^-(k+1) when u > 1); default the working precision.  A smaller value only widens the
        balls (the tail is part of the radius); the tests use it to check the tail bound.
    taylor_order : None (default) computes the three integrals at every call.  An order N >= 1 lets
        the evaluator answer calls whose u = e^(alpha_a - alpha_b) lies near an earlier one from a
        certified Taylor model in u (``TaylorModel``), built once two calls computed in a row (calls the
        model answers do not count) are close but at different u: what a run of small attention steps
        asks for (the joint plan at d = 10^6 moves the gap by 4e-8 in 300 steps).  The values are
        enclosures either way; only their radii differ.
    """

    context = "arb"

    def __init__(self, setting: Setting, *, dps: int = 30, prec_bits: int | None = None,
                 tail_bits: int | None = None, taylor_order: int | None = None):
        if setting.loss != "squared":
            raise SettingError(f"the integral representation is derived for the squared loss, the setting "
                               f"has loss={setting.loss!r}; use numerics.theorem.series.SeriesEvaluator")
        from numerics.theorem.closed_forms import require_geometric

        require_geometric(setting, "the integral representation is")
        p = setting.p_value
        if p == 1:
            raise SettingError("the integral representation needs p < 1 (at p = 1 every string has length "
                               "1); use numerics.theorem.series.SeriesEvaluator")
        self.setting = setting
        self.dps = check_int("dps", dps, 15)
        self.prec_bits = (math.ceil(self.dps * math.log2(10)) + GUARD_BITS if prec_bits is None
                          else check_int("prec_bits", prec_bits, 53))
        self.tail_bits = None if tail_bits is None else check_int("tail_bits", tail_bits, 1)
        self.taylor_order = None if taylor_order is None else check_int("taylor_order", taylor_order, 1)
        self._p = Fraction(p)  # a float p is a dyadic rational: entered exactly
        self._model: TaylorModel | None = None  # the latest Taylor model (taylor_order set)
        self._last_u = None                     # u of the latest call computed directly
        self.integrals_computed = 0             # integrals evaluated by acb.integral (models' included)

    # ------------------------------------------------------------------------------------------
    def _constants(self, ctx):
        """The law's constants as balls: pref, q pi, x, X, and the masses P(c >= 1), P(c = 0, n >= 1)
        and P(n = 0)."""
        p, d, lo = self._p, self.setting.d, self.setting.law.start
        q = 1 - p
        pref = ctx.number(p / q ** lo)
        qpi = ctx.number(q / d)
        x = ctx.number(q * (d - 1) / d)
        X = qpi / (1 - x)
        marked = pref * X / ((1 - x) * (1 - X))  # sum over c >= 1, r >= 0 of P(c, r)
        unmarked = pref * x / (1 - x)             # c = 0, r >= 1
        empty = ctx.number(p if lo == 0 else 0)
        return pref, qpi, x, X, (marked, unmarked, empty)

    def _integral(self, j: int, k: int, u, qpi, x, X, prec: int):
        """J_{j,k}(u) as a ball: the integral over [0, V] plus the bounded tail.

        J_{j,k} is of order u^-(k+1) for u > 1 and is multiplied by u^(k+1) afterwards, so both the
        tail and the integration's absolute tolerance are 2^-bits u^-(k+1): relative accuracy is what
        arb's floating balls give at any magnitude, so no extra working precision is needed."""
        from flint import acb, arb

        self.integrals_computed += 1
        scale = (u.max(arb(1))) ** -(k + 1)
        target = (arb(2) ** -(self.tail_bits or prec)) * scale
        V = cut_off(j, k, u, x, X, target)
        # the integration tolerance follows the working precision even when tail_bits cuts the range
        # short, so that the radius of a short-range ball is the tail bound, not integration slack
        value = acb.integral(integrand(j, k, u, qpi, x), 0, V, abs_tol=((arb(2) ** -prec) * scale).mid()).real
        return value + arb(0, tail_bound(j, k, u, x, X, V).upper())

    def _integrals(self, u, qpi, x, X, prec: int, count: int) -> list:
        """[J_{1,0}, J_{2,1}, J_{3,2}][:count] as balls: computed, or from the Taylor model when u is inside
        it (``taylor_order``); a call close to the previous computed one builds a model around it."""
        N = self.taylor_order
        if N is not None and self._model is not None and self._model.covers(u):  # prec is the evaluator's own
            return self._model.values(u, count)
        direct = [self._integral(j, k, u, qpi, x, X, prec) for j, k in J_INDICES[:count]]
        if N is None:
            return direct
        last, self._last_u = self._last_u, u
        # a step, not a repeat: calls at the same u (the moments and the risk at one attention state) say
        # nothing about the next call's distance
        step = last is not None and u.mid() != last.mid()
        if step and (u - last).abs_upper() <= TaylorModel.radius(last, N, prec) / 4:
            # small steps: a model around u serves the next several calls (it costs N + 6 - count more
            # integrals: the centre's orders past the ``count`` just computed, and three at the low end)
            self._model = TaylorModel.build(self, u, qpi, x, X, prec, N, direct)
        return direct

    def _sums(self, ctx: ArbContext, alpha_a, alpha_b, count: int):
        """(pref, the three masses, u, [J_{1,0}, J_{2,1}, J_{3,2}][:count]) inside the context ``ctx``."""
        gap = ctx.number(alpha_a) - ctx.number(alpha_b)
        if not abs(float(gap.mid())) <= MAX_GAP:
            raise SettingError(f"the integral representation is used for |alpha_a - alpha_b| <= {MAX_GAP}, got "
                               f"{float(gap.mid())}; use the series")
        u = gap.exp()
        pref, qpi, x, X, masses = self._constants(ctx)
        return pref, masses, u, self._integrals(u, qpi, x, X, ctx.prec_bits, count)

    # ------------------------------------------------------------------------------------------
    def evaluate_symmetric(self, alpha_a: Number, alpha_b: Number, beta_a: Number, beta_b: Number) -> Evaluation:
        """Risk and gradients as in ``SeriesEvaluator.evaluate_symmetric``: two-element gradient lists
        [marked coordinate, each unmarked coordinate], every value an arb ball."""
        for name, v in (("alpha_a", alpha_a), ("alpha_b", alpha_b), ("beta_a", beta_a), ("beta_b", beta_b)):
            check_vector(name, [v], 1)
        with ArbContext(self.prec_bits) as ctx:
            pref, (marked, unmarked, empty), u, (J10, J21, J32) = self._sums(ctx, alpha_a, alpha_b, 3)
            ba, bb = ctx.number(beta_a), ctx.number(beta_b)
            B, Delta = bb - 1, ba - bb
            uJ10, u2J21, u3J32 = u * J10, u * u * J21, u * u * u * J32
            # sums over the strings with c >= 1 of (f-y)^2, (f-y) w, (f-y), (f-y) w (1-w)
            sq = B * B * marked + pref * (2 * B * Delta * uJ10 + Delta * Delta * u2J21)
            fy_w = pref * (B * uJ10 + Delta * u2J21)
            fy = B * marked + pref * Delta * uJ10
            fy_ww = pref * (B * uJ10 + (Delta - B) * u2J21 - Delta * u3J32)
            risk = (sq + (bb + 1) ** 2 * unmarked) / 2 + empty / 2
            g_ba = fy_w
            g_bb = fy - fy_w + (bb + 1) * unmarked
            g_gap = Delta * fy_ww
            d = self.setting.d
            grad_alpha, grad_beta = [g_gap, -g_gap / (d - 1)], [g_ba, g_bb / (d - 1)]
            bound = max(float(g.rad()) for g in grad_alpha + grad_beta)
            return Evaluation(risk, grad_alpha, grad_beta, float(risk.rad()), bound, 0.0, 0, True)

    def evaluate(self, alpha: Sequence[Number], beta: Sequence[Number]) -> Evaluation:
        """``evaluate_symmetric`` for full vectors in R^d that are symmetric in the unmarked symbols,
        with per-coordinate gradient lists of length d."""
        d = self.setting.d
        alpha = check_vector("alpha", alpha, d)
        beta = check_vector("beta", beta, d)
        if len(_group(alpha, beta)) != 2:
            raise SettingError("the integral representation needs parameters symmetric in the unmarked symbols "
                               "(alpha_k, beta_k equal for k >= 2); use numerics.theorem.series.SeriesEvaluator")
        res = self.evaluate_symmetric(alpha[0], alpha[1], beta[0], beta[1])
        return Evaluation(res.risk, [res.grad_alpha[0]] + [res.grad_alpha[1]] * (d - 1),
                          [res.grad_beta[0]] + [res.grad_beta[1]] * (d - 1), res.risk_bound, res.grad_bound,
                          res.omitted_mass, res.terms, True)

    def quadratic_moments(self, alpha_a: Number, alpha_b: Number) -> QuadraticMoments:
        """The moments of ``SeriesEvaluator.quadratic_moments`` (M = E[phi phi^T], m = E[y phi] with
        phi = (w, 1 - w) on non-empty strings) from J_{1,0} and J_{2,1}."""
        check_vector("alpha_a", [alpha_a], 1)
        check_vector("alpha_b", [alpha_b], 1)
        with ArbContext(self.prec_bits) as ctx:
            pref, (marked, unmarked, _), u, (J10, J21) = self._sums(ctx, alpha_a, alpha_b, 2)
            Ew, Eww = pref * u * J10, pref * u * u * J21  # E[w 1{c>=1}], E[w^2 1{c>=1}]
            M = [[Eww, Ew - Eww], [Ew - Eww, marked + unmarked - 2 * Ew + Eww]]
            m = [Ew, marked - Ew - unmarked]
            bound = max(float(v.rad()) for v in (M[0][0], M[0][1], M[1][1], m[0], m[1]))
            return QuadraticMoments(M, m, ctx.number(Fraction(1, 2)), bound, True)
