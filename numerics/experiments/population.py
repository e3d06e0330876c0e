"""Exact population sums of occurrence, OR and AND by the class reduction.

With parameters symmetric over the unmarked symbols, a string enters the model only through its length n
and the counts of the marked symbols (a; a and b for OR and AND).  The population risk and gradient are then
weighted sums over count classes, which the model evaluates as a shared table of class tokens
[e_a, (e_b,) u] with u = the mean of the unmarked one-hot vectors, counts (c_a, (c_b,) n - c_a - c_b) and
probability weights P(n) P(counts | n).  The table row u gives the score and value of every unmarked symbol
(they are equal by symmetry), and its gradient row is the per-coordinate gradient of each unmarked symbol,
so gradient descent stays symmetric and the sums are exact.

Weights (stated): P(n) = p exp((n - 1) log1p(-p)) times binomial probabilities (``scipy.stats.binom.pmf``,
Boost's, measured to 2.4e-14 relative, where the old difference of ``gammaln`` terms lost up to 2e-11 at
n ~ 7,000): P(c | n) for one marked count, P(c_a + c_b | n) P(c_a | c_a + c_b) for two.
``WEIGHT_RELATIVE_ERROR`` states their relative error, checked against arb on every class at d = 50 and on
classes spread over lengths and counts at d = 200 (tests/experiments/test_tasks.py).

Truncation (stated, parameters): lengths n <= n_max with tail mass P(n > n_max) = (1 - p)^n_max <=
``len_tol``; counts above the binomial 1 - 1e-16 quantile are left out (mass < 1e-16 per length, and per
marked symbol); then the lightest classes are dropped while their total mass stays <= ``mass_tol``.  The
weights are not renormalised.  ``dropped`` (reported, with its parts ``length_tail``, ``count_tails``,
``cut_mass`` and merged AND's ``split_mass``) is an upper bound on the neglected mass, given the weights'
stated relative error, summed from its parts, each computed directly (not as 1 - sum of the kept weights,
which at these tolerances is within the weights' own error: with the old gammaln weights it came out
negative at d = 200): the length tail in closed form, the count tails by
``binom.sf`` per length (a union bound over the marked symbols), and the sum of the dropped classes'
weights (a weight that underflows to 0 adds 0 here: at most 1e-308 each), widened by the weights' stated
relative error.  It bounds the risk's truncation error by dropped * max loss (``loss_bound``);
``rounding_bound`` is the stated allowance for the rest.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import binom

from theory.validation import SettingError

from numerics.experiments.engine import SUM_BLOCK
from numerics.experiments.tasks import Batch, check_task, length_parameter

QUANTILE_TAIL = 1e-16

WEIGHT_RELATIVE_ERROR = 1e-13
"""Stated relative error of every class weight (P(n) times binomial probabilities in float64); the largest
measured against arb is 2.4e-14 (tests/experiments/test_tasks.py holds to it every class of the runner's occurrence, OR
and AND populations at d = 50, and every 13th class at d = 200)."""

SPLIT_C = 55
"""Merged AND: the -1 share 2^(1 - c) of a class with c >= SPLIT_C marked tokens (at most 2^-54 of the class)
is left out and its mass counted in ``dropped`` (at d = 200 these shares would be 580,000 more classes, 46 %,
for a mass of 2.3e-23)."""

WIDEN = 1e-9
"""The left-out mass's parts are each computed to a few units in the last place; their sum is widened
by this relative margin so that ``dropped`` stays an upper bound."""


def _complement_power(x: float, n):
    """(1 - x)^n by log1p: relative error a few units in the last place at every n, where the float power of
    1 - x loses n times the rounding of 1 - x."""
    return np.exp(np.asarray(n) * np.log1p(-x))


def _pmf(c: np.ndarray, n: int, q: float) -> np.ndarray:
    """Binomial probabilities P(c | n, q): Boost's (``binom.pmf``), but (1 - q)^n at c = 0 by
    ``_complement_power``, where Boost's lost up to 7e-13 relative (n = 1,945, q = 1/200)."""
    out = binom.pmf(c, n, q)
    out[c == 0] = _complement_power(q, n)
    return out


def length_probability(p: float, n):
    """P(length = n) = p (1 - p)^(n - 1) for n >= 1 (``_complement_power``).  p = 1: every string has
    length 1."""
    if p >= 1:
        return np.where(np.asarray(n) == 1, 1.0, 0.0)
    return p * _complement_power(p, np.asarray(n) - 1)

CUT_CHUNK = 1 << 16
"""The mass cut's running total is taken over this many classes at a time (memory of the cut: 16 bytes per
class, the weights and their order, instead of all classes' counts and weights at once)."""


def marked_symbols(task: str) -> int:
    """Number of marked symbols of the task's class reduction (a; or a and b)."""
    return 1 if task == "occurrence" else 2


