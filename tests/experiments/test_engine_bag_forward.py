"""The compiled loops that give numpy's own bits under either kernel option: the bag layout's forward pass
(``kernels.bag_forward``, run where ``passes._bag_compiled`` says) and the squared loss's terms for one output
(``kernels.squared_terms``, in ``readout._risk_and_dl``).  On the exact populations (two token types, one
output) they give the numpy path's bits, not only its values to rounding, in every output of the engine
(forward, risks, accuracies, gradients), for several runs and heads, saturated attention, empty strings and
non-finite parameters (a NaN's sign aside); the loss's terms on any outputs, runs, strides and weights; the
cases they do not take, and a numba that cannot import, stay on the numpy path; their inputs are checked
before the loops."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import layout, passes, readout
from numerics.experiments import tasks
from numerics.experiments.population import population
from tests._spies import counted

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")

TASKS = ("occurrence", "OR", "AND")


def _tokens(task: str, d: int) -> engine.Tokens:
    return engine.from_batch(population(task, d, 1e-10, 1e-12, merged=task != "occurrence"))


def _outputs(alpha, B, tb):
    fw = engine.forward(alpha, B, tb)
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb)
    risk, acc, tied = engine.risk_and_accuracy(alpha, B, tb)
    return {"w": fw.w, "fh": fw.fh, "f": fw.f, "risk": r, "d alpha": ga, "d B": gB, "f of the step": f,
            "risk alone": engine.risk(alpha, B, tb), "risk with accuracy": risk, "accuracy": acc, "tied": tied}


def _both(alpha, B, tb):
    """(compiled, numpy) outputs; asserts that both compiled loops ran, and then that neither did."""
    with counted(kernels, ["bag_forward", "squared_terms"]) as calls, pytest.MonkeyPatch.context() as m:
        got = _outputs(alpha, B, tb)
        assert all(calls.values()), f"a compiled loop did not run: {calls}"
        m.setattr(kernels, "usable", lambda: False)
        n = dict(calls)
        want = _outputs(alpha, B, tb)
        assert calls == n
    return got, want


def _same_bits(got, want):
    """Every entry the same bits, but for the sign of a NaN (IEEE leaves it unspecified, and LLVM may take it
    from the other operand of a sum): the same NaN positions, equal values elsewhere, the same sign of every
    zero (array_equal holds -0.0 == 0.0)."""
    for key in want:
        x, y = np.asarray(got[key]), np.asarray(want[key])
        assert x.shape == y.shape and x.dtype == y.dtype, key
        nan = np.isnan(x)
        assert np.array_equal(nan, np.isnan(y)), key
        assert np.array_equal(x[~nan], y[~nan]), key
        assert np.array_equal(np.signbit(x[~nan]), np.signbit(y[~nan])), key


@pytest.mark.parametrize("task", TASKS)
@given(seed=st.integers(0, 2 ** 31 - 1), d=st.integers(4, 12), R=st.integers(1, 3), H=st.integers(1, 2),
       scale=st.sampled_from([0.0, 1.0, 40.0]))
@examples(8)
def test_the_compiled_forward_gives_the_numpy_paths_bits(task, seed, d, R, H, scale):
    """Random parameters of R runs and H heads (scale 40: attention saturated to rounding; 0: the zero
    initialisation)."""
    tb = _tokens(task, d)
    T = tb.counts.shape[1]
    rng = np.random.default_rng(seed)
    D = tb.table.shape[1]
    alpha = scale * rng.standard_normal((R, H, D))
    B = rng.standard_normal((R, H, D, 1))
    assert T == 2 and passes._bag_compiled(T, 1)
    got, want = _both(alpha, B, tb)
    _same_bits(got, want)


def test_empty_strings_and_zero_weights():
    """A class with no tokens (both counts 0: its weights 0 / 1, its output 0) and classes of zero weight."""
    tb = _tokens("AND", 6)
    counts = np.array(tb.counts)
    counts[:3] = 0.0
    weights = np.array(tb.weights)
    weights[3:6] = 0.0
    tb = dataclasses.replace(tb, counts=counts, weights=weights)
    rng = np.random.default_rng(0)
    alpha, B = rng.standard_normal((2, 1, 6)), rng.standard_normal((2, 1, 6, 1))
    got, want = _both(alpha, B, tb)
    _same_bits(got, want)
    assert np.all(got["w"][:, :3] == 0.0) and np.all(got["f"][:3] == 0.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["alpha", "B"])
def test_non_finite_parameters_give_the_same_bits(bad, where):
    """A non-finite attention coefficient or readout entry of one run: the same NaN and infinite entries
    on both paths, and the same bits elsewhere."""
    tb = _tokens("OR", 8)
    rng = np.random.default_rng(2)
    alpha, B = rng.standard_normal((2, 1, 8)), rng.standard_normal((2, 1, 8, 1))
    (alpha if where == "alpha" else B)[1, 0, 0] = bad
    with np.errstate(invalid="ignore", over="ignore"):
        got, want = _both(alpha, B, tb)
    _same_bits(got, want)
    assert np.isfinite(got["f"][:, 0]).all() and not np.isfinite(got["f"][:, 1]).all()


def test_nans_of_both_signs():
    """An infinite and a NaN readout entry of one run (0 inf is a NaN of the other sign): the type values are
    NaNs of opposite signs, and the sums over them NaN on both paths at the same entries."""
    tb = _tokens("occurrence", 6)
    alpha, B = np.full((2, 1, 6), 0.5), np.full((2, 1, 6, 1), 0.5)
    B[0, 0, 0], B[0, 0, 1] = np.inf, np.nan
    with np.errstate(invalid="ignore"):
        got, want = _both(alpha, B, tb)
    _same_bits(got, want)
    assert np.isnan(got["f"][:, 0]).any() and np.isfinite(got["f"][:, 1]).all()


def test_a_numba_that_is_found_but_cannot_import_leaves_the_numpy_path_working(monkeypatch):
    """numba installed but failing at import (or at compiling the loop): the default path does without it."""
    import sys

    tb = _tokens("OR", 8)
    rng = np.random.default_rng(6)
    alpha, B = rng.standard_normal((1, 1, 8)), rng.standard_normal((1, 1, 8, 1))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(passes, "_bag_compiled", lambda T, K: False)
        want = _outputs(alpha, B, tb)
    kernels.usable.cache_clear()
    kernels._compiled.cache_clear()
    try:
        monkeypatch.setitem(sys.modules, "numba", None)  # "import numba" raises ImportError
        assert kernels.available() and not kernels.usable()
        _same_bits(_outputs(alpha, B, tb), want)
    finally:
        monkeypatch.undo()
        kernels.usable.cache_clear()
        kernels._compiled.cache_clear()
    assert kernels.usable()


def test_other_bags_and_a_missing_numba_stay_on_the_numpy_path(monkeypatch):
    """Bags of more than two types (even pairs, two-head AND below d = 17) and every bag when numba is
    missing take the numpy path."""
    calls = []
    monkeypatch.setattr(kernels, "bag_forward", lambda *a: calls.append(1))
    rng = np.random.default_rng(3)
    for task, H in (("even_pairs", 1), ("AND", 2)):
        tb = engine.from_batch(tasks.sample(task, 8, 20, rng, seed=0))
        assert tb.layout == "bag" and tb.counts.shape[1] > 2
        _, D, K = tasks.model_shape(task, 8, H)
        engine.forward(rng.standard_normal((1, H, D)), rng.standard_normal((1, H, D, K)), tb)
    monkeypatch.setattr(kernels, "available", lambda: False)
    kernels.usable.cache_clear()
    try:
        engine.forward(np.zeros((1, 1, 8)), np.zeros((1, 1, 8, 1)), _tokens("occurrence", 8))
    finally:
        monkeypatch.undo()
        kernels.usable.cache_clear()
    assert not calls


def test_patterns_are_read_modulo_four_and_shapes_are_checked():
    """The loop has no bounds checks: a pattern outside 0..3 cannot read outside the exponentials' table (it
    is read modulo 4), and mis-shaped inputs are refused before the loop."""
    tb = _tokens("occurrence", 5)
    pat = layout._patterns(tb)
    rng = np.random.default_rng(4)
    exP, V = rng.random((4, 2, 3)), rng.standard_normal((2, 3))
    w, fh = kernels.bag_forward(tb.counts, pat, exP, V)
    for shifted in (pat + 4, pat - 8):
        w2, fh2 = kernels.bag_forward(tb.counts, shifted, exP, V)
        assert np.array_equal(w, w2) and np.array_equal(fh, fh2)
    N = tb.counts.shape[0]
    for args, what in (((np.ones((N, 3)), pat, exP, V), "the counts"), ((tb.counts, pat[1:], exP, V), "the patterns"),
                       ((tb.counts, pat, exP[:3], V), "the exponentials"), ((tb.counts, pat, exP, V[:1]),
                                                                            "the type values")):
        with pytest.raises(ValueError, match=f"^{what} has shape"):
            kernels.bag_forward(*args)


@given(seed=st.integers(0, 2 ** 31 - 1), N=st.integers(1, 40), R=st.integers(1, 4), strided=st.booleans(),
       special=st.booleans())
@examples(30)
def test_the_squared_losss_terms_are_numpys_bits(seed, N, R, strided, special):
    """``readout._risk_and_dl`` with the compiled terms and with numpy's passes, on outputs of R runs (strided
    views of a heads' array, as the bag layout passes them), unequal and zero weights, and outputs that are
    +-0, +-inf, NaN, huge (squares that overflow) or subnormal: the same bits (a NaN's sign aside)."""
    rng = np.random.default_rng(seed)
    fh = rng.standard_normal((N, R, 2 if strided else 1, 1))
    if special:
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 1.5e154, 3e-160, 5e-324, 1.0])
        flat = fh.reshape(-1)
        pick = rng.random(flat.size) < 0.5
        flat[pick] = rng.choice(pool, int(pick.sum()))
    f = fh[:, :, 0]
    w = rng.random(N) * (rng.random(N) < 0.8)
    tb = engine.Tokens(table=None, y=rng.choice([-1.0, 1.0, 0.0, -0.0], (N, 1)), weights=w, labels=None)
    calls, real = [], kernels.squared_terms
    with np.errstate(all="ignore"), pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "squared_terms", lambda *a: calls.append(1) or real(*a))
        got = readout._risk_and_dl(f, tb, "squared")
        assert calls, "the compiled terms did not run"
        m.setattr(kernels, "usable", lambda: False)
        n = len(calls)  # (usable's own trial, when it runs first here, calls the terms too)
        want = readout._risk_and_dl(f, tb, "squared")
        assert len(calls) == n
    _same_bits({"risk": got[0], "dL/df": got[1]}, {"risk": want[0], "dL/df": want[1]})
    # each string's terms too (a NaN anywhere makes the risk NaN on both paths): numpy's losses, weighted
    with np.errstate(all="ignore"):
        lv, dl = kernels.squared_terms(f[:, :, 0], tb.y[:, 0], w)
        lv_np, dl_np = engine.losses(f, tb, "squared")
        dl_np = dl_np[:, :, 0] * w[:, None]
    _same_bits({"loss": lv, "weighted dL/df": dl}, {"loss": lv_np, "weighted dL/df": dl_np})


