"""The engine's compiled kernel (``kernel = "compiled"``, numerics/experiments/kernels.py): the same risks,
gradients and outputs as the numpy path and the dense model to 1e-12 (relative), on random batches with
several runs and heads, both ICL losses, empty strings, repeated tokens, rows of one, two and three
coordinates; its underflow fallback; non-finite parameters; the option's validation and its record in a run's
results (its finite differences: tests/experiments/test_engine.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import sparse
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import runner
from numerics.experiments import tasks
from numerics.model import Model, Params
from theory.validation import SettingError
from tests._spies import counted

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")

TOL = 1e-12


def _close(got, want, what):
    scale = max(float(np.abs(want).max()), 1e-300)
    assert float(np.abs(np.asarray(got) - np.asarray(want)).max()) <= TOL * scale, what


def _both(batch, alpha, B, loss="squared"):
    """(numpy path, compiled path) results of risk_and_grad on one batch; asserts the compiled one ran."""
    tn, tc = engine.from_batch(batch), engine.from_batch(batch, "compiled")
    assert engine._onehot(tc) is not None and engine._onehot(tn) is None
    return engine.risk_and_grad(alpha, B, tn, loss), engine.risk_and_grad(alpha, B, tc, loss)


def _agree(batch, alpha, B, loss="squared"):
    want, got = _both(batch, alpha, B, loss)
    for x, y, what in zip(got, want, ("risk", "d alpha", "d B", "f")):
        assert x.shape == y.shape, what
        _close(x, y, what)


@pytest.mark.parametrize("task,heads,dmin", [("ICL", 1, 5), ("ICL", 2, 5), ("AND", 2, 17)])
@given(seed=st.integers(0, 2 ** 31 - 1), dd=st.integers(0, 7), R=st.integers(1, 4))
@examples(6)
def test_compiled_kernel_agrees_with_the_dense_model(task, heads, dmin, seed, dd, R):
    """Against numerics.model.Model, run by run (both ICL losses; AND from d = 17, where its symbols are
    token rows of one coordinate rather than a bag)."""
    d = dmin + dd
    rng = np.random.default_rng(seed)
    sampled = tasks.sample(task, d, 30, np.random.default_rng(seed + 1), seed=seed % 7)
    batch = sampled.dense()
    model = Model(*tasks.model_shape(task, d, heads))
    alpha = rng.standard_normal((R, heads, model.D))
    B = rng.standard_normal((R, heads, model.D, model.K))
    tb = engine.from_batch(sampled, "compiled")
    assert engine._onehot(tb) is not None
    for loss in ["squared"] + (["cross_entropy"] if task == "ICL" else []):
        r, ga, gB, f = engine.risk_and_grad(alpha, B, tb, loss)
        target = batch.labels if loss == "cross_entropy" else batch.y
        for i in range(R):
            rr, g, ff = model.risk_and_grad(Params(alpha[i], B[i]), batch.X, target, batch.m, loss=loss)
            _close(r[i], rr, "risk")
            _close(ga[i], g.alpha, "d alpha")
            _close(gB[i], g.B, "d B")
            assert np.abs(f[:, i] - ff).max() <= TOL * max(np.abs(ff).max(), 1.0)


@pytest.mark.parametrize("d", [8, 50])
@pytest.mark.parametrize("R,H", [(1, 1), (3, 1), (2, 2)])
def test_compiled_kernel_agrees_with_the_numpy_path(d, R, H):
    """ICL at the benchmark's batch (repeated tokens, rows of one and two coordinates): risks, gradients and
    outputs of every run to 1e-12, and the risks alone through ``risk``."""
    batch = tasks.sample("ICL", d, 64, np.random.default_rng(d))
    _, D, K = tasks.model_shape("ICL", d, H)
    rng = np.random.default_rng(R + 10 * H)
    alpha, B = rng.standard_normal((R, H, D)), rng.standard_normal((R, H, D, K))
    tc = engine.from_batch(batch, "compiled")
    assert (tc.mult != 1).any() and set(np.diff(tc.rows.indptr)) == {1, 2}
    _agree(batch, alpha, B)
    _close(engine.risk(alpha, B, tc), engine.risk(alpha, B, engine.from_batch(batch)), "risk only")


@pytest.mark.parametrize("R,H", [(3, 1), (2, 2)])
def test_compiled_kernel_with_empty_strings(R, H):
    """Empty strings (f = 0 there): risks, gradients and outputs, and the risks and accuracies alone, with one
    head and with two (whose outputs the compiled path sums in the products' layout)."""
    batch = tasks.sample("ICL", 20, 40, np.random.default_rng(1))
    m = batch.m.tolil()
    m[3], m[17] = 0, 0
    batch.m = m.tocsr()
    rng = np.random.default_rng(2)
    _, D, K = tasks.model_shape("ICL", 20, H)
    tb, tn = engine.from_batch(batch, "compiled"), engine.from_batch(batch)
    assert len(tb.starts) == tb.size - 2
    alpha, B = rng.standard_normal((R, H, D)), rng.standard_normal((R, H, D, K))
    _agree(batch, alpha, B)
    for loss in ("squared", "cross_entropy"):
        (r, acc, tied), (rn, accn, tiedn) = (engine.risk_and_accuracy(alpha, B, tb, loss),
                                             engine.risk_and_accuracy(alpha, B, tn, loss))
        _close(r, rn, "risk only")
        assert np.array_equal(acc, accn) and np.array_equal(tied, tiedn)
    assert engine.risk_and_grad(alpha, B, tb, with_f=False)[3] is None


def _one_hot_batch(rng, T=40, D=12, N=25, K=2, absent=None, per_row=None):
    """A one-hot table of T types over D coordinates, rows of one, two or three coordinates (``per_row``: that
    many each), and counts of N strings (none empty); with ``absent`` no string has a type on that
    coordinate."""
    X = np.zeros((T, D))
    for t in range(T):
        X[t, rng.choice(D, size=per_row or 1 + t % 3, replace=False)] = 1.0
    m = (rng.integers(1, 4, (N, T)) * (rng.random((N, T)) < 0.3)).astype(float)
    if absent is not None:
        m[:, X[:, absent] > 0] = 0.0
    first = int(np.flatnonzero(X[:, absent] == 0)[0]) if absent is not None else 0
    m[:, first] += 1.0  # no empty string
    return tasks.Batch(X, m, rng.standard_normal((N, K)))


@given(seed=st.integers(0, 2 ** 31 - 1), R=st.integers(1, 3), H=st.integers(1, 3), K=st.integers(1, 4),
       N=st.integers(1, 9))
@examples(20)
def test_the_fused_squared_loss_is_numpys_on_any_weights(seed, R, H, K, N):
    """``squared_loss`` (the compiled kernel's loss on batches without empty strings) against the numpy path's
    loss (``engine._risk_and_dl``) on heads' outputs, targets and unequal, some zero, weights: risks to 1e-12,
    and dL/df for every head of every run."""
    rng = np.random.default_rng(seed)
    fhe, y = rng.standard_normal((R * H, N, K)), rng.standard_normal((N, K))
    w = rng.random(N) * (rng.random(N) < 0.8)
    tb = engine.Tokens(table=None, y=y, weights=w, labels=None)
    f = fhe.reshape(R, H, N, K).sum(axis=1).transpose(1, 0, 2)                        # (N, R, K)
    r_want, g_want = engine._risk_and_dl(f, tb, "squared")
    r, g = kernels.squared_loss(fhe, y, w, H)
    _close(r, r_want, "risk")
    for h in range(H):
        _close(g.reshape(R, H, N, K)[:, h], g_want.transpose(1, 0, 2), f"dL/df of head {h}")


@pytest.mark.parametrize("H", [1, 2])
def test_the_compiled_kernel_reads_the_batchs_weights(H):
    """A batch with unequal probability weights (the sampled tasks' are equal): the compiled path's risks and
    gradients (its fused loss) agree with the numpy path's to 1e-12, and differ from those of equal weights."""
    batch = tasks.sample("ICL", 12, 30, np.random.default_rng(5))
    batch.weights = np.random.default_rng(6).random(30)
    batch.weights /= batch.weights.sum()
    _, D, K = tasks.model_shape("ICL", 12, H)
    rng = np.random.default_rng(7)
    alpha, B = rng.standard_normal((2, H, D)), rng.standard_normal((2, H, D, K))
    _agree(batch, alpha, B)
    equal = engine.risk(alpha, B, engine.from_batch(tasks.Batch(batch.X, batch.m, batch.y), "compiled"))
    assert np.abs(engine.risk(alpha, B, engine.from_batch(batch, "compiled")) - equal).min() > 1e-6


def test_the_fused_squared_loss_refuses_mis_shaped_inputs():
    fhe = np.zeros((4, 3, 2))
    for args, msg in (((fhe, np.zeros((3, 2)), np.zeros(3), 3), "not a whole number of runs"),
                      ((fhe, np.zeros((3, 2)), np.zeros(3), 0), "not a whole number of runs"),
                      ((fhe, np.zeros((3, 1)), np.zeros(3), 2), "targets has shape"),
                      ((fhe, np.zeros((3, 2)), np.zeros(4), 2), "weights has shape")):
        with pytest.raises(ValueError, match=msg):
            kernels.squared_loss(*args)


def test_compiled_kernel_with_three_coordinates_a_row():
    """A one-hot table whose rows have one, two or three coordinates (the kernel's general loop)."""
    rng = np.random.default_rng(4)
    batch = _one_hot_batch(rng)
    tc = engine.from_batch(batch, "compiled")
    assert engine._onehot(tc).idx.shape[0] == 3
    _agree(batch, rng.standard_normal((2, 2, 12)), rng.standard_normal((2, 2, 12, 2)))


def test_pairs_whose_first_coordinates_recur_out_of_order():
    """Rows of exactly two coordinates in an order where a string's first coordinates change and come back
    (the pair loops sum each run of one first coordinate in a register: every run, the last included, must
    reach the mean embedding, the normaliser and the gradient)."""
    rng = np.random.default_rng(6)
    batch = _one_hot_batch(rng, per_row=2)
    tc = engine.from_batch(batch, "compiled")
    oh = engine._onehot(tc)
    assert oh.idx.shape[0] == 2 and (oh.idx < oh.D).all()
    first = [oh.idx[0, lo:hi] for lo, hi in zip(oh.bounds[:-1], oh.bounds[1:])]
    assert any(len(set(x)) < np.count_nonzero(np.diff(x)) + 1 for x in first)   # a first coordinate recurs
    assert any((np.diff(x) == 0).any() for x in first)                          # and runs longer than one
    _agree(batch, rng.standard_normal((2, 2, 12)), rng.standard_normal((2, 2, 12, 2)))


def test_each_kernel_builds_only_its_own_view_of_the_rows():
    """The numpy path's CSR operators (costing more than a step to build) are built
    for neither kernel's one-hot batch where numba runs, neither with the layout nor by a step: the compiled
    kernel takes its one-hot view, the numpy kernel the same-bits loops' view.  Inside ``numpy_paths`` a step
    of the numpy kernel builds them on demand."""
    batch = tasks.sample("ICL", 12, 20, np.random.default_rng(0))
    _, D, K = tasks.model_shape("ICL", 12, 1)
    tc, tn = engine.from_batch(batch, "compiled"), engine.from_batch(batch)
    assert "_onehot" in tc.__dict__ and "_rows_loops" in tn.__dict__
    for tb in (tc, tn):
        engine.risk_and_grad(np.ones((2, 1, D)), np.ones((2, 1, D, K)), tb)
        engine.risk(np.ones((2, 1, D)), np.ones((2, 1, D, K)), tb)
        assert "_ops" not in tb.__dict__
    assert "_rows_loops" not in tc.__dict__ and "_onehot" not in tn.__dict__
    with kernels.numpy_paths():
        engine.risk_and_grad(np.ones((2, 1, D)), np.ones((2, 1, D, K)), tn)
    assert "_ops" in tn.__dict__


def test_rows_the_kernel_cannot_take_stay_on_the_numpy_path():
    """Weighted (non-unit) entries, an all-zero token row, dense rows: no compiled view, numpy's results."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 8)) * (rng.random((40, 8)) < 0.15)
    X[-1] = 0.0
    m = (rng.integers(1, 3, (10, 40)) * (rng.random((10, 40)) < 0.3)).astype(float)
    for batch in (tasks.Batch(X, m, rng.standard_normal((10, 1))), tasks.sample("SLR", 6, 10, rng)):
        tb = engine.from_batch(batch, "compiled")
        assert engine._onehot(tb) is None
        H, D, K = 1, tb.table.shape[1], tb.y.shape[1]
        a, B = rng.standard_normal((2, H, D)), rng.standard_normal((2, H, D, K))
        for x, y in zip(engine.risk_and_grad(a, B, tb), engine.risk_and_grad(a, B, engine.from_batch(batch))):
            assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize("shift,top", [(-750.0, None), (0.0, 722.0)])
def test_shifted_columns_agree_with_the_numpy_path(shift, top):
    """Every coefficient ~750 below 0 (the shift's floor at 0 keeps the padding factor finite; every product
    underflows and each string is redone), and one coefficient at +722 (some strings' sums fall between 0 and
    TINY, where 1 / Z would overflow).  The attention saturates there, so the gradients, near 0, are held to
    1e-12 absolute; risks and outputs to 1e-12 relative."""
    d = 10
    batch = tasks.sample("ICL", d, 40, np.random.default_rng(3))
    _, D, K = tasks.model_shape("ICL", d, 2)
    rng = np.random.default_rng(0)
    alpha = rng.standard_normal((1, 2, D)) + shift
    if top is not None:
        alpha[0, :, 0] += top
    want, got = _both(batch, alpha, rng.standard_normal((1, 2, D, K)))
    _close(got[0], want[0], "risk")
    _close(got[3], want[3], "f")
    for x, y in zip(got[1:3], want[1:3]):
        assert np.isfinite(x).all() and np.abs(x - y).max() <= TOL


def test_underflowing_strings_fall_back_to_their_own_maximum():
    """One coordinate, present in some strings only, at the column's top and every other ~1500 below it:
    the strings without it have every product of exponentials underflow to 0; the kernel recomputes those
    with their own maximum and agrees with the numpy path (without the fallback their weights are 0 / 0)."""
    d = 10
    batch = tasks.sample("ICL", d, 30, np.random.default_rng(3))
    _, D, K = tasks.model_shape("ICL", d, 1)
    tc = engine.from_batch(batch, "compiled")
    oh = engine._onehot(tc)
    has = np.zeros((len(oh.bounds) - 1, D + 1), bool)
    strings = np.repeat(np.arange(len(oh.bounds) - 1), np.diff(oh.bounds))
    for k in range(oh.idx.shape[0]):
        has[strings, oh.idx[k]] = True
    share = has[:, :D].mean(axis=0)
    j = int(np.flatnonzero((share > 0.2) & (share < 0.8))[0])
    rng = np.random.default_rng(5)
    alpha = rng.standard_normal((2, 1, D)) - 1500.0
    alpha[:, 0, j] = 2.0
    A = alpha.reshape(2, D)
    Ea = np.exp(np.concatenate([A, np.zeros((2, 1))], axis=1) - 2.0)   # the padding slot: exp(-top)
    Z = np.add.reduceat(Ea[:, oh.idx[0]] * Ea[:, oh.idx[1]] * oh.mult, oh.bounds[:-1], axis=1)
    assert (Z == 0).any() and (Z > 0).any()   # the case is reached: some strings' products all underflow
    (w, inv), _ = kernels.softmax_scatter(np.ascontiguousarray(A), oh)
    assert np.isfinite(inv).all() and np.isfinite(w).all()
    _agree(batch, alpha, rng.standard_normal((2, 1, D, K)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("present", [True, False])
@pytest.mark.parametrize("per_row", [None, 2])
def test_non_finite_parameters_spoil_the_same_strings_on_both_paths(bad, present, per_row):
    """A non-finite coefficient of one run on a coordinate that some strings have (or that no string has):
    both paths give non-finite outputs for the same strings and runs, and agree to 1e-12 on the rest; in
    the general loop (rows of one to three coordinates) and in the pair loops (two a row)."""
    rng = np.random.default_rng(1)
    j = 5
    batch = _one_hot_batch(rng, absent=j, per_row=per_row)
    assert engine._onehot(engine.from_batch(batch, "compiled")).idx.shape[0] == (per_row or 3)
    if present:  # the first ten strings get a token on coordinate j
        batch.m[:10, int(np.flatnonzero(batch.X[:, j])[0])] = 1.0
    alpha, B = rng.standard_normal((2, 1, 12)), rng.standard_normal((2, 1, 12, 2))
    alpha[1, 0, j] = bad
    with np.errstate(invalid="ignore"):  # inf - inf on the numpy path
        want, got = _both(batch, alpha, B)
    fw, fg = want[3], got[3]
    ok = np.isfinite(fw)
    assert np.array_equal(ok, np.isfinite(fg))
    assert ok[:, 0].all() and ok[:, 1].all() == (not present or bad == -np.inf) and ok[:, 1].any()
    _close(fg[ok], fw[ok], "finite outputs")
    _close(got[1][0], want[1][0], "the finite run's alpha gradient")
    for x, y, what in zip(got[:3], want[:3], ("risk", "d alpha", "d B")):  # the spoilt run's too
        assert np.array_equal(np.isfinite(x), np.isfinite(y)), what
    assert np.isfinite(want[1][1]).all() == (not present or bad == -np.inf)


def test_mis_shaped_parameters_are_refused_before_the_loops():
    """The compiled loops have no bounds checks: parameters of the wrong width raise, not write past arrays."""
    batch = tasks.sample("ICL", 8, 10, np.random.default_rng(0))
    _, D, K = tasks.model_shape("ICL", 8, 1)
    tc = engine.from_batch(batch, "compiled")
    with pytest.raises(ValueError, match="compiled kernel needs"):
        engine.risk_and_grad(np.zeros((1, 1, D + 5)), np.zeros((1, 1, D + 5, K)), tc)
    oh = engine._onehot(tc)
    weights, _ = kernels.softmax_scatter(np.zeros((1, D)), oh)
    N_ne = len(oh.bounds) - 1
    with pytest.raises(ValueError, match="U has shape"):
        kernels.score_grad(np.zeros((1, N_ne, D + 1)), np.zeros((1, N_ne, K)), np.zeros((1, N_ne, K)), weights, oh)
    # the same rows split into other strings: the weights' normalisers no longer fit them
    other = kernels.OneHotRows(oh.idx, np.unique(np.append(oh.bounds, oh.bounds[:-1] + 1)), oh.mult, D)
    assert len(other.bounds) - 1 > N_ne
    with pytest.raises(ValueError, match="normalisers has shape"):
        kernels.score_grad(np.zeros((1, N_ne, D)), np.zeros((1, N_ne, K)), np.zeros((1, N_ne, K)), weights, other)
    for bounds, mult, idx in ((oh.bounds + 1, oh.mult, oh.idx), (oh.bounds, oh.mult[1:], oh.idx),
                              (oh.bounds, oh.mult, oh.idx + D), (np.insert(oh.bounds, 1, 0), oh.mult, oh.idx),
                              (oh.bounds, oh.mult, oh.idx - D - 1),  # negative: unsigned, it would lie past D
                              (oh.bounds, oh.mult, oh.idx.astype(np.uint64) + np.uint64(2 ** 63))):
        with pytest.raises(ValueError, match="inconsistent one-hot rows"):   # the last: an empty string
            kernels.OneHotRows(idx, bounds, mult, D)
    # what was checked cannot change under the loops: the view is frozen and its arrays read-only copies
    idx = oh.idx.copy()
    mine = kernels.OneHotRows(idx, oh.bounds, oh.mult, D)
    idx[:] = 0
    assert (mine.idx == oh.idx).all() and (mine.uidx == oh.idx).all()
    with pytest.raises(ValueError, match="read-only"):
        mine.ubounds[-1] = 0
    with pytest.raises(ValueError, match="read-only"):
        mine.uidx[0, 0] = 0
    with pytest.raises(AttributeError):
        mine.bounds = np.array([0, mine.idx.shape[1]])


def test_kernel_option_is_checked_before_any_work(monkeypatch):
    with pytest.raises(SettingError, match="kernel must be one of"):
        runner.Config(kernel="fast").validate()
    with pytest.raises(SettingError, match="kernel must be one of"):
        engine.from_batch(tasks.sample("ICL", 5, 4, np.random.default_rng(0)), "fast")
    monkeypatch.setattr(kernels, "available", lambda: False)
    with pytest.raises(SettingError, match="needs numba"):
        runner.Config(kernel="compiled").validate()
    runner.Config(kernel="numpy").validate()


def test_results_record_the_kernel_and_old_results_read_as_numpy(tmp_path):
    """A run on the compiled kernel records it in its config and names it on its page; a results file from
    before the option (no "kernel") reads back as the numpy kernel, the one that made it; the two kernels'
    trained risks agree to rounding."""
    from app.cli import main
    from app.render.table1 import markdown

    runs = {}
    for kernel in ("numpy", "compiled"):
        out = tmp_path / kernel
        main(["table1", "--quick", "--tasks", "ICL", "--seeds", "1", "--max-steps", "40", "--jobs", "1", "--quiet",
              "--kernel", kernel, "--out", str(out)])
        runs[kernel] = json.loads((out / "table1.json").read_text())
    assert runs["compiled"]["config"]["kernel"] == "compiled" and runs["numpy"]["config"]["kernel"] == "numpy"
    assert "engine kernel compiled" in markdown(runs["compiled"]) and "engine kernel" not in markdown(runs["numpy"])
    old = dict(runs["numpy"]["config"])
    del old["kernel"]
    assert runner.Config.from_dict(old).kernel == "numpy"
    a, b = (json.dumps(runs[k]["rows"], sort_keys=True) for k in ("numpy", "compiled"))
    ra, rb = _floats(json.loads(a)), _floats(json.loads(b))
    assert len(ra) == len(rb) > 0
    assert max(abs(x - y) / max(abs(x), 1e-3) for x, y in zip(ra, rb)) < 1e-8


def _floats(obj) -> list:
    if isinstance(obj, dict):
        return [v for k in sorted(obj) if not (k.endswith("_s") or k == "seconds") for v in _floats(obj[k])]
    if isinstance(obj, list):
        return [v for x in obj for v in _floats(x)]
    return [float(obj)] if isinstance(obj, float) else []


SAME_BITS_LOOPS = ("bag_forward", "squared_terms", "squared_outputs", "rows_shifted_scores",
                   "rows_normalise_scatter", "rows_score_grad", "type_pairs", "icl_round", "count_csr",
                   "taken_entries", "take_rows")


def _default_kernel_work():
    """What the default numpy kernel computes at every call site of the same-bits loops: an exact population's
    step (``bag_forward``, ``squared_terms``), a sampled SLR step (rows, ``squared_terms``), an ICL batch drawn
    (``icl_round``, ``count_csr``), laid out (``taken_entries``, ``take_rows``), and its step under both losses
    (the rows loops; ``squared_outputs``), an even pairs step (``type_pairs``); as flat arrays (the sparse counts
    and token rows by their CSR arrays)."""
    from numerics.experiments.population import population

    out = []
    rng = np.random.default_rng(11)
    for task, loss, batch in (("OR", "squared", population("OR", 6, 1e-6, 1e-6, merged=True)),
                              ("SLR", "squared", tasks.sample("SLR", 6, 32, np.random.default_rng(1), seed=0)),
                              ("ICL", "cross_entropy", tasks.sample("ICL", 6, 32, np.random.default_rng(2))),
                              ("ICL", "squared", tasks.sample("ICL", 6, 32, np.random.default_rng(3))),
                              ("even_pairs", "squared", tasks.sample("even_pairs", 2, 32, np.random.default_rng(4)))):
        if sparse.issparse(batch.m):
            m = sparse.csr_matrix(batch.m)
            out += [m.indptr, m.indices, m.data]
        _, D, K = tasks.model_shape(task, 6, 1)
        alpha, B = rng.standard_normal((2, 1, D)), rng.standard_normal((2, 1, D, K))
        tb = engine.from_batch(batch)
        if sparse.issparse(tb.rows):
            out += [tb.rows.indptr, tb.rows.indices, tb.rows.data, tb.starts, tb.seg, tb.mult]
        out += [np.asarray(x) for x in engine.risk_and_grad(alpha, B, tb, loss)]
    return out


def test_numpy_paths_switch_off_every_same_bits_loop_with_the_same_bits():
    """Inside ``numpy_paths`` no call site of the default kernel (the bag's forward pass and pairs of types, the
    rows' passes, the squared loss's terms, the ICL sampler's rounds and counts) reaches numba, and every result
    has the same bits as with the loops; on exit the loops are taken again."""
    with counted(kernels._compiled(), SAME_BITS_LOOPS) as calls:
        assert kernels.usable()
        with_loops = _default_kernel_work()
        assert all(calls.values()), calls        # the workload reaches every loop
        calls.update(dict.fromkeys(calls, 0))
        with kernels.numpy_paths():
            assert not kernels.usable()
            with kernels.numpy_paths():               # nested: still off after the inner one ends
                pass
            without = _default_kernel_work()
        assert calls == dict.fromkeys(SAME_BITS_LOOPS, 0)
        assert len(without) == len(with_loops)
        for a, b in zip(with_loops, without):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        assert kernels.usable()
        _default_kernel_work()
        assert all(calls.values()), calls


def test_numpy_paths_restores_the_switch_after_an_error():
    with pytest.raises(RuntimeError):
        with kernels.numpy_paths():
            raise RuntimeError
    assert kernels.usable()


def test_the_heavy_rows_are_those_a_multiplicity_scales():
    """``OneHotRows.heavy``: every row whose multiplicity is not 1, below or above it or NaN, in order (the
    normalisation scales these rows alone); read-only."""
    mult = np.array([1.0, 0.5, 2.0, np.nan, 1.0, 0.0, 3.0])
    oh = kernels.OneHotRows(idx=np.array([[0, 1, 0, 1, 0, 1, 0]]), bounds=np.array([0, 3, 7]), mult=mult, D=2)
    assert oh.heavy.tolist() == [1, 2, 3, 5, 6] and oh.heavy.dtype == np.uint64
    with pytest.raises(ValueError, match="read-only"):
        oh.heavy[0] = 0
