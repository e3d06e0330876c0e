"""The engine's direct calls of scipy's sparse kernels in building a batch's layout (``layout._take_rows``,
``layout._transpose``, the gather operator in ``_row_operators``): the same arrays, of the same dtypes, with
the same flags, as scipy's own indexing and conversion, on random matrices; scipy's path where the fast one
does not apply; and every operator of an ICL batch equal to the one scipy's expressions build."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import layout
from numerics.experiments import tasks
def _same(got, want):
    assert sparse.isspmatrix_csr(got) and got.shape == want.shape
    for a, b in ((got.data, want.data), (got.indices, want.indices), (got.indptr, want.indptr)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # the flag as set (scipy works it out from the arrays where it is not set, which cannot differ here)
    assert got.__dict__.get("_has_sorted_indices") == want.__dict__.get("_has_sorted_indices")
    assert got.has_sorted_indices == want.has_sorted_indices


def _matrix(rng, M, N, density, int64=False):
    A = sparse.random(M, N, density=density, format="csr", random_state=rng, data_rvs=rng.standard_normal)
    if int64:  # int64 indices that fit int32 (scipy's constructor would narrow them: set after it)
        A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
        assert A.indices.dtype == np.int64
    return A


@given(seed=st.integers(0, 2 ** 32 - 1), M=st.integers(1, 30), N=st.integers(1, 30),
       density=st.sampled_from([0.0, 0.1, 0.5, 1.0]), k=st.integers(1, 50), int64=st.booleans())
@examples(40)
def test_take_rows_and_transpose_are_scipys(seed, M, N, density, k, int64):
    """Rows taken in any order, repeated, and matrices with empty rows, none or every entry; int64 indices
    (scipy's own path)."""
    rng = np.random.default_rng(seed)
    A = _matrix(rng, M, N, density, int64)
    idx = rng.integers(0, M, k)
    _same(layout._take_rows(A, idx), A[idx])
    _same(layout._transpose(A), A.T.tocsr())
    _same(layout._transpose(layout._take_rows(A, idx)), A[idx].T.tocsr())


def test_the_fast_path_is_taken_and_bad_rows_are_refused(monkeypatch):
    rng = np.random.default_rng(1)
    A = _matrix(rng, 6, 4, 0.5)
    assert layout._fast_csr(A) and not layout._fast_csr(_matrix(rng, 6, 4, 0.5, int64=True))
    assert not layout._fast_csr(A.astype(np.float32)) and not layout._fast_csr(A.tocsc())
    with pytest.raises(IndexError, match="out of range"):
        layout._take_rows(A, np.array([0, 6]))
    with pytest.raises(IndexError, match="out of range"):
        layout._take_rows(A, np.array([-1, 2]))
    _same(layout._take_rows(A, np.array([], dtype=np.int64)), A[np.array([], dtype=np.int64)])
    # more entries taken than int32 pointers hold (here a limit of 12 for a matrix of 12 entries, 6 rows): refused
    monkeypatch.setattr(tasks, "INT32_MAX", A.nnz)
    assert layout._fast_csr(A)
    from numerics.experiments import kernels
    with pytest.raises(ValueError, match="more than int32 index pointers hold"):
        layout._take_rows(A, np.arange(6).repeat(2))
    with kernels.numpy_paths(), pytest.raises(ValueError, match="more than int32 index pointers hold"):
        layout._take_rows(A, np.arange(6).repeat(2))
    _same(layout._take_rows(A, np.arange(6)), A[np.arange(6)])  # at the limit: taken
    calls, kernel = [], layout._sparsetools.csr_tocsc
    monkeypatch.setattr(layout._sparsetools, "csr_tocsc", lambda *a: calls.append(a) or kernel(*a))
    _same(layout._transpose(A), A.T.tocsr())
    assert calls, "the fast path did not call scipy's kernel"


@pytest.mark.parametrize("d", [5, 50])
def test_an_icl_batchs_operators_are_scipys(d):
    """Every operator ``_row_operators`` builds for an ICL batch equals scipy's expression for it (the rows
    of the table taken by index, their transpose, the gather and the scatter), so the numpy kernel's
    products see the same arrays as before the fast paths."""
    b = tasks.sample("ICL", d, 64, np.random.default_rng(d))
    tb = layout.from_batch(b)
    mc = b.m.tocsr()
    _same(tb.rows, b.X[mc.indices])
    scatter, gather, rows_t = layout._row_operators(tb)[:3]
    X = tb.rows
    D = X.shape[1]
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    want_gather = sparse.csr_matrix((X.data, X.indices + tb.seg[row_of] * D, X.indptr),
                                shape=(X.shape[0], len(tb.starts) * D))
    _same(gather, want_gather)
    _same(rows_t, X.T.tocsr())
    _same(scatter, want_gather.T.tocsr())


def _reference_layout(batch):
    """The rows layout's arrays as ``from_batch`` built them before its shortcuts: the counts re-wrapped and
    sorted, one string index per stored count, the non-positive counts dropped, segments by ``_segments``,
    the rows by scipy's fancy indexing (on a copy: sorting in place would sort the caller's matrix)."""
    mc = sparse.csr_matrix(batch.m, copy=True)
    mc.sort_indices()
    n_idx = np.repeat(np.arange(mc.shape[0]), np.diff(mc.indptr))
    tok, mult = mc.indices.astype(np.int64), mc.data.astype(float)
    keep = mult > 0
    n_idx, tok, mult = n_idx[keep], tok[keep], mult[keep]
    nonempty, starts, seg = layout._segments(n_idx)
    return {"nonempty": nonempty, "starts": starts, "seg": seg, "mult": mult}, batch.X[tok]


@given(seed=st.integers(0, 2 ** 32 - 1), N=st.integers(1, 30), T=st.integers(1, 40),
       empty=st.sampled_from([0, 1, 5]), zeros=st.booleans(), unsorted=st.booleans())
@examples(40)
def test_the_layouts_segments_and_rows_are_the_reference_ones(seed, N, T, empty, zeros, unsorted):
    """``from_batch`` on sparse counts: canonical CSR counts are used as they are and their segments read off
    the pointers; stored zero counts, unsorted indices and empty strings take the general path.  Either way
    the same arrays, of the same dtypes, as the reference, and the caller's matrix keeps its values."""
    rng = np.random.default_rng(seed)
    X = sparse.csr_matrix(((rng.random((T, 9)) < 0.3) | (np.eye(T, 9) > 0)) * 1.0)  # one-hot rows, 1 to 9 each
    dense = rng.integers(0, 3, (N, T)).astype(float)
    dense[N - min(empty, N):] = 0.0
    m = sparse.csr_matrix(dense)
    if zeros and m.nnz:  # a stored zero: not a token row
        m.data[rng.integers(0, m.nnz)] = 0.0
    if unsorted:  # each string's entries in reverse order
        order = np.concatenate([np.arange(m.indptr[i + 1] - 1, m.indptr[i] - 1, -1) for i in range(N)]
                               + [np.zeros(0, int)])
        m = sparse.csr_matrix((m.data[order], m.indices[order], m.indptr), shape=m.shape)
        assert not sparse.csr_matrix(m, copy=True).has_sorted_indices or np.diff(m.indptr).max(initial=0) < 2
    before, indices, flag = m.toarray(), m.indices.copy(), m.__dict__.get("_has_sorted_indices")
    batch = tasks.Batch(X, m, rng.standard_normal((N, 1)))
    for numpy_only in (False, True):
        want, rows = _reference_layout(batch)  # afresh: ``_same`` works out (and so stores) both matrices' flags
        from numerics.experiments import kernels
        with kernels.numpy_paths() if numpy_only else __import__("contextlib").nullcontext():
            tb = layout.from_batch(batch)
        for k, v in want.items():
            got = getattr(tb, k)
            assert got.dtype == v.dtype and np.array_equal(got, v), k
        _same(tb.rows, rows)
        # the caller's matrix as it was: values, the order of its entries, and no flag stored on it
        assert np.array_equal(m.toarray(), before) and np.array_equal(m.indices, indices)
        assert m.__dict__.get("_has_sorted_indices") == flag
