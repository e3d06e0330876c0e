"""The population risk of AND under the squared loss for any parameters of the one-hot attention model, by the
integral representation: an exact population for two-head AND, whose class population (c_a, c_b, the rest)
has 9.4 million classes at d = 50, too many to step on.  The risk and its gradient
(``population_risk_and_grad``) cost a sum over the integral's nodes and the d symbols; when every head's
parameters are equal on the unmarked symbols, as a Table 1 row's stay (``_classes``), the sums run over the
three classes a, b and the rest, whatever d.  ``IntegralPopulation`` is the runner's data for two-head AND
under ``table1 --and-heads-data integral``.

The model: H heads over one-hot tokens, head h's output F_h = sum_i e^{alpha_h[z_i]} B_h[z_i] / S_h with
S_h = sum_i e^{alpha_h[z_i]}, f = sum_h F_h; tokens i.i.d. uniform over the d symbols, lengths n ~ Geometric(p)
on {1, 2, ...} (AND's balancing p), y = +1 iff symbols 0 (a) and 1 (b) both occur.  Then

    risk = E[(f - y)^2] / 2 = E[f^2] / 2 - E[f y] + 1/2.

With u_t = e^{alpha[t]} B[t], the counts c_t of the symbols and, for z in [0, 1]^d, the generating function
E[prod_t z_t^{c_t}] = G(w), w = sum_t z_t / d, G(w) = p w / (1 - q w) (q = 1 - p), one has
E[c_t prod z^c] = z_t G'(w) / d and E[c_t c_u prod z^c] = z_t z_u G''(w) / d^2 + [t = u] z_t G'(w) / d.  Writing
1/S = int_0^inf e^{-s S} ds, 1/S^2 = int_0^inf s e^{-s S} ds and 1/(S_1 S_2) = int int e^{-s S_1 - r S_2} ds dr
makes every term an integral over z_t = e^{-s e^{alpha[t]}} (two heads: z_t = e^{-s e^{alpha_1[t]} - r
e^{alpha_2[t]}}):

    E[F_h]       = int G'(w) sum_t z_t u_t / d ds,
    E[F_h^2]     = int s (G''(w) (sum_t z_t u_t / d)^2 + G'(w) sum_t z_t u_t^2 / d) ds,
    E[F_1 F_2]   = int int G''(w) (sum_t z_t u_1t / d)(sum_t z_t u_2t / d) + G'(w) sum_t z_t u_1t u_2t / d ds dr,

and E[f 1{both occur}] = E[f] - E[f 1{no a}] - E[f 1{no b}] + E[f 1{no a, no b}], where a mask sets z_a (z_b)
to 0, which keeps exactly the strings without that symbol.  Every integrand is analytic and bounded in a strip
around the positive axis of x = log s (there |z_t| < 1, so 1 - q w stays away from 0), and decays like s near 0
and like e^{-s min e^alpha} at infinity: the trapezoid rule in x converges geometrically.  Each head's scores
are taken less their maximum (F_h does not change), so max e^alpha = 1.  The nodes are equally spaced (``STEP``)
in t, s = exp(t - e^{t0 - t}) with t0 = log p - ``TAIL_MARGIN`` (``_nodes``): x = t above t0, where the
integrands change (G' near s ~ p, z_t near s ~ e^{-alpha_t}), while below it the tail towards s = 0, where every
integrand is smooth in s (analytic in a disc around 0), is crossed in a few nodes; from s = ``LOWEST`` p to
45 / min e^alpha (where every z_t < 3e-20).  That takes 69-184 nodes at d = 50 where equal steps in x take 265-370,
at the same accuracy (measured: ``TAIL_MARGIN``); the 2-D term's sums over the symbols are matrix products.  The
trapezoid error is estimated by the same sum at twice the step (every other node, the same integrands): an
estimate, not a bound.  Rounding: 1 - q w is formed as p + q (1 - w) from -expm1, so small p costs no accuracy; the
absolute error is a few eps (1 + sum_h max |B_h|)^2, and no relative accuracy is claimed for tiny risks (the
same holds for the gradient, checked in long double at p = 1e-6 as well).
Checked against exhaustive sums over count vectors at d = 3 and 4 (every symbol its own parameters; the
gradient by the complex step), the engine's class population at d = 6, and the same sums in long double at
p = 1e-6 (tests/experiments/test_and_integral.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.validation import SettingError

from numerics.experiments.tasks import MIN_D, length_parameter

STEP = 0.2
"""Trapezoid step in t (``_nodes``; t = log s above the tail).  The trapezoid's error falls geometrically in
1 / step: in 10 random two-head cases at d = 50 (score scales 0.3 to 3) the sum at 0.4 differed from the one at
0.2 by 3e-12 to 1e-9, and the one at 0.1 from 0.2 by at most 1.1e-15."""

TAIL_MARGIN = 2.0
"""The node map leaves the log scale at s = p e^{-TAIL_MARGIN} (``_nodes``).  Against the sums of the plain log
scale at step 0.1 (then the reference), risk and gradient agreed to 2.6e-16 (1 + sum_h max |B_h|)^2 at margins
0 to 3 in 60 random cases (d = 3 to 300, p = 1e-6 to 0.9, one to three heads, score scales 0.01 to 30), and 2 is
kept as a margin; at d = 50 the map takes 69-184 nodes where the log scale took 265-370."""

LOWEST = 1e-19
"""The smallest node s, relative to p: below it every integrand is s (1 / p + O(1)) times readouts, so the part
left out is about LOWEST times them."""

GRAD_MAX_SPREAD = 200.0
"""Largest spread taken by ``population_risk_and_grad``: its integrands carry s^3 (the square's term), which
overflows at nodes s = 45 e^spread once the spread passes about 233."""

MAX_SPREAD = 300.0
"""Largest spread max - min of one head's attention scores taken: beyond it e^{-spread} nears the smallest
double and the range of nodes (about spread / STEP of them) grows past use (a head's risk does not change when a
constant is added to its scores, so only the spread matters)."""


@dataclass(frozen=True)
class IntegralRisk:
    risk: float
    error_estimate: float
    """|risk - the same sum at twice the step|: an estimate of the coarser sum's trapezoid error, and so
    pessimistic for this one; not a bound, and not of rounding (about a few eps (1 + sum_h max |B_h|)^2 in
    absolute terms: no relative accuracy is claimed for tiny risks)."""
    nodes: int
    """Nodes of each one-dimensional integral (each pair of heads takes their square)."""


def _sums(alpha: np.ndarray, B: np.ndarray, p: float, s: np.ndarray, ws: np.ndarray, dtype=float, grad: bool = False,
          mult: np.ndarray | None = None):
    """The risk from the trapezoid sums on the nodes s with weights ws (``dtype``: float, np.longdouble for the
    tests' reference, or complex for their complex-step derivative), and with ``grad`` its gradient (risk,
    d risk / d alpha (H, d), d risk / d B (H, d)), each term differentiated under the integral.  1 - q w is formed
    as p + q (1 - w), with 1 - w from -expm1: near s = 0, w is 1 to rounding and 1 - q w would lose eps / p of its
    accuracy (1e-11 at p = 1e-6).

    With v = 1 - w: g1 = G' = p / (p + q v)^2, g2 = G'' = 2 p q / (p + q v)^3, and d g1 / d v = -g2,
    d g2 / d v = -g3 = -6 p q^2 / (p + q v)^4.  For symbol t of head h: d z_t / d alpha_t = -s e_t z_t,
    d u_t / d alpha_t = u_t, d u_t / d B_t = e_t.

    ``mult``: the columns of alpha and B are classes of symbols sharing their parameters, column t standing for
    mult[t] symbols (a and b first, alone in theirs): every sum over the symbols weights a column by its
    multiplicity, and the gradient of a column is that of its shared parameter (the sum over its symbols)."""
    H, n = alpha.shape
    m = np.ones(n, dtype) if mult is None else np.asarray(mult, dtype)
    d = int(round(float(np.real(m.sum()))))
    p = dtype(p)
    q = dtype(1) - p
    s = np.asarray(s, dtype)
    ws = np.asarray(ws, dtype)  # (S,) or (k, S): k weightings of the same nodes give k risks
    e = np.exp(np.asarray(alpha, dtype))
    u = e * np.asarray(B, dtype)
    # the masks as columns (n, 4): the strings with a and b free, without a, without b, without both
    M = np.ones((n, 4), dtype)
    M[0, 1] = M[1, 2] = M[0, 3] = M[1, 3] = 0
    # the risk is f_square / 2 - (2 f_both - f_mean) + 1/2: each mask's term enters with this weight
    c = np.array([-2 + 1, 2, 2, -2], dtype)  # -2 (inclusion-exclusion sign) + 1 for the unmasked term, f_mean
    free = (d - m @ M) / dtype(d)  # 1 - w of the masked symbols

    def g1(v):
        return p / (p + q * v) ** 2

    def g2(v):
        return 2 * p * q / (p + q * v) ** 3

    def g3(v):
        return 6 * p * q * q / (p + q * v) ** 4

    se = [np.outer(s, e[h]) for h in range(H)]  # s e^alpha_t at every node, per head
    md = m / dtype(d)
    z = [np.exp(-x) for x in se]  # z_t
    y = [-np.expm1(-x) for x in se]  # 1 - z_t
    Z = [x * md for x in z]  # z_t m_t / d: one factor of each sum over the symbols carries m_t / d
    Y = [x * md for x in y]  # (1 - z_t) m_t / d
    risk = dtype(1) / 2
    ga, gB = np.zeros((H, n), dtype), np.zeros((H, n), dtype)
    sc = s[:, None]
    for h, (Zh, Yh) in enumerate(zip(Z, Y)):
        eh, uh = e[h], u[h]
        v = Yh @ M + free  # (S, 4): 1 - w under each mask
        a = Zh @ (M * uh[:, None])
        g1v = g1(v)
        risk += ws @ (g1v * a) @ c
        if grad:  # d v / d alpha_t = m_t s e_t Z_t, d a / d alpha_t = m_t Z_t u_t (1 - s e_t); all masks at once
            k1 = ws[:, None] * g1v
            k2 = ws[:, None] * g2(v) * a * sc
            K = np.concatenate((k1, k1 * sc, k2), axis=1).T @ Zh
            K1, K1s, K2 = K[:4], K[4:8], K[8:]  # (4, n) each (slices: np.split costs more)
            cm = c[:, None] * M.T
            ga[h] += (cm * (uh * K1 - uh * eh * K1s - eh * K2)).sum(axis=0)
            gB[h] += (cm * K1).sum(axis=0) * eh
        v = Yh.sum(axis=1)
        a1, a2 = Zh @ uh, Zh @ (uh * uh)
        cs = ws * s / 2  # the square's weight in the risk: 1/2
        g1v, g2v = g1(v), g2(v)
        risk += cs @ (g2v * a1 * a1 + g1v * a2)
        if grad:  # d a1 = Z_t u_t (1 - s e_t), d a2 = Z_t u_t^2 (2 - s e_t), d v = s e_t Z_t
            kv = cs * s * (-g3(v) * a1 * a1 - g2v * a2)
            k1, k2 = cs * 2 * g2v * a1, cs * g1v
            Kv, K1, K1s, K2, K2s = np.stack((kv, k1, k1 * s, k2, k2 * s)) @ Zh
            ga[h] += eh * Kv + uh * K1 - uh * eh * K1s + 2 * uh * uh * K2 - uh * uh * eh * K2s
            gB[h] += eh * K1 + 2 * uh * eh * K2
    for h1 in range(H):
        for h2 in range(h1 + 1, H):
            z2, y2 = z[h2], y[h2]  # z_t and 1 - z_t of the second head (m_t / d taken once, with the first)
            Z1 = Z[h1]
            u1, u2, e1, e2 = u[h1], u[h2], e[h1], e[h2]
            V = Y[h1].sum(axis=1)[:, None] + Z1 @ y2.T  # 1 - sum z1 z2 / d = sum ((1 - z1) + z1 (1 - z2)) / d
            A1 = (Z1 * u1) @ z2.T
            A2 = Z1 @ (z2 * u2).T
            A12 = (Z1 * u1) @ (z2 * u2).T
            iW = 1 / (p + q * V)  # G' = p iW^2, G'' = 2 p q iW^3 and G''' = 3 q iW G'', each formed once
            G1 = p * iW * iW
            G2 = 2 * q * G1 * iW
            AA = A1 * A2
            # the cross term's weight in the risk is 2 / 2: the sum over (s, r) of ws(s) ws(r) (...), per weighting
            risk += np.sum((ws @ (G2 * AA + G1 * A12)) * ws, axis=-1)
            if grad:  # each factor's derivative is (z1 z2 / d)_t times a function of s (head 1) or r (head 2)
                K = np.outer(ws, ws)
                KG2 = K * G2
                P1 = -(3 * q * iW) * KG2 * AA - KG2 * A12  # with d V: K (-G''' A1 A2 - G'' A12)
                P2, P3, P4 = KG2 * A2, KG2 * A1, K * G1  # with d A1, d A2, d A12
                P = np.stack((P1, P2, P3, P4))
                Q1, Q2, Q3, Q4 = P @ z2 * Z1  # (S, d) each: summed over r, times Z1
                ga[h1] += (e1 * (s @ Q1) + u1 * (Q2.sum(0) - e1 * (s @ Q2)) - e1 * u2 * (s @ Q3)
                           + u1 * u2 * (Q4.sum(0) - e1 * (s @ Q4)))
                gB[h1] += e1 * Q2.sum(0) + e1 * u2 * Q4.sum(0)
                R1, R2, R3, R4 = P.transpose(0, 2, 1) @ Z1 * z2  # (S, d) each: summed over s, times z2
                ga[h2] += (e2 * (s @ R1) - e2 * u1 * (s @ R2) + u2 * (R3.sum(0) - e2 * (s @ R3))
                           + u1 * u2 * (R4.sum(0) - e2 * (s @ R4)))
                gB[h2] += e2 * R3.sum(0) + u1 * e2 * R4.sum(0)
    return (risk, ga, gB) if grad else risk


def _checked(alpha, B, d: int, p: float | None, step: float, max_spread: float = MAX_SPREAD):
    """(alpha less each head's maximum, B (H, d), p, the nodes) after the checks of ``population_risk``."""
    alpha = np.asarray(alpha, float)
    B = np.asarray(B, float)
    if B.ndim == 3 and B.shape[-1] == 1:
        B = B[..., 0]
    if (d < MIN_D["AND"] or alpha.ndim != 2 or alpha.shape[0] < 1 or alpha.shape[1] != d
            or B.shape != alpha.shape):
        raise SettingError(f"alpha must be (H, d) and B (H, d) or (H, d, 1) with H >= 1 and d >= {MIN_D['AND']}, "
                           f"got {alpha.shape}, {B.shape} for d = {d}")
    if not (np.isfinite(alpha).all() and np.isfinite(B).all()):
        raise SettingError("alpha and B must be finite")
    alpha = alpha - alpha.max(axis=1, keepdims=True)
    if -alpha.min() > max_spread:
        raise SettingError(f"a head's attention scores spread over {-alpha.min():.3g} > {max_spread:g}")
    p = length_parameter("AND", d) if p is None else float(p)
    if not 0.0 < p <= 1.0:
        raise SettingError(f"p must be in (0, 1], got {p}")
    if not 0.0 < step <= 0.5:
        raise SettingError(f"step must be in (0, 0.5], got {step}")
    return alpha, B, p, _nodes(float(alpha.min()), p, step)


def _nodes(alpha_min: float, p: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """(s, ds / dt) at the nodes t = t_lo + k step of s = exp(t - e^{t0 - t}), t0 = log p - TAIL_MARGIN: s = e^t
    above t0, so the transitions (G' near s ~ p, each symbol's z_t near s ~ e^{-alpha_t}) are resolved as on a
    log scale, and below t0 the tail towards s = 0 is crossed in a few nodes.  From s = LOWEST p (t_lo solves
    t - e^{t0 - t} = log(LOWEST p), whatever p is) to t = log 45 - alpha_min (every z_t < 3e-20 beyond)."""
    t0 = math.log(p) - TAIL_MARGIN
    lo, hi = t0 - _TAIL_DEPTH, math.log(45.0) - alpha_min
    t = lo + step * np.arange(int(math.ceil((hi - lo) / step)) + 1)
    E = np.exp(t0 - t)
    s = np.exp(t - E)
    return s, s * (1 + E)


def _tail_depth() -> float:
    """u = t0 - t_lo of ``_nodes``: the root of u + e^u = c, c = -TAIL_MARGIN - log LOWEST, by Newton from
    above (it depends on the constants alone, not on p: computed once, ``_TAIL_DEPTH``)."""
    c = -TAIL_MARGIN - math.log(LOWEST)
    u = math.log(c)
    for _ in range(50):
        nu = u - (u + math.exp(u) - c) / (1 + math.exp(u))
        if abs(nu - u) < 1e-15:
            break
        u = nu
    return u


_TAIL_DEPTH = _tail_depth()


def _classes(alpha: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The columns ``_sums`` takes, (alpha, B, mult): those of the classes a, b and the rest with their sizes
    when every head's scores and readouts are equal on the d - 2 unmarked symbols (as every Table 1 row's are:
    its start is, and the population gradient keeps it so), so that the sums take three columns whatever d, to
    the same rounding (tests/experiments/test_and_integral.py); else every symbol's, mult None."""
    d = alpha.shape[1]
    if d <= 3 or not (np.all(alpha[:, 3:] == alpha[:, 2:3]) and np.all(B[:, 3:] == B[:, 2:3])):
        return alpha, B, None
    return alpha[:, :3], B[:, :3], np.array([1.0, 1.0, d - 2.0])


def population_risk_and_grad(alpha, B, d: int, p: float | None = None, step: float = STEP):
    """(risk, d risk / d alpha (H, d), d risk / d B in B's shape) at the nodes of ``population_risk``, for
    score spreads up to ``GRAD_MAX_SPREAD``.  No error estimate: the gradient's integrands carry higher powers
    of s and converge more slowly than the risk's (at step 0.4, 20 to 45 times the risk's error; at the default
    0.2 the sums agree with those at 0.1 to about 1e-16).  Each head's score gradient sums to 0 (a constant added
    to the scores changes nothing), so it is the gradient at the caller's scores as well as at the shifted ones."""
    shape = np.shape(B)
    alpha, B, p, (s, jac) = _checked(alpha, B, d, p, step, GRAD_MAX_SPREAD)
    ca, cB, mult = _classes(alpha, B)
    risk, ga, gB = _sums(ca, cB, p, s, step * jac, grad=True, mult=mult)
    if mult is not None:  # each unmarked symbol's gradient is its class's shared by the d - 2 of them
        ga, gB = (np.concatenate((g[:, :2], np.repeat(g[:, 2:] / (d - 2), d - 2, axis=1)), axis=1) for g in (ga, gB))
    if not (np.isfinite(risk) and np.isfinite(ga).all() and np.isfinite(gB).all()):  # readouts beyond about 1e150
        raise ArithmeticError("the integral's gradient came out non-finite")
    return float(risk), ga, gB.reshape(shape)


def population_risk(alpha, B, d: int, p: float | None = None, step: float = STEP, dtype=float) -> IntegralRisk:
    """The population risk of AND (squared loss) at parameters ``alpha`` (H, d) and ``B`` (H, d) or (H, d, 1),
    H >= 1, lengths Geometric(p) on {1, 2, ...} (AND's balancing p by default).  Each head's scores are taken
    less their maximum (which changes nothing); their spread must be at most ``MAX_SPREAD``."""
    alpha, B, p, (s, jac) = _checked(alpha, B, d, p, step)
    ws = np.zeros((2, s.size))
    ws[0] = step * jac
    ws[1, ::2] = 2 * step * jac[::2]  # the coarse sum: every other node, twice the step, the same integrands
    ca, cB, mult = _classes(alpha, B)
    fine, coarse = (float(v) for v in _sums(ca, cB, p, s, ws, dtype, mult=mult))
    if not (math.isfinite(fine) and math.isfinite(coarse)):  # readouts beyond about 1e150 overflow the sums
        raise ArithmeticError(f"the integral came out {fine}, {coarse}")
    return IntegralRisk(risk=fine, error_estimate=abs(fine - coarse), nodes=s.size)


@dataclass(frozen=True)
class IntegralPopulation:
    """AND's population as training data for R runs at once (``runner``'s ``and_heads_data="integral"``): the
    risk and gradient of each run by the integral, in the engine's shapes (alpha (R, H, d), B (R, H, d, 1)),
    and accuracies, which the integral does not give, on the sampled strings ``accuracy_set`` (engine
    ``Tokens``) when given.  A run the integral refuses (non-finite parameters, a head's scores spread over
    more than ``GRAD_MAX_SPREAD``, or sums that overflow) gets a NaN risk and gradient: the bank does not take
    that step and stops the run, which the runner records as refused by the integral (``refusal``)."""

    d: int
    p: float
    accuracy_set: object = None

    def _attempt(self, f, alpha, B):
        """(f(alpha, B, d, p), None), or (None, why) where the integral refuses the parameters or its sums
        overflow (readouts beyond about 1e150)."""
        try:
            return f(alpha, B, self.d, self.p), None
        except (SettingError, ArithmeticError) as exc:
            return None, str(exc)

    def _each(self, alpha, B, f):
        return [self._attempt(f, a, b)[0] for a, b in zip(np.asarray(alpha, float), np.asarray(B, float))]

    def refusal(self, alpha, B) -> str | None:
        """Why the integral refuses one run's parameters (its gradient's limits), or None."""
        return self._attempt(population_risk_and_grad, alpha, B)[1]

    def risk(self, alpha, B) -> np.ndarray:
        vals = self._each(alpha, B, population_risk)
        return np.array([np.nan if v is None else v.risk for v in vals])

    def risk_and_grad(self, alpha, B):
        """(risks (R,), d risk / d alpha (R, H, d), d risk / d B (R, H, d, 1))."""
        alpha, B = np.asarray(alpha, float), np.asarray(B, float)
        vals = self._each(alpha, B, population_risk_and_grad)
        risk = np.full(len(vals), np.nan)
        ga, gB = np.full(alpha.shape, np.nan), np.full(B.shape, np.nan)
        for i, v in enumerate(vals):
            if v is not None:
                risk[i], ga[i], gB[i] = v
        return risk, ga, gB

    def risk_and_accuracy(self, alpha, B, accuracy):
        """(risks, accuracies and tied masses on ``accuracy_set`` by ``accuracy`` (the engine's
        risk_and_accuracy), or None without one)."""
        risk = self.risk(alpha, B)
        if self.accuracy_set is None:
            return risk, None, None
        _, acc, ties = accuracy(alpha, B, self.accuracy_set)
        return risk, acc, ties

    def error_estimate(self, alpha, B) -> float | None:
        """The trapezoid error estimate at one run's parameters (``IntegralRisk.error_estimate``)."""
        got = self._attempt(population_risk, alpha, B)[0]
        return None if got is None else got.error_estimate

    def uniform_mean_token_moment(self) -> np.ndarray:
        """E[xbar xbar^T] of the uniform-attention mean token xbar = c / n (the engine's function of that name,
        for this population): E[c_t c_u | n] = n [t = u] / d + n (n - 1) / d^2 gives E[1/n] I / d
        + (1 - E[1/n]) 11^T / d^2, with E[1/n] = -p log p / (1 - p) (1 at p = 1); its largest eigenvalue is
        1 / d."""
        m = 1.0 if self.p == 1.0 else -self.p * math.log(self.p) / (1.0 - self.p)
        return m * np.eye(self.d) / self.d + (1.0 - m) * np.ones((self.d, self.d)) / self.d ** 2
