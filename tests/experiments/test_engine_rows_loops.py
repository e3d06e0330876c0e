"""The default kernel's loops over one-hot token rows (``kernels.rows_forward``, ``kernels.rows_score_grad``,
taken where ``layout._rows_loops`` says) and the squared loss of several outputs (``kernels.squared_outputs``):
the numpy path's bits, not only its values to rounding, in every output of the engine (forward weights and
mean tokens, risks, accuracies, gradients) on ICL and two-head AND batches and on random one-hot batches with
several runs and heads, rows of one to three coordinates, repeated tokens, empty strings, strings longer than
128 rows, saturated attention, both ICL losses and non-finite parameters (a NaN's sign aside); numpy's
pairwise sums that the loops replay (``reduceat``'s for every segment length up to 600, ``reduce``'s for every
row length up to 300); the batches they do not take stay on the
numpy path; their inputs are checked before the loops.  Also the bag layout's score gradient from all pairs of
types at once (one einsum, ``kernels.type_pairs``): the per-pair loop's bits on even pairs' batches and random
bags of up to ``passes.PAIRS_AT_ONCE_MAX`` strings."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import layout, passes
from numerics.experiments import tasks
from tests._spies import counted

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")

LOOPS = ("rows_forward", "rows_score_grad", "squared_outputs")


def _outputs(alpha, B, tb, loss):
    fw = engine.forward(alpha, B, tb)
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb, loss)
    risk, acc, tied = engine.risk_and_accuracy(alpha, B, tb, loss)
    return {"w": fw.w, "xbar": fw.V, "fh": fw.fh, "f": fw.f, "risk": r, "d alpha": ga, "d B": gB,
            "f of the step": f, "risk alone": engine.risk(alpha, B, tb, loss), "risk with accuracy": risk,
            "accuracy": acc, "tied": tied}


def _both(alpha, B, batch, loss="squared", need=LOOPS):
    """(loops, numpy) outputs on one batch (each on its own layout of it); asserts that the loops in ``need``
    ran, and then that none did."""
    with counted(kernels, LOOPS) as calls:
        tb = engine.from_batch(batch)
        assert layout._rows_loops(tb) is not None
        got = _outputs(alpha, B, tb, loss)
        assert all(calls[n] for n in need), f"a loop did not run: {calls}"
        ran = dict(calls)
        with kernels.numpy_paths():
            tn = engine.from_batch(batch)
            assert layout._rows_loops(tn) is None
            want = _outputs(alpha, B, tn, loss)
        assert calls == ran, "a loop ran inside numpy_paths"
    return got, want


def _same_bits(got, want, nan_sign=False):
    for k in want:
        a, b = np.asarray(got[k]), np.asarray(want[k])
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if nan_sign:  # IEEE leaves a NaN's sign to the implementation: the NaNs where they are, the rest bits
            nan = np.isnan(b) if b.dtype.kind == "f" else np.zeros(b.shape, bool)
            assert np.array_equal(np.isnan(a) if a.dtype.kind == "f" else nan, nan), k
            a, b = a[~nan], b[~nan]
        assert a.tobytes() == b.tobytes(), k


def _one_hot_batch(rng, T=40, D=12, N=25, K=2, per_row=None, empty=0, heavy=True):
    """A one-hot table of T types over D coordinates (rows of one to three coordinates, or ``per_row`` each),
    counts of N strings (repeated tokens unless ``heavy`` is False), the last ``empty`` strings empty."""
    X = np.zeros((T, D))
    for t in range(T):
        X[t, rng.choice(D, size=per_row or 1 + t % 3, replace=False)] = 1.0
    m = ((rng.integers(1, 4) if heavy else 1) * (rng.random((N, T)) < 0.3)).astype(float)
    if heavy:
        m *= rng.integers(1, 4, (N, T))
    m[:, 0] += 1.0
    if empty:
        m[N - empty:] = 0.0
    return tasks.Batch(X, m, rng.standard_normal((N, K)))


@given(seed=st.integers(0, 2 ** 31 - 1), R=st.integers(1, 3), H=st.integers(1, 3), K=st.integers(1, 4),
       per_row=st.sampled_from([None, 1, 2, 3]), empty=st.integers(0, 2), scale=st.sampled_from([0.3, 3.0, 40.0]))
@examples(25)
def test_the_loops_give_the_numpy_paths_bits_on_random_one_hot_batches(seed, R, H, K, per_row, empty, scale):
    """Every output of the engine the same bits with the loops as without, at attention from near uniform
    (scale 0.3) to saturated (40: a string's weights within rounding of one row)."""
    rng = np.random.default_rng(seed)
    batch = _one_hot_batch(rng, K=K, per_row=per_row, empty=empty)
    alpha, B = scale * rng.standard_normal((R, H, 12)), rng.standard_normal((R, H, 12, K))
    got, want = _both(alpha, B, batch, need=LOOPS if K > 1 else LOOPS[:2])
    _same_bits(got, want)


@pytest.mark.parametrize("task,heads,d,loss", [("ICL", 1, 5, "squared"), ("ICL", 1, 40, "squared"),
                                                ("ICL", 2, 12, "squared"), ("ICL", 1, 12, "cross_entropy"),
                                                ("AND", 2, 17, "squared")])
@pytest.mark.parametrize("R", [1, 3])
def test_the_loops_give_the_numpy_paths_bits_on_the_tasks_batches(task, heads, d, loss, R):
    """The tasks' own batches (ICL's pairs, two-head AND's tokens), several runs: the same bits.  At d = 40
    ICL's strings run to more than 128 rows, where numpy's pairwise sum splits into halves."""
    batch = tasks.sample(task, d, 32, np.random.default_rng([d, R]), seed=0)
    _, D, K = tasks.model_shape(task, d, heads)
    rng = np.random.default_rng([d, heads, R])
    alpha, B = rng.standard_normal((R, heads, D)), rng.standard_normal((R, heads, D, K))
    tb = engine.from_batch(batch)
    if d == 40:
        assert np.diff(np.append(tb.starts, tb.rows.shape[0])).max() > 129
    need = LOOPS if loss == "squared" and K > 1 else LOOPS[:2]
    got, want = _both(alpha, B, batch, loss, need=need)
    _same_bits(got, want)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("present", [True, False])
def test_non_finite_parameters_give_the_numpy_paths_results(bad, present):
    """A non-finite score coefficient of one run (on a coordinate some strings have, or none): NaNs in the same
    places and every other entry the same bits, in every output."""
    rng = np.random.default_rng(3)
    batch = _one_hot_batch(rng, per_row=2)
    j = 5
    if not present:
        batch.m[:, batch.X[:, j] > 0] = 0.0
        batch.m[:, int(np.flatnonzero(batch.X[:, j] == 0)[0])] += 1.0
    alpha, B = rng.standard_normal((2, 1, 12)), rng.standard_normal((2, 1, 12, 2))
    alpha[1, 0, j] = bad
    with np.errstate(invalid="ignore", over="ignore"):
        got, want = _both(alpha, B, batch)
    on_j = (batch.m[:, batch.X[:, j] > 0] > 0).any(axis=1)
    assert on_j.any() == present
    # -inf: a zero weight on its rows, so finite but where a string has only such rows (none here)
    assert np.isfinite(want["f"][:, 0]).all() and np.isfinite(want["f"][:, 1]).all() == (not present or bad < 0)
    _same_bits(got, want, nan_sign=True)


def test_the_pairwise_sums_replay_numpys():
    """``_pairwise_column`` against ``np.add.reduceat`` (a segment's first entry plus the pairwise sum of the
    rest; every segment length 1..600, columns of a several-column array) and ``np.add.reduce`` along a
    contiguous row (the pairwise sum of all; every row length 1..300), on terms exp(6 N(0, 1)), which span many
    orders of magnitude (where another order rounds differently: a sequential sum differs on most of them)."""
    rng = np.random.default_rng(0)
    lengths = np.arange(1, 601)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    S = np.exp(6.0 * rng.standard_normal((int(lengths.sum()), 3)))
    pw = kernels.pairwise_column
    want = np.add.reduceat(S, starts, axis=0)
    got = np.array([[S[s, c] + pw(S, c, s + 1, n - 1) if n > 1 else S[s, c] for c in range(3)]
                    for s, n in zip(starts, lengths)])
    assert got.tobytes() == want.tobytes()
    seq = np.array([[np.cumsum(S[s:s + n, c])[-1] for c in range(3)] for s, n in zip(starts, lengths)])
    assert (seq != want).sum() > 900  # the check can tell orders apart
    rows = np.exp(6.0 * rng.standard_normal((300, 600)))
    T = np.ascontiguousarray(rows.T)
    got = np.array([0.0 + pw(T, n, 0, n + 1) for n in range(300)])   # row n: its first n + 1 entries
    want = np.array([np.add.reduce(rows[n, :n + 1]) for n in range(300)])
    assert got.tobytes() == want.tobytes()


@given(seed=st.integers(0, 2 ** 31 - 1), N=st.integers(1, 40), R=st.integers(1, 4), K=st.integers(2, 200),
       strided=st.booleans())
@examples(30)
def test_the_squared_loss_of_several_outputs_is_numpys(seed, N, R, K, strided):
    """``squared_outputs`` against the numpy path's squared loss (``readout.losses`` and the weights' product) on
    outputs exp(4 N(0, 1)) of either sign (in practice about 1e-7..1e7, where a sequential sum over the outputs
    rounds differently), contiguous or strided."""
    rng = np.random.default_rng(seed)
    f = np.exp(4.0 * rng.standard_normal((N, R, 2 * K if strided else K))) * rng.choice([-1.0, 1.0], (N, R, 1))
    f = f[:, :, ::2] if strided else f
    y, w = rng.standard_normal((N, K)), rng.random(N)
    lv, dl = kernels.squared_outputs(f, y, w)
    r = np.ascontiguousarray(f).reshape(N * R, K) - np.repeat(y, R, axis=0)
    assert lv.tobytes() == (0.5 * np.add.reduce(r * r, axis=-1)).reshape(N, R).tobytes()
    assert dl.tobytes() == (r.reshape(N, R, K) * w[:, None, None]).tobytes()


def test_batches_the_loops_do_not_take_stay_on_the_numpy_path():
    """Weighted rows (an entry not 1.0), rows of three coordinates out of order, a stack of batches and dense
    rows: no view, the numpy path."""
    rng = np.random.default_rng(5)
    batch = _one_hot_batch(rng, per_row=2)
    weighted = tasks.Batch(2.0 * batch.X, batch.m, batch.y)
    assert layout._rows_loops(engine.from_batch(weighted)) is None
    three = engine.from_batch(_one_hot_batch(rng, per_row=3))
    assert layout._rows_loops(three) is not None
    unsorted = sparse.csr_matrix(three.rows)
    order = np.argsort(-unsorted.indices.reshape(-1, 3), axis=1)  # each row's three entries reversed
    base = 3 * np.arange(unsorted.shape[0])[:, None]
    unsorted.indices = unsorted.indices[(base + order).ravel()]
    unsorted.has_sorted_indices = False
    three.__dict__.pop("_rows_loops")
    three.rows = unsorted
    assert layout._rows_loops(three) is None
    parts = [engine.from_batch(tasks.sample("ICL", 6, 8, np.random.default_rng(i)), operators=False) for i in range(2)]
    assert layout._rows_loops(engine.stack(parts)) is None
    slr = engine.from_batch(tasks.sample("SLR", 6, 8, np.random.default_rng(0), seed=0))
    assert not sparse.issparse(slr.rows) and layout._rows_loops(slr) is None


def test_the_loops_refuse_mis_shaped_inputs():
    """The loops run without bounds checks: inputs of the wrong shape raise before them."""
    tb = engine.from_batch(_one_hot_batch(np.random.default_rng(6), per_row=2))
    rows = layout._rows_loops(tb)
    M, N, D = rows.idx.shape[1], rows.bounds.size - 1, rows.D
    W, xbar = kernels.rows_forward(np.zeros((2, D)), rows)
    assert W.shape == (M, 2) and xbar.shape == (2, N, D)
    with pytest.raises(ValueError):
        kernels.rows_forward(np.zeros((2, D + 1)), rows)
    with pytest.raises(ValueError):
        kernels.rows_forward(np.zeros(D), rows)
    for U, fg, Wb in ((np.zeros((2, N, D + 1)), np.zeros((N, 2)), W), (np.zeros((2, N, D)), np.zeros((N, 1)), W),
                      (np.zeros((2, N, D)), np.zeros((N, 2)), W[:-1])):
        with pytest.raises(ValueError):
            kernels.rows_score_grad(U, fg, Wb, rows)
    with pytest.raises(ValueError):
        kernels.squared_outputs(np.zeros((3, 1, 2)), np.zeros((3, 3)), np.ones(3))
    with pytest.raises(ValueError):
        kernels.squared_outputs(np.zeros((3, 1, 2)), np.zeros((3, 2)), np.ones(2))


def _bag_outputs(alpha, B, tb):
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb)
    return {"risk": r, "d alpha": ga, "d B": gB, "f": f}


