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
and like e^{-s min e^alpha} at infinity: the trapezoid rule in x converges geometrically.  Nodes from
s = 1e-19 p / max e^alpha to 45 / min e^alpha (where every z_t < 3e-20), step ``STEP`` in x; the 2-D term's
sums over the symbols are matrix products.  The error is estimated by the same sum at twice the step (every
other node): an estimate, not a bound.  Checked against an exhaustive sum over count vectors at d = 3 and
against the engine's class population at small d (tests/test_and_integral.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.validation import SettingError

from .tasks import MIN_D, length_parameter

STEP = 0.2
"""Trapezoid step in x = log s (agreement to about 1e-14 with the exhaustive sums; twice it, 0.4, agreed to
about 5e-15 at d = 50 on random parameters)."""


@dataclass(frozen=True)
class IntegralRisk:
    risk: float
    error_estimate: float
    """|risk - the same sum at twice the step|: an estimate of the coarser sum's error, and so pessimistic for
    this one (the trapezoid's error falls geometrically as the step shrinks); not a bound."""
    nodes: int
    """Nodes of each one-dimensional integral (the two-head term takes their square)."""


def _sums(alpha: np.ndarray, B: np.ndarray, p: float, x: np.ndarray, step: float) -> float:
    d = alpha.shape[1]
    q = 1.0 - p
    s = np.exp(x)
    ws = s * step  # ds = s dx
    e = np.exp(alpha)
    u = e * B
    masks = (np.ones(d), np.r_[0.0, np.ones(d - 1)], np.r_[1.0, 0.0, np.ones(d - 2)], np.r_[0.0, 0.0, np.ones(d - 2)])
    signs = (1.0, -1.0, -1.0, 1.0)  # inclusion-exclusion of "a and b both occur"

    def g1(w):
        return p / (1.0 - q * w) ** 2

    def g2(w):
        return 2.0 * p * q / (1.0 - q * w) ** 3

    Z = [np.exp(-np.outer(s, e[h])) / d for h in range(len(e))]  # z_t / d at every node, per head
    f_mean = f_both = f_square = 0.0
    for h, Zh in enumerate(Z):
        for sign, m in zip(signs, masks):
            term = ws @ (g1(Zh @ m) * (Zh @ (m * u[h])))
            f_both += sign * term
            if sign == 1.0 and m.all():
                f_mean += term
        w = Zh.sum(axis=1)
        a1 = Zh @ u[h]
        f_square += (ws * s) @ (g2(w) * a1 * a1 + g1(w) * (Zh @ (u[h] * u[h])))
    for h1 in range(len(Z)):
        for h2 in range(h1 + 1, len(Z)):
            Z2 = Z[h2] * d  # z_t of the second head (the 1/d taken once, with the first)
            W = Z[h1] @ Z2.T
            A1 = (Z[h1] * u[h1]) @ Z2.T
            A2 = Z[h1] @ (Z2 * u[h2]).T
            A12 = (Z[h1] * u[h1]) @ (Z2 * u[h2]).T
            f_square += 2.0 * (ws @ (g2(W) * A1 * A2 + g1(W) * A12) @ ws)
    return 0.5 * f_square - (2.0 * f_both - f_mean) + 0.5


def population_risk(alpha, B, d: int, p: float | None = None, step: float = STEP) -> IntegralRisk:
    """The population risk of AND (squared loss) at parameters ``alpha`` (H, d) and ``B`` (H, d) or (H, d, 1),
    lengths Geometric(p) on {1, 2, ...} (AND's balancing p by default)."""
    alpha = np.asarray(alpha, float)
    B = np.asarray(B, float)
    if B.ndim == 3 and B.shape[-1] == 1:
        B = B[..., 0]
    if d < MIN_D["AND"] or alpha.ndim != 2 or alpha.shape[1] != d or B.shape != alpha.shape:
        raise SettingError(f"alpha must be (H, d) and B (H, d) or (H, d, 1) with d >= {MIN_D['AND']}, got "
                           f"{alpha.shape}, {B.shape} for d = {d}")
    if not (np.isfinite(alpha).all() and np.isfinite(B).all()):
        raise SettingError("alpha and B must be finite")
    p = length_parameter("AND", d) if p is None else float(p)
    if not 0.0 < p <= 1.0:
        raise SettingError(f"p must be in (0, 1], got {p}")
    if not 0.0 < step <= 0.5:
        raise SettingError(f"step must be in (0, 0.5], got {step}")
    lo = math.log(1e-19 * p) - float(alpha.max())
    hi = math.log(45.0) - float(alpha.min())
    x = lo + step * np.arange(int(math.ceil((hi - lo) / step)) + 1)
    fine = _sums(alpha, B, p, x, step)
    coarse = _sums(alpha, B, p, x[::2], 2 * step)
    return IntegralRisk(risk=fine, error_estimate=abs(fine - coarse), nodes=x.size)
