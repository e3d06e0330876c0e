"""Compiled loops (numba) for the engine's rows layout on one-hot token rows: the engine's ``kernel = "compiled"``;
and loops that give numpy's own bits, taken under either kernel where numba runs (``usable``; see the end):
the bag layout's forward pass, the rows layout's passes over one-hot rows, the squared loss's terms, the ICL
sampler's rounds and counts, and the gather of a sparse table's rows into a batch's layout.

The numpy path of ``passes`` makes about a dozen passes over the (token rows, runs x heads) array per step
(a CSR product for the scores, a segment maximum, an exponential per row, a segment sum, the CSR scatter
into the mean tokens; in the backward pass a CSR gather, a subtraction, a product and the transposed CSR
product), each a numpy or scipy call.  At ICL's sizes (7,400 rows at d = 50) the calls' fixed cost and
glibc's scalar exponential per row set the step's time.  These loops do the same work in two passes over
the rows, and leave the three dense readout products to BLAS (``passes``); a third loop, ``squared_loss``,
takes the squared loss and its gradient in one pass over the outputs, in place of numpy's dozen calls, whose
fixed costs at ICL's sizes exceed one pass over the rows:

* every row is one-hot on at most P coordinates (``OneHotRows``: ICL's [e_z; e_prev], P = 2, with a padding
  slot D for rows with fewer), so its exponentiated score is a product: exp(alpha . x_i - P c) =
  prod_k exp(alpha_{j_ik} - c) with c = max(max_j alpha_j, 0) per (run, head) column; the softmax then
  needs D exponentials per column instead of one per row, and no per-string maximum (the shift P c is
  common to the string and cancels in the normalisation; every factor is <= 1, so nothing overflows);
* a string whose products all underflow (sum below ``TINY``: its scores all lie ~700 below P c) is done
  again with the per-string maximum and one exponential per row, as the numpy path does;
* rows of two coordinates (ICL's pairs) come in token order, so runs of consecutive rows share their first
  coordinate; both loops sum a run in a register and add it to that coordinate once (this and unsigned
  indices, see ``OneHotRows``, halve the passes' time);
* non-finite parameters make non-finite exactly the strings (of the run and head) that they make non-finite
  on the numpy path: a NaN or +inf coefficient the strings that have a row on its coordinate (under +inf the
  other strings' products all underflow and the fallback keeps them finite), a -inf coefficient the strings
  every row of which is on its coordinate (0 / 0).

The arithmetic differs from the numpy path's in rounding only (products of exponentials, other summation
orders): the tests hold the two to 1e-12 relative (to each array's largest entry) on random batches with
parameters of order one, and the trained results of a run record which kernel made them
(``runner.Config.kernel``).  Where the attention saturates (one row's weight within rounding of 1) the
attention gradient of both paths is rounding noise, of the size of |B| |g| times the rounding unit, and the
two differ by that much.  Near the end of the float range (readouts of ~1e154, whose products overflow) the
two paths' other summation orders overflow at different places: an entry infinite on one path can be finite
(~1e307) on the other.

``bag_forward`` is not an alternative rounding: for two token types and one output (the exact populations)
it does the numpy path's operations in the numpy path's order, in one pass over the strings instead of
about eight, and gives the same bits (but for the sign of a NaN, which IEEE arithmetic leaves unspecified and
LLVM may take from the other operand); ``passes._bag_compiled`` says where it runs.  So do ``squared_terms``
(the squared loss's elementwise terms for one output, ``readout._risk_and_dl``: every row but ICL) and, on
integers, ``icl_round`` and ``count_csr`` (``tasks.sample_icl``).  numba compiles without fast-math, so
LLVM neither contracts a product and a sum into one rounding nor reorders them.

The default kernel's passes over one-hot token rows (ICL, two-head AND; ``layout._rows_loops`` says where)
are the same kind of loop: ``rows_forward`` (the scores less each string's maximum, then numpy's own
exponential, then the multiplicities, the normalisation and the scatter into the mean tokens) and
``rows_score_grad`` (the backward pass's gather, difference, product and transposed scatter) do the numpy
path's operations in its order: scipy's CSR products sum a row's entries, or a coordinate's rows, in order
from +0, and multiply by the entry 1.0 (exact, so left out); ``np.add.reduceat`` adds a string's first weight
to numpy's pairwise sum of the others (``_pairwise_column`` replays it: eight interleaved partial sums up to
128 terms, halves above).  ``squared_outputs`` takes the squared loss of several outputs (ICL), whose
``np.add.reduce`` over a contiguous row is the pairwise sum of the whole row.  The exponential stays numpy's
(its loop can differ from the C library's that numba calls, as numpy's AVX-512 one does); so do the three
readout products (BLAS) and f_n . g_n (einsum's own order).

``type_pairs`` takes the bag layout's score gradient for one output from its pair sums, which
``passes._risk_and_grad`` computes for all pairs of types in one einsum on batches of at most
``passes.PAIRS_AT_ONCE_MAX`` strings (even pairs: 28 pairs of its 8 types, one numpy call instead of 28):
the per-pair loop's subtractions, products and sums in its order.
"""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
from scipy import sparse
TINY = 1e-280
"""A string's sum of exponentiated scores below this is recomputed with its own maximum (no underflow)."""


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether numba can be imported (it is imported, and the loops compiled or read from numba's cache, on
    first use only: by the compiled kernel, or by ``usable``'s trial at the first training step with the
    squared loss or on an exact population, the first ICL batch drawn, or the first layout of sparse token
    rows built (``layout.from_batch`` asks whether the rows loops will run); even with the loops loaded from
    the cache that costs CPU time and resident memory once per process, which commands that train nothing do
    not pay).  Looked up once per process (every batch of a compiled run asks)."""
    return importlib.util.find_spec("numba") is not None


@lru_cache(maxsize=1)
def usable() -> bool:
    """Whether the loops that give numpy's own results run here (``bag_forward``, ``squared_terms``,
    ``squared_outputs``, ``rows_forward``, ``rows_score_grad``, ``type_pairs``, ``icl_round``,
    ``count_csr``, ``take_rows``, which the default numpy kernel takes too): numba is found, imports, and
    compiles (or loads) them, tried once per process on a tiny input.  Only then are they taken, so that a
    numba that is installed but cannot import (say, one older than numpy) leaves the numpy paths working,
    with the same results.  False, without a trial, inside ``numpy_paths``."""
    if _numpy_paths_only or not available():
        return False
    try:
        bag_forward(np.ones((2, 2)), np.array([3, 1]), np.ones((4, 2, 1)), np.ones((2, 1)))
        squared_terms(np.ones((2, 1)), np.ones(2), np.ones(2))
        icl_round(np.zeros((1, 2), np.int64), np.array([2]), np.array([1]), 2)
        count_csr(np.array([0, 0]), np.array([1, 1]), 1, 2)
        rows = OneHotRows(idx=np.array([[0, 1, 0]]), bounds=np.array([0, 2, 3]), mult=np.ones(3), D=2)
        W, _ = rows_forward(np.zeros((1, 2)), rows)
        rows_score_grad(np.ones((1, 2, 2)), np.ones((2, 1)), W, rows)
        squared_outputs(np.ones((2, 1, 2)), np.ones((2, 2)), np.ones(2))
        type_pairs(np.ones((3, 1)), np.ones((3, 1)))
        take_rows(np.array([0, 1, 1], np.int32), np.array([1], np.int32), np.ones(1), np.array([1, 0], np.int32),
                  limit=2)
    except Exception:  # noqa: BLE001 - any failure of numba's import or compilation: the numpy paths instead
        return False
    return True


_numpy_paths_only = False
"""Set by ``numpy_paths`` for its duration (``usable`` reads it)."""


@contextmanager
def numpy_paths():
    """For its duration ``usable()`` is False, so that the engine and the ICL sampler take their numpy paths instead of
    the loops that give their bits (``bag_forward``, ``squared_terms``, ``squared_outputs``, ``rows_forward``,
    ``rows_score_grad``, ``type_pairs``, ``icl_round``, ``count_csr``, ``take_rows``): the default kernel as it
    runs without numba,
    with the same results (what the engine benchmark compares). Every call site asks ``kernels.usable()`` at each
    call, so clearing its cache on entry reaches them all; it is cleared again on exit, and the next call repeats
    the trial (microseconds once the loops are loaded). Process-wide (not per thread), and may be nested; this
    process only: a worker forked inside it keeps the numpy paths for its life, a spawned one never takes them, so
    create no pool inside. The compiled kernel (``kernel = "compiled"``) is left as it is: it needs numba and does
    not ask ``usable``."""
    global _numpy_paths_only
    was = _numpy_paths_only
    _numpy_paths_only = True
    usable.cache_clear()
    try:
        yield
    finally:
        _numpy_paths_only = was
        usable.cache_clear()


@dataclass(frozen=True)
class OneHotRows:
    """Token rows that are one-hot on at most P coordinates: ``idx`` (P, M) the coordinates of each row
    (the padding slot D where a row has fewer), ``bounds`` (N_ne + 1,) each non-empty string's first row
    and the end, ``mult`` (M,) multiplicities, D the embedding width.  Frozen, its arrays read-only copies
    of what it was given: the loops read unsigned ones, ``uidx`` (the same memory as ``idx``) and ``ubounds``,
    which must not drift from what was checked."""

    idx: np.ndarray
    bounds: np.ndarray
    mult: np.ndarray
    D: int
    uidx: np.ndarray = field(init=False, repr=False)
    ubounds: np.ndarray = field(init=False, repr=False)
    heavy: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        """The loops trust these shapes (no bounds checks): refuse inconsistent ones here, once per batch; then
        keep read-only copies, and unsigned views or copies of idx and bounds for the loops (numba checks every access
        through a signed index for a negative value to wrap around; through an unsigned one it does not: a
        third of each pass at d = 50)."""
        # one copy of idx, unsigned, and its signed view (values that wrapped show negative there: refused)
        given = np.asarray(self.idx)
        idx = given.astype(np.uint64).view(np.int64) if given.dtype.kind in "iu" else np.array(given, np.int64)
        b = np.array(self.bounds, np.int64)
        mult = np.array(self.mult, float)
        P, M = idx.shape
        if (b.ndim != 1 or b.size < 1 or b[0] != 0 or b[-1] != M or np.any(np.diff(b) <= 0)
                or mult.shape != (M,) or (M and (idx.min() < 0 or idx.max() > self.D))):
            raise ValueError("inconsistent one-hot rows: bounds must rise strictly (no empty string) from 0 to "
                             "the number of rows, mult have one entry a row and idx lie in 0..D")
        heavy = np.flatnonzero(mult != 1.0).astype(np.uint64)  # the rows a multiplicity scales (NaN too)
        for name, x in (("idx", idx), ("bounds", b), ("mult", mult),
                        ("uidx", idx.view(np.uint64)), ("ubounds", b.astype(np.uint64)), ("heavy", heavy)):
            x.flags.writeable = False
            object.__setattr__(self, name, x)

    @classmethod
    def of(cls, rows, starts: np.ndarray, mult: np.ndarray) -> "OneHotRows | None":
        """The rows of a CSR matrix whose non-zeros are all 1.0 and of which every row has one, else None
        (dense, weighted or empty rows stay on the numpy path)."""
        if not sparse.issparse(rows):
            return None
        X = rows if sparse.isspmatrix_csr(rows) else sparse.csr_matrix(rows)
        per = np.diff(X.indptr)
        if X.nnz == 0 or per.min() == 0 or not np.all(X.data == 1.0):
            return None
        if not sorted_rows(X):  # a sorted copy (the caller's matrix is left as it is)
            X = X.copy()
            X.sort_indices()
        M, D = X.shape
        idx = np.full((int(per.max()), M), D, np.int64)
        # one compiled pass, cheaper than numpy's fancy indexing for the view
        _compiled().pad(X.indptr, X.indices, idx)
        bounds = np.append(np.asarray(starts, np.int64), M)
        return cls(idx=idx, bounds=bounds, mult=mult, D=D)


def sorted_rows(X) -> bool:
    """``X.has_sorted_indices`` of a CSR matrix without storing the answer on X, as scipy's property does (a
    batch's rows keep the flags scipy's own indexing gives them): scipy's kernel for it, called directly."""
    if X.__dict__.get("_has_sorted_indices") is not None:
        return bool(X.has_sorted_indices)
    try:
        from scipy.sparse import _sparsetools
        return bool(_sparsetools.csr_has_sorted_indices(len(X.indptr) - 1, X.indptr, X.indices))
    except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - scipy without the kernel
        return sparse.csr_matrix(X).has_sorted_indices


