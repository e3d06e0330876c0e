"""One fused pass for a training step on an exact class population: the risks and gradients of R runs of the
one-head, one-output model with the squared loss on a bag of two token types (occurrence, OR and one-head AND
in their reduced types), reading the population once.

A population step is memory-bound: its arithmetic per class is a few dozen operations, and the layout's
passes (``passes.forward`` and the backward sums of ``passes._risk_and_grad``) read and write several
(strings, runs) arrays each.  Here every class is read once per block of ``BLOCK`` classes, in a narrow
copy of the population (``narrow``: the counts in the narrowest integer type that holds them, the
targets as int8 where they are small integers, the weights as they are, float64), and every run's
weights, output, loss and four sums (the risk, the two type-value gradients dV_t = sum_n x_tn g_n and the
pair sum M = sum_n x_1n x_0n g_n of the score gradient) are taken in one vectorised loop over the block
(``_step_sums``).  A class's attention
weights need no exponential of their own: the two types' exponentials exp(s_t - max_t s_t) are taken once
per run (the shift makes both at most 1, so nothing overflows), and x_t = c_t e_t / (c_0 e_0 + c_1 e_1).

The narrowing is exact (every count and target is held as the same number), so the only rounding that
differs from the layout's passes is the summation order: within a block, eight interleaved partial sums
(class n in lane n mod 8), added as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)); the blocks' sums are
added with Neumaier's compensation, so the error of a sum does not grow with the number of blocks (a
million classes).  The score gradient keeps the pair form ds = (V_1 - V_0) M, which has no cancellation
beyond the gradient's own (``passes._risk_and_grad``).  The compiled loop (numba, where ``kernels.usable``)
and its numpy replay (``_numpy_sums``) do the same operations in the same order, so a step's bits do not
depend on whether numba runs (the tests hold them equal).  Outputs f are not formed: ``engine.risk_and_grad``
takes this pass when the caller asks for none (the trainer), the layout's passes otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from numerics.experiments import kernels

BLOCK = 1024
"""Classes per block: a multiple of the eight lanes; the narrow population is padded with empty classes of
weight 0 (which add +0 to every sum) to a whole number of blocks."""
LANES = 8


@dataclass(frozen=True)
class Narrow:
    """A population in the fused pass's layout: ``counts`` (2, Np) (each type's counts contiguous), ``y`` (Np,), ``weights`` (Np,), Np the
    population's N classes padded to a multiple of ``BLOCK``."""

    counts: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    size: int

    @property
    def bytes_per_class(self) -> int:
        """What the pass reads of one class: its two counts, its target and its weight."""
        return self.counts.itemsize * 2 + self.y.itemsize + self.weights.itemsize


def _exact_type(x: np.ndarray, types) -> np.dtype:
    """The first of ``types`` that holds every entry of x as the same number (float64 at last)."""
    if x.size == 0 or not np.all(np.isfinite(x)):
        return np.dtype(np.float64)
    for t in types:
        info = np.iinfo(t)
        if x.min() >= info.min and x.max() <= info.max and np.array_equal(x.astype(t).astype(float), x):
            return np.dtype(t)
    return np.dtype(np.float64)


