"""The engine's layout of a batch (:class:`Tokens`), on the tokens' structure.

A batch of strings is held as **token rows**: each row is one distinct token of one string, given by its type
(an index into a table of embeddings, dense or scipy.sparse) and its multiplicity, with the rows of a string
contiguous.  One-hot tasks give sparse tables (the identity, or the ICL pair table with two non-zeros a row),
so a token's score alpha^T x is a lookup and the readout's gradient a scatter-add through the table's
transpose; dense tasks (single-location regression) give one table row per token.  A population of count
classes (occurrence, OR, AND) keeps its shared table of 2 or 3 class tokens with a dense count matrix
(:func:`from_batch` picks the layout).  No array of the layout has a dimension of the table's size, so
memory is linear in the batch.

Beside the arrays, the operators the passes apply to them (``_row_operators``), the views of the compiled
loops (``_rows_loops``, ``_onehot``), direct calls of scipy's sparse kernels that build them with the same
arrays as scipy's own paths, and the stack of several batches as one (``stack``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
try:  # the kernels behind scipy's CSR @ dense product, called without its dispatch (see _CsrProduct)
    from scipy.sparse import _sparsetools
except ImportError:  # pragma: no cover - a scipy without the private module: its public product
    _sparsetools = None

from theory.validation import SettingError

from numerics.experiments import kernels
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
    layout's passes stepping on batch r // C (``engine.grouped_risk_and_grad``).
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
        return sparse.csr_matrix(X)
    return X


def _segments(n_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(n_idx, return_index=True, return_inverse=True)`` of a non-decreasing ``n_idx`` (the string of
    each token row, rows in string order), read off its runs without a sort: the strings present, the first row
    of each and each row's segment (a sort's work saved on every batch)."""
    new = np.empty(n_idx.size, dtype=bool)
    new[:1] = True
    np.not_equal(n_idx[1:], n_idx[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return n_idx[starts], starts, np.cumsum(new) - 1


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
    if kernel == "compiled" and not kernels.available():
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
    X = batch.X if sparse.issparse(batch.X) else np.asarray(batch.X, float)
    segments = None
    if sparse.issparse(batch.m):
        if sparse.isspmatrix_csr(batch.m) and kernels.sorted_rows(batch.m):  # the samplers' (canonical) matrices
            mc = batch.m
        else:  # a sorted copy: the caller's matrix is left as it is (flags included)
            mc = sparse.csr_matrix(batch.m, copy=True)
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
        # a sampler may hand in the sparse form of its dense table, built once (``tasks.identity_sparse``; a
        # dense copy of an ICL batch keeps its sparse table): the arrays ``_sparse_if_sparse`` gives the table
        kept = batch.extra.get("table_sparse") if isinstance(batch.X, np.ndarray) else None
        if kept is not None and kept.shape != X.shape:
            raise SettingError(f"the batch's sparse table is {kept.shape}, its table {X.shape}")
        table = X if sparse.issparse(X) else kept if kept is not None else _sparse_if_sparse(X)
        rows = _take_rows(table, tok) if sparse.issparse(table) else table[tok]
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


def _row_operators(tb: Tokens):
    """The rows layout's operators, built once per batch (by ``from_batch``) and kept on ``tb``:
    ``scatter`` (N_ne D, M) sends row i's embedding x_i to the block of its string (entry (seg_i D + j, i)
    = x_ij), so scatter @ W is every string's weighted sum of its rows for all (run, head) columns of W at
    once; ``gather`` = scatter^T gives each row its string's block (sparse rows; None for dense ones, whose
    backward pass does without it); ``rows_t`` the rows' transpose as CSR
    (sparse rows; None for dense ones), whose product sums each coordinate over the rows in the order of
    the transposed CSC product, without building the transpose at every step; ``reps`` (N_ne,) the rows of
    each string, so ``np.repeat(v, reps, axis=0)`` is ``v[seg]`` (the rows of a string are contiguous and
    in string order), cheaper than the fancy index; ``heavy`` the rows whose multiplicity is not 1 (the
    only ones the softmax must multiply, x * 1.0 being x: a few hundred of ICL's 36000 rows at d = 200);
    ``prods`` the sparse products of the rows, scatter, gather and rows_t (``_CsrProduct``, None for dense
    rows), checked once.  A stack of S groups (``stack``) takes its scores and rows_t on the rows moved to
    their group's block of S D coordinates (row i of group s: column s D + j), so that one product gives
    every run the scores of its own group's rows from the alphas of all groups stacked (S D, C H), each
    entry the sum, over the same entries in the same order, of the group's own product."""
    ops = tb.__dict__.get("_ops")
    if ops is None:
        score = tb.rows if sparse.issparse(tb.rows) else None
        if score is not None:
            X = tb.rows if sparse.isspmatrix_csr(tb.rows) else sparse.csr_matrix(tb.rows)
            D = X.shape[1]
            shape = (X.shape[0], len(tb.starts) * D)
            # row i's coordinates moved to its string's block, computed in the index type scipy's constructor keeps
            dt = csr_index_dtype(X.nnz, *shape)
            per_entry = np.diff(X.indptr)
            block = np.repeat((tb.seg * D).astype(dt), per_entry)
            gather = sparse.csr_matrix((X.data, np.add(X.indices, block, dtype=dt), X.indptr), shape=shape)
            if tb.groups > 1:  # the score rows: each group's rows in its own block of coordinates
                S_ = tb.groups
                wide = (X.shape[0], S_ * D)
                dt = csr_index_dtype(X.nnz, *wide)
                shift = np.repeat((tb.seg // (len(tb.starts) // S_) * D).astype(dt), per_entry)
                X = score = sparse.csr_matrix((X.data, np.add(X.indices, shift, dtype=dt), X.indptr), shape=wide)
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
    operations in its order, so they give its bits (``tests/experiments/test_engine_rows_loops.py``); None elsewhere."""
    if tb.kernel != "numpy" or tb.groups != 1 or not sparse.issparse(tb.rows) or not kernels.usable():
        return None
    view = tb.__dict__.get("_rows_loops")
    if view is None:  # the score rows of one group are the rows themselves (``_row_operators``)
        score = tb.rows
        oh = kernels.OneHotRows.of(score, tb.starts, tb.mult) if score.format == "csr" else None
        ordered = oh is not None and (oh.idx.shape[0] <= 2 or kernels.sorted_rows(score))
        view = tb.__dict__["_rows_loops"] = oh if ordered else False
    return view or None


def _fast_csr(A) -> bool:
    """Whether ``_take_rows`` and ``_transpose`` may call scipy's kernels directly on A: a CSR matrix of
    float64 values with int32 indices and pointers, which scipy keeps for its size (every batch of the tasks;
    anything else takes scipy's own path)."""
    return (_sparsetools is not None and sparse.isspmatrix_csr(A) and A.data.dtype == np.float64
            and A.indices.dtype == np.int32 and A.indptr.dtype == np.int32
            and csr_index_dtype(A.nnz, *A.shape) == np.int32)


def _take_rows(A, idx: np.ndarray):
    """``A[idx]`` for a CSR matrix A and integer row indices idx (each in 0..rows - 1; negative ones, which
    scipy reads from the end, are refused): the arrays of scipy's row gather, from two compiled passes where
    numba runs (``kernels.take_rows``, in place of numpy's pointer arithmetic), else from scipy's kernel
    (``csr_row_index``) called without its indexing machinery, which costs most of scipy's own gather on a
    sampled batch."""
    idx = np.asarray(idx)
    if not _fast_csr(A) or idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0:
        return A[idx]
    if idx.min() < 0 or idx.max() >= A.shape[0]:
        raise IndexError(f"row index out of range 0..{A.shape[0] - 1}")
    rows = idx.astype(np.int32)
    if kernels.usable():  # one compiled pass for the pointers and one for the entries: the same arrays
        indptr, indices, data = kernels.take_rows(A.indptr, A.indices, A.data, rows, limit=_tasks.INT32_MAX)
    else:
        ends = np.cumsum(A.indptr[rows + 1] - A.indptr[rows], dtype=np.int64)
        total = int(ends[-1])
        if csr_index_dtype(total) != np.int32:  # scipy's own gather would wrap its int32 pointers: refused
            raise ValueError(f"{total} entries in the rows taken: more than int32 index pointers hold")
        indptr = np.zeros(rows.size + 1, dtype=np.int32)
        indptr[1:] = ends
        indices, data = np.empty(total, dtype=np.int32), np.empty(total)
        _sparsetools.csr_row_index(rows.size, rows, A.indptr, A.indices, A.data, indices, data)
    return sparse.csr_matrix((data, indices, indptr), shape=(rows.size, A.shape[1]), copy=False)


def _transpose(A):
    """``A.T.tocsr()`` for a CSR matrix A: scipy's conversion kernel (``csr_tocsc``) called directly, the same
    arrays, its rows' indices sorted as scipy marks them (without scipy's wrappers, most of a conversion's
    cost on a sampled batch, which makes two)."""
    if not _fast_csr(A):
        return A.T.tocsr()
    M, N = A.shape
    indptr, indices, data = np.empty(N + 1, dtype=np.int32), np.empty(A.nnz, dtype=np.int32), np.empty(A.nnz)
    _sparsetools.csr_tocsc(M, N, A.indptr, A.indices, A.data, indptr, indices, data)
    out = sparse.csr_matrix((data, indices, indptr), shape=(N, M), copy=False)
    out.has_sorted_indices = True
    return out


def _dense_scatter(rows: np.ndarray, starts: np.ndarray):
    """``scatter`` of dense rows (M, D) built from their layout: the CSR matrix that converting the rows to CSR
    (which drops their zeros), shifting each row's columns to its string's block and transposing gives, the
    same arrays (so the same products, bit for bit), without the conversion's scan and the transpose's sort
    (most of the cost of an SLR batch's layout).  Row seg_i D + j lists the entries (i, j) of its string's
    rows in order, so a string's block of entries is its rows transposed (``rows[s:e].T``, copied block by
    block: contiguous reads and writes, where one scatter over all M D entries jumps across the array)."""
    M, D = rows.shape
    N_ne = len(starts)
    ends = np.append(starts[1:], M).astype(np.int64)
    L = ends - starts
    bounds = list(zip(np.asarray(starts).tolist(), ends.tolist()))
    data = np.concatenate([rows[s:e].T.ravel() for s, e in bounds]) if M else np.empty(0)
    dt = csr_index_dtype(N_ne * D, M, M * D)
    i = np.arange(M, dtype=dt)
    indices = np.concatenate([np.tile(i[s:e], D) for s, e in bounds]) if M else np.empty(0, dt)
    per_row = np.repeat(L, D)
    keep = data != 0
    if not keep.all():
        data, indices = data[keep], indices[keep]
        per_row = np.bincount(np.repeat(np.arange(N_ne * D), per_row)[keep], minlength=N_ne * D)
    dt = csr_index_dtype(N_ne * D, M, data.size)  # (int64 ones scipy would scan and copy)
    indptr = np.zeros(N_ne * D + 1, dt)
    np.cumsum(per_row, out=indptr[1:])
    return sparse.csr_matrix((data, indices.astype(dt, copy=False), indptr), shape=(N_ne * D, M))


def _onehot(tb: Tokens):
    """The compiled kernel's view of the rows (``kernels.OneHotRows``), built once per batch; None when the
    kernel is "numpy" or the rows are not one-hot."""
    if tb.kernel != "compiled":
        return None
    if "_onehot" not in tb.__dict__:
        tb.__dict__["_onehot"] = kernels.OneHotRows.of(tb.rows, tb.starts, tb.mult)
    return tb.__dict__["_onehot"]


class _CsrProduct:
    """``A @ X`` (m, c) for a CSR matrix A (m, n) and an array X (n, c): when both are float64, by the
    kernel scipy runs for it (``csr_matvec`` for one column, ``csr_matvecs`` for several, into zeros),
    called directly: the same arithmetic in the same order, so the same bits, without scipy's dispatch and
    checks (a fixed cost per product that a small step pays several times).  Anything else goes through ``A @ X``."""

    __slots__ = ("A", "args")

    def __init__(self, A):
        self.A = A
        fast = _sparsetools is not None and sparse.isspmatrix_csr(A) and A.data.dtype == np.float64
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


def _patterns(tb: Tokens) -> np.ndarray:
    """Bag layout: each string's presence pattern (bit t set when it has a token of type t), computed once
    per count matrix and kept on ``tb`` (an exact population is the batch of every step; the product is a
    fifth of a step of AND's population)."""
    got = tb.__dict__.get("_pat")
    if got is None or got[0] is not tb.counts:
        got = tb.__dict__["_pat"] = (tb.counts, (tb.counts > 0) @ (1 << np.arange(tb.counts.shape[1])))
    return got[1]


def stackable(parts: list[Tokens]) -> bool:
    """Whether ``stack`` takes these batches: token rows over one-hot (sparse) embeddings on the numpy kernel,
    the same number of strings and width D, none empty (the sampled ICL and two-head AND batches); not AND's
    population by the integral, which ``engine.risk_and_grad`` takes one group at a time."""
    if len(parts) < 2 or any(isinstance(p, IntegralPopulation) for p in parts):
        return False
    first = parts[0]
    return all(p.layout == "rows" and p.kernel == "numpy" and p.groups == 1 and sparse.issparse(p.rows)
               and p.size == first.size and len(p.starts) == p.size and p.rows.shape[1] == first.rows.shape[1]
               for p in parts)


def stack(parts: list[Tokens]) -> Tokens:
    """S batches of ``stackable`` token rows as one batch of S N strings (``Tokens.groups`` = S): the rows,
    strings and targets of batch s after those of batches 0 .. s - 1, every row in its own string's block of
    the operators (``_row_operators``).  A run of group s then sees in each product of the rows layout the
    same entries, in the same order, as on batch s alone: the same bits (tests/experiments/test_engine_grouped.py).  Only
    ``engine.grouped_risk_and_grad`` steps a stack (``engine.risk`` and ``engine.risk_and_grad`` refuse one)."""
    if not stackable(parts):
        raise SettingError("stack takes two or more batches of one-hot token rows of the same size, "
                           "none with an empty string, on the numpy kernel")
    Xs = [p.rows if sparse.isspmatrix_csr(p.rows) else sparse.csr_matrix(p.rows) for p in parts]
    N, D = parts[0].size, Xs[0].shape[1]
    M = np.cumsum([0] + [X.shape[0] for X in Xs])
    nnz = np.cumsum([0] + [X.nnz for X in Xs])
    dt = csr_index_dtype(int(nnz[-1]), int(M[-1]), len(parts) * N * D)
    indptr = np.concatenate([np.zeros(1, dt)] + [X.indptr[1:].astype(dt) + nnz[i] for i, X in enumerate(Xs)])
    rows = sparse.csr_matrix((np.concatenate([X.data for X in Xs]), np.concatenate([X.indices for X in Xs]).astype(dt),
                          indptr), shape=(int(M[-1]), D))
    labels = None if parts[0].labels is None else np.concatenate([np.asarray(p.labels) for p in parts])
    return Tokens(table=parts[0].table, y=np.concatenate([p.y for p in parts]),
                  weights=np.concatenate([p.weights for p in parts]), labels=labels,
                  mult=np.concatenate([p.mult for p in parts]),
                  starts=np.concatenate([p.starts + M[i] for i, p in enumerate(parts)]),
                  seg=np.concatenate([p.seg + i * N for i, p in enumerate(parts)]),
                  nonempty=np.arange(len(parts) * N), rows=rows, kernel="numpy", groups=len(parts))