def test_the_squared_losss_terms_are_taken_only_for_one_output_and_checked(monkeypatch):
    """More than one output (ICL) or another loss stays on numpy's passes; mis-shaped inputs are refused."""
    calls = []
    monkeypatch.setattr(kernels, "squared_terms", lambda *a: calls.append(1))
    rng = np.random.default_rng(1)
    tb = engine.Tokens(table=None, y=rng.standard_normal((5, 3)), weights=np.full(5, 0.2), labels=None)
    readout._risk_and_dl(rng.standard_normal((5, 2, 3)), tb, "squared")
    tb1 = engine.Tokens(table=None, y=np.sign(rng.standard_normal((5, 1))), weights=np.full(5, 0.2), labels=None)
    readout._risk_and_dl(rng.standard_normal((5, 2, 1)), tb1, "logistic")
    assert not calls
    monkeypatch.undo()
    with pytest.raises(ValueError, match="targets has shape"):
        kernels.squared_terms(np.zeros((4, 2)), np.zeros(5), np.zeros(4))
    with pytest.raises(ValueError, match="weights has shape"):
        kernels.squared_terms(np.zeros((4, 2)), np.zeros(4), np.zeros(3))


@pytest.mark.parametrize("task,heads,d,kernel", [("SLR", 1, 6, "numpy"), ("even_pairs", 1, 4, "numpy"),
                                                 ("AND", 2, 20, "numpy"), ("AND", 2, 20, "compiled")])
