"""Representability ceilings: the best risk the model class can reach on each Table 1 task's population.

A Table 1 row compares how close training plans get to the task's best value; that comparison tests learning
only if the model class (H heads, softmax attention with one fixed query per head, linear readout;
``numerics.model``) can get close to that value at all.  ``ceiling(task, d, heads, loss=...)`` returns a
:class:`Ceiling`: an interval [lower, upper] that contains the infimum of the population risk over all
parameters, the value reached (``risk`` = upper end reached by a stated construction or search), how it was
obtained (``kind``, ``method``) and the task's own best value (``best_risk``).

Two facts carry most of the ceilings (docs/setting.md, "Capacity"):

* Limits of attention.  As scores go to +-infinity in a fixed pattern (a ranking of the token types, ties
  allowed), f tends to the count-weighted average readout over the top-ranked token types present in the
  string.  For a fixed pattern that limit is linear in the readout, so the best limit risk of a pattern is a
  finite weighted least-squares problem.  It is reached as the scale grows (dominated convergence: f stays
  in the convex hull of the readout values), so it is an upper bound on the infimum; when it is 0, it is the
  infimum.
* Sign-linearity.  With one head and one-hot tokens, f = (w . c) / (v . c) with v_k = e^{alpha_k} > 0,
  w_k = beta_k v_k and c the token counts, so numerator and denominator are linear in the counts.  Any
  linear relation sum_P kappa_s c_s = sum_M kappa_s c_s (kappa > 0) between count vectors of positive
  strings P and negative strings M (a Farkas certificate that no linear rule classifies them) makes a convex
  combination of f over P equal one over M, whence sum_{s in P u M} |f_s - y_s| >= 2 for every parameter,
  and the risk is at least 2 / sum_s 1/pi_s (pi_s: the probability of count vector s).  Over a family of
  such certificates the dual of min sum pi_s e_s^2 / 2 subject to them gives the bound (weak duality: any
  nonnegative multipliers give a valid bound).  The even-pairs certificates are of this form.
* AND's certificates are not: c(u + k a + l b) + c(u) = c(u + k a) + c(u + l b) puts the negative string u
  beside the positive one.  The four errors still sum to at least 2, by a step that needs v > 0: the
  all-marked string dominates the other three, so its denominator is the largest,
  D_P = D_u + k v_a + l v_b >= max(D_u + k v_a, D_u + l v_b, D_u) (D_s = v . c_s).  Writing each output as
  f_s D_s = w . c_s, the relation holds for the numerators and the denominators alike, and with the labels
  (+1 for P, -1 for the rest) it reads 2 D_P = (1 - f_P) D_P + (1 + f_ua) D_ua + (1 + f_ub) D_ub
  - (1 + f_u) D_u <= sum_s |f_s - y_s| D_s <= D_P sum_s |f_s - y_s|: dividing by D_P gives the 2.  Without
  the dominance (a weight v_k <= 0, which softmax never gives) the errors can sum to far less than 2.

Ceilings per task (all at the task's own length law):

* occurrence, OR (any H), AND (H >= 2): exact infimum 0 = Bayes risk, reached in the limit of the best
  attention pattern (found by least squares over all patterns of the class tokens, symmetric parameters);
* AND, H = 1: not representable; a proved lower bound (certificates {u, u + k a, u + l b, u + k a + l b},
  k, l <= 4, for every unmarked part u) and the best value found (limit patterns and a search over finite scores, readout by
  least squares);
* ICL (squared and cross-entropy), any H: exact infimum 0 by construction (attention on the tokens whose
  previous symbol is the trigger; they are all the answer o);
* SLR: Monte Carlo.  best_risk is the Bayes risk E[Var(y | X)] / 2 (the posterior of the location J is
  quadratic in x_i, outside the model class since gamma^2 != 1); the model's risk is bounded by the best
  over alpha = a k*, beta = b v* (fitted on one sample, evaluated on another);
* even pairs, "ends" embedding: H >= 2, exact infimum 0 by construction (``even_pairs_ends_construction``:
  one head reads "no b at the ends", the other "no a at the ends"); H = 1, not representable, with the proved
  lower bound (1 - p) / 8: for every length n >= 2 and middle counts, the four strings x...y with the same
  middle give the certificate c(a..a) + c(b..b) = c(a..b) + c(b..a), four classes of equal probability pi,
  so each family costs at least pi / 2 and the families of one length hold P(n) / 4 in all;
* even pairs, "query" embedding: exact infimum 0 by construction (attention on the first token);
  "adjacent" embedding (H = 1): not representable; a proved lower bound (certificates a^i, b^j, a^i b^j,
  b^j a^i, a^i b^j a^i, b^j a^i b^j, i, j <= 6) and the best value found by multi-start L-BFGS on the exact class
  population (truncated, with the truncation in the bound).
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from scipy.special import gammaln

from numerics.model import Model, Params
from theory.validation import SettingError, check_int

from numerics.experiments import engine
from numerics.experiments import tasks
from numerics.experiments.population import marked_symbols, population

LOSSES = {"ICL": ("squared", "cross_entropy")}
"""Losses a ceiling is computed for (default: squared only)."""

MC_Z = 3.0
"""Monte Carlo bounds are stated at MC_Z standard errors."""

ROUNDING = 1e-12
"""Floating-point allowance on a least-squares residual that is 0 in exact arithmetic."""

VERDICTS = ("representable", "not representable", "undecided")


@dataclass(frozen=True)
class Ceiling:
    """The representability ceiling of a (task, d, heads, loss).

    The infimum of the population risk over all parameters lies in [lower, upper] = [risk - risk_error, risk]
    except for Monte Carlo kinds, where ``upper`` adds MC_Z standard errors to ``risk`` (the estimate of
    the reached risk) and ``lower`` is the estimated Bayes risk less MC_Z standard errors.  ``details``
    holds the construction's parameters, the pieces of the bound and the time taken.
    """

    task: str
    d: int
    heads: int
    loss: str
    risk: float
    risk_error: float
    accuracy: float | None
    best_risk: float
    kind: str
    method: str
    lower: float = math.nan
    upper: float = math.nan
    details: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if math.isnan(self.lower):
            object.__setattr__(self, "lower", self.risk - self.risk_error)
        if math.isnan(self.upper):
            object.__setattr__(self, "upper", self.risk)

    def representable(self, tol: float) -> bool:
        """True when the model class certainly reaches within ``tol`` of the task's best value
        (upper - best_risk <= tol)."""
        return self.upper - self.best_risk <= tol

    def not_representable(self, tol: float) -> bool:
        """True when the model class certainly stays more than ``tol`` above the best value
        (lower - best_risk > tol)."""
        return self.lower - self.best_risk > tol

    def verdict(self, tol: float) -> str:
        """"representable", "not representable", or "undecided" when [lower, upper] straddles best + tol."""
        if self.representable(tol):
            return "representable"
        return "not representable" if self.not_representable(tol) else "undecided"

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------------
# limits of attention: weak orderings of the token types and least squares per pattern


def weak_orderings(T: int) -> list[tuple[int, ...]]:
    """Every ranking of T token types with ties (rank 0 on top), ranks contiguous from 0: 1, 3, 13 for
    T = 1, 2, 3."""
    out = []
    for ranks in itertools.product(range(T), repeat=T):
        if set(ranks) == set(range(max(ranks) + 1)):
            out.append(ranks)
    return out


def limit_features(m: np.ndarray, ranks) -> np.ndarray:
    """Attention weights (N, T) in the limit of a pattern: counts restricted to the top-ranked types present,
    normalised (rows with no token get 0)."""
    ranks = np.asarray(ranks)
    present = m > 0
    big = ranks.max() + 1
    top = np.where(present, ranks[None, :], big).min(axis=1, keepdims=True)
    sel = np.where(present & (ranks[None, :] == top), m, 0.0)
    tot = sel.sum(axis=1, keepdims=True)
    return sel / np.where(tot > 0, tot, 1.0)


def _weighted_lstsq(Phi: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, float]:
    """Readout theta minimising sum w (Phi theta - y)^2 / 2 and that risk (residual computed directly)."""
    sw = np.sqrt(w)[:, None]
    theta = np.linalg.lstsq(Phi * sw, y * sw[:, 0], rcond=None)[0]
    r = Phi @ theta - y
    return theta, 0.5 * float((w * r * r).sum())


def best_pattern(m: np.ndarray, y: np.ndarray, w: np.ndarray, heads: int):
    """The best limiting pattern for ``heads`` heads (unordered tuples of weak orderings): (risk, patterns,
    readout (heads, T)).  Normal equations rank the patterns; the best is re-solved by least squares."""
    T = m.shape[1]
    orders = weak_orderings(T)
    yy = float((w * y * y).sum())
    gram, Fy = {}, []
    if heads > 1:  # every pair of patterns: the features of all patterns at once (not their weighted copies)
        feats = [limit_features(m, r) for r in orders]
        for i in range(len(orders)):
            wf = feats[i] * w[:, None]
            Fy.append(feats[i].T @ (w * y))
            for j in range(i, len(orders)):
                gram[i, j] = wf.T @ feats[j]
                gram[j, i] = gram[i, j].T
        del feats, wf  # the best pattern's features are rebuilt below: do not hold all of them meanwhile
    else:  # one pattern at a time: memory of one (N, T) feature array
        for i, r in enumerate(orders):
            f = limit_features(m, r)
            Fy.append(f.T @ (w * y))
            gram[i, i] = (f * w[:, None]).T @ f
    best = (math.inf, None)
    for combo in itertools.combinations_with_replacement(range(len(orders)), heads):
        G = np.block([[gram[i, j] for j in combo] for i in combo])
        b = np.concatenate([Fy[i] for i in combo])
        theta = np.linalg.lstsq(G, b, rcond=None)[0]
        risk = 0.5 * (yy - b @ theta)
        if risk < best[0]:
            best = (risk, combo)
    combo = best[1]
    Phi = np.concatenate([limit_features(m, orders[i]) for i in combo], axis=1)
    theta, risk = _weighted_lstsq(Phi, y, w)
    return risk, [orders[i] for i in combo], theta.reshape(heads, T)


def _accuracy(f: np.ndarray, labels: np.ndarray, w: np.ndarray, readout) -> tuple[float, float]:
    """(probability-weighted accuracy, tied mass) by the engine's rule for the trained runs
    (``engine.predictions`` at ``engine.tie_margin`` of the readout: per head, the values the outputs f are
    convex combinations of, any shape (heads, ...)), normalised by the total weight."""
    B = np.asarray(readout, dtype=float)
    hits, tied = engine.prediction_hits(np.asarray(f)[:, None, None], labels, engine.tie_margin(B.reshape(1, B.shape[0], -1, 1)))
    return float((w * hits[:, 0]).sum() / w.sum()), float((w * tied[:, 0]).sum() / w.sum())


# ------------------------------------------------------------------------------------------------
# occurrence, OR, AND


def and_lower_bound(d: int, tail: float = 1e-14, K: int = 1) -> float:
    """The sum of ``and_lower_bound_terms`` (below)."""
    return float(and_lower_bound_terms(d, tail, K)[1].sum())


def and_lower_bound_terms(d: int, tail: float = 1e-14, K: int = 1):
    """A lower bound on the squared risk of every one-head model on AND (any parameters, not only symmetric).

    For each unmarked part u (a count vector over the d - 2 unmarked symbols, |u| = m >= 1) and k, l >= 1 the
    count vectors u, u + k a, u + l b, u + k a + l b (labels -, -, -, +) satisfy c(u + k a + l b) + c(u) =
    c(u + k a) + c(u + l b), so the sum of their four errors is >= 2: not by a Farkas relation (u, a negative
    string, stands beside the positive one) but because the all-marked string's attention denominator is the
    largest of the four, D(u + k a + l b) = D(u) + k e^{alpha_a} + l e^{alpha_b} (module doc, "AND's
    certificates").  With
    pi(u + i a + j b) = T(u) g_ij(m), T(u) = m! / prod u! d^-m and g_ij(m) = P(n = m + i + j) (m + i + j)! /
    (m! i! j!) d^-(i + j), and sum_{|u| = m} T(u) = ((d - 2)/d)^m, the parts with |u| = m contribute at least
    ((d - 2)/d)^m times the bound of the families k, l <= K over the g_ij(m): for K = 1 the closed form
    2 / sum_ij 1/g_ij(m); for K > 1 the dual (``certificate_lower_bound``) solved on a grid of m, its
    multipliers reused at every m (any nonnegative multipliers give a valid bound) and never below the K = 1
    term.  Terms are summed for m = 1, ... until the geometric tail is below ``tail`` (dropping terms keeps a
    lower bound).  Returns (m, the bound's term at each m, g (m, members), the families as member lists).
    """
    p = tasks.length_parameter("AND", d)
    m_max = int(math.ceil(math.log(tail) / math.log1p(-p))) + 2
    m = np.arange(1, m_max + 1, dtype=float)

    def log_g(i, j):
        n = m + i + j
        return (math.log(p) + (n - 1) * math.log1p(-p) + gammaln(n + 1) - gammaln(m + 1)
                - math.lgamma(i + 1) - math.lgamma(j + 1) - (i + j) * math.log(d))

    weight = np.exp(m * math.log1p(-2.0 / d))
    inv = sum(np.exp(-log_g(i, j)) for i in (0, 1) for j in (0, 1))
    single = 2.0 / inv
    if K == 1:
        g = np.exp(np.stack([log_g(i, j) for i in (0, 1) for j in (0, 1)], axis=1))
        return m, weight * single, g, [[0, 2, 1, 3]]
    members = [(i, j) for i in range(K + 1) for j in range(K + 1)]
    col = {ij: c for c, ij in enumerate(members)}
    fams = [[col[0, 0], col[k, 0], col[0, l], col[k, l]] for k in range(1, K + 1) for l in range(1, K + 1)]
    g = np.exp(np.stack([log_g(i, j) for i, j in members], axis=1))      # (m, members)
    A = np.zeros((len(fams), len(members)))
    for f, F in enumerate(fams):
        A[f, F] = 1.0
    scale = 1.0 / ((1.0 / g) @ A.T)                                       # (m, families)

    def dual(nu):  # nu (m, families) >= 0 in units of each family's own optimum: a valid bound per m
        mu = scale * nu
        t = mu @ A
        return 2 * mu.sum(axis=1) - (t * t / (2 * g)).sum(axis=1)

    grid = np.unique(np.geomspace(1, m_max, 12).astype(int)) - 1
    nus = np.array([_dual_multipliers(g[r], fams) for r in grid])
    nearest = grid[np.abs(np.log(m[:, None]) - np.log(m[grid][None, :])).argmin(axis=1)]
    nu = nus[np.searchsorted(grid, nearest)]
    return m, weight * np.maximum(dual(nu), single), g, fams


def _dual_multipliers(probs: np.ndarray, fams: list[list[int]]) -> np.ndarray:
    """The maximiser nu >= 0 of ``certificate_lower_bound``'s dual, in units of each family's own optimum."""
    return certificate_lower_bound(probs, fams, return_multipliers=True)[1]


AND_CERTIFICATE_K = 4
"""AND's one-head lower bound uses the certificates u, u + k a, u + l b, u + k a + l b for k, l <= 4."""

SEARCH_MASS = 1e-2
"""The finite-score search runs on the heaviest classes holding all but SEARCH_MASS of the probability; the
point it finds is then evaluated on the whole class population."""


def _symbol_search_h1(pop, y: np.ndarray, w: np.ndarray, span: float = 12.0):
    """Best one-head risk over finite scores (alpha_u = 0; alpha_a = alpha_b on a grid, then a 2-d local
    refinement, on the heaviest classes), readout by least squares on all classes: (risk, alpha, beta)."""
    order = np.argsort(w)
    heavy = np.sort(order[np.cumsum(w[order]) > SEARCH_MASS])
    m, ys, ws = pop.m[heavy], y[heavy], w[heavy]
    wy, yy = ws * ys, float((ws * ys * ys).sum())

    def fit(alpha):  # normal equations (3 x 3) for the search; the caller re-solves the best directly
        e = m * np.exp(alpha - alpha.max())[None, :]
        Phi = e / e.sum(axis=1, keepdims=True)
        b = Phi.T @ wy
        beta = np.linalg.lstsq((Phi * ws[:, None]).T @ Phi, b, rcond=None)[0]
        return 0.5 * (yy - b @ beta), beta

    def obj(x):
        return fit(np.array([x[0], x[1], 0.0]))[0]

    grid = np.linspace(-span, span, 25)
    vals = [obj((g, g)) for g in grid]
    g0 = grid[int(np.argmin(vals))]
    res = minimize(obj, x0=np.array([g0, g0]), method="Nelder-Mead",
                   options={"xatol": 1e-5, "fatol": 1e-12, "maxiter": 400})
    alpha = np.array([res.x[0], res.x[1], 0.0])
    e = pop.m * np.exp(alpha - alpha.max())[None, :]
    beta, risk = _weighted_lstsq(e / e.sum(axis=1, keepdims=True), y, w)
    return risk, alpha, beta


def limit_rule_is_exact(task: str, patterns, theta: np.ndarray, tol: float = 1e-9) -> bool:
    """Whether the limit of ``patterns`` with readout ``theta`` gives f = y on every string, not only on the
    classes kept: for every set of class tokens present, at counts all 1 and at each token alone raised to
    1000 (a count-weighted average that equals y at all of these has equal readouts on its tier)."""
    k = marked_symbols(task)
    T = k + 1
    rows, labels = [], []
    for present in itertools.product((0, 1), repeat=T):
        if not any(present):
            continue
        marked = present[:k]
        label = {"occurrence": marked[0], "OR": any(marked), "AND": all(marked)}[task]
        base = np.array(present, float)
        rows.append(base)
        for t in np.flatnonzero(base):
            heavy = base.copy()
            heavy[t] = 1000.0
            rows += [heavy]
        labels += [1.0 if label else -1.0] * (1 + int(base.sum()))
    m = np.array(rows)
    f = sum(limit_features(m, r) @ theta[h] for h, r in enumerate(patterns))
    return bool(np.all(np.abs(f - np.array(labels)) <= tol))


def _symbol_ceiling(task: str, d: int, heads: int, mass_tol: float, len_tol: float) -> Ceiling:
    pop = population(task, d, mass_tol=mass_tol, len_tol=len_tol)
    y, w, m = pop.y[:, 0], pop.weights, pop.m
    dropped = pop.extra["dropped"]
    risk, patterns, theta = best_pattern(m, y, w, heads)
    f = sum(limit_features(m, r) @ theta[h] for h, r in enumerate(patterns))
    acc, tied = _accuracy(f, pop.labels, w, theta)
    details = {"patterns": [list(r) for r in patterns], "readout": theta.tolist(), "classes": int(len(w)),
               "dropped_mass": dropped, "mass_tol": mass_tol, "len_tol": len_tol, "accuracy_tied": tied,
               "token_classes": ["a", "u"] if marked_symbols(task) == 1 else ["a", "b", "u"]}
    names = details["token_classes"]
    how = ("least squares over the limits of attention (every ranking of the class tokens "
           f"{', '.join(names)} per head, {len(weak_orderings(len(names)))} rankings, symmetric parameters) "
           f"on the class-reduced population ({len(w)} classes, dropped mass {dropped:.1e})")
    if risk <= ROUNDING and limit_rule_is_exact(task, patterns, theta):
        # the limit reaches 0 = the Bayes risk: the infimum; f -> y for every string, dropped mass included
        return Ceiling(task, d, heads, "squared", risk, risk, acc, 0.0,
                       "exact infimum (0, approached as the attention scale grows; not attained)",
                       how + f"; best pattern {patterns}, readout {np.round(theta, 6).tolist()}",
                       lower=0.0, upper=risk, details=details)
    # H = 1 on AND: finite scores can beat every limit pattern; the lower bound is proved separately
    pattern_risk = risk
    fin_risk, alpha, beta = _symbol_search_h1(pop, y, w)
    lower = and_lower_bound(d, K=AND_CERTIFICATE_K) if (task == "AND" and heads == 1) else 0.0
    if fin_risk < risk:
        e = m * np.exp(alpha - alpha.max())[None, :]
        f = (e / e.sum(axis=1, keepdims=True)) @ beta
        acc, tied = _accuracy(f, pop.labels, w, beta[None])
        risk, bmax = fin_risk, float(np.abs(beta).max())
        details.update(alpha=alpha.tolist(), beta=beta.tolist(), reached_by="finite scores", accuracy_tied=tied)
    else:
        bmax = float(np.abs(theta).max())
        details["reached_by"] = "limit pattern"
    # the dropped classes: f stays in the convex hull of the readout, loss <= (max|beta| + 1)^2 / 2
    upper = risk + dropped * (bmax + 1.0) ** 2 / 2.0
    details.update(limit_pattern_risk=pattern_risk, search_risk=fin_risk,
                   lower_bound=lower)
    return Ceiling(task, d, heads, "squared", upper, upper - lower, acc, 0.0,
                   "bracket: proved lower bound, upper bound reached (not the infimum)",
                   f"lower: certificates {{u, u+ka, u+lb, u+ka+lb}}, k, l <= {AND_CERTIFICATE_K}, over every "
                   "unmarked part u (sign-linearity, any parameters; dual bound); upper: best of " + how + " and a search over finite scores "
                   "(alpha_u = 0, grid on alpha_a = alpha_b, Nelder-Mead in (alpha_a, alpha_b), on the classes "
                   "holding 99% of the mass), readout by least squares on all classes, plus dropped mass times "
                   "the largest loss",
                   lower=lower, upper=upper, details=details)


# ------------------------------------------------------------------------------------------------
# ICL


def _icl_ceiling(d: int, heads: int, loss: str) -> Ceiling:
    ce = loss == "cross_entropy"
    method = ("construction: head 1 has alpha = s e_{d+q} (score s on every token whose previous symbol is the "
              "trigger q, 0 elsewhere) and readout B = c [I_d; 0] (value e_z of the token's own symbol), other "
              "heads 0; every token after q is the answer o and one exists, so as s -> infinity f -> c e_o "
              + ("and the cross-entropy log(1 + (d - 1) e^-c) -> 0 as c -> infinity" if ce
                 else "with c = 1, and the squared loss -> 0"))
    return Ceiling("ICL", d, heads, loss, 0.0, 0.0, 1.0, 0.0,
                   "exact infimum (0, approached by the construction; not attained)", method,
                   details={"construction": {"alpha": "s e_(d+q)", "B": "c [I_d; 0]"}})


# ------------------------------------------------------------------------------------------------
# SLR


def slr_projections(d: int, N: int, rng: np.random.Generator):
    """N SLR strings reduced to what the ceiling needs, per token: (x.k*, x.v*, |x_perp|^2) (exact in law:
    the noise tokens and the signal's noise are isotropic).  Tokens of all strings are concatenated
    (flat arrays); returns (xk, xv, rp, starts) with ``starts`` the index of each string's first token."""
    p = tasks.length_parameter("SLR", d)
    n = rng.geometric(p, N)
    starts = np.concatenate([[0], np.cumsum(n)[:-1]])
    total = int(n.sum())
    xk = rng.standard_normal(total)
    xv = rng.standard_normal(total)
    rp = rng.chisquare(d - 2, total) if d > 2 else np.zeros(total)
    J = starts + rng.integers(0, n)
    g = math.sqrt(tasks.SLR_GAMMA2)
    xk[J] = math.sqrt(d / 2) + g * xk[J]
    xv[J] = g * xv[J]
    rp[J] = tasks.SLR_GAMMA2 * rp[J]
    return xk, xv, rp, starts


def _segment_softmax_mean(score: np.ndarray, values: list[np.ndarray], starts: np.ndarray) -> list[np.ndarray]:
    """Per string (segments from ``starts``): sum_i softmax(score)_i v_i for each flat array v of ``values``."""
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(score))))
    top = np.maximum.reduceat(score, starts)
    e = np.exp(score - top[seg])
    den = np.add.reduceat(e, starts)
    return [np.add.reduceat(e * v, starts) / den for v in values]