@pytest.mark.parametrize("R,H", [(1, 1), (3, 1), (2, 2)])
@pytest.mark.parametrize("embedding", ["query", "adjacent"])
def test_type_pairs_at_once_give_the_loops_bits_on_even_pairs(R, H, embedding):
    """Even pairs' sampled batches (8 or 9 types, 64 strings): the pairs at once (``kernels.type_pairs`` ran)
    against one pair at a time, the same bits in the risk, both gradients and the outputs."""
    batch = tasks.sample("even_pairs", 2, 64, np.random.default_rng([R, H]), even_pairs_embedding=embedding)
    tb = engine.from_batch(batch)
    assert tb.layout == "bag" and tb.counts.shape[1] in (8, 9)
    _, D, K = tasks.model_shape("even_pairs", 2, H, even_pairs_embedding=embedding)
    rng = np.random.default_rng([R, H, D])
    alpha, B = 2.0 * rng.standard_normal((R, H, D)), rng.standard_normal((R, H, D, K))
    assert kernels.usable()  # its trial (which calls the loop) done before counting
    with counted(kernels, ["type_pairs"]) as calls:
        got = _bag_outputs(alpha, B, tb)
        assert calls["type_pairs"] == 1
        with kernels.numpy_paths():
            want = _bag_outputs(alpha, B, tb)
        assert calls["type_pairs"] == 1
    _same_bits(got, want)


