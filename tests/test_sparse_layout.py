"""The engine's direct calls of scipy's sparse kernels in building a batch's layout (``engine._take_rows``,
``engine._transpose``, the gather operator in ``_row_operators``): the same arrays, of the same dtypes, with
the same flags, as scipy's own indexing and conversion, on random matrices; scipy's path where the fast one
does not apply; and every operator of an ICL batch equal to the one scipy's expressions build."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine as E
from numerics.experiments import tasks as TK


def _same(got, want):
    assert sp.isspmatrix_csr(got) and got.shape == want.shape
    for a, b in ((got.data, want.data), (got.indices, want.indices), (got.indptr, want.indptr)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    # the flag as set (scipy works it out from the arrays where it is not set, which cannot differ here)
    assert got.__dict__.get("_has_sorted_indices") == want.__dict__.get("_has_sorted_indices")
    assert got.has_sorted_indices == want.has_sorted_indices


def _matrix(rng, M, N, density, int64=False):
    A = sp.random(M, N, density=density, format="csr", random_state=rng, data_rvs=rng.standard_normal)
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
    _same(E._take_rows(A, idx), A[idx])
    _same(E._transpose(A), A.T.tocsr())
    _same(E._transpose(E._take_rows(A, idx)), A[idx].T.tocsr())


def test_the_fast_path_is_taken_and_bad_rows_are_refused(monkeypatch):
    rng = np.random.default_rng(1)
    A = _matrix(rng, 6, 4, 0.5)
    assert E._fast_csr(A) and not E._fast_csr(_matrix(rng, 6, 4, 0.5, int64=True))
    assert not E._fast_csr(A.astype(np.float32)) and not E._fast_csr(A.tocsc())
    with pytest.raises(IndexError, match="out of range"):
        E._take_rows(A, np.array([0, 6]))
    with pytest.raises(IndexError, match="out of range"):
        E._take_rows(A, np.array([-1, 2]))
    _same(E._take_rows(A, np.array([], dtype=np.int64)), A[np.array([], dtype=np.int64)])
    # more entries taken than int32 pointers hold (here a limit of 12 for a matrix of 12 entries, 6 rows): refused
    monkeypatch.setattr(TK, "INT32_MAX", A.nnz)
    assert E._fast_csr(A)
    with pytest.raises(ValueError, match="more than int32 index pointers hold"):
        E._take_rows(A, np.arange(6).repeat(2))
    calls, kernel = [], E._sparsetools.csr_tocsc
    monkeypatch.setattr(E._sparsetools, "csr_tocsc", lambda *a: calls.append(a) or kernel(*a))
    _same(E._transpose(A), A.T.tocsr())
    assert calls, "the fast path did not call scipy's kernel"


@pytest.mark.parametrize("d", [5, 50])
def test_an_icl_batchs_operators_are_scipys(d):
    """Every operator ``_row_operators`` builds for an ICL batch equals scipy's expression for it (the rows
    of the table taken by index, their transpose, the gather and the scatter), so the numpy kernel's
    products see the same arrays as before the fast paths."""
    b = TK.sample("ICL", d, 64, np.random.default_rng(d))
    tb = E.from_batch(b)
    mc = b.m.tocsr()
    _same(tb.rows, b.X[mc.indices])
    scatter, gather, rows_t = E._row_operators(tb)[:3]
    X = tb.rows
    D = X.shape[1]
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    want_gather = sp.csr_matrix((X.data, X.indices + tb.seg[row_of] * D, X.indptr),
                                shape=(X.shape[0], len(tb.starts) * D))
    _same(gather, want_gather)
    _same(rows_t, X.T.tocsr())
    _same(scatter, want_gather.T.tocsr())