def slr_posterior(d: int, xk, xv, rp, starts):
    """Posterior mean m(X) = E[y | X] and variance Var(y | X) of SLR: J's posterior is proportional to the
    likelihood ratio N(x_i; mu, gamma^2 I) / N(x_i; 0, I), mu = sqrt(d/2) k*."""
    g2, mu = tasks.SLR_GAMMA2, math.sqrt(d / 2)
    ell = -((xk - mu) ** 2 + xv ** 2 + rp) / (2 * g2) + (xk ** 2 + xv ** 2 + rp) / 2
    mean, second = _segment_softmax_mean(ell, [xv, xv * xv], starts)
    var = tasks.SLR_NOISE ** 2 + second - mean ** 2
    return mean, np.maximum(var, 0.0)


def _slr_family(a: float, xk, xv, starts) -> np.ndarray:
    """g = sum_i softmax(a x_i.k*) x_i.v* per string (a = inf: hard attention on the top score)."""
    if math.isinf(a):
        top = np.maximum.reduceat(xk, starts)
        seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(xk))))
        hit = xk == top[seg]
        return np.add.reduceat(np.where(hit, xv, 0.0), starts) / np.add.reduceat(hit.astype(float), starts)
    return _segment_softmax_mean(a * xk, [xv], starts)[0]