def _softmax_scatter(A, idx, bounds, mult, w, inv, xbar):  # pragma: no cover - compiled
    """A (C, D) scores' coefficients.  Fills w (C, M) with the unnormalised attention weights (products of
    exponentials times multiplicities), inv (C, N_ne) with each string's normaliser 1 / sum_i w_i, and xbar
    (C, N_ne, D) with the mean embeddings, in one pass over the rows: each string's weights are scattered
    into a row of D + 1 entries (the last one the padding slot's, dropped), without a branch, and the row
    is normalised once."""
    C, D = A.shape
    P = idx.shape[0]
    N = bounds.size - 1
    Ea = np.empty(D + 1)
    acc = np.empty(D + 1)
    j0, j1 = idx[0], idx[P - 1]
    for c in range(C):
        # Ea[j] = exp(A[c, j] - top), the padding slot Ea[D] = exp(-top), top = max(max_j A[c, j], 0) over the
        # coefficients that are not NaN
        top = 0.0
        for j in range(D):
            a = A[c, j]
            if a > top:  # a NaN coefficient is skipped: only the rows that have it become NaN
                top = a
        for j in range(D):
            Ea[j] = np.exp(A[c, j] - top)
        Ea[D] = np.exp(-top)
        wc = w[c]
        for n in range(N):
            lo, hi = bounds[n], bounds[n + 1]
            acc[:] = 0.0
            Z = 0.0
            if P == 2 and hi > lo:
                # ICL's pairs (the general loop below is slower there, in both passes).  The rows of
                # a string are in token order, so runs of rows share their first coordinate (two rows in three at
                # d = 50): a run's weights are summed in a register and added to acc and Z once, not through
                # memory row by row (a chain of stores and loads of one entry)
                prev = j0[lo]
                ea = Ea[prev]
                run = 0.0
                for i in range(lo, hi):
                    a = j0[i]
                    if a != prev:
                        acc[prev] += run
                        Z += run
                        run = 0.0
                        prev = a
                        ea = Ea[a]
                    b = j1[i]
                    p = mult[i] * ea * Ea[b]
                    wc[i] = p
                    run += p
                    acc[b] += p
                acc[prev] += run
                Z += run
            else:
                for i in range(lo, hi):
                    p = mult[i]
                    for k in range(P):
                        p *= Ea[idx[k, i]]
                    wc[i] = p
                    Z += p
                    for k in range(P):
                        acc[idx[k, i]] += p
            if not Z >= TINY and Z == Z:  # underflow (not NaN): this string with its own maximum score
                m = -np.inf
                for i in range(lo, hi):
                    sc = 0.0
                    for k in range(P):
                        j = idx[k, i]
                        if j < D:
                            sc += A[c, j]
                    wc[i] = sc
                    if sc > m:
                        m = sc
                Z = 0.0
                for i in range(lo, hi):
                    p = mult[i] * np.exp(wc[i] - m)
                    wc[i] = p
                    Z += p
                acc[:] = 0.0
                for i in range(lo, hi):
                    for k in range(P):
                        acc[idx[k, i]] += wc[i]
            s = 1.0 / Z
            inv[c, n] = s
            row = xbar[c, n]
            for j in range(D):
                row[j] = acc[j] * s


