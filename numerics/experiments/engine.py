"""The Table 1 training engine: many runs advanced by one array program, on the tokens' structure.

A batch is held in the engine's layout (``layout.Tokens``, built by ``from_batch``); a **bank** is R runs of
the same model on the same data stream, each with its own parameters: alpha (R, H, D), B (R, H, D, K).
:func:`risk_and_grad` returns the R risks and their gradients in one pass (``passes``), in chunks of runs
that bound memory; :func:`risk` and :func:`risk_and_accuracy` the reported risks, summed by
``weighted_sum``, and accuracies (``readout``).  The trainer (``numerics.experiments.runner``) gives each
run its own step sizes, optimizer state and stopping rule.

The dense model (``numerics.model.Model.risk_and_grad``) stays the reference: the tests check that this
path agrees with it to 1e-12 on random batches, and its gradients by finite differences.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp  # noqa: F401  (callers and tests read ``engine.sp``)
from threadpoolctl import threadpool_limits

from theory.validation import SettingError

from numerics.model import loss_terms  # noqa: F401  (read through this module by callers)
from numerics.experiments.and_integral import IntegralPopulation
from numerics.experiments.allocator import keep_temporaries_on_heap  # noqa: F401
from numerics.experiments import popstep
from numerics.experiments.layout import (  # noqa: F401  (the layout's API, read through this module)
    DENSE_BAG_MAX_TYPES, KERNELS, Tokens, _dense_scatter, _onehot, check_kernel, from_batch, stack, stackable)
from numerics.experiments.passes import (  # noqa: F401
    Forward, _backward_rows, _bag_compiled, _risk_and_grad, forward)
from numerics.experiments.readout import (  # noqa: F401
    TIE_RTOL, _largest_l1, _risk_and_dl, _terms_and_dl, accuracy, losses, prediction_hits, predictions,
    tie_margin)


MOMENT_ELEMENTS = 1 << 24
"""``uniform_mean_token_moment`` keeps its strings x D arrays of mean tokens below this many elements (128 MB
each) by computing them in blocks of columns."""
MOMENT_ALIGN = 16
"""Column blocks of ``uniform_mean_token_moment`` start at multiples of this width, a multiple of the dgemm
kernels' tile sides (OpenBLAS: 4 x 8 on Haswell, 16 x 2 on SkylakeX), so that every entry of a block is
computed by the same kernel, in the same order, as in the whole product."""


def uniform_mean_token_moment(tb: Tokens, block: int | None = None) -> np.ndarray:
    """The lower triangle (the strict upper one is 0) of E[xbar xbar^T] (D, D) under the batch's weights,
    xbar the mean token of a string under uniform attention (alpha = 0: each token weighted by its
    multiplicity; xbar = 0 for an empty string).

    xbar of every string is f of a one-head model with B = I (K = D outputs) at alpha = 0 (``forward``), and the
    moment the product (xbar w)^T xbar.  When strings x D exceeds ``MOMENT_ELEMENTS`` (AND's population at
    d = 200: 10^6 x 200, 4.8 GB for the whole product and its temporaries), both are computed in blocks of ``block``
    columns of B = I (a multiple of ``MOMENT_ALIGN``; the last block takes a remainder narrower than that), only
    the blocks on or below the diagonal: every entry is then the same sum, over the same strings in the same
    order, as in the whole product, and the moment is bit-identical to it (tests/experiments/test_engine.py checks this
    with ==).  The products run on one BLAS thread, as table1's rows and the sweep's units do
    (``runner.run_row``): with several threads the whole product's bits depend on how BLAS shares its rows among
    them, and on a shared machine its threads spin on these thin products.  Another summation order (the moment
    of the class weights, or of the rows' mean tokens) would move it by 1e-15, and trained numbers by up to
    5e-12 through the step-size grid (``runner.output_curvature``).  AND's population by the integral gives its
    closed form (the full matrix, not a triangle)."""
    if isinstance(tb, IntegralPopulation):
        return tb.uniform_mean_token_moment()
    N, D = tb.size, tb.table.shape[1]
    if block is None:
        fit = MOMENT_ELEMENTS // max(N, 1) // MOMENT_ALIGN * MOMENT_ALIGN
        block = D if N * D <= MOMENT_ELEMENTS else max(MOMENT_ALIGN, fit)
    if block < 1 or (block < D and block % MOMENT_ALIGN):
        raise SettingError(f"block must be >= D or a positive multiple of {MOMENT_ALIGN}, got {block}")
    zero_a = np.zeros((1, 1, D))
    eye = np.eye(D)
    edges = list(range(0, D, block)) + [D]
    if len(edges) > 2 and D - edges[-2] < MOMENT_ALIGN:
        del edges[-2]  # no thin last block: a product one column wide is not a dgemm (OpenBLAS: a gemv)
    cols = list(zip(edges[:-1], edges[1:]))

    def xbar(lo: int, hi: int) -> np.ndarray:                              # (N, hi - lo)
        return forward(zero_a, eye[:, lo:hi][None, None], tb).f[:, 0, :]

    moment = np.zeros((D, D))
    with threadpool_limits(limits=1):
        for i, (lo, hi) in enumerate(cols):
            xi = xbar(lo, hi)
            wxi = xi * tb.weights[:, None]
            for lo2, hi2 in cols[:i]:
                moment[lo:hi, lo2:hi2] = wxi.T @ xbar(lo2, hi2)
            moment[lo:hi, lo:hi] = wxi.T @ xi
    return np.tril(moment)


SUM_BLOCK = 4096
"""The reported risks are weighted sums taken a block of this many strings at a time, each block's products
added by numpy's pairwise sum (rounding error below SUM_BLOCK units in the last place of the block's sum,
whatever the order), the blocks added exactly (``math.fsum``): a population of a million classes is summed to
~5e-13 relative, where one product's bound is a million units.  Each run's sum is the same bits whichever runs
it is summed with.  Batches up to SUM_BLOCK strings (every sampled set) are one BLAS product."""


def weighted_sum(w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """w @ v (w (N,), v (N,) or (N, R)) by blocks of ``SUM_BLOCK`` added exactly."""
    if len(w) <= SUM_BLOCK:
        return w @ v
    cols = v.reshape(len(w), -1)
    # per block, (R, block): each run's products a contiguous row (a block's copy, not the whole array's)
    parts = np.array([np.add.reduce(np.ascontiguousarray(cols[i:i + SUM_BLOCK].T) * w[i:i + SUM_BLOCK], axis=1)
                      for i in range(0, len(w), SUM_BLOCK)])
    out = np.array([math.fsum(c) for c in parts.T.tolist()])
    return np.float64(out[0]) if v.ndim == 1 else out


def _summed(w: np.ndarray, parts: list) -> np.ndarray:
    """``weighted_sum`` of the chunks' (N, c) arrays, concatenated along the runs: up to SUM_BLOCK strings one
    product over all runs (the rounding of the unchunked path); above, chunk by chunk (the same
    bits, since a run's blocked sum does not depend on the runs beside it, without an (N, R) copy of all)."""
    if len(w) <= SUM_BLOCK:
        return weighted_sum(w, np.concatenate(parts, axis=1))
    return np.concatenate([weighted_sum(w, p) for p in parts])


def _integral(tb, loss: str) -> bool:
    """Whether ``tb`` is AND's population by the integral (``and_integral.IntegralPopulation``), which the
    functions below hand their work to (squared loss only)."""
    if not isinstance(tb, IntegralPopulation):
        return False
    if loss != "squared":
        raise SettingError(f"the AND integral gives the squared loss only, not {loss!r}")
    return True


def risk(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str = "squared") -> np.ndarray:
    """The R weighted risks (no gradient), summed by ``weighted_sum``."""
    if _integral(tb, loss):
        return tb.risk(alpha, B)
    _unstacked(tb)
    lvs = _chunked_losses(alpha, B, tb, loss, False)[0]
    if tb.layout == "rows":  # up to SUM_BLOCK strings one product over all runs (the unchunked path's rounding)
        return _summed(tb.weights, lvs)
    return np.concatenate([weighted_sum(tb.weights, lv) for lv in lvs])


def risk_and_accuracy(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str = "squared"):
    """(the R weighted risks, the R weighted accuracies, the R weighted tied masses), the last two None for
    regression (``accuracy``, ``tie_margin``), from one forward pass per chunk of runs (memory bounded
    whatever R: no (strings, R, K) array is kept), summed by ``_summed`` (up to SUM_BLOCK strings one
    product over all R runs, above chunk by chunk)."""
    if _integral(tb, loss):
        return tb.risk_and_accuracy(alpha, B, risk_and_accuracy)
    _unstacked(tb)
    lvs, hits, ties = _chunked_losses(alpha, B, tb, loss, True)
    if tb.labels is None:
        return _summed(tb.weights, lvs), None, None
    return _summed(tb.weights, lvs), _summed(tb.weights, hits), _summed(tb.weights, ties)


def _chunked_losses(alpha, B, tb: Tokens, loss: str, hits: bool):
    """Per chunk of runs: the losses (N, c) and, with ``hits``, the correct and the tied predictions (N, c)
    as floats (``prediction_hits``, at each run's ``tie_margin``)."""
    c = _chunk(tb, alpha.shape[1], B.shape[-1])
    lvs, hs, ts = [], [], []
    l1 = _largest_l1(tb.table) if hits and tb.labels is not None else None
    for i in range(0, alpha.shape[0], c):
        fw = forward(alpha[i:i + c], B[i:i + c], tb)
        lvs.append(losses(fw.f, tb, loss)[0])
        if l1 is not None:
            h, t = prediction_hits(fw.f, tb.labels, tie_margin(B[i:i + c], l1))
            hs.append(h)
            ts.append(t)
    return lvs, hs, ts


CHUNK_ELEMENTS = 250_000
"""Runs are processed in chunks whose largest temporary per chunk stays below this many elements (bag
layout: strings x types x runs x heads x outputs; rows layout: runs x heads x the largest of token rows,
strings x D, strings x K and D x K): beyond it, memory traffic, not arithmetic, sets the time, and memory
stays linear in the batch whatever the number of runs."""


def _chunk(tb: Tokens, H: int, K: int) -> int:
    return max(1, CHUNK_ELEMENTS // max(_per_run(tb, H, K), 1))


def _per_run(tb: Tokens, H: int, K: int) -> int:
    """The elements of a run's largest temporary on ``tb`` (``CHUNK_ELEMENTS``)."""
    if tb.layout == "rows":
        D = tb.rows.shape[1]
        return H * max(tb.rows.shape[0], len(tb.starts) * D, tb.size * K, D * K)
    return tb.counts.size * H * K


def risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str = "squared", with_f: bool = True):
    """(risks (R,), d risk / d alpha (R, H, D), d risk / d B (R, H, D, K), f (N, R, K)) of R runs;
    ``with_f=False`` returns None for f (a trainer needs no outputs, and on a population of a million
    classes f of 30 runs is 240 MB).  Without outputs, a bag of two token types with one head, one output
    and the squared loss (the exact populations of occurrence, OR and one-head AND) takes one fused pass
    over the population for all R runs (``popstep``: its own summation order, compensated across blocks;
    the same values to rounding)."""
    if _integral(tb, loss):
        if with_f:
            raise SettingError("the AND integral gives no outputs f")
        return (*tb.risk_and_grad(alpha, B), None)
    _unstacked(tb)
    R, H, _ = alpha.shape
    if not with_f and popstep.applies(tb, H, B.shape[-1], loss):
        return (*popstep.risk_and_grad(alpha, B, tb), None)
    c = _chunk(tb, H, B.shape[-1])
    if R <= c:  # one chunk (the common case): no slices, no list of parts
        r, ga, gB, f = _risk_and_grad(alpha, B, tb, loss)
        return r, ga, gB, f if with_f else None
    parts = []
    for i in range(0, R, c):
        r, ga, gB, f = _risk_and_grad(alpha[i:i + c], B[i:i + c], tb, loss)
        parts.append((r, ga, gB, f if with_f else None))
    if len(parts) == 1:
        return parts[0]
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts], axis=1) if with_f else None)