def _slr_ceiling(d: int, heads: int, samples: int, seed: int) -> Ceiling:
    rng = np.random.default_rng([seed, 14, d])
    fit = slr_projections(d, samples // 2, rng)
    ev = slr_projections(d, samples, rng)
    m_fit = slr_posterior(d, *fit)[0]

    def excess(a):
        g = _slr_family(a, fit[0], fit[1], fit[3])
        b = (g @ m_fit) / (g @ g)
        return 0.5 * np.mean((b * g - m_fit) ** 2), b

    res = minimize_scalar(lambda t: excess(math.exp(t))[0], bounds=(-3.0, 6.0), method="bounded",
                          options={"xatol": 1e-4})
    a, (ex, b) = math.exp(res.x), excess(math.exp(res.x))
    ex_inf, b_inf = excess(math.inf)
    if ex_inf < ex:
        a, b = math.inf, b_inf
    mean, var = slr_posterior(d, *ev)
    g = _slr_family(a, ev[0], ev[1], ev[3])
    gap = 0.5 * (b * g - mean) ** 2
    bayes = 0.5 * var
    N = samples
    gap_hat, gap_se = float(gap.mean()), float(gap.std(ddof=1) / math.sqrt(N))
    bay_hat, bay_se = float(bayes.mean()), float(bayes.std(ddof=1) / math.sqrt(N))
    acc = None
    risk = bay_hat + gap_hat
    upper = risk + MC_Z * gap_se
    details = {"a": None if math.isinf(a) else a, "hard_attention": math.isinf(a), "b": float(b),
               "samples": N, "seed": seed, "excess": gap_hat, "excess_se": gap_se,
               "bayes": bay_hat, "bayes_se": bay_se}
    return Ceiling("SLR", d, heads, "squared", risk, upper - bay_hat, acc, bay_hat,
                   f"Monte Carlo estimate of an upper bound (bounds at {MC_Z:g} standard errors)",
                   "best_risk: Bayes risk E[Var(y|X)]/2 (posterior of J from the likelihood ratio of each "
                   "token); risk: Bayes risk + E[(f - E[y|X])^2]/2 for alpha = a k*, beta = b v* (a fitted "
                   "on one sample by a bounded search in log a and hard attention a = inf, b by least squares, "
                   f"evaluated on an independent sample of {N}); other heads 0; the infimum over all "
                   "parameters lies between the Bayes risk and this",
                   lower=bay_hat, upper=upper, details=details)


# ------------------------------------------------------------------------------------------------
# even pairs


def _even_pairs_query_ceiling(d: int, heads: int) -> Ceiling:
    p = tasks.length_parameter("even_pairs", 2)
    second = (1 - p) * (2 - p) / p ** 2  # E[(n - 1)^2], n - 1 ~ Geometric on {0, 1, ...}
    method = ("construction (query embedding): alpha = s on the first-token types (1, x, q), 0 elsewhere; "
              "readout +1 on (1, x, x), -1 on (1, x, y != x), 0 elsewhere; f = y / (1 + (n - 1) e^-s), so "
              f"the risk is E[((n - 1) e^-s / (1 + (n - 1) e^-s))^2] / 2 <= e^(-2s) E[(n - 1)^2] / 2 = "
              f"{second / 2:g} e^(-2s) -> 0")
    return Ceiling("even_pairs", d, heads, "squared", 0.0, 0.0, 1.0, 0.0,
                   "exact infimum (0, approached by the construction; not attained)", method,
                   details={"embedding": "query", "E_n_minus_1_squared": second})


def even_pairs_query_construction_risk(s: float, n_max: int = 4000) -> float:
    """The population risk of the query construction at scale s (sum over lengths, tail below 1e-15)."""
    p = tasks.length_parameter("even_pairs", 2)
    n = np.arange(1, n_max + 1, dtype=float)
    pn = p * (1 - p) ** (n - 1)
    e = (n - 1) * math.exp(-s)
    return float(0.5 * (pn * (e / (1 + e)) ** 2).sum())


def even_pairs_ends_construction(s: float) -> tuple[np.ndarray, np.ndarray]:
    """Two heads (alpha (2, 8), B (2, 8, 1)) that represent even pairs under the "ends" embedding as s grows
    (types 4 first + 2 last + z: 0, 1 middle a, b; 2, 3 last a, b; 4, 5 first a, b; 6, 7 a string of one
    symbol).  Head 1 scores the b-ends 2s, the a-ends s, the middle 0 and reads -1, +1, 0: its limit is +1 when
    no end is b, else -1.  Head 2 scores the a-ends 2s, the b-ends s and reads 0, 2: its limit is 2 when no
    end is a, else 0.  The sum is +1 on aa and bb, -1 on ab and ba; a one-symbol string has score 2s and
    value 1/2 in both heads, so f = 1 exactly."""
    alpha = np.zeros((2, 8))
    beta = np.zeros((2, 8))
    alpha[0, [3, 5]], alpha[0, [2, 4]], alpha[:, [6, 7]] = 2 * s, s, 2 * s
    alpha[1, [2, 4]], alpha[1, [3, 5]] = 2 * s, s
    beta[0, [3, 5]], beta[0, [2, 4]], beta[:, [6, 7]] = -1.0, 1.0, 0.5
    beta[1, [3, 5]] = 2.0
    return alpha, beta[..., None]


def even_pairs_ends_construction_risk(s: float, n_max: int = 4000) -> float:
    """The population risk of ``even_pairs_ends_construction(s)``, summed over lengths (tail below 1e-15):
    a string of length n >= 2 enters only through its two ends and its n - 2 middle tokens, which have score
    0 and value 0 in both heads (the one-symbol strings have f = 1 exactly)."""
    p = tasks.length_parameter("even_pairs", 2)
    m = np.arange(0, n_max - 1, dtype=float)          # middle tokens of the lengths n = 2, 3, ...
    pn = p * (1 - p) ** (m + 1)
    e1, e2 = math.exp(s), math.exp(2 * s)
    same_a = 2 * e1 / (2 * e1 + m)
    same_b = -2 * e2 / (2 * e2 + m) + 4 * e1 / (2 * e1 + m)
    mixed = (e1 - e2) / (e1 + e2 + m) + 2 * e1 / (e2 + e1 + m)
    loss = ((same_a - 1) ** 2 + (same_b - 1) ** 2 + 2 * (mixed + 1) ** 2) / 8   # (f - y)^2 / 2, ends 1/4 each
    return float((pn * loss).sum())


def even_pairs_ends_lower_bound_one_head() -> float:
    """The proved lower bound (1 - p) / 8 on the one-head risk under the "ends" embedding (module doc)."""
    return (1 - tasks.length_parameter("even_pairs", 2)) / 8


def _even_pairs_ends_ceiling(d: int, heads: int) -> Ceiling:
    if heads >= 2:
        method = ("construction (ends embedding, two heads; further heads 0): "
                  "``even_pairs_ends_construction(s)``, whose risk -> 0 as s -> infinity "
                  f"({even_pairs_ends_construction_risk(20.0):.1e} at s = 20)")
        return Ceiling("even_pairs", d, heads, "squared", 0.0, 0.0, 1.0, 0.0,
                       "exact infimum (0, approached by the construction; not attained)", method,
                       details={"embedding": "ends"})
    lower = even_pairs_ends_lower_bound_one_head()
    return Ceiling("even_pairs", d, heads, "squared", 0.5, 0.5 - lower, 0.5, 0.0,
                   "bracket: proved lower bound, upper bound reached (not the infimum)",
                   "lower: (1 - p) / 8 by the certificates c(a..a) + c(b..b) = c(a..b) + c(b..a) of every length "
                   "and middle (sign-linearity, any parameters); upper: 1/2, the zero model",
                   lower=lower, upper=0.5, details={"embedding": "ends", "lower_bound": lower})


@lru_cache(maxsize=4)
def adjacent_population(mass_tol: float = 1e-4, len_tol: float = 1e-5):
    """The exact population of even pairs under the adjacent embedding as count classes.

    A string is determined up to its pair counts by (n, first symbol, number of runs r, number A of a's):
    its counts are (BOS, first), (last, EOS), ab and ba transitions alternating from the first symbol,
    aa = A - (a runs) and bb = B - (b runs); the class holds C(A - 1, ka - 1) C(B - 1, kb - 1) strings of
    probability p (1 - p)^(n - 1) 2^-n each.  Lengths n <= n_max with (1 - p)^n_max <= len_tol, then the
    lightest classes dropped while their mass stays <= mass_tol; ``extra["dropped"]`` is the mass left out.
    """
    p = tasks.length_parameter("even_pairs", 2)
    n_max = int(math.ceil(math.log(len_tol) / math.log1p(-p)))
    rows, logw, labels = [], [], []

    def lbinom(a, b):  # log C(a, b) for a >= b >= 0, and C(-1, -1) = 1 (no run of that symbol)
        a, b = np.maximum(a, 0), np.maximum(b, 0)
        return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)

    for n in range(1, n_max + 1):
        r, A = (x.ravel() for x in np.meshgrid(np.arange(1, n + 1), np.arange(0, n + 1), indexing="ij"))
        for first in (0, 1):
            k_first, k_other = (r + 1) // 2, r // 2
            ka, kb = (k_first, k_other) if first == 0 else (k_other, k_first)
            B = n - A
            ok = (A >= ka) & (B >= kb) & ((A == 0) == (ka == 0)) & ((B == 0) == (kb == 0))
            rr, AA, BB, kka, kkb = r[ok], A[ok], B[ok], ka[ok], kb[ok]
            last = np.where(rr % 2 == 1, first, 1 - first)
            c = np.zeros((len(rr), 9))
            c[:, first] = 1                                    # (BOS, first)
            c[np.arange(len(rr)), 3 * (last + 1) + 2] = 1      # (last, EOS)
            n_first_to_other, n_other_to_first = rr // 2, (rr - 1) // 2
            ab, ba = (n_first_to_other, n_other_to_first) if first == 0 else (n_other_to_first, n_first_to_other)
            c[:, 4], c[:, 6] = ab, ba
            c[:, 3], c[:, 7] = AA - kka, BB - kkb
            lw = (math.log(p) + (n - 1) * math.log1p(-p) - n * math.log(2)
                  + lbinom(AA - 1, kka - 1) + lbinom(BB - 1, kkb - 1))
            rows.append(c)
            logw.append(lw)
            labels.append(np.where(last == first, 1, -1))
    c = np.concatenate(rows)
    w = np.exp(np.concatenate(logw))
    lab = np.concatenate(labels)
    order = np.argsort(w)
    light = np.cumsum(w[order]) <= mass_tol
    keep = np.sort(order[~light])
    c, w, lab = c[keep], w[keep], lab[keep]
    extra = {"n_max": n_max, "classes": int(len(w)), "dropped": float(1.0 - w.sum()), "p": p}
    return tasks.Batch(np.eye(9), c, lab[:, None].astype(float), weights=w, labels=lab, extra=extra)