def _score_grad(U, fh, g, w, inv, idx, bounds, ga):  # pragma: no cover - compiled
    """ga (C, D) = sum_i ds_i x_i with ds_i = w_i inv_n (x_i . U_n - fh_n . g_n) per (run, head) column c:
    U (C, N_ne, D) = B g_n, fh (C, N_ne, K) the heads' outputs, g (C, N_ne, K) dL/df, w (C, M) and inv
    (C, N_ne) from ``_softmax_scatter``.  U_n is copied into a row of D + 1 entries with 0 in the padding
    slot, and ga summed in one, so the loop has no branch."""
    C, D = ga.shape
    P = idx.shape[0]
    N = bounds.size - 1
    K = g.shape[2]
    u = np.empty(D + 1)
    gacc = np.empty(D + 1)
    j0, j1 = idx[0], idx[P - 1]
    for c in range(C):
        wc = w[c]
        gacc[:] = 0.0
        u[D] = 0.0
        for n in range(N):
            lo, hi = bounds[n], bounds[n + 1]
            for j in range(D):
                u[j] = U[c, n, j]
            f = 0.0
            for k in range(K):
                f += fh[c, n, k] * g[c, n, k]
            s = inv[c, n]
            if P == 2 and hi > lo:  # runs of rows with one first coordinate, as in _softmax_scatter
                prev = j0[lo]
                ua = u[prev] - f
                run = 0.0
                for i in range(lo, hi):
                    a = j0[i]
                    if a != prev:
                        gacc[prev] += run
                        run = 0.0
                        prev = a
                        ua = u[a] - f
                    b = j1[i]
                    ds = wc[i] * s * (ua + u[b])
                    run += ds
                    gacc[b] += ds
                gacc[prev] += run
            else:
                for i in range(lo, hi):
                    v = -f
                    for k in range(P):
                        v += u[idx[k, i]]
                    ds = wc[i] * s * v
                    for k in range(P):
                        gacc[idx[k, i]] += ds
        for j in range(D):
            ga[c, j] = gacc[j]