def narrow(tb) -> Narrow:
    """The fused pass's copy of a bag population (``layout.Tokens`` with two types and one output), built once
    per count matrix and kept on ``tb``: counts in int16 or int32 where they are integers that fit, targets
    in int8 where they are small integers (the tasks' +-1 and 0/1), weights in float64; every value the same
    number as in ``tb``."""
    got = tb.__dict__.get("_narrow")
    if got is not None and got[0] is tb.counts:
        return got[1]
    counts, y, w = np.asarray(tb.counts, float), np.asarray(tb.y, float)[:, 0], np.asarray(tb.weights, float)
    N = counts.shape[0]
    Np = -(-N // BLOCK) * BLOCK
    ct, yt = _exact_type(counts, (np.int16, np.int32)), _exact_type(y, (np.int8,))
    nc, ny, nw = np.zeros((2, Np), ct), np.zeros(Np, yt), np.zeros(Np)
    nc[:, :N], ny[:N], nw[:N] = counts.T, y, w
    out = Narrow(nc, ny, nw, N)
    tb.__dict__["_narrow"] = (tb.counts, out)
    return out


def applies(tb, H: int, K: int, loss: str) -> bool:
    """Whether the fused pass takes a step on ``tb``: a bag of two token types (``layout.Tokens`` with a count
    matrix), one head, one output, one target column, the squared loss."""
    counts = getattr(tb, "counts", None)
    return (counts is not None and counts.ndim == 2 and counts.shape[1] == 2 and H == 1 and K == 1
            and loss == "squared" and tb.y.ndim == 2 and tb.y.shape[1] == 1 and getattr(tb, "groups", 1) == 1)


def _type_values(alpha: np.ndarray, B: np.ndarray, table) -> tuple[np.ndarray, np.ndarray]:
    """Each type's exponential e (2, C), shifted by the run's larger score (a non-finite maximum by 0), and
    value V (2, C), for the C = R runs' columns."""
    R, H, D = alpha.shape
    S = np.asarray(table @ alpha.reshape(R * H, D).T)                                # (2, C)
    V = np.asarray(table @ B.transpose(2, 0, 1, 3).reshape(D, R * H))                 # (2, C)
    top = S.max(axis=0)
    top[~np.isfinite(top)] = 0.0
    return np.exp(np.minimum(S - top, 0.0)), V


def _step_sums(c0s, c1s, y, w, e, V, tot, comp, b0, b1, b2, b3):  # pragma: no cover - compiled
    """The four sums of every column c (risk, dV_0, dV_1, M) into tot (4, C), Neumaier's compensations in comp
    (4, C), block by block (``BLOCK`` classes, a whole number of them).  A block's terms of one column are summed
    in eight lanes in one elementwise loop over one-dimensional arrays: ``b0`` .. ``b3`` (BLOCK + 8 each, one
    a term) hold each lane's running sum at k + 8 (b[k + 8] = b[k] + term k, from b[:8] = 0), a dependence
    eight entries back that leaves the loop branch-free and in vector registers; the lanes' sums end at
    b[BLOCK:] and are added as a tree."""
    Np = c0s.shape[0]
    C = e.shape[1]
    for lo in range(0, Np, BLOCK):
        k0 = c0s[lo:lo + BLOCK]
        k1 = c1s[lo:lo + BLOCK]
        yb = y[lo:lo + BLOCK]
        wb = w[lo:lo + BLOCK]
        for c in range(C):
            e0 = e[0, c]
            e1 = e[1, c]
            v0 = V[0, c]
            v1 = V[1, c]
            for j in range(LANES):
                b0[j] = 0.0
                b1[j] = 0.0
                b2[j] = 0.0
                b3[j] = 0.0
            for k in range(BLOCK):
                c0 = float(k0[k])
                c1 = float(k1[k])
                w0 = c0 * e0
                w1 = c1 * e1
                Z = w0 + w1
                zero = Z == 0.0
                inv = 1.0 / (1.0 if zero else Z)
                x0 = (1.0 if c0 > 0.0 else 0.0) if zero else w0 * inv
                x1 = (1.0 if c1 > 0.0 else 0.0) if zero else w1 * inv
                wt = wb[k]
                err = (0.0 + x0 * v0 + x1 * v1) - float(yb[k])
                g = err * wt
                b0[k + LANES] = b0[k] + wt * (0.5 * (err * err))
                b1[k + LANES] = b1[k] + x0 * g
                b2[k + LANES] = b2[k] + x1 * g
                b3[k + LANES] = b3[k] + (x1 * x0) * g
            for q in range(4):
                r = (b0, b1, b2, b3)[q][BLOCK:]
                b = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
                s = tot[q, c]
                t = s + b
                if abs(s) >= abs(b):
                    comp[q, c] += (s - t) + b
                else:
                    comp[q, c] += (b - t) + s
                tot[q, c] = t


def _numpy_sums(nar: Narrow, e: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_step_sums`` in numpy, the same operations in the same order: the terms of every class and column,
    each lane's sum over its block in order from +0 (a reduction over an outer axis adds its rows in turn),
    the lanes' tree, then the blocks one at a time."""
    c0 = nar.counts[0].astype(float)[:, None]
    c1 = nar.counts[1].astype(float)[:, None]
    w0, w1 = c0 * e[0], c1 * e[1]
    Z = w0 + w1
    zero = Z == 0.0
    inv = 1.0 / np.where(zero, 1.0, Z)
    x0 = np.where(zero, np.where(c0 > 0.0, 1.0, 0.0), w0 * inv)
    x1 = np.where(zero, np.where(c1 > 0.0, 1.0, 0.0), w1 * inv)
    wt = nar.weights[:, None]
    err = (0.0 + x0 * V[0] + x1 * V[1]) - nar.y.astype(float)[:, None]
    g = err * wt
    terms = np.stack([wt * (0.5 * (err * err)), x0 * g, x1 * g, (x1 * x0) * g])      # (4, Np, C)
    C = e.shape[1]
    nb = nar.counts.shape[1] // BLOCK
    lanes = np.add.reduce(terms.reshape(4, nb, BLOCK // LANES, LANES, C), axis=2, initial=0.0)  # (4, nb, 8, C)
    L = [lanes[:, :, j] for j in range(LANES)]
    blocks = ((L[0] + L[1]) + (L[2] + L[3])) + ((L[4] + L[5]) + (L[6] + L[7]))        # (4, nb, C)
    tot, comp = np.zeros((4, C)), np.zeros((4, C))
    for k in range(nb):
        b = blocks[:, k]
        t = tot + b
        comp += np.where(np.abs(tot) >= np.abs(b), (tot - t) + b, (b - t) + tot)
        tot = t
    return tot, comp


def sums(nar: Narrow, e: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The four compensated sums (4, C) of every column: risk, dV_0, dV_1, M; by the compiled loop where
    ``kernels.usable``, else by its numpy replay (the same bits)."""
    C = e.shape[1]
    if kernels.usable():
        tot, comp = np.zeros((4, C)), np.zeros((4, C))
        _compiled()(nar.counts[0], nar.counts[1], nar.y, nar.weights, np.ascontiguousarray(e, np.float64),
                    np.ascontiguousarray(V, np.float64), tot, comp,
                    *(np.empty(BLOCK + LANES) for _ in range(4)))  # four arrays: rows of one run slower
    else:
        tot, comp = _numpy_sums(nar, e, V)
    return tot + comp


def risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(risks (R,), d risk / d alpha (R, 1, D), d risk / d B (R, 1, D, 1)) of R runs on a population that
    ``applies`` (no outputs)."""
    R, H, D = alpha.shape
    table = tb.table
    e, V = _type_values(alpha, B, table)
    tot = sums(narrow(tb), e, V)
    dV = tot[1:3]                                                                    # (2, C)
    part = (V[1] - V[0]) * tot[3]
    ds = np.stack([0.0 - part, part])                                                # (2, C)
    gB = np.asarray(table.T @ dV).reshape(D, R, H, 1).transpose(1, 2, 0, 3)
    ga = np.asarray(table.T @ ds).reshape(D, R, H).transpose(1, 2, 0)
    return tot[0].copy(), ga, gB


@lru_cache(maxsize=1)
def _compiled():
    """``_step_sums`` compiled by numba (on first use; numba caches the machine code beside this file)."""
    import numba

    return numba.njit(cache=True, nogil=True, boundscheck=False)(_step_sums)