def adjacent_certificates(M: int = 6):
    """The certificate families F(i, j), i, j <= M, of the adjacent embedding (module doc): the count classes
    a^i, b^j, {a^x b^j a^y : x + y = 2i}, {b^x a^i b^y : x + y = 2j} (positive, kappa = 1) and a^i b^j,
    b^j a^i (negative, kappa = 2).  Returns (class keys, their probabilities, families as index lists)."""
    p = tasks.length_parameter("even_pairs", 2)

    def prob(n, strings):
        return strings * p * (1 - p) ** (n - 1) * 2.0 ** -n

    keys, probs, fams = {}, [], []

    def idx(key, n, strings):
        if key not in keys:
            keys[key] = len(probs)
            probs.append(prob(n, strings))
        return keys[key]

    for i in range(1, M + 1):
        for j in range(1, M + 1):
            fams.append([idx(("a", i), i, 1), idx(("b", j), j, 1), idx(("ab", i, j), i + j, 1),
                         idx(("ba", j, i), i + j, 1), idx(("aba", 2 * i, j), 2 * i + j, 2 * i - 1),
                         idx(("bab", 2 * j, i), i + 2 * j, 2 * j - 1)])
    return list(keys), np.array(probs), fams


def certificate_lower_bound(probs: np.ndarray, fams: list[list[int]], return_multipliers: bool = False):
    """max over mu >= 0 of 2 sum mu_F - sum_s (sum_{F ni s} mu_F)^2 / (2 pi_s): the dual of
    min sum pi_s e_s^2 / 2 subject to sum_{s in F} e_s >= 2; by weak duality every mu >= 0 gives a lower
    bound, so the value at the optimiser's point is a valid bound whatever its accuracy."""
    A = np.zeros((len(fams), len(probs)))
    for k, F in enumerate(fams):
        A[k, F] = 1.0

    scale = np.array([1.0 / (1.0 / probs[F]).sum() for F in fams])  # each family's own optimum multiplier
    As = A * scale[:, None]                                              # mu = scale * nu

    def dual(nu):
        t = nu @ As
        return 2 * (scale * nu).sum() - (t * t / (2 * probs)).sum()

    norm = scale.sum()  # the objective in units of the families' own optima, so gradients are O(1)

    def neg(nu):
        t = nu @ As
        return -dual(nu) / norm, -(2 * scale - As @ (t / probs)) / norm

    res = minimize(neg, np.full(len(fams), 0.5), jac=True, method="L-BFGS-B", bounds=[(0, None)] * len(fams),
                   options={"ftol": 1e-13, "gtol": 1e-10, "maxiter": 500})
    nu = np.maximum(res.x, 0.0)
    value = float(max(dual(nu), 0.0))
    return (value, nu) if return_multipliers else value