def _squared_loss(fhe, y, wts, H, r, g):  # pragma: no cover - compiled
    """The squared loss of R = C / H runs on strings that are all non-empty, in one pass: f_n = sum_h fhe[c, n]
    over the run's H heads (c = run H + h), r[run] = sum_n wts_n |f_n - y_n|^2 / 2 and g[c, n] = wts_n (f_n -
    y_n) for each of the run's heads (dL/df in the layout (C, N, K) of the readout products).  Sums in order
    (numpy sums pairwise: other rounding, as the rest of the compiled kernel)."""
    C, N, K = fhe.shape
    R = C // H
    res = np.empty(K)
    for run in range(R):
        c0 = run * H
        tot = 0.0
        for n in range(N):
            sq = 0.0
            for k in range(K):
                fk = fhe[c0, n, k]
                for h in range(1, H):
                    fk += fhe[c0 + h, n, k]
                e = fk - y[n, k]
                res[k] = e
                sq += e * e
            wn = wts[n]
            tot += wn * (0.5 * sq)
            for h in range(H):
                gc = g[c0 + h, n]
                for k in range(K):
                    gc[k] = wn * res[k]
        r[run] = tot


def _icl_round(raw, nk, ok_, d, z, cells, good):  # pragma: no cover - compiled
    """One round of ``tasks.sample_icl``'s rejection loop on k strings: raw (k, L) the uniform draws, nk (k,)
    the lengths, ok_ (k,) the answers.  Applies the rule left to right (a token after a final q = 0 becomes
    the answer), writing the strings laid end to end: their tokens into z and their pair cells
    z_i (d + 1) + z_{i-1} + 1 (z_{-1} = -1) into cells; good[s] whether string s has a q before its last
    position."""
    off = 0
    for s in range(nk.size):
        n = nk[s]
        o = ok_[s]
        prev = -1
        g = False
        for i in range(n):
            t = o if prev == 0 else raw[s, i]
            z[off + i] = t
            cells[off + i] = t * (d + 1) + prev + 1
            if t == 0 and i < n - 1:
                g = True
            prev = t
        good[s] = g
        off += n


def icl_round(raw: np.ndarray, nk: np.ndarray, ok_: np.ndarray, d: int):
    """(z, cells, good) of ``_icl_round``: tokens and pair cells (sum nk,) of the k strings laid end to end
    (int64), and which strings have a q before their last position."""
    k = nk.size
    raw, nk, ok_ = (np.ascontiguousarray(x, np.int64) for x in (raw, nk, ok_))
    if raw.ndim != 2 or raw.shape[0] != k or ok_.shape != (k,) or (k and (nk.min() < 0 or nk.max() > raw.shape[1])):
        raise ValueError("inconsistent ICL round: raw must be (k, L) with every length in 0..L and one answer "
                         "a string")
    total = int(nk.sum())
    z, cells, good = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(k, np.bool_)
    _compiled().icl_round(raw, nk, ok_, int(d), z, cells, good)
    return z, cells, good


def _count_csr(rows, cols, N, ncols, indptr, indices, counts):  # pragma: no cover - compiled
    """The canonical CSR arrays of the counts of the pairs (rows_i, cols_i) in an (N, ncols) matrix: the pairs
    sorted by column and then, stably, by row (two counting sorts, linear in the pairs, N and ncols, each
    written out for its own key: a loop over the two keys as a tuple ran at half the speed) and their repeats
    counted; returns the number of distinct pairs (indices and counts filled up to it, indptr (N + 1,)
    throughout)."""
    M = rows.size
    start = np.zeros(ncols + 1, np.int64)  # a stable counting sort of the pairs by column
    for i in range(M):
        start[cols[i] + 1] += 1
    for c in range(ncols):
        start[c + 1] += start[c]
    bycol = np.empty(M, np.int64)
    for i in range(M):
        c = cols[i]
        bycol[start[c]] = i
        start[c] += 1
    ends = np.zeros(N + 1, np.int64)  # then stably by row: each row's columns in order
    for i in range(M):
        ends[rows[i] + 1] += 1
    for r in range(N):
        ends[r + 1] += ends[r]
    sorted_cols = np.empty(M, np.int64)
    for t in range(M):
        i = bycol[t]
        r = rows[i]
        sorted_cols[ends[r]] = cols[i]
        ends[r] += 1
    out = 0  # ends[r] is now the end of row r: its runs of equal columns counted
    indptr[0] = 0
    t = 0
    for r in range(N):
        end = ends[r]
        while t < end:
            c = sorted_cols[t]
            m = 0
            while t < end and sorted_cols[t] == c:
                m += 1
                t += 1
            indices[out] = c
            counts[out] = m
            out += 1
        indptr[r + 1] = out
    return out


def count_csr(rows: np.ndarray, cols: np.ndarray, N: int, ncols: int):
    """(indptr (N + 1,), indices, counts) of ``_count_csr``: the canonical CSR arrays (int64 indices, float
    counts) of the counts of the pairs (rows_i, cols_i), rows in 0..N - 1 and columns in 0..ncols - 1."""
    rows, cols = np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(cols, np.int64)
    if (rows.shape != cols.shape or rows.ndim != 1
            or (rows.size and (rows.min() < 0 or rows.max() >= N or cols.min() < 0 or cols.max() >= ncols))):
        raise ValueError(f"the pairs must be one column per row, rows in 0..{N - 1} and columns in "
                         f"0..{ncols - 1}")
    indptr, indices, counts = np.empty(N + 1, np.int64), np.empty(rows.size, np.int64), np.empty(rows.size)
    nnz = _compiled().count_csr(rows, cols, int(N), int(ncols), indptr, indices, counts)
    return indptr, indices[:nnz], counts[:nnz]


