"""The population risk of AND under the squared loss for any parameters of the one-hot attention model, by the
integral representation: the route towards an exact population for two-head AND (issue 15), whose class
population (c_a, c_b, the rest) has 9.4 million classes at d = 50 and costs 2.25 s a step.  The risk only: no
gradient yet, and nothing in the runner uses it yet.

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
are taken less their maximum (F_h does not change), so max e^alpha = 1; nodes from s = 1e-19 p to
45 / min e^alpha (where every z_t < 3e-20), step ``STEP`` in x; the 2-D term's sums over the symbols are matrix
products.  The trapezoid error is estimated by the same sum at twice the step (every other node): an estimate,
not a bound.  Rounding: 1 - q w is formed as p + q (1 - w) from -expm1, so small p costs no accuracy; the
absolute error is a few eps (1 + sum_h max |B_h|)^2, and no relative accuracy is claimed for tiny risks.
Checked against exhaustive sums over count vectors at d = 3 and 4 (every symbol its own parameters), the
engine's class population at d = 6, and the same sums in long double at p = 1e-6 (tests/test_and_integral.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.validation import SettingError

from .tasks import MIN_D, length_parameter

STEP = 0.2
"""Trapezoid step in x = log s.  The trapezoid's error falls like exp(-pi^2 / step): at d = 50 the sum at 0.4
differed from the one at 0.2 by 1e-11 to 1e-10, and the one at 0.1 from 0.2 by about 2e-16."""

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


def _sums(alpha: np.ndarray, B: np.ndarray, p: float, x: np.ndarray, step: float, dtype=float) -> float:
    """The risk from the trapezoid sums on the nodes x (``dtype``: float, or np.longdouble for the tests'
    reference).  1 - q w is formed as p + q (1 - w), with 1 - w from -expm1: near s = 0, w is 1 to rounding
    and 1 - q w would lose eps / p of its accuracy (1e-11 at p = 1e-6)."""
    d = alpha.shape[1]
    p = dtype(p)
    q = dtype(1) - p
    x = np.asarray(x, dtype)
    s = np.exp(x)
    ws = s * dtype(step)  # ds = s dx
    e = np.exp(np.asarray(alpha, dtype))
    u = e * np.asarray(B, dtype)
    one = np.ones(d, dtype)
    masks = (one, np.r_[0, one[1:]], np.r_[1, 0, one[2:]], np.r_[0, 0, one[2:]])
    signs = (1, -1, -1, 1)  # inclusion-exclusion of "a and b both occur"

    def g1(v):  # G'(w) from v = 1 - w
        return p / (p + q * v) ** 2

    def g2(v):
        return 2 * p * q / (p + q * v) ** 3

    Z = [np.exp(-np.outer(s, e[h])) / d for h in range(len(e))]  # z_t / d at every node, per head
    Y = [-np.expm1(-np.outer(s, e[h])) / d for h in range(len(e))]  # (1 - z_t) / d
    f_mean = f_both = f_square = dtype(0)
    for h, (Zh, Yh) in enumerate(zip(Z, Y)):
        for k, (sign, m) in enumerate(zip(signs, masks)):
            v = Yh @ m + (d - m.sum()) / dtype(d)  # 1 - w under the mask
            term = ws @ (g1(v) * (Zh @ (m * u[h])))
            f_both += sign * term
            if k == 0:
                f_mean += term
        v = Yh.sum(axis=1)
        a1 = Zh @ u[h]
        f_square += (ws * s) @ (g2(v) * a1 * a1 + g1(v) * (Zh @ (u[h] * u[h])))
    for h1 in range(len(Z)):
        for h2 in range(h1 + 1, len(Z)):
            Z2, Y2 = Z[h2] * d, Y[h2] * d  # z_t and 1 - z_t of the second head (the 1/d taken once, with the first)
            V = Y[h1].sum(axis=1)[:, None] + Z[h1] @ Y2.T  # 1 - sum z1 z2 / d = sum ((1 - z1) + z1 (1 - z2)) / d
            A1 = (Z[h1] * u[h1]) @ Z2.T
            A2 = Z[h1] @ (Z2 * u[h2]).T
            A12 = (Z[h1] * u[h1]) @ (Z2 * u[h2]).T
            f_square += 2 * (ws @ (g2(V) * A1 * A2 + g1(V) * A12) @ ws)
    return float(f_square / 2 - (2 * f_both - f_mean) + dtype(1) / 2)


def population_risk(alpha, B, d: int, p: float | None = None, step: float = STEP, dtype=float) -> IntegralRisk:
    """The population risk of AND (squared loss) at parameters ``alpha`` (H, d) and ``B`` (H, d) or (H, d, 1),
    H >= 1, lengths Geometric(p) on {1, 2, ...} (AND's balancing p by default).  Each head's scores are taken
    less their maximum (which changes nothing); their spread must be at most ``MAX_SPREAD``."""
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
    if -alpha.min() > MAX_SPREAD:
        raise SettingError(f"a head's attention scores spread over {-alpha.min():.3g} > {MAX_SPREAD:g}")
    p = length_parameter("AND", d) if p is None else float(p)
    if not 0.0 < p <= 1.0:
        raise SettingError(f"p must be in (0, 1], got {p}")
    if not 0.0 < step <= 0.5:
        raise SettingError(f"step must be in (0, 0.5], got {step}")
    lo = math.log(1e-19 * p)  # every head's largest score is 0
    hi = math.log(45.0) - float(alpha.min())
    x = lo + step * np.arange(int(math.ceil((hi - lo) / step)) + 1)
    fine = _sums(alpha, B, p, x, step, dtype)
    coarse = _sums(alpha, B, p, x[::2], 2 * step, dtype)
    if not (math.isfinite(fine) and math.isfinite(coarse)):  # pragma: no cover - guarded by the checks above
        raise ArithmeticError(f"the integral came out {fine}, {coarse}")
    return IntegralRisk(risk=fine, error_estimate=abs(fine - coarse), nodes=x.size)