def one_head_risk_and_grad(x: np.ndarray, m: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Squared risk sum w (f - y)^2 / 2 of one head over one-hot tokens (counts m (N, D)) at x = (alpha, beta)
    and its gradient: the lean form of ``Model.risk_and_grad`` for H = 1, K = 1, X = I_D."""
    D = m.shape[1]
    alpha, beta = x[:D], x[D:]
    e = np.exp(alpha - alpha.max())
    me = m * e[None, :]
    den = me.sum(axis=1)
    f = (me @ beta) / den
    r = f - y
    q = w * r / den
    mq = q @ m
    mqf = (q * f) @ m
    g_beta = e * mq
    g_alpha = e * (beta * mq - mqf)
    return 0.5 * float((w * r * r).sum()), np.concatenate([g_alpha, g_beta])


ADJ_ALPHA_BOX, ADJ_BETA_BOX = 40.0, 5.0
"""The adjacent search's box: |alpha| <= 40 (score differences up to 80: limits in all but name) and
|beta| <= 5 (the dropped classes cost at most 18 times their mass; unboxed searches find no lower risk)."""


@lru_cache(maxsize=2)
def _adjacent_search(starts: int = 16, seed: int = 0):
    """Multi-start L-BFGS over (alpha, beta) of one head on a coarse adjacent class population (mass_tol 1e-2;
    the risk of the point found is then evaluated on the fine population): the best point found."""
    pop = adjacent_population(1e-2, 1e-3)
    m, y, w = pop.m, pop.y[:, 0], pop.weights
    rng = np.random.default_rng([seed, 9])
    best = (math.inf, None)
    for k in range(starts):
        x0 = np.clip(rng.standard_normal(18) * (0.5 if k == 0 else 2.0 * (1 + k % 3)), -ADJ_BETA_BOX, ADJ_BETA_BOX)
        res = minimize(one_head_risk_and_grad, x0, args=(m, y, w), jac=True, method="L-BFGS-B",
                       bounds=[(-ADJ_ALPHA_BOX, ADJ_ALPHA_BOX)] * 9 + [(-ADJ_BETA_BOX, ADJ_BETA_BOX)] * 9,
                       options={"maxiter": 2000, "gtol": 1e-9})
        if res.fun < best[0]:
            best = (float(res.fun), res.x)
    return best[1]


def _even_pairs_adjacent_ceiling(d: int, heads: int) -> Ceiling:
    pop = adjacent_population(1e-4, 1e-5)
    x = _adjacent_search()
    risk = one_head_risk_and_grad(x, pop.m, pop.y[:, 0], pop.weights)[0]
    model = Model(1, 9, 1)
    params = Params(x[:9].reshape(1, 9), x[9:].reshape(1, 9, 1))
    f = model.forward(params, pop.X, pop.m)[0][:, 0]
    acc, tied = _accuracy(f, pop.labels, pop.weights, x[9:][None])
    bmax = float(np.abs(x[9:]).max())
    upper = risk + pop.extra["dropped"] * (bmax + 1.0) ** 2 / 2.0
    keys, probs, fams = adjacent_certificates()
    lower = certificate_lower_bound(probs, fams) if heads == 1 else 0.0
    details = {"embedding": "adjacent", "alpha": x[:9].tolist(), "beta": x[9:].tolist(),
               "classes": pop.extra["classes"], "dropped_mass": pop.extra["dropped"], "lower_bound": lower,
               "certificate_families": len(fams), "accuracy_tied": tied}
    how_lower = ("lower: dual bound over the certificate families F(i, j), i, j <= 6 (a^i, b^j, a^i b^j, "
                 "b^j a^i, a^i b^j a^i, b^j a^i b^j; sign-linearity, any parameters)" if heads == 1 else
                 "lower: 0 (no bound proved for H >= 2)")
    return Ceiling("even_pairs", d, heads, "squared", upper, upper - lower, acc, 0.0,
                   "bracket: proved lower bound, upper bound reached (not the infimum)",
                   how_lower + "; upper: multi-start L-BFGS over one head's (alpha, beta) on the exact class "
                   f"population ({pop.extra['classes']} classes, dropped mass {pop.extra['dropped']:.1e}, "
                   "counted at the largest loss); further heads 0",
                   lower=lower, upper=upper, details=details)


# ------------------------------------------------------------------------------------------------


def ceiling(task: str, d: int, heads: int = 1, *, loss: str = "squared", **task_options) -> Ceiling:
    """The representability ceiling of ``task`` at alphabet size d with ``heads`` heads under ``loss``.

    Options: even pairs ``even_pairs_embedding`` ("query" default, "adjacent" or "ends"); SLR ``samples`` (Monte
    Carlo size, default 40000) and ``seed`` (default 0); occurrence, OR, AND ``mass_tol`` and ``len_tol``
    of the class population (defaults 1e-6 and 1e-8; AND 1e-4 and 1e-6, its population being the largest).
    """
    tasks.check_task(task, d)
    heads = check_int("heads", heads)
    if loss not in LOSSES.get(task, ("squared",)):
        raise SettingError(f"the ceiling of {task} is computed for loss in "
                           f"{', '.join(LOSSES.get(task, ('squared',)))}; got {loss!r}")
    allowed = {"even_pairs": {"even_pairs_embedding"}, "SLR": {"samples", "seed"},
               "occurrence": {"mass_tol", "len_tol"}, "OR": {"mass_tol", "len_tol"},
               "AND": {"mass_tol", "len_tol"}}.get(task, set())
    unknown = set(task_options) - allowed
    if unknown:
        raise SettingError(f"unknown option(s) for {task}: {', '.join(sorted(unknown))}")
    t0 = time.perf_counter()
    if task in tasks.POPULATION_TASKS:
        default = (1e-4, 1e-6) if task == "AND" else (1e-6, 1e-8)
        mass_tol = task_options.get("mass_tol", default[0])
        len_tol = task_options.get("len_tol", default[1])
        out = _symbol_ceiling(task, d, heads, mass_tol, len_tol)
    elif task == "ICL":
        out = _icl_ceiling(d, heads, loss)
    elif task == "SLR":
        samples = check_int("samples", task_options.get("samples", 40000))
        out = _slr_ceiling(d, heads, samples, int(task_options.get("seed", 0)))
    else:
        emb = task_options.get("even_pairs_embedding", "query")
        tasks.check_even_pairs_embedding(emb)
        out = {"query": _even_pairs_query_ceiling, "adjacent": _even_pairs_adjacent_ceiling,
               "ends": _even_pairs_ends_ceiling}[emb](d, heads)
    out.details["seconds"] = time.perf_counter() - t0
    return out