def test_the_rows_layouts_steps_keep_numpys_bits(task, heads, d, kernel):
    """The sampled rows (dense SLR rows, even pairs' bag of eight types, two-head AND's token rows, on either
    kernel), with two strings emptied where the layout allows: risks, gradients and outputs of three runs with
    the compiled loss terms the same bits as with numpy's passes, and the terms ran."""
    batch = tasks.sample(task, d, 40, np.random.default_rng(3), seed=1)
    if task == "AND":  # two empty strings (the compiled kernel's own path then reads them as numpy does)
        batch.m = np.array(batch.m)
        batch.m[[4, 9]] = 0.0
    tb = engine.from_batch(batch, kernel)
    _, D, K = tasks.model_shape(task, d, heads)
    rng = np.random.default_rng(4)
    alpha, B = rng.standard_normal((3, heads, D)), rng.standard_normal((3, heads, D, K))
    calls, real = [], kernels.squared_terms
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kernels, "squared_terms", lambda *a: calls.append(1) or real(*a))
        got = dict(zip(("risk", "d alpha", "d B", "f"), engine.risk_and_grad(alpha, B, tb)))
        assert calls, "the compiled terms did not run"
        m.setattr(kernels, "usable", lambda: False)
        n = len(calls)
        want = dict(zip(("risk", "d alpha", "d B", "f"), engine.risk_and_grad(alpha, B, tb)))
        assert len(calls) == n
    _same_bits(got, want)
