"""Exact population sums of occurrence, OR and AND by the class reduction.

With parameters symmetric over the unmarked symbols, a string enters the model only through its length n
and the counts of the marked symbols (a; a and b for OR and AND).  The population risk and gradient are then
weighted sums over count classes, which the model evaluates as a shared table of class tokens
[e_a, (e_b,) u] with u = the mean of the unmarked one-hot vectors, counts (c_a, (c_b,) n - c_a - c_b) and
probability weights P(n) P(counts | n).  The table row u gives the score and value of every unmarked symbol
(they are equal by symmetry), and its gradient row is the per-coordinate gradient of each unmarked symbol,
so gradient descent stays symmetric and the sums are exact.

Truncation (stated, parameters): lengths n <= n_max with tail mass P(n > n_max) = (1 - p)^n_max <=
``len_tol`` (default 1e-12); counts above the binomial 1 - 1e-16 quantile are left out (mass < 1e-16 per
length); then the lightest classes are dropped while their total mass stays <= ``mass_tol``.  The weights
are not renormalised: the neglected mass ``dropped`` (reported) bounds the error of the risk by
dropped * max loss.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import gammaln
from scipy.stats import binom

from theory.validation import SettingError

from .tasks import Batch, check_task, length_parameter

QUANTILE_TAIL = 1e-16

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

    def logp_n(n):  # p = 1 (OR at d = 4): every string has length 1, and 0 * log(0) is 0 here
        return np.log(p) + ((n - 1) * np.log1p(-p) if n > 1 else 0.0)

    lq, lr = np.log(1.0 / d), np.log1p(-k / d)
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
    for n, hi, o, end in zip(lengths, his, offsets[:-1], offsets[1:]):
        ca, cb = counts_of(n, hi)
        cr = n - ca - cb
        if merged:  # c marked tokens, each a or b: binomial(n, 2/d)
            lw = (gammaln(n + 1) - gammaln(ca + 1) - gammaln(cr + 1) + ca * np.log(k / d) + cr * lr + logp_n(n))
        else:
            lw = (gammaln(n + 1) - gammaln(ca + 1) - gammaln(cb + 1) - gammaln(cr + 1)
                  + (ca + cb) * lq + cr * lr + logp_n(n))
        w[o:end] = lw
    np.exp(w, out=w)
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
    if merged:
        c = counts[:, 0]
        if task == "OR":
            lab = np.where(c > 0, 1, -1)
        else:  # AND: split each class by the label, P(both | c) = 1 - 2^(1 - c) for c >= 1
            both = np.where(c >= 2, 1.0 - np.exp2(1.0 - c), 0.0)
            counts = np.concatenate([counts, counts])
            w = np.concatenate([w * both, w * (1.0 - both)])
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
    extra = {"n_max": n_max, "classes": int(len(w)), "dropped": float(1.0 - w.sum()),
             "mass_tol": mass_tol, "len_tol": len_tol, "p": p, "merged": merged}
    return Batch(X, counts, lab[:, None].astype(float), weights=w, labels=lab, extra=extra)


def loss_bound(dropped: float, B: np.ndarray) -> float:
    """Bound on the error of a population risk from the left-out mass: every left-out string has squared
    loss at most (1 + max |f|)^2 / 2 with |f| <= sum over heads of max_k |B_hk| (B of shape (..., H, D, K))."""
    fmax = float(np.abs(B).max(axis=(-2, -1)).sum(axis=-1).max())
    return dropped * (1.0 + fmax) ** 2 / 2


def expand(values: np.ndarray, d: int, marked: int) -> np.ndarray:
    """Class values (..., marked + 1, ...) on axis -2 expanded to the d symbols (the last class value
    repeated for every unmarked symbol): used for symmetric initial parameters."""
    idx = np.minimum(np.arange(d), marked)
    return np.take(values, idx, axis=-2)