@given(seed=st.integers(0, 2 ** 31 - 1), T=st.integers(3, 9), N=st.sampled_from([1, 7, 64, 1000, 4096]),
       R=st.integers(1, 12), H=st.integers(1, 3))
@examples(12)
def test_type_pairs_at_once_give_the_loops_bits_on_random_bags(seed, T, N, R, H):
    """Random bags of T types (counts with zeros, so some strings lack types and some are empty) up to the
    size limit, up to 12 runs of up to 3 heads: the same bits with the pairs at once as one pair at a time."""
    rng = np.random.default_rng(seed)
    m = rng.integers(0, 4, (N, T)).astype(float) * (rng.random((N, T)) < 0.6)
    tb = engine.from_batch(tasks.Batch(np.eye(T), m, rng.standard_normal((N, 1))))
    assert tb.layout == "bag" and N <= passes.PAIRS_AT_ONCE_MAX
    alpha, B = 3.0 * rng.standard_normal((R, H, T)), rng.standard_normal((R, H, T, 1))
    got = _bag_outputs(alpha, B, tb)
    with kernels.numpy_paths():
        want = _bag_outputs(alpha, B, tb)
    _same_bits(got, want)


def test_type_pairs_refuses_mis_shaped_sums():
    with pytest.raises(ValueError):
        kernels.type_pairs(np.ones((4, 2)), np.ones((5, 2)))


@pytest.mark.parametrize("N,at_once", [(passes.PAIRS_AT_ONCE_MAX, True), (passes.PAIRS_AT_ONCE_MAX + 1, False), (9000, False)])
def test_type_pairs_at_once_only_up_to_the_limit(N, at_once):
    """Above ``PAIRS_AT_ONCE_MAX`` strings the pairs are summed one at a time (one run of three types: at 9000
    strings the stacked einsum's buffering moved the last bits on numpy 2.4)."""
    rng = np.random.default_rng(N)
    m = rng.integers(0, 3, (N, 3)).astype(float)
    tb = engine.from_batch(tasks.Batch(np.eye(3), m, rng.standard_normal((N, 1))))
    assert tb.layout == "bag"
    assert kernels.usable()
    with counted(kernels, ["type_pairs"]) as calls:
        engine.risk_and_grad(rng.standard_normal((1, 1, 3)), rng.standard_normal((1, 1, 3, 1)), tb)
    assert calls["type_pairs"] == int(at_once)