def _squared_terms(f, y, w, lv, dl):  # pragma: no cover - compiled
    """The squared loss's terms for one output (K = 1), numpy's operations in numpy's order (``model._squared``
    and ``readout._risk_and_dl``), in one pass: e = f[n, r] - y[n], lv[n, r] = 0.5 (e e), dl[n, r] = e w[n].
    Elementwise only (no sum), so the same bits as numpy's passes (but for a NaN's sign, as ``bag_forward``)."""
    N, R = f.shape
    if R == 1:  # one run: a loop over the strings alone, which LLVM vectorises (the nested one does not)
        for n in range(N):
            e = f[n, 0] - y[n]
            lv[n, 0] = 0.5 * (e * e)
            dl[n, 0] = e * w[n]
        return
    for n in range(N):
        yn = y[n]
        wn = w[n]
        for r in range(R):
            e = f[n, r] - yn
            lv[n, r] = 0.5 * (e * e)
            dl[n, r] = e * wn


def squared_terms(f: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loss lv (N, R), weighted gradient dl (N, R)) of ``_squared_terms`` from outputs f (N, R) (any strides),
    targets y (N,) and weights w (N,)."""
    N, R = f.shape
    _check("the targets", y, (N,))
    _check("the weights", w, (N,))
    lv, dl = np.empty((N, R)), np.empty((N, R))
    # float64 in native byte order (the loop's signatures; a view is not copied), y and w C-contiguous as well
    _compiled().squared_terms(np.asarray(f, np.float64), _float(y), _float(w), lv, dl)
    return lv, dl


def _bag_forward(counts, pat, exP, V, w, fh):  # pragma: no cover - compiled
    """The bag layout's forward pass for two token types and one output, in one pass over the strings per
    column c, with numpy's operations in numpy's order (``passes.forward``): w_t = exP[pat[n], t, c] counts[n, t],
    Z = 0 + w_0 + w_1 (1 where it is 0), w_t /= Z, fh[n, c] = 0 + w_0 V[0, c] + w_1 V[1, c]; w (2, N, C).  The
    sums start from +0, as numpy's sums over the types' axis do: where both terms are -0.0 the sum is +0.0 (the
    test compares the sign of every zero).  A NaN's sign can differ from numpy's (of a sum of two NaNs of
    opposite signs, numpy keeps the first's; LLVM may swap the operands).  A pattern is read modulo 4, so that
    no value of ``pat`` reads outside exP.  Written for T = 2 (no loop over types): a general loop over T is
    slower than numpy's passes at one-head AND's sizes."""
    N = counts.shape[0]
    C = V.shape[1]
    e0 = np.empty(4)
    e1 = np.empty(4)
    for c in range(C):
        for q in range(4):
            e0[q] = exP[q, 0, c]
            e1[q] = exP[q, 1, c]
        v0 = V[0, c]
        v1 = V[1, c]
        for n in range(N):
            p = pat[n] & 3
            w0 = e0[p] * counts[n, 0]
            w1 = e1[p] * counts[n, 1]
            Z = 0.0 + w0 + w1
            if Z == 0.0:
                Z = 1.0
            x0 = w0 / Z
            x1 = w1 / Z
            w[0, n, c] = x0
            w[1, n, c] = x1
            fh[n, c] = 0.0 + x0 * v0 + x1 * v1


def bag_forward(counts: np.ndarray, pat: np.ndarray, exP: np.ndarray, V: np.ndarray):
    """(w (2, N, C), fh (N, C)) of ``_bag_forward`` from counts (N, 2), the strings' presence patterns pat (N,)
    (bit t set where counts[n, t] > 0: ``layout._patterns``), each pattern's exponentials exP (4, 2, C) and the
    type values V (2, C)."""
    N = counts.shape[0]
    C = V.shape[1]
    _check("the counts", counts, (N, 2))
    _check("the patterns", pat, (N,))
    _check("the exponentials", exP, (4, 2, C))
    _check("the type values", V, (2, C))
    w, fh = np.empty((2, N, C)), np.empty((N, C))
    _compiled().bag_forward(_float(counts), np.ascontiguousarray(pat, np.int64), _float(exP), _float(V), w, fh)
    return w, fh


def squared_loss(fhe: np.ndarray, y: np.ndarray, weights: np.ndarray, H: int) -> tuple[np.ndarray, np.ndarray]:
    """(risks r (R,), dL/df g (C, N, K)) of ``_squared_loss`` from the heads' outputs fhe (C = R H, N, K) of
    strings that are all non-empty, their targets y (N, K) and probability weights (N,)."""
    C, N, K = fhe.shape
    if H < 1 or C % H:
        raise ValueError(f"{C} columns are not a whole number of runs of {H} heads")
    _check("the targets", y, (N, K))
    _check("the weights", weights, (N,))
    r, g = np.empty(C // H), np.empty((C, N, K))
    _compiled().squared_loss(_float(fhe), _float(y), _float(weights), H, r, g)
    return r, g


def _float(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous float64 array (itself when it is one): the loops are compiled for that layout."""
    return np.ascontiguousarray(x, dtype=np.float64)


def _taken_entries(indptr, rows):  # pragma: no cover - compiled
    """The number of entries of the CSR rows ``rows`` (int64: it may exceed int32)."""
    total = 0
    for i in range(rows.size):
        total += indptr[rows[i] + 1] - indptr[rows[i]]
    return total


def _take_rows(indptr, indices, data, rows, out_indptr, out_indices, out_data):  # pragma: no cover - compiled
    """The CSR arrays of the rows ``rows`` of (indptr, indices, data), in that order: what scipy's
    ``csr_row_index`` writes, with the pointers it is given."""
    t = 0
    out_indptr[0] = 0
    for i in range(rows.size):
        r = rows[i]
        for k in range(indptr[r], indptr[r + 1]):
            out_indices[t] = indices[k]
            out_data[t] = data[k]
            t += 1
        out_indptr[i + 1] = t


def take_rows(indptr, indices, data, rows, *, limit: int):
    """(indptr, indices, data) of the rows ``rows`` (each in 0..len(indptr) - 2, checked by the caller) of a CSR
    matrix with int32 pointers and indices and float64 values: int32 pointers and indices, float64 values, the
    arrays of scipy's row gather (``layout._take_rows``).  One compiled pass counts the entries (refused above
    ``limit``, which int32 pointers must hold), a second copies them."""
    if not (indptr.dtype == indices.dtype == rows.dtype == np.int32 and data.dtype == np.float64):
        raise ValueError("take_rows wants int32 pointers, indices and rows and float64 values")
    total = int(_compiled().taken_entries(indptr, rows))
    if total > limit:
        raise ValueError(f"{total} entries in the rows taken: more than int32 index pointers hold")
    out = np.empty(rows.size + 1, np.int32), np.empty(total, np.int32), np.empty(total)
    _compiled().take_rows(indptr, indices, data, rows, *out)
    return out


def _pad(indptr, indices, idx):  # pragma: no cover - compiled
    """idx[k, i] = the k-th coordinate of CSR row i, for the rows that have one (the others keep their padding)."""
    for i in range(indptr.size - 1):
        for k in range(indptr[i + 1] - indptr[i]):
            idx[k, i] = indices[indptr[i] + k]


def _pairwise_column(S, c, lo, n, stack, left):  # pragma: no cover - compiled
    """numpy's pairwise sum of S[lo:lo + n, c] (``pairwise_sum`` of numpy's float64 add loop, which
    ``np.add.reduceat`` runs on each segment after its first entry): below 8 terms in order from -0.0; up to
    128 in eight interleaved partial sums added as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the
    rest in order; above, the two halves (the first a multiple of 8 long) each so, then added.  The recursion
    is unrolled onto a stack (numba's cache does not keep recursive functions: a cached one crashed when
    loaded): a node is pushed, its left half summed, then its right half, and the two added.  ``stack`` (3, 64)
    int64 and ``left`` (64,) are the caller's scratch, allocated once per loop (allocating them here cost more
    than the sums of ICL's loss)."""
    lo_s = stack[0]
    n_s = stack[1]
    state = stack[2]                   # 0: not started, 1: its left half being summed, 2: its right half
    state[0] = 0
    top = 0
    lo_s[0] = lo
    n_s[0] = n
    v = 0.0
    have = False                       # v is the sum of the node just popped
    while True:
        if have:
            if top < 0:
                return v
            if state[top] == 1:        # the left half's sum: keep it, sum the right half
                left[top] = v
                state[top] = 2
                half = n_s[top] // 2
                half -= half % 8
                top += 1
                lo_s[top] = lo_s[top - 1] + half
                n_s[top] = n_s[top - 1] - half
                state[top] = 0
                have = False
            else:                      # the right half's: this node's sum, passed up
                v = left[top] + v
                top -= 1
            continue
        a = lo_s[top]
        m = n_s[top]
        if m > 128:
            half = m // 2
            half -= half % 8
            state[top] = 1
            top += 1
            lo_s[top] = a
            n_s[top] = half
            state[top] = 0
            continue
        if m < 8:
            v = -0.0
            for i in range(m):
                v += S[a + i, c]
        else:
            r0 = S[a, c]
            r1 = S[a + 1, c]
            r2 = S[a + 2, c]
            r3 = S[a + 3, c]
            r4 = S[a + 4, c]
            r5 = S[a + 5, c]
            r6 = S[a + 6, c]
            r7 = S[a + 7, c]
            i = 8
            stop = m - m % 8
            while i < stop:
                r0 += S[a + i, c]
                r1 += S[a + i + 1, c]
                r2 += S[a + i + 2, c]
                r3 += S[a + i + 3, c]
                r4 += S[a + i + 4, c]
                r5 += S[a + i + 5, c]
                r6 += S[a + i + 6, c]
                r7 += S[a + i + 7, c]
                i += 8
            v = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            while i < m:
                v += S[a + i, c]
                i += 1
        top -= 1
        have = True


_pairwise_loop = _pairwise_column
"""What the loops call for a pairwise sum: ``_pairwise_column`` itself in Python, its compiled form once
``_compiled`` has run (numba resolves a global when it compiles a caller, so the compiled callers call the
compiled sum)."""


def _rows_shifted_scores(A, idx, bounds, S):  # pragma: no cover - compiled
    """The numpy path's scores less their string's maximum (``passes._forward_rows``) on one-hot rows, its
    operations in its order: S[i, c] = 0 + A[j_i1, c] + A[j_i2, c] + ... (scipy's ``csr_matvec(s)`` into
    zeros: 1.0 * a is a, and the padding slot adds +0.0, which leaves a sum begun at +0 as it is), then
    S[i, c] - max over the string's rows (``np.maximum.reduceat``, which is NaN if any score is: here a NaN
    is skipped unless it comes first, but a NaN score makes the string's sum of exponentials NaN, so its
    weights are all NaN either way, as the test of non-finite parameters checks).  A (C, D) the
    coefficients, idx (P, M) and bounds (N_ne + 1,) the rows (``OneHotRows``).  Column by column, each sum
    in a register; a row's second coordinate read as the padding slot where there is none (P = 1: + a[D] = +0.0
    leaves the sum as it is), so that the two-coordinate sum is unrolled (ICL's rows: a third of this pass)."""
    C, D = A.shape
    P = idx.shape[0]
    N = bounds.size - 1
    pad = np.uint64(D)
    a = np.empty(D + 1)
    for c in range(C):
        for j in range(D):
            a[j] = A[c, j]
        a[D] = 0.0
        for n in range(N):
            lo, hi = bounds[n], bounds[n + 1]
            m = 0.0
            for i in range(lo, hi):
                v = (0.0 + a[idx[0, i]]) + a[idx[1, i] if P > 1 else pad]
                for k in range(2, P):
                    v = v + a[idx[k, i]]
                S[i, c] = v
                if i == lo or v > m:
                    m = v
            for i in range(lo, hi):
                S[i, c] = S[i, c] - m


def _rows_normalise_scatter(S, mult, heavy, idx, bounds, xbar):  # pragma: no cover - compiled
    """After numpy's exponential of ``_rows_shifted_scores``: the numpy path's rest of the forward pass over
    the rows, its operations in its order.  S[i, c] *= mult[i] on the rows ``heavy`` lists, those where
    mult[i] != 1 (x * 1.0 is x; testing every row would add a pass over the rows); Z = S[lo, c] +
    the pairwise sum of the string's other rows (``np.add.reduceat``); S[i, c] /= Z (S becomes the weights);
    xbar[c, n, j] = 0 + sum over the string's rows on coordinate j, in row order, of S[i, c] (scipy's product
    with the scatter operator, whose row (n, j) lists those rows in order).  xbar (C, N_ne, D) is the layout
    the readout products take."""
    M, C = S.shape
    D = xbar.shape[2]
    P = idx.shape[0]
    N = bounds.size - 1
    acc = np.empty(D + 1)
    stack = np.empty((3, 64), np.int64)
    left = np.empty(64)
    for h in range(heavy.size):
        i = heavy[h]
        mi = mult[i]
        for c in range(C):
            S[i, c] *= mi
    for c in range(C):
        for n in range(N):
            lo, hi = bounds[n], bounds[n + 1]
            Z = S[lo, c]
            if hi - lo > 1:
                Z = Z + _pairwise_loop(S, c, np.int64(lo) + 1, np.int64(hi - lo) - 1, stack, left)  # (signed)
            acc[:] = 0.0
            for i in range(lo, hi):
                w = S[i, c] / Z
                S[i, c] = w
                for k in range(P):
                    acc[idx[k, i]] += w
            row = xbar[c, n]
            for j in range(D):
                row[j] = acc[j]


def _rows_score_grad(U, fg, W, idx, bounds, ga):  # pragma: no cover - compiled
    """The numpy path's attention gradient over one-hot rows (``passes._backward_rows``), its operations in
    its order: v = 0 + U[c, n, j_i1] + U[c, n, j_i2] + ... (the gather product), ds = (v - fg[n, c]) W[i, c],
    ga[c, j] = 0 + sum over the rows on coordinate j, in row order, of ds (the product with the rows'
    transpose).  U (C, N_ne, D), fg (N_ne, C), W (M, C) the weights, ga (C, D)."""
    C, D = ga.shape
    P = idx.shape[0]
    N = bounds.size - 1
    u = np.empty(D + 1)
    acc = np.empty(D + 1)
    for c in range(C):
        acc[:] = 0.0
        u[D] = 0.0
        for n in range(N):
            lo, hi = bounds[n], bounds[n + 1]
            for j in range(D):
                u[j] = U[c, n, j]
            f = fg[n, c]
            for i in range(lo, hi):
                v = 0.0 + u[idx[0, i]]
                for k in range(1, P):
                    v = v + u[idx[k, i]]
                ds = (v - f) * W[i, c]
                for k in range(P):
                    acc[idx[k, i]] += ds
        for j in range(D):
            ga[c, j] = acc[j]


def _squared_outputs(f, y, w, lv, dl, buf):  # pragma: no cover - compiled
    """The squared loss's terms for K outputs, numpy's operations in numpy's order (``model._squared`` and
    ``readout._terms_and_dl``): e = f[n, r] - y[n], lv[n, r] = 0.5 (+0 + the pairwise sum over all k of e_k e_k:
    numpy's ``add.reduce`` along a contiguous row gives that sum, +0 for no terms), dl[n, r] = e w[n].  buf (K, 1)
    holds a row's squares."""
    N, R, K = f.shape
    stack = np.empty((3, 64), np.int64)
    left = np.empty(64)
    for n in range(N):
        wn = w[n]
        for r in range(R):
            for k in range(K):
                e = f[n, r, k] - y[n, k]
                buf[k, 0] = e * e
                dl[n, r, k] = e * wn
            lv[n, r] = 0.5 * (0.0 + _pairwise_loop(buf, 0, 0, K, stack, left))


def squared_outputs(f: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(loss lv (N, R), weighted gradient dl (N, R, K)) of ``_squared_outputs`` from outputs f (N, R, K)
    (any strides), targets y (N, K) and weights w (N,)."""
    N, R, K = f.shape
    _check("the targets", y, (N, K))
    _check("the weights", w, (N,))
    lv, dl = np.empty((N, R)), np.empty((N, R, K))
    _compiled().squared_outputs(_float(f), _float(y), _float(w), lv, dl, np.empty((K, 1)))
    return lv, dl


def _type_pairs(V, E, ds):  # pragma: no cover - compiled
    """The bag layout's score gradient from its pair sums (``passes._risk_and_grad``, one output), the numpy
    loop's operations in its order: for t = 0..T - 1, s = 0..t - 1 (pair p in that order), part = (V[t, c] -
    V[s, c]) E[p, c], ds[t, c] += part, ds[s, c] -= part, from ds = 0.  V (T, C), E (P, C), ds (T, C)."""
    T, C = V.shape
    p = 0
    for t in range(T):
        for s in range(t):
            for c in range(C):
                part = (V[t, c] - V[s, c]) * E[p, c]
                ds[t, c] += part
                ds[s, c] -= part
            p += 1


def type_pairs(V: np.ndarray, E: np.ndarray) -> np.ndarray:
    """ds (T, C) of ``_type_pairs`` from the type values V (T, C) and the pair sums E (T (T - 1) / 2, C)."""
    T, C = V.shape
    _check("the pair sums", E, (T * (T - 1) // 2, C))
    ds = np.zeros((T, C))
    _compiled().type_pairs(_float(V), _float(E), ds)
    return ds


def pairwise_column(S: np.ndarray, c: int, lo: int, n: int) -> float:
    """numpy's pairwise sum of S[lo:lo + n, c] by the loops' ``_pairwise_column`` (S float64, C-contiguous)."""
    if S.ndim != 2 or not 0 <= c < S.shape[1] or lo < 0 or n < 0 or lo + n > S.shape[0]:
        raise ValueError(f"rows {lo}..{lo + n - 1} of column {c} are not in an array of shape {S.shape}")
    _compiled()
    return float(_pairwise_loop(_float(S), int(c), int(lo), int(n), np.empty((3, 64), np.int64), np.empty(64)))


def rows_forward(A: np.ndarray, rows: OneHotRows) -> tuple[np.ndarray, np.ndarray]:
    """(weights W (M, C), mean embeddings xbar (C, N_ne, D)) of the numpy path's forward pass over one-hot
    rows at score coefficients A (C, D), the same bits: two loops around numpy's own exponential."""
    if A.ndim != 2:
        raise ValueError(f"score coefficients must be (runs x heads, D), got shape {A.shape}")
    _check("the score coefficients", A, (A.shape[0], rows.D))
    loops = _compiled()
    S = np.empty((rows.idx.shape[1], A.shape[0]))
    loops.rows_shifted_scores(_float(A), rows.uidx, rows.ubounds, S)
    np.exp(S, out=S)
    xbar = np.empty((A.shape[0], rows.bounds.size - 1, rows.D))
    loops.rows_normalise_scatter(S, rows.mult, rows.heavy, rows.uidx, rows.ubounds, xbar)
    return S, xbar


def rows_score_grad(U: np.ndarray, fg: np.ndarray, W: np.ndarray, rows: OneHotRows) -> np.ndarray:
    """d risk / d A (C, D) of the numpy path's backward pass over one-hot rows, the same bits, from U = B g_n
    (C, N_ne, D), fg = f_n . g_n (N_ne, C) and the weights W (M, C)."""
    C = W.shape[1]
    N = rows.bounds.size - 1
    _check("U", U, (C, N, rows.D))
    _check("fg", fg, (N, C))
    _check("the weights", W, (rows.idx.shape[1], C))
    ga = np.empty((C, rows.D))
    _compiled().rows_score_grad(_float(U), _float(fg), _float(W), rows.uidx, rows.ubounds, ga)
    return ga


def _check(name: str, x: np.ndarray, shape: tuple) -> None:
    """The compiled loops run without bounds checks: a mis-shaped array must be refused before them."""
    if x.shape != shape:
        raise ValueError(f"{name} has shape {x.shape}, the compiled kernel needs {shape}")


def softmax_scatter(A: np.ndarray, rows: OneHotRows) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """((w (C, M) unnormalised weights, inv (C, N_ne) normalisers), xbar (C, N_ne, D)) at score coefficients
    A (C, D): the attention weight of row i of string n is w_i inv_n."""
    if A.ndim != 2:
        raise ValueError(f"score coefficients must be (runs x heads, D), got shape {A.shape}")
    _check("the score coefficients", A, (A.shape[0], rows.D))
    C = A.shape[0]
    N_ne = rows.bounds.size - 1
    w, inv = np.empty((C, rows.idx.shape[1])), np.empty((C, N_ne))
    xbar = np.empty((C, N_ne, rows.D))
    _compiled().softmax_scatter(A, rows.uidx, rows.ubounds, rows.mult, w, inv, xbar)
    return (w, inv), xbar


def score_grad(U: np.ndarray, fh: np.ndarray, g: np.ndarray, weights, rows: OneHotRows) -> np.ndarray:
    """d risk / d A (C, D) from U (C, N_ne, D), fh and g (C, N_ne, K) (the layout of the readout products; any
    strides) and ``softmax_scatter``'s weights."""
    C, N_ne = weights[1].shape
    K = g.shape[-1] if g.ndim == 3 else -1
    _check("U", U, (C, N_ne, rows.D))
    _check("fh", fh, (C, N_ne, K))
    _check("g", g, (C, N_ne, K))
    _check("the weights", weights[0], (C, rows.idx.shape[1]))
    _check("the normalisers", weights[1], (C, rows.bounds.size - 1))
    ga = np.empty((C, rows.D))
    _compiled().score_grad(U, fh, g, weights[0], weights[1], rows.uidx, rows.ubounds, ga)
    return ga


@lru_cache(maxsize=1)
def _compiled():
    """The loops compiled by numba (on first use; numba caches the machine code beside this file), by name
    without the leading underscore (``_compiled().bag_forward``)."""
    import numba

    global _pairwise_loop
    jit = numba.njit(cache=True, nogil=True, boundscheck=False)
    _pairwise_loop = jit(_pairwise_column)  # before the loops that call it compile (on their first call)
    loops = (_softmax_scatter, _score_grad, _pad, _bag_forward, _squared_loss, _icl_round, _count_csr,
             _squared_terms, _squared_outputs, _type_pairs, _rows_shifted_scores, _rows_normalise_scatter,
             _rows_score_grad, _taken_entries, _take_rows)
    return SimpleNamespace(**{f.__name__.lstrip("_"): jit(f) for f in loops})