def class_table(d: int, marked: int) -> np.ndarray:
    """Rows e_0, ..., e_{marked-1} and the mean of the unmarked one-hot vectors."""
    X = np.zeros((marked + 1, d))
    X[np.arange(marked), np.arange(marked)] = 1.0
    X[marked, marked:] = 1.0 / (d - marked)
    return X


@lru_cache(maxsize=8)
def population(task: str, d: int, mass_tol: float = 1e-8, len_tol: float = 1e-12, merged: bool = False) -> Batch:
    """The population of ``task`` at alphabet size d as a weighted batch of count classes (see module doc).

    ``merged=True`` (OR and AND only): the classes of the a/b-symmetric reduction.  When every head's
    parameters are equal on a and b (zero initialisation with exact gradients keeps them so: the population
    is invariant under swapping a and b), a string enters the model only through its length and the count
    c = c_a + c_b of marked tokens, so the classes are (c, n - c) over the table [(e_a + e_b)/2, u], and the
    label splits each class: OR is +1 iff c > 0; AND is +1 with probability 1 - 2^(1-c) given c (each marked
    token is a or b with probability 1/2).  The table row (e_a + e_b)/2 sends half of each gradient to a and
    half to b, which is the exact gradient at symmetric parameters.  Its cost is that of occurrence.

    ``extra`` holds n_max, the number of classes and the dropped probability mass.
    """
    check_task(task, d)
    if task not in ("occurrence", "OR", "AND"):
        raise SettingError(f"the class reduction is for occurrence, OR and AND, not {task}")
    if not (0 < mass_tol < 1 and 0 < len_tol < 1):
        raise SettingError(f"mass_tol and len_tol must be in (0, 1), got {mass_tol}, {len_tol}")
    if merged and task == "occurrence":
        raise SettingError("the merged (a/b-symmetric) reduction is for OR and AND")
    p = length_parameter(task, d)
    k = marked_symbols(task)
    n_max = max(1, int(np.ceil(np.log(len_tol) / np.log1p(-p)))) if p < 1 else 1

    lengths = range(1, n_max + 1)
    his = [int(min(n, binom.isf(QUANTILE_TAIL, n, (k if merged else 1) / d) + 1)) for n in lengths]

    def counts_of(n, hi):  # the classes of length n, in int32 (half the memory of float)
        c = np.arange(hi + 1, dtype=np.int32)
        if k == 1 or merged:
            return c, np.zeros_like(c)
        ca, cb = (a.ravel() for a in np.meshgrid(c, c, indexing="ij"))
        keep = ca + cb <= n
        return ca[keep], cb[keep]

    # the weights of every class, written into one array block by block (no per-block copies kept); the blocks'
    # sizes come from the blocks themselves (built once more here: cheap beside the weights)
    offsets = np.cumsum([0] + [len(counts_of(n, hi)[0]) for n, hi in zip(lengths, his)])
    w = np.empty(int(offsets[-1]))
    q = (k if merged else 1) / d  # the binomial of the quantiles: one marked symbol, or both merged
    for n, hi, o, end in zip(lengths, his, offsets[:-1], offsets[1:]):
        ca, cb = counts_of(n, hi)
        if k == 1 or merged:
            w[o:end] = _pmf(ca, n, q)
        else:  # the multinomial (c_a, c_b, rest) as P(c_a + c_b | n) P(c_a | c_a + c_b), each marked token a or b
            c = ca + cb
            w[o:end] = _pmf(c, n, k / d) * binom.pmf(ca, c, 0.5)
        w[o:end] *= length_probability(p, n)
    # the left-out mass's first two parts: the length tail, and the count tails of every kept length (a union
    # bound over the marked symbols where each has its own quantile)
    ns, hs = np.arange(1, n_max + 1), np.array(his)
    count_tails = float(np.sum(binom.sf(hs, ns, q) * length_probability(p, ns))) * (1 if (k == 1 or merged) else 2)
    length_tail = float(_complement_power(p, n_max)) if p < 1 else 0.0
    # the mass cut: the lightest classes go while their running total (in increasing order) stays <= mass_tol;
    # the running total is taken a chunk at a time, carried from chunk to chunk in the same order of additions
    order = np.argsort(w)
    cut, total, chunk = len(order), 0.0, CUT_CHUNK
    for s in range(0, len(order), chunk):
        run = w[order[s:s + chunk]]
        run[0] += total
        np.cumsum(run, out=run)
        above = np.flatnonzero(run > mass_tol)
        if len(above):
            cut = s + int(above[0])
            break
        total = float(run[-1])
    # the dropped classes' mass, a chunk at a time (numpy's pairwise sum within, exact sum across: relative error
    # ~20 units in the last place, far inside WIDEN)
    cut_mass = math.fsum(float(np.sum(w[order[s:min(s + chunk, cut)]])) for s in range(0, cut, chunk))
    keep = np.sort(order[cut:])
    del order
    # the kept classes' counts, rebuilt block by block
    width = 3 if (k == 2 and not merged) else 2
    rows = []
    for n, hi, o, lo, up in zip(lengths, his, offsets, np.searchsorted(keep, offsets[:-1]),
                                np.searchsorted(keep, offsets[1:])):
        if up > lo:
            ca, cb = counts_of(n, hi)
            block = np.stack([ca, cb, n - ca - cb] if width == 3 else [ca, n - ca], axis=1)
            rows.append(block[keep[lo:up] - o])
    counts = np.concatenate(rows) if rows else np.zeros((0, width), np.int32)  # every class under the cut
    counts, w = counts.astype(float), w[keep]
    split_mass = 0.0
    if merged:
        c = counts[:, 0]
        if task == "OR":
            lab = np.where(c > 0, 1, -1)
        else:  # AND: split each class by the label, P(both | c) = 1 - 2^(1 - c) for c >= 1
            one_symbol = np.where(c >= 2, np.exp2(1.0 - c), 1.0)  # every marked token a, or every one b
            both = 1.0 - one_symbol
            # the -1 share of a class with c >= SPLIT_C is at most 2^-54 of it: left out, its mass counted in
            # dropped (computed as 1 - (1 - 2^(1 - c)) it would be 0 in float, and the share lost uncounted)
            split_mass = math.fsum((w * one_symbol)[c >= SPLIT_C].tolist())
            counts = np.concatenate([counts, counts])
            w = np.concatenate([w * both, np.where(c >= SPLIT_C, 0.0, w * one_symbol)])
            lab = np.concatenate([np.ones(len(c), int), -np.ones(len(c), int)])
            nz = w > 0
            counts, w, lab = counts[nz], w[nz], lab[nz]
        X = np.zeros((2, d))
        X[0, :2] = 0.5
        X[1, 2:] = 1.0 / (d - 2)
    else:
        present = counts[:, :k] > 0
        pos = {"occurrence": present[:, 0], "OR": present.any(axis=1), "AND": present.all(axis=1)}[task]
        lab = np.where(pos, 1, -1)
        X = class_table(d, k)
    left_out = (cut_mass + split_mass) * (1 + WEIGHT_RELATIVE_ERROR)
    dropped = min(1.0, (length_tail + count_tails + left_out) * (1 + WIDEN))
    extra = {"n_max": n_max, "classes": int(len(w)), "dropped": dropped, "length_tail": length_tail,
             "count_tails": count_tails, "cut_mass": cut_mass, "split_mass": split_mass,
             "mass_tol": mass_tol, "len_tol": len_tol, "p": p, "merged": merged}
    return Batch(X, counts, lab[:, None].astype(float), weights=w, labels=lab, extra=extra)