# ------------------------------------------------------------------------------------------------
# runs on several batches at once (seeds in one array program): measured, not taken by the runner


def _unstacked(tb: Tokens) -> None:
    """A stack (``stack``) is stepped by ``grouped_risk_and_grad`` alone: its risks and chunks are per group."""
    if tb.groups > 1:
        raise SettingError("a stack of batches is stepped by grouped_risk_and_grad, not by risk or risk_and_grad")


def _members(groups: np.ndarray, S: int, R: int) -> list[tuple[int, np.ndarray]]:
    """(group, its runs in order) of every group with runs; ``groups`` must give each of the R runs an
    integer index in 0..S - 1."""
    groups = np.asarray(groups)
    if (groups.shape != (R,) or groups.dtype.kind not in "iu"
            or (groups.size and (groups.min() < 0 or groups.max() >= S))):
        raise SettingError(f"groups must be one integer index in 0..{S - 1} per run ({R} runs)")
    return [(s, np.flatnonzero(groups == s)) for s in range(S) if np.any(groups == s)]


def grouped_risk_and_grad(alpha: np.ndarray, B: np.ndarray, batches: list, groups: np.ndarray,
                          loss: str = "squared"):
    """``risk_and_grad`` of R runs, run r on ``batches[groups[r]]`` (no outputs returned): bit for bit what
    ``risk_and_grad`` gives each group's runs (in their order) on the group's batch alone.

    Seeds vectorised: every seed's runs advanced by one array program.  The runner does not take it (one
    bank per seed): a step costs its runs' work (token rows x runs), which stacking does not reduce, and
    docs/benchmarks_engine.md ("Seeds in one program") times the two side by side on the batches the
    program is built for (ICL, two-head AND).

    Stackable batches (``stackable``) are stacked (``stack``) and every run advanced by one array program;
    groups with fewer runs than the largest are padded with runs at zero, which only cost time.  The risks are
    then summed per group, over the chunks of runs ``risk_and_grad`` takes on that group's batch alone, so
    that they too are the same bits.  Other batches (dense rows, bags, the compiled kernel) take one call
    per group."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    members = _members(groups, len(batches), R)
    r, ga, gB = np.empty(R), np.empty_like(alpha, dtype=float), np.empty_like(B, dtype=float)
    parts = [batches[s] for s, _ in members]
    if not stackable(parts):
        for (_, idx), part in zip(members, parts):
            r[idx], ga[idx], gB[idx], _ = risk_and_grad(alpha[idx], B[idx], part, loss, with_f=False)
        return r, ga, gB
    tb = stack(parts)
    G = len(parts)
    C = max(len(idx) for _, idx in members)
    a = np.zeros((G, C, H, D))
    b = np.zeros((G, C, H, D, K))
    for i, (_, idx) in enumerate(members):
        a[i, :len(idx)], b[i, :len(idx)] = alpha[idx], B[idx]
    lv = np.empty((tb.size // G, G, C))
    step = max(1, CHUNK_ELEMENTS // max(G * max(_per_run(p, H, K) for p in parts), 1))  # slots per chunk
    for lo in range(0, C, step):
        hi = min(C, lo + step)
        fw = forward(a[:, lo:hi].reshape(-1, H, D), b[:, lo:hi].reshape(-1, H, D, K), tb)
        f = fw.f.reshape(-1, G, hi - lo, K)
        g = np.zeros_like(f)
        for i, ((_, idx), part) in enumerate(zip(members, parts)):
            n = min(hi, len(idx)) - lo  # the group's real runs in this chunk
            if n > 0:
                lv[:, i, lo:lo + n], g[:, i, :n] = _terms_and_dl(np.ascontiguousarray(f[:, i, :n]), part, loss)
        # (no rows loops: a stack has two or more groups, which ``_rows_loops`` never takes)
        ga_c, gB_c = _backward_rows(fw, b[:, lo:hi].reshape(-1, H, D, K), g.reshape(-1, G * (hi - lo), K), tb, None)
        ga_c, gB_c = ga_c.reshape(G, hi - lo, H, D), gB_c.reshape(G, hi - lo, H, D, K)
        for i, (_, idx) in enumerate(members):
            n = min(hi, len(idx)) - lo
            if n > 0:
                ga[idx[lo:lo + n]], gB[idx[lo:lo + n]] = ga_c[i, :n], gB_c[i, :n]
    for i, ((_, idx), part) in enumerate(zip(members, parts)):
        c = _chunk(part, H, K)  # the chunks of risk_and_grad on this batch alone: its sums, term for term
        for lo in range(0, len(idx), c):
            r[idx[lo:lo + c]] = part.weights @ np.ascontiguousarray(lv[:, i, lo:min(lo + c, len(idx))])
    return r, ga, gB
