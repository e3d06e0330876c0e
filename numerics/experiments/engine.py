"""The Table 1 training engine: many runs advanced by one array program, on the tokens' structure.

A batch of strings is held as **token rows** (:class:`Tokens`): each row is one distinct token of one string,
given by its type (an index into a table of embeddings, dense or scipy.sparse) and its multiplicity, with the
rows of a string contiguous.  One-hot tasks give sparse tables (the identity, or the ICL pair table with two
non-zeros a row), so a token's score alpha^T x is a lookup and the readout's gradient a scatter-add through
the table's transpose; dense tasks (single-location regression) give one table row per token.  A population
of count classes (occurrence, OR, AND) keeps its shared table of 2 or 3 class tokens with a dense count matrix
(:func:`from_batch` picks the layout).  Cost per step is proportional to the number of token rows times the
number of runs times H K, and memory is linear in the batch.

A **bank** is R runs of the same model on the same data stream, each with its own parameters: alpha (R, H, D),
B (R, H, D, K).  :func:`risk_and_grad` returns the R risks and their gradients in one pass; the trainer
(``numerics.experiments.runner``) gives each run its own step sizes, optimizer state and stopping rule.

The dense model (``numerics.model.Model.risk_and_grad``) stays the reference: the tests check that this
path agrees with it to 1e-12 on random batches, and its gradients by finite differences.

``Tokens.kernel`` chooses how one-hot token rows (ICL, two-head AND) are computed: "numpy" (the default, the
rounding of the committed results) or "compiled" (``kernels``: numba loops, other rounding, the same values
to 1e-12; ``runner.Config.kernel``, ``table1 --kernel``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

try:  # the kernels behind scipy's CSR @ dense product, called without its dispatch (see _CsrProduct)
    from scipy.sparse import _sparsetools
except ImportError:  # pragma: no cover - a scipy without the private module: its public product
    _sparsetools = None

from numerics.model import loss_terms
from theory.validation import SettingError

from numerics.experiments import kernels as KN
from numerics.experiments.and_integral import IntegralPopulation
from numerics.experiments import tasks as _tasks
from numerics.experiments.tasks import Batch, csr_index_dtype

DENSE_BAG_MAX_TYPES = 16
"""A shared table with at most this many token types is kept as a dense count matrix (N, L) (the class
populations: 2 or 3 types); larger shared tables (ICL: d (d + 1) pair types) become token rows."""


@dataclass
class Tokens:
    """A batch in the engine's layout.

    ``table`` (T, D): the token embeddings (numpy or scipy.sparse CSR).  Layout "bag": ``counts`` (N, T) dense
    multiplicities (few types).  Layout "rows": ``rows`` (M, D) the embedding of each token row (scipy.sparse
    CSR for one-hot tables, so a score is a lookup and a gradient a scatter-add; dense for dense tokens),
    ``mult`` (M,) its multiplicity, ``starts`` (N_ne,) first row of each non-empty
    string, ``seg`` (M,) index of the row's string among the non-empty ones, ``nonempty`` (N_ne,) their
    indices in the batch (empty strings have f = 0).  No array has a dimension of the table's size T, so
    the cost is linear in the number of token rows however many types the table has.
    ``y`` (N, K) targets, ``labels`` class labels (or None), ``weights`` (N,) probability weights.
    ``kernel`` (``KERNELS``): "compiled" runs one-hot token rows through ``kernels`` (other rounding).
    ``groups`` S > 1: the S batches of ``stack``, each of size / S strings, run r of the R = S C given to the
    layout's passes stepping on batch r // C (``grouped_risk_and_grad``).
    """

    table: object
    y: np.ndarray
    weights: np.ndarray
    labels: np.ndarray | None
    counts: np.ndarray | None = None
    mult: np.ndarray | None = None
    starts: np.ndarray | None = None
    seg: np.ndarray | None = None
    nonempty: np.ndarray | None = None
    rows: object = None
    kernel: str = "numpy"
    groups: int = 1

    @property
    def size(self) -> int:
        return self.y.shape[0]

    @property
    def layout(self) -> str:
        return "bag" if self.counts is not None else "rows"


def _sparse_if_sparse(X: np.ndarray):
    X = np.asarray(X, float)
    if X.size and np.count_nonzero(X) <= 0.25 * X.size and X.shape[0] > DENSE_BAG_MAX_TYPES:
        return sp.csr_matrix(X)
    return X


def _segments(n_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(n_idx, return_index=True, return_inverse=True)`` of a non-decreasing ``n_idx`` (the string of
    each token row, rows in string order), read off its runs without a sort: the strings present, the first row
    of each and each row's segment (4x faster at ICL's 37,000 rows)."""
    new = np.empty(n_idx.size, dtype=bool)
    new[:1] = True
    np.not_equal(n_idx[1:], n_idx[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return n_idx[starts], starts, np.cumsum(new) - 1


MMAP_THRESHOLD = 32 * 2 ** 20
"""``keep_temporaries_on_heap``: arrays below this many bytes come from the heap (glibc's own ceiling for the
threshold it adapts by itself)."""
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
"""``keep_temporaries_on_heap``: free memory at the top of the heap up to this many bytes stays with the process
(the ratio glibc keeps when it adapts the thresholds by itself)."""


def keep_temporaries_on_heap() -> bool:
    """Have glibc's malloc serve arrays below ``MMAP_THRESHOLD`` from the heap in this process and keep up to
    ``TRIM_THRESHOLD`` of freed memory for reuse (mallopt); False where there is no glibc.  Table 1's rows
    and the sweep's units call it in the process that trains them, and the engine benchmark in its own.  A
    step on an exact population allocates temporaries of a few MB (8 runs on OR's population at d = 50:
    22,513 classes, 1-3 MB an array); in a fresh process glibc maps each afresh and unmaps it when freed, so
    every step pays page faults for them (2,000 a step; 9.1 ms a step, 2.8 ms with this; one-head AND at
    d = 50 before its forward pass was compiled: 4,200 a step, 15.9 and 4.3 ms).  Values are unchanged:
    where memory comes from does not enter the arithmetic."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = libc.mallopt if libc is not None else None
    except (OSError, AttributeError):
        return False
    if mallopt is None or not hasattr(libc, "gnu_get_libc_version"):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


KERNELS = ("numpy", "compiled")
"""How the rows layout computes a step on one-hot token rows: "numpy" (numpy and scipy's CSR kernels, the
rounding of the committed results) or "compiled" (``kernels``: two compiled passes over the rows, products
of per-coordinate exponentials, and the squared loss in one more; the same risks and gradients to
rounding).  Dense rows always take the numpy path; bags too, but for the forward pass of two types and one
output (``_bag_compiled``).  That pass, the squared loss's terms (``_terms_and_dl``), the bag's score gradient
from its pairs of types on small batches (``PAIRS_AT_ONCE_MAX``), the ICL sampler's rounds (``tasks.sample_icl``)
and, under "numpy", the passes over one-hot token rows (``_rows_loops``) are compiled loops where numba runs
(``kernels.usable``), and give numpy's bits (NaN signs aside)."""


def check_kernel(kernel: str) -> str:
    if kernel not in KERNELS:
        raise SettingError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel == "compiled" and not KN.available():
        raise SettingError('kernel "compiled" needs numba, which is not installed')
    return kernel


def from_batch(batch: Batch, kernel: str = "numpy", operators: bool = True) -> Tokens:
    """The engine layout of a task batch (``tasks.Batch``): shared tables with few types stay a dense bag;
    shared tables with many types become token rows over a sparse table; per-string embeddings (N, L, D)
    become one table row per present token.  ``kernel``: see ``KERNELS``.  ``operators=False`` leaves the
    rows layout's operators to be built on first use (a batch that is only to be stacked: ``stack``)."""
    check_kernel(kernel)
    y = np.asarray(batch.y, float)
    N = y.shape[0]
    w = np.full(N, 1.0 / N) if batch.weights is None else np.asarray(batch.weights, float)
    X = batch.X if sp.issparse(batch.X) else np.asarray(batch.X, float)
    segments = None
    if sp.issparse(batch.m):
        if sp.isspmatrix_csr(batch.m) and KN.sorted_rows(batch.m):  # the samplers' (canonical) matrices
            mc = batch.m
        else:  # a sorted copy: the caller's matrix is left as it is (flags included)
            mc = sp.csr_matrix(batch.m, copy=True)
            mc.sort_indices()
        per = np.diff(mc.indptr)
        tok, mult = mc.indices.astype(np.int64), mc.data.astype(float)
        if np.all(mult > 0):  # every stored count is a row: the strings' segments are read off indptr
            nonempty = np.flatnonzero(per)
            segments = (nonempty, mc.indptr[nonempty].astype(np.intp),
                        np.repeat(np.arange(nonempty.size), per[nonempty]))
        else:
            n_idx = np.repeat(np.arange(mc.shape[0]), per)
            keep = mult > 0
            n_idx, tok, mult = n_idx[keep], tok[keep], mult[keep]
    else:
        m = np.asarray(batch.m, float)
        if X.ndim == 2 and X.shape[0] <= DENSE_BAG_MAX_TYPES:
            return Tokens(table=X, y=y, weights=w, labels=batch.labels, counts=m, kernel=kernel)
        if X.ndim == 2:
            n_idx, tok = np.nonzero(m)
            mult = m[n_idx, tok]
    if X.ndim == 2:
        table = X if sp.issparse(X) else _sparse_if_sparse(X)
        rows = _take_rows(table, tok) if sp.issparse(table) else table[tok]
    elif X.ndim == 3:
        m = np.asarray(batch.m, float)
        n_idx, pos = np.nonzero(m)
        table = rows = X[n_idx, pos]
        mult = m[n_idx, pos]
    else:
        raise SettingError(f"batch embeddings must be (L, D) or (N, L, D), got shape {X.shape}")
    nonempty, starts, seg = _segments(n_idx) if segments is None else segments
    tb = Tokens(table=table, y=y, weights=w, labels=batch.labels, mult=mult, starts=starts,
                seg=seg, nonempty=nonempty, rows=rows, kernel=kernel)
    # the operators of the kernel that will run, built here once per batch (the numpy ones on demand, by
    # _row_operators, for compiled batches whose rows the compiled kernel cannot take, and for batches of the
    # rows loops run inside ``kernels.numpy_paths``)
    if operators and _onehot(tb) is None and _rows_loops(tb) is None:
        _row_operators(tb)
    return tb


@dataclass
class Forward:
    """What the backward pass needs: per-head outputs fh (N, R, H, K), f (N, R, K), and the attention
    weights: bag layout (T, N, RH) with the type values V (T, RH, K); rows layout (M, RH) with V the mean
    embeddings xbar (RH, N_ne, D) of the non-empty strings.  The compiled kernel's (``_onehot_forward``: w its
    weights and normalisers) has no fh: its backward pass is in ``_onehot_risk_and_grad``."""

    f: np.ndarray
    fh: np.ndarray | None
    w: object
    V: object = None


def _row_operators(tb: Tokens):
    """The rows layout's operators, built once per batch (by ``from_batch``) and kept on ``tb``:
    ``scatter`` (N_ne D, M) sends row i's embedding x_i to the block of its string (entry (seg_i D + j, i)
    = x_ij), so scatter @ W is every string's weighted sum of its rows for all (run, head) columns of W at
    once; ``gather`` = scatter^T gives each row its string's block (sparse rows; None for dense ones, whose
    backward pass does without it); ``rows_t`` the rows' transpose as CSR
    (sparse rows; None for dense ones), whose product sums each coordinate over the rows in the order of
    the transposed CSC product, without building the transpose at every step; ``reps`` (N_ne,) the rows of
    each string, so ``np.repeat(v, reps, axis=0)`` is ``v[seg]`` (the rows of a string are contiguous and
    in string order), 5x faster than the fancy index; ``heavy`` the rows whose multiplicity is not 1 (the
    only ones the softmax must multiply, x * 1.0 being x: a few hundred of ICL's 36000 rows at d = 200);
    ``prods`` the sparse products of the rows, scatter, gather and rows_t (``_CsrProduct``, None for dense
    rows), checked once.  A stack of S groups (``stack``) takes its scores and rows_t on the rows moved to
    their group's block of S D coordinates (row i of group s: column s D + j), so that one product gives
    every run the scores of its own group's rows from the alphas of all groups stacked (S D, C H), each
    entry the sum, over the same entries in the same order, of the group's own product."""
    ops = tb.__dict__.get("_ops")
    if ops is None:
        score = tb.rows if sp.issparse(tb.rows) else None
        if score is not None:
            X = tb.rows if sp.isspmatrix_csr(tb.rows) else sp.csr_matrix(tb.rows)
            D = X.shape[1]
            shape = (X.shape[0], len(tb.starts) * D)
            # row i's coordinates moved to its string's block, computed in the index type scipy's constructor keeps
            dt = csr_index_dtype(X.nnz, *shape)
            per_entry = np.diff(X.indptr)
            block = np.repeat((tb.seg * D).astype(dt), per_entry)
            gather = sp.csr_matrix((X.data, np.add(X.indices, block, dtype=dt), X.indptr), shape=shape)
            if tb.groups > 1:  # the score rows: each group's rows in its own block of coordinates
                S_ = tb.groups
                wide = (X.shape[0], S_ * D)
                dt = csr_index_dtype(X.nnz, *wide)
                shift = np.repeat((tb.seg // (len(tb.starts) // S_) * D).astype(dt), per_entry)
                X = score = sp.csr_matrix((X.data, np.add(X.indices, shift, dtype=dt), X.indptr), shape=wide)
            rows_t = _transpose(X)
            scatter = _transpose(gather)
        else:  # dense rows: their backward pass needs no gather (and no rows_t)
            gather = rows_t = None
            scatter = _dense_scatter(np.asarray(tb.rows), tb.starts)
        reps = np.diff(np.append(tb.starts, tb.rows.shape[0]))
        heavy = np.flatnonzero(tb.mult != 1.0)
        prods = tuple(_CsrProduct(A) if A is not None else None
                      for A in (score, scatter, gather, rows_t))
        ops = tb.__dict__["_ops"] = (scatter, gather, rows_t, reps, heavy, prods)
    return ops


def _rows_loops(tb: Tokens):
    """The rows loops' view of a batch (``kernels.OneHotRows``, built once per batch), where the numpy kernel
    takes them: one group of one-hot sparse rows whose entries are in the order of its score product (sorted,
    or at most two a row, whose sum does not depend on their order), and numba usable (``kernels.usable``,
    asked at every call, so that ``kernels.numpy_paths`` reaches it).  The loops do the numpy path's
    operations in its order, so they give its bits (``tests/test_rows_loops.py``); None elsewhere."""
    if tb.kernel != "numpy" or tb.groups != 1 or not sp.issparse(tb.rows) or not KN.usable():
        return None
    view = tb.__dict__.get("_rows_loops")
    if view is None:  # the score rows of one group are the rows themselves (``_row_operators``)
        score = tb.rows
        oh = KN.OneHotRows.of(score, tb.starts, tb.mult) if score.format == "csr" else None
        ordered = oh is not None and (oh.idx.shape[0] <= 2 or KN.sorted_rows(score))
        view = tb.__dict__["_rows_loops"] = oh if ordered else False
    return view or None


def _fast_csr(A) -> bool:
    """Whether ``_take_rows`` and ``_transpose`` may call scipy's kernels directly on A: a CSR matrix of
    float64 values with int32 indices and pointers, which scipy keeps for its size (every batch of the tasks;
    anything else takes scipy's own path)."""
    return (_sparsetools is not None and sp.isspmatrix_csr(A) and A.data.dtype == np.float64
            and A.indices.dtype == np.int32 and A.indptr.dtype == np.int32
            and csr_index_dtype(A.nnz, *A.shape) == np.int32)


def _take_rows(A, idx: np.ndarray):
    """``A[idx]`` for a CSR matrix A and integer row indices idx (each in 0..rows - 1; negative ones, which
    scipy reads from the end, are refused): the arrays of scipy's row gather, from two compiled passes where
    numba runs (``kernels.take_rows``: 0.2 of the 0.5 ms at ICL's d = 200 were numpy's pointer arithmetic),
    else from scipy's kernel (``csr_row_index``) called without its indexing machinery (170 of its 200 us a
    batch at ICL's d = 50 were the machinery)."""
    idx = np.asarray(idx)
    if not _fast_csr(A) or idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0:
        return A[idx]
    if idx.min() < 0 or idx.max() >= A.shape[0]:
        raise IndexError(f"row index out of range 0..{A.shape[0] - 1}")
    rows = idx.astype(np.int32)
    if KN.usable():  # one compiled pass for the pointers and one for the entries: the same arrays
        indptr, indices, data = KN.take_rows(A.indptr, A.indices, A.data, rows, limit=_tasks.INT32_MAX)
    else:
        ends = np.cumsum(A.indptr[rows + 1] - A.indptr[rows], dtype=np.int64)
        total = int(ends[-1])
        if csr_index_dtype(total) != np.int32:  # scipy's own gather would wrap its int32 pointers: refused
            raise ValueError(f"{total} entries in the rows taken: more than int32 index pointers hold")
        indptr = np.zeros(rows.size + 1, dtype=np.int32)
        indptr[1:] = ends
        indices, data = np.empty(total, dtype=np.int32), np.empty(total)
        _sparsetools.csr_row_index(rows.size, rows, A.indptr, A.indices, A.data, indices, data)
    return sp.csr_matrix((data, indices, indptr), shape=(rows.size, A.shape[1]), copy=False)


def _transpose(A):
    """``A.T.tocsr()`` for a CSR matrix A: scipy's conversion kernel (``csr_tocsc``) called directly, the same
    arrays, its rows' indices sorted as scipy marks them (its wrappers took 130 of the 200 us a conversion at
    ICL's d = 50, two a batch)."""
    if not _fast_csr(A):
        return A.T.tocsr()
    M, N = A.shape
    indptr, indices, data = np.empty(N + 1, dtype=np.int32), np.empty(A.nnz, dtype=np.int32), np.empty(A.nnz)
    _sparsetools.csr_tocsc(M, N, A.indptr, A.indices, A.data, indptr, indices, data)
    out = sp.csr_matrix((data, indices, indptr), shape=(N, M), copy=False)
    out.has_sorted_indices = True
    return out


def _dense_scatter(rows: np.ndarray, starts: np.ndarray):
    """``scatter`` of dense rows (M, D) built from their layout: the CSR matrix that converting the rows to CSR
    (which drops their zeros), shifting each row's columns to its string's block and transposing gives, the
    same arrays (so the same products, bit for bit), without the conversion's scan and the transpose's sort
    (the layout of an SLR batch of 64 at d = 50: 2.5 to 1.0 ms).  Entry (i, j) goes to row seg_i D + j, whose
    entries are the rows of string seg_i in order: position starts_n D + j L_n + (i - starts_n), L_n the
    string's rows."""
    M, D = rows.shape
    N_ne = len(starts)
    L = np.diff(np.append(starts, M))
    first = np.repeat(starts, L)                                                      # (M,) the string's first row
    i = np.arange(M)
    pos = ((first * D + i - first)[:, None] + np.arange(D)[None, :] * np.repeat(L, L)[:, None]).ravel()
    data, indices = np.empty(M * D), np.empty(M * D, np.int64)
    data[pos] = rows.ravel()
    indices[pos] = np.repeat(i, D)
    per_row = np.repeat(L, D)
    keep = data != 0
    if not keep.all():
        data, indices = data[keep], indices[keep]
        per_row = np.bincount(np.repeat(np.arange(N_ne * D), per_row)[keep], minlength=N_ne * D)
    dt = csr_index_dtype(N_ne * D, M, data.size)  # (int64 ones scipy would scan and copy: 0.1 ms)
    indptr = np.zeros(N_ne * D + 1, dt)
    np.cumsum(per_row, out=indptr[1:])
    return sp.csr_matrix((data, indices.astype(dt, copy=False), indptr), shape=(N_ne * D, M))


def _onehot(tb: Tokens):
    """The compiled kernel's view of the rows (``kernels.OneHotRows``), built once per batch; None when the
    kernel is "numpy" or the rows are not one-hot."""
    if tb.kernel != "compiled":
        return None
    if "_onehot" not in tb.__dict__:
        tb.__dict__["_onehot"] = KN.OneHotRows.of(tb.rows, tb.starts, tb.mult)
    return tb.__dict__["_onehot"]


class _CsrProduct:
    """``A @ X`` (m, c) for a CSR matrix A (m, n) and an array X (n, c): when both are float64, by the
    kernel scipy runs for it (``csr_matvec`` for one column, ``csr_matvecs`` for several, into zeros),
    called directly: the same arithmetic in the same order, so the same bits, without scipy's dispatch and
    checks (~4 us a product, 5% of an ICL step at d = 50).  Anything else goes through ``A @ X``."""

    __slots__ = ("A", "args")

    def __init__(self, A):
        self.A = A
        fast = _sparsetools is not None and sp.isspmatrix_csr(A) and A.data.dtype == np.float64
        self.args = (A.shape[0], A.shape[1], A.indptr, A.indices, A.data) if fast else None

    def __call__(self, X: np.ndarray) -> np.ndarray:
        args = self.args
        if args is None or X.dtype != np.float64 or X.shape[0] != args[1]:
            return np.asarray(self.A @ X)
        m, c = args[0], X.shape[1]
        if c == 1:
            out = np.zeros(m)
            _sparsetools.csr_matvec(*args, X.ravel(), out)
            return out.reshape(m, 1)
        out = np.zeros((m, c))
        _sparsetools.csr_matvecs(m, args[1], c, *args[2:], X.ravel(), out.ravel())
        return out


def _forward_rows(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loops) -> Forward:
    """Rows layout, all runs and heads at once: scores s = X_rows alpha (a lookup for one-hot rows), the
    segment softmax w, the mean embedding xbar_n = sum_i w_i x_i of each string (one sparse product over
    every (run, head)) and f = xbar B (a batched dense product of size N x D x K per run and head).  ``loops``:
    ``_rows_loops(tb)``, asked once by the caller for the whole step."""
    R, H, D = alpha.shape
    N_ne = len(tb.starts)
    oh = _onehot(tb)
    if oh is not None:
        Wt, xbar, _, f = _onehot_forward(alpha, B, tb, oh)
        return Forward(f=f, fh=None, w=Wt, V=xbar)
    if loops is not None:  # the same operations in the same order in two loops around numpy's exponential
        Wt, xbar = KN.rows_forward(alpha.reshape(R * H, D), loops)                    # (M, RH), (RH, N_ne, D)
        return _readout(xbar, B, tb, Wt)
    _, _, _, reps, heavy, (rows_p, scatter_p, _, _) = _row_operators(tb)
    G = tb.groups
    if G > 1 and R % G:
        raise SettingError(f"a stack of {G} batches takes the same number of runs on each, got {R} runs")
    CH = R * H // G                                                                   # columns: runs of a group
    if G == 1:
        A = alpha.reshape(R * H, D).T                                                 # (D, RH)
    else:  # group s's alphas in rows s D .. s D + D - 1 (``_row_operators``' score rows)
        A = alpha.reshape(G, CH, D).transpose(0, 2, 1).reshape(G * D, CH)            # (G D, CH)
    S = rows_p(A) if rows_p is not None else np.asarray(tb.rows @ A)                 # (M, CH)
    # the softmax in place (S becomes the weights): no new (M, CH) array per operation
    S -= np.repeat(np.maximum.reduceat(S, tb.starts, axis=0), reps, axis=0)
    np.exp(S, out=S)
    if CH == 1 and 20 * len(heavy) < len(S):  # few repeated tokens (ICL at d >= 50): only their rows
        S.reshape(-1)[heavy] *= tb.mult[heavy]
    elif len(heavy):
        S *= tb.mult[:, None]
    S /= np.repeat(np.add.reduceat(S, tb.starts, axis=0), reps, axis=0)
    Wt = S                                                                            # (M, CH)
    xbar = scatter_p(Wt).reshape(N_ne, D, CH)
    if G > 1:  # (G N, D, CH) -> (G CH, N, D): run (s, c) on its group's strings
        xbar = np.ascontiguousarray(xbar.reshape(G, N_ne // G, D, CH).transpose(0, 3, 1, 2))
        xbar = xbar.reshape(R * H, N_ne // G, D)
    elif R * H > 1:
        xbar = np.ascontiguousarray(xbar.transpose(2, 0, 1))                         # (RH, N_ne, D)
    else:
        xbar = xbar.reshape(1, N_ne, D)
    return _readout(xbar, B, tb, Wt)


def _onehot_forward(alpha: np.ndarray, B: np.ndarray, tb: Tokens, oh):
    """The compiled kernel's forward pass: (its weights and normalisers, the mean embeddings xbar (RH, N_ne, D),
    the heads' outputs fhe (RH, N_ne, K), f (N, R, K)), f a view of fhe where there is one head and no empty
    string (no array of the numpy path's layout (N, R, H, K) is built)."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    Wt, xbar = KN.softmax_scatter(alpha.reshape(R * H, D), oh)
    fhe = xbar @ B.reshape(R * H, D, K)                                               # (RH, N_ne, K)
    f = (fhe if H == 1 else fhe.reshape(R, H, -1, K).sum(axis=1)).transpose(1, 0, 2)  # (N_ne, R, K)
    if f.shape[0] < tb.size:
        f_ne, f = f, np.zeros((tb.size, R, K))
        f[tb.nonempty] = f_ne
    return Wt, xbar, fhe, f


def _onehot_risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str, oh):
    """``_risk_and_grad`` on the compiled kernel, in the fewest calls (at d = 50 a step's numpy calls take
    as long as its passes over the rows): dL/df, U = B g_n and the heads' outputs stay in the layout
    (RH, N_ne, .) of the readout products, which the loops read as they are; the squared loss on a batch
    without empty strings (ICL, sampled two-head AND) is one compiled pass too (``kernels.squared_loss``)."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    Wt, xbar, fhe, f = _onehot_forward(alpha, B, tb, oh)
    if loss == "squared" and fhe.shape[1] == tb.size:  # one compiled pass (a third of numpy's calls' time)
        r, g_c = KN.squared_loss(fhe, tb.y, tb.weights, H)                            # g_c (RH, N, K)
    else:
        r, g = _risk_and_dl(f, tb, loss)                                              # g (N, R, K)
        g_t = (g if fhe.shape[1] == tb.size else g[tb.nonempty]).transpose(1, 0, 2)   # (R, N_ne, K)
        g_c = g_t if H == 1 else np.repeat(g_t, H, axis=0)                            # (RH, N_ne, K)
    Bc = B.reshape(R * H, D, K)
    gB = xbar.transpose(0, 2, 1) @ g_c                                                # (RH, D, K)
    ga = KN.score_grad(g_c @ Bc.transpose(0, 2, 1), fhe, g_c, Wt, oh)                 # (RH, D)
    return r, ga.reshape(R, H, D), gB.reshape(R, H, D, K), f


def _readout(xbar: np.ndarray, B: np.ndarray, tb: Tokens, Wt) -> Forward:
    """The numpy kernel's f = xbar B from the mean embeddings xbar (RH, N_ne, D) of the non-empty strings."""
    R, H, D, K = B.shape
    N = tb.size // tb.groups
    N_ne = len(tb.starts) // tb.groups
    fhe = xbar @ B.reshape(R * H, D, K)                                               # (RH, N_ne, K)
    if N_ne == N:  # every string non-empty (the sampled tasks): nonempty is 0..N-1
        fh = fhe.transpose(1, 0, 2).reshape(N, R, H, K)
    else:
        fh = np.zeros((N, R, H, K))
        fh[tb.nonempty] = fhe.transpose(1, 0, 2).reshape(N_ne, R, H, K)
    # one head: numpy's sum over the length-1 axis is 0.0 + fh (bit for bit), without its strided loop
    f = fh[:, :, 0] + 0.0 if H == 1 else fh.sum(axis=2)
    return Forward(f=f, fh=fh, w=Wt, V=xbar)


def _backward_rows(fw: Forward, B: np.ndarray, g: np.ndarray, tb: Tokens, loops) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of the rows layout from dL/df = g (N, R, K), all runs and heads at once: dB_h = xbar^T g,
    and per row ds_i = w_i (x_i . (B g_n) - f_hn . g_n), dalpha_h = X_rows^T ds."""
    R, H, D, K = B.shape
    G = tb.groups
    N_ne = len(tb.starts) // G
    every = N_ne == g.shape[0]  # nonempty is 0..N-1: no gather of the strings (always so for G > 1)
    g_t = (g if every else g[tb.nonempty]).transpose(1, 0, 2)                        # (R, N_ne, K)
    # for one head a strided view, not a contiguous copy: the products below round by their operands'
    # layout (a contiguous copy changed dB's last bits at R = 3 with empty strings)
    # (one head: g_t itself, which the products take with the same bits as the broadcast's reshape of it (its
    # strides differ only on axes of length 1; tests/test_rows_loops.py), without the call: about 10 us)
    g_ne = g_t if H == 1 else np.broadcast_to(g_t[:, None], (R, H, N_ne, K)).reshape(R * H, N_ne, K)
    gB = fw.V.transpose(0, 2, 1) @ g_ne                                               # (RH, D, K)
    U = g_ne @ B.reshape(R * H, D, K).transpose(0, 2, 1)                              # (RH, N_ne, D)
    fh = (fw.fh if every else fw.fh[tb.nonempty]).reshape(N_ne, R * H, K)
    if K == 1:  # f_hn . g_n is one product
        fg = fh[..., 0] * g_ne[..., 0].T                                              # (N_ne, RH)
    elif R * H == 1:
        fg = np.einsum("nk,nk->n", fh[:, 0], g_ne[0])[:, None]
    else:
        fg = np.empty((N_ne, R * H))
        for c in range(R * H):  # per (run, head): the summation order of the per-run path
            fg[:, c] = np.einsum("nk,nk->n", fh[:, c], g_ne[c])
    if loops is not None:  # the sparse branch's operations in its order, in one loop over the rows
        return KN.rows_score_grad(U, fg, fw.w, loops).reshape(R, H, D), gB.reshape(R, H, D, K)
    if sp.issparse(tb.rows):
        _, _, _, reps, _, (_, _, gather_p, rows_t_p) = _row_operators(tb)
    if sp.issparse(tb.rows) and G > 1:  # group s's strings and runs: rows s N D .., columns its C H runs
        CH = R * H // G
        vg = gather_p(np.ascontiguousarray(U.reshape(G, CH, N_ne * D).transpose(0, 2, 1)).reshape(-1, CH))
        vg -= np.repeat(fg.reshape(N_ne, G, CH).transpose(1, 0, 2).reshape(-1, CH), reps, axis=0)
        ds = np.multiply(vg, fw.w, out=vg)
        ga = rows_t_p(ds).reshape(G, D, CH).transpose(0, 2, 1)                       # (G, CH, D)
        return ga.reshape(R, H, D), gB.reshape(R, H, D, K)
    if sp.issparse(tb.rows):
        vg = gather_p(U.reshape(R * H, N_ne * D).T)                                   # (M, RH)
        vg -= np.repeat(fg, reps, axis=0)
        ds = np.multiply(vg, fw.w, out=vg)
        ga = rows_t_p(ds)                                                             # (D, RH)
    else:
        # dense rows (SLR, cheap): per run and head, a row's dot product and rows^T ds by BLAS, the
        # summation order of the per-run path, so that trained numbers do not move with the rounding
        ga = np.empty((D, R * H))
        for c in range(R * H):
            ds = fw.w[:, c] * (np.einsum("md,md->m", tb.rows, U[c][tb.seg]) - fg[tb.seg, c])
            ga[:, c] = tb.rows.T @ ds
    return ga.T.reshape(R, H, D), gB.reshape(R, H, D, K)


def forward(alpha: np.ndarray, B: np.ndarray, tb: Tokens) -> Forward:
    """Outputs of R runs (alpha (R, H, D), B (R, H, D, K)) on every string of ``tb``."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    N = tb.size
    if tb.layout == "rows":
        return _forward_rows(alpha, B, tb, _rows_loops(tb))
    S_tab = np.asarray(tb.table @ alpha.reshape(R * H, D).T)                         # (T, RH)
    V_tab = np.asarray(tb.table @ B.transpose(2, 0, 1, 3).reshape(D, R * H * K))     # (T, RHK)
    # bag layout
    # few token types: a string's softmax shift (its largest present score) and its exponentials
    # depend only on which types it has, so they are computed once per presence pattern (2^T of them)
    # and gathered; then one (N, RH) array per type, no (N, T, RH) temporaries and no exp over N
    counts = tb.counts
    T = counts.shape[1]
    pat = _patterns(tb)                                                            # (N,) pattern
    bits = ((np.arange(1 << T)[:, None] >> np.arange(T)[None, :]) & 1).astype(bool)  # (P, T)
    topP = np.where(bits[:, :, None], S_tab[None], -np.inf).max(axis=1)            # (P, RH)
    topP[~np.isfinite(topP)] = 0.0
    exP = np.where(bits[:, :, None], np.exp(np.minimum(S_tab[None] - topP[:, None], 0.0)), 0.0)
    V = V_tab.reshape(T, R * H, K)
    if _bag_compiled(T, K):  # the same operations in the same order, in one pass: the same bits
        w, fh = KN.bag_forward(counts, pat, exP, V[:, :, 0])
    else:
        w = np.empty((T, N, R * H))
        for t in range(T):
            np.take(exP[:, t], pat, axis=0, out=w[t])
            w[t] *= counts[:, t:t + 1]
        Z = w.sum(axis=0)
        Z[Z == 0] = 1.0
        w /= Z
        fh = np.einsum("tnc,tck->nck", w, V) if K > 1 else (w * V[:, None, :, 0]).sum(axis=0)
    fh = fh.reshape(N, R, H, K)
    # one head: f is fh itself, which is what fh.sum(axis=2) (0.0 + fh) gives here, bit for bit: every sum
    # above starts from +0, so no entry of fh is -0.0 (``_readout``'s fh can be, and adds the 0.0)
    return Forward(f=fh[:, :, 0] if H == 1 else fh.sum(axis=2), fh=fh, w=w, V=V)


def _bag_compiled(T: int, K: int) -> bool:
    """Whether the bag layout's forward pass runs as one compiled loop (``kernels.bag_forward``), whatever the
    kernel option: for two token types and one output (the exact populations: occurrence, OR and one-head AND
    in their reduced types), where numba imports and compiles (``kernels.usable``).  The loop does numpy's
    operations in numpy's order (its sums over the two types too, from +0 up), so it gives numpy's bits
    (tested, to the sign of every zero; only a NaN's sign may differ) and no result changes.  The numpy path
    makes about eight passes over (types, strings, runs) arrays, the loop one: one-head AND's step at d = 50
    took half the time."""
    return K == 1 and T == 2 and KN.usable()


def _patterns(tb: Tokens) -> np.ndarray:
    """Bag layout: each string's presence pattern (bit t set when it has a token of type t), computed once
    per count matrix and kept on ``tb`` (an exact population is the batch of every step; the product is a
    fifth of a step of AND's population)."""
    got = tb.__dict__.get("_pat")
    if got is None or got[0] is not tb.counts:
        got = tb.__dict__["_pat"] = (tb.counts, (tb.counts > 0) @ (1 << np.arange(tb.counts.shape[1])))
    return got[1]


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

    xbar of every string is f of a one-head model with B = I (K = D outputs) at alpha = 0 (``forward``),
    and the moment the product (xbar w)^T xbar.  When strings x D exceeds ``MOMENT_ELEMENTS`` (AND's
    population at d = 200: 10^6 x 200, 4.8 GB for the whole product and its temporaries), both are
    computed in blocks of ``block`` columns of B = I (a multiple of ``MOMENT_ALIGN``; the last block takes a
    remainder narrower than that), only the blocks on or below the diagonal: every entry is then the same sum, over the same strings in the same order, as
    in the whole product, and the moment is bit-identical to it (tests/test_experiments.py checks this
    with ==).  The products run on one BLAS thread, as table1's rows and the sweep's units do
    (``runner.run_row``): with several threads the whole product's bits depend on how BLAS shares its rows
    among them, and on a shared machine its threads spin (10x slower for these thin products).  Another summation order (the moment of the class weights, or of the rows' mean tokens)
    would move it by 1e-15, and trained numbers by up to 5e-12 through the step-size grid
    (``runner.output_curvature``).  AND's population by the integral gives its closed form (the full matrix,
    not a triangle)."""
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


def losses(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per string and run: loss (N, R) and dloss/df (N, R, K)."""
    N, R, K = f.shape
    flat = f.reshape(N * R, K)
    if loss == "cross_entropy":
        if tb.labels is None:
            raise SettingError("the cross-entropy loss needs class labels; this task has none")
        target = np.repeat(np.asarray(tb.labels, int), R)
    else:
        target = tb.y if R == 1 else np.repeat(tb.y, R, axis=0)
    lv, dl = loss_terms(loss, flat, target)
    return np.asarray(lv, float).reshape(N, R), np.asarray(dl, float).reshape(N, R, K)


SUM_BLOCK = 4096
"""The reported risks are weighted sums taken a block of this many strings at a time, each block's products
added by numpy's pairwise sum (rounding error below SUM_BLOCK units in the last place of the block's sum,
whatever the order), the blocks added exactly (``math.fsum``): a population of a million classes is summed to ~5e-13 relative, where one
product's bound is a million units.  Each run's sum is the same bits whichever runs it is summed with.
Batches up to SUM_BLOCK strings (every sampled set) are one BLAS product, as before."""


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
    product over all runs (the rounding of the unchunked path, as before); above, chunk by chunk (the same
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
    classes f of 30 runs is 240 MB)."""
    if _integral(tb, loss):
        if with_f:
            raise SettingError("the AND integral gives no outputs f")
        return (*tb.risk_and_grad(alpha, B), None)
    _unstacked(tb)
    R, H, _ = alpha.shape
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


def _risk_and_dl(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """The R weighted risks and d risk / d f (N, R, K): each string's loss gradient times its weight, scaled in
    the gradient's own array (every loss returns a new one)."""
    lv, dl = _terms_and_dl(f, tb, loss)
    return tb.weights @ lv, dl


def _terms_and_dl(f: np.ndarray, tb: Tokens, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """The losses (N, R) and their weighted gradients d risk / d f (N, R, K) of ``_risk_and_dl``."""
    if loss == "squared" and f.shape[2] == 1 and tb.y.shape[1] == 1 and KN.usable():
        # one output: numpy's elementwise passes as one compiled pass, the same bits (``kernels.squared_terms``)
        lv, dl = KN.squared_terms(f[:, :, 0], tb.y[:, 0], tb.weights)
        return lv, dl[:, :, None]
    if loss == "squared" and tb.y.shape[1] == f.shape[2] and KN.usable():
        # several outputs (ICL): the same in one pass, numpy's pairwise sum over the outputs replayed
        return KN.squared_outputs(f, tb.y, tb.weights)
    lv, dl = losses(f, tb, loss)
    return lv, np.multiply(dl, tb.weights[:, None, None], out=dl)


# ------------------------------------------------------------------------------------------------
# runs on several batches at once (seeds in one array program): measured, not taken by the runner


def stackable(parts: list[Tokens]) -> bool:
    """Whether ``stack`` takes these batches: token rows over one-hot (sparse) embeddings on the numpy kernel,
    the same number of strings and width D, none empty (the sampled ICL and two-head AND batches); not AND's
    population by the integral, which ``risk_and_grad`` takes one group at a time."""
    if len(parts) < 2 or any(isinstance(p, IntegralPopulation) for p in parts):
        return False
    first = parts[0]
    return all(p.layout == "rows" and p.kernel == "numpy" and p.groups == 1 and sp.issparse(p.rows)
               and p.size == first.size and len(p.starts) == p.size and p.rows.shape[1] == first.rows.shape[1]
               for p in parts)


def stack(parts: list[Tokens]) -> Tokens:
    """S batches of ``stackable`` token rows as one batch of S N strings (``Tokens.groups`` = S): the rows,
    strings and targets of batch s after those of batches 0 .. s - 1, every row in its own string's block of
    the operators (``_row_operators``).  A run of group s then sees in each product of the rows layout the
    same entries, in the same order, as on batch s alone: the same bits (tests/test_grouped.py).  Only
    ``grouped_risk_and_grad`` steps a stack (``risk`` and ``risk_and_grad`` refuse one)."""
    if not stackable(parts):
        raise SettingError("stack takes two or more batches of one-hot token rows of the same size, "
                           "none with an empty string, on the numpy kernel")
    Xs = [p.rows if sp.isspmatrix_csr(p.rows) else sp.csr_matrix(p.rows) for p in parts]
    N, D = parts[0].size, Xs[0].shape[1]
    M = np.cumsum([0] + [X.shape[0] for X in Xs])
    nnz = np.cumsum([0] + [X.nnz for X in Xs])
    dt = csr_index_dtype(int(nnz[-1]), int(M[-1]), len(parts) * N * D)
    indptr = np.concatenate([np.zeros(1, dt)] + [X.indptr[1:].astype(dt) + nnz[i] for i, X in enumerate(Xs)])
    rows = sp.csr_matrix((np.concatenate([X.data for X in Xs]), np.concatenate([X.indices for X in Xs]).astype(dt),
                          indptr), shape=(int(M[-1]), D))
    labels = None if parts[0].labels is None else np.concatenate([np.asarray(p.labels) for p in parts])
    return Tokens(table=parts[0].table, y=np.concatenate([p.y for p in parts]),
                  weights=np.concatenate([p.weights for p in parts]), labels=labels,
                  mult=np.concatenate([p.mult for p in parts]),
                  starts=np.concatenate([p.starts + M[i] for i, p in enumerate(parts)]),
                  seg=np.concatenate([p.seg + i * N for i, p in enumerate(parts)]),
                  nonempty=np.arange(len(parts) * N), rows=rows, kernel="numpy", groups=len(parts))


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
    bank per seed): on the batches it is built for (ICL, two-head AND) it was slower than one
    ``risk_and_grad`` call per seed in most of the configurations measured, and faster only for two-head AND
    with few runs per seed (docs/benchmarks_engine.md, "Seeds in one program", measures both).  A step costs
    its runs' work (token rows x runs), which stacking does not reduce; why the stack is often slower was not
    measured (the stacked operands are larger than one seed's, a guess is the caches).

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


def _risk_and_grad(alpha: np.ndarray, B: np.ndarray, tb: Tokens, loss: str):
    oh = _onehot(tb)
    if oh is not None:
        return _onehot_risk_and_grad(alpha, B, tb, loss, oh)
    if tb.layout == "rows":  # the loops' view asked once for the step (``_rows_loops``: 4 us a call)
        loops = _rows_loops(tb)
        fw = _forward_rows(alpha, B, tb, loops)
        r, g = _risk_and_dl(fw.f, tb, loss)                            # g (N, R, K)
        ga, gB = _backward_rows(fw, B, g, tb, loops)
        return r, ga, gB, fw.f
    R, H, D = alpha.shape
    K = B.shape[-1]
    fw = forward(alpha, B, tb)
    r, g = _risk_and_dl(fw.f, tb, loss)                                # g (N, R, K)
    gh = np.broadcast_to(g[:, :, None, :], (g.shape[0], R, H, K)).reshape(-1, R * H, K)
    fh = fw.fh.reshape(-1, R * H, K)
    # per type t: dV_t = sum_n w_tn g_n and ds_t = sum_n w_tn (V_t - fh_n) . g_n.  A non-empty string's weights
    # sum to 1, so V_t - fh_n = sum_s w_sn (V_t - V_s), and an empty string has w = 0: ds_t = sum_s (V_t - V_s) .
    # M_ts with M_ts = sum_n w_tn w_sn g_n, one pass over the strings per pair of the bag's few types, and no
    # cancellation beyond the gradient's own.  (As V_t . dV_t - sum_n w_tn fh_n . g_n, two sums of size |f| |g|
    # cancelled to the gradient, it erred by 9e-12 on an alpha entry of 2.2e-6 of occurrence's d = 200
    # population at |alpha| = 20, |B| = 12: tests/test_tasks.py.)
    T = fw.w.shape[0]
    dV = np.einsum("tnc,nc->tc", fw.w, gh[..., 0])[..., None] if K == 1 else np.einsum("tnc,nck->tck", fw.w, gh)
    if K == 1 and T > 2 and g.shape[0] <= PAIRS_AT_ONCE_MAX and KN.usable():
        # every pair's sum in one einsum (the same sums as one call a pair, bit for bit, on so few strings),
        # then the loop's differences, products and sums in its order (``kernels.type_pairs``)
        t_of, s_of = np.tril_indices(T, -1)                                         # the loop's order of pairs
        E = np.einsum("pnc,nc->pc", fw.w[t_of] * fw.w[s_of], gh[..., 0])           # (T (T - 1) / 2, RH)
        ds = KN.type_pairs(fw.V[:, :, 0], E)
    else:
        ds = _type_pairs_loop(fw, gh, T, K)
    G_V, G_s = dV.reshape(dV.shape[0], -1), ds
    gB = np.asarray(tb.table.T @ G_V).reshape(D, R, H, K).transpose(1, 2, 0, 3)
    ga = np.asarray(tb.table.T @ G_s).reshape(D, R, H).transpose(1, 2, 0)
    return r, ga, gB, fw.f


PAIRS_AT_ONCE_MAX = 4096
"""The bag layout's score gradient takes every pair of types in one einsum on batches of at most this many
strings (even pairs' sampled batches, and the unmerged class populations of three types up to that size).  One
einsum over the stacked pairs gives each pair's sum the bits of its own call where the reduction over the strings
fits numpy's iterator buffer (8192 elements) in one piece (``tests/test_rows_loops.py`` holds the two to the same
bits up to this size); on longer ones the buffering can split them differently (measured on numpy 2.4: at 9000
strings and one run the last bits moved)."""


def _type_pairs_loop(fw: Forward, gh: np.ndarray, T: int, K: int) -> np.ndarray:
    """The bag layout's ds (T, RH), one pair of types at a time (``_risk_and_grad``)."""
    ds = np.zeros((T, gh.shape[1]))
    for t in range(T):
        for s in range(t):
            wts = fw.w[t] * fw.w[s]                                                # (N, RH)
            if K == 1:
                part = (fw.V[t, :, 0] - fw.V[s, :, 0]) * np.einsum("nc,nc->c", wts, gh[..., 0])
            else:
                part = np.einsum("ck,ck->c", fw.V[t] - fw.V[s], np.einsum("nc,nck->ck", wts, gh))
            ds[t] += part
            ds[s] -= part
    return ds


TIE_RTOL = 1e-9
"""Outputs closer than TIE_RTOL times the run's output scale (``tie_margin``) are tied: a +-1 output with
|f| within it, or two class outputs within it of each other.  Their order is the trained parameters'
rounding, not the model's: OR's output-only readout at d = 50 has beta_a / beta_u = -24 (-(d/2 - 1)) to
2e-15 relative, so 34 count classes (mass 0.0076) sit at |f| <= 8e-16, and the committed run's accuracy
curve alternated between 0.857 and 0.864 as their signs moved; the next class is at |f| = 3.5e-4.  A tie
is decided by the stated rule (``predictions``: f = 0 counts as -1, the first of tied classes wins), so an
accuracy does not depend on rounding, and its tied mass is reported beside it.  The margin is far above
the ties seen (|f| <= 8e-16 here, 1e-13 in an Adam run of the same row at d = 25) and far below the
next class's 3.5e-4."""


def tie_margin(B: np.ndarray, l1: float = 1.0) -> np.ndarray:
    """TIE_RTOL times the largest |f| the readout B (..., H, D, K) allows on tokens of L1 norm at most ``l1``
    (``_largest_l1`` of the token table): each head's output is a convex combination of its token values
    x B_h, and |x B_h| <= |x|_1 max |B_h|, so |f| <= l1 sum_h max |B_h|.  One-hot and class-average tokens
    have l1 = 1; ICL's pair tokens have two ones, l1 = 2.  Shape (...)."""
    return TIE_RTOL * l1 * np.abs(B).max(axis=(-2, -1)).sum(axis=-1)


def _largest_l1(table) -> float:
    """The largest L1 norm of a table's rows (0 for an empty table)."""
    if table.shape[0] == 0:
        return 0.0
    return float(abs(table).sum(axis=1).max())


def predictions(f: np.ndarray, margin=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(the predictions, whether each is tied) of outputs f (..., K) at a tie margin broadcast against
    f[..., 0]: for K = 1, +1 where f > margin and -1 elsewhere (f = 0 and every |f| <= margin count as
    -1), tied where |f| <= margin; for K > 1, the first class whose output is within the margin of the
    largest (the argmax when the margin is 0), tied where two are (on ICL a tie goes to class 0, the
    trigger, which is never an answer: a tied string counts wrong)."""
    margin = np.asarray(margin, dtype=float)
    if f.shape[-1] == 1:
        f0 = f[..., 0]
        return np.where(f0 > margin, 1, -1), np.abs(f0) <= margin
    near = f >= f.max(axis=-1, keepdims=True) - margin[..., None]
    return np.argmax(near, axis=-1), near.sum(axis=-1) > 1


def accuracy(f: np.ndarray, tb: Tokens, margin=0.0) -> np.ndarray | None:
    """Weighted accuracy per run of outputs f (N, R, K): ``predictions`` at ``margin`` (a scalar or one per
    run), +-1 labels for K = 1 and class labels for K > 1; None for regression."""
    return None if tb.labels is None else tb.weights @ prediction_hits(f, tb.labels, margin)[0]


def prediction_hits(f: np.ndarray, labels, margin=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(correct, tied) predictions (N, R) as floats for outputs f (N, R, K) and labels (N,)."""
    pred, tied = predictions(f, margin)
    return (pred == np.asarray(labels)[:, None]).astype(float), tied.astype(float)