def _readout_max(B: np.ndarray) -> float:
    """f_max: the largest |f| any string can reach, sum over heads of max_k |B_hk| (B of shape (..., H, D, K)),
    the largest over runs."""
    return float(np.abs(B).max(axis=(-2, -1)).sum(axis=-1).max())


def loss_bound(dropped: float, B: np.ndarray) -> float:
    """Bound on the error of a population risk from the left-out mass: every left-out string has squared
    loss at most (1 + max |f|)^2 / 2 with |f| <= sum over heads of max_k |B_hk| (B of shape (..., H, D, K))."""
    fmax = _readout_max(B)
    return dropped * (1.0 + fmax) ** 2 / 2


def rounding_bound(risk: float, alpha: np.ndarray, B: np.ndarray) -> float:
    """Stated allowance for the float evaluation of a population risk ``engine.risk`` at parameters (alpha, B)
    (a statement checked against arb, not a proof): the weights' relative error (``WEIGHT_RELATIVE_ERROR``)
    and the blocked sum's (``engine.SUM_BLOCK`` + 3 units in the last place, the loss's own two roundings
    included) times the risk, plus each class's output f off by at most 32 (1 + a_max) units in the last place
    of f_max = sum over heads of max |B| (a weighted mean of readout entries whose weights are exponentials of
    scores of size up to a_max = max |alpha|, each rounded relative to its argument), which moves its loss by
    |y - f| |df| and the risk by at most that times sqrt(2 risk) (Cauchy-Schwarz, the weights summing to at
    most 1).  tests/experiments/test_tasks.py holds the reported risks of occurrence, OR and AND to it against arb sums
    over the same classes, up to |alpha| = 20 and |B| = 12, and occurrence's to it plus the truncation bound
    against the integral representation's arb balls."""
    u = np.finfo(float).eps / 2
    fmax = _readout_max(B)
    amax = float(np.abs(alpha).max())
    risk = abs(float(risk))
    return ((WEIGHT_RELATIVE_ERROR + (SUM_BLOCK + 3) * u) * risk
            + 32 * u * (1 + amax) * fmax * math.sqrt(2 * risk))


def expand(values: np.ndarray, d: int, marked: int) -> np.ndarray:
    """Class values (..., marked + 1, ...) on axis -2 expanded to the d symbols (the last class value
    repeated for every unmarked symbol): used for symmetric initial parameters."""
    idx = np.minimum(np.arange(d), marked)
    return np.take(values, idx, axis=-2)
