"""The Table 1 experiment layers: engine (against the dense model), exact populations, the extending grid,
the plateau rule and the lag measures (the verdicts: tests/experiments/test_verdicts.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from checks.strategies import examples
from numerics.experiments import bank
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import lag
from numerics.experiments import runner
from numerics.experiments import tasks as tasks_module
from numerics.experiments.grid import GridSearch
from numerics.experiments.population import population
from numerics.model import Model, Params
from theory.validation import SettingError

# ------------------------------------------------------------------------------------------------ engine

CASES = [("occurrence", 1), ("OR", 1), ("AND", 2), ("ICL", 1), ("SLR", 1), ("even_pairs", 1), ("SLR", 2)]


@pytest.mark.parametrize("task,heads", CASES)
@given(seed=st.integers(0, 2 ** 31 - 1), d=st.integers(5, 12))
@examples(6)
def test_engine_agrees_with_the_dense_model(task, heads, seed, d):
    """The token-row / bag engine and numerics.model.Model give the same risks, gradients and outputs to
    1e-12 (relative) for several runs at once, on random batches and random parameters."""
    rng = np.random.default_rng(seed)
    sampled = tasks_module.sample(task, d, 30, np.random.default_rng(seed + 1), seed=seed % 7)
    batch = sampled.dense()
    model = Model(*tasks_module.model_shape(task, d, heads))
    R = 3
    alpha = rng.standard_normal((R, heads, model.D))
    B = rng.standard_normal((R, heads, model.D, model.K))
    tb = engine.from_batch(sampled)
    losses = ["squared"] + (["cross_entropy"] if task == "ICL" else []) + (["logistic"] if model.K == 1 and
                                                                           batch.labels is not None else [])
    for loss in losses:
        r, ga, gB, f = engine.risk_and_grad(alpha, B, tb, loss)
        target = batch.labels if loss == "cross_entropy" else batch.y
        for i in range(R):
            rr, g, ff = model.risk_and_grad(Params(alpha[i], B[i]), batch.X, target, batch.m, loss=loss)
            assert abs(r[i] - rr) <= 1e-12 * abs(rr)
            assert np.abs(ga[i] - g.alpha).max() <= 1e-12 * max(np.abs(g.alpha).max(), 1e-300)
            assert np.abs(gB[i] - g.B).max() <= 1e-12 * np.abs(g.B).max()
            assert np.abs(f[:, i] - ff).max() <= 1e-12 * max(np.abs(ff).max(), 1.0)


def _reference_rows_step(alpha, B, tb, loss):
    """The rows layout's risk and gradients in the engine's reference order (its code before the direct
    CSR kernels and the skipped gathers: scipy's ``@``, every fancy index and broadcast, the head sum)."""
    R, H, D = alpha.shape
    K = B.shape[-1]
    N, N_ne = tb.size, len(tb.starts)
    X = tb.rows if sparse.isspmatrix_csr(tb.rows) else sparse.csr_matrix(tb.rows)
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    gather = sparse.csr_matrix((X.data, X.indices + tb.seg[row_of] * D, X.indptr), shape=(X.shape[0], N_ne * D))
    scatter, rows_t = gather.T.tocsr(), (tb.rows.T.tocsr() if sparse.issparse(tb.rows) else None)
    reps = np.diff(np.append(tb.starts, X.shape[0]))
    S = np.asarray(tb.rows @ alpha.reshape(R * H, D).T)
    S -= np.repeat(np.maximum.reduceat(S, tb.starts, axis=0), reps, axis=0)
    np.exp(S, out=S)
    S *= tb.mult[:, None]
    S /= np.repeat(np.add.reduceat(S, tb.starts, axis=0), reps, axis=0)
    xbar = np.ascontiguousarray((scatter @ S).reshape(N_ne, D, R * H).transpose(2, 0, 1))
    fhe = xbar @ B.reshape(R * H, D, K)
    fh = np.zeros((N, R, H, K))
    fh[tb.nonempty] = fhe.transpose(1, 0, 2).reshape(N_ne, R, H, K)
    f = fh.sum(axis=2)
    lv, dl = engine.loss_terms(loss, f.reshape(N * R, K), np.repeat(tb.y, R, axis=0))
    r = tb.weights @ np.asarray(lv).reshape(N, R)
    g = np.asarray(dl).reshape(N, R, K) * tb.weights[:, None, None]
    g_ne = np.broadcast_to(g[tb.nonempty].transpose(1, 0, 2)[:, None], (R, H, N_ne, K)).reshape(R * H, N_ne, K)
    gB = xbar.transpose(0, 2, 1) @ g_ne
    U = g_ne @ B.reshape(R * H, D, K).transpose(0, 2, 1)
    fhn = fh[tb.nonempty].reshape(N_ne, R * H, K)
    fg = np.empty((N_ne, R * H))
    for c in range(R * H):
        fg[:, c] = np.einsum("nk,nk->n", fhn[:, c], g_ne[c])
    if sparse.issparse(tb.rows):
        vg = np.asarray(gather @ U.reshape(R * H, N_ne * D).T)
        vg -= np.repeat(fg, reps, axis=0)
        ga = np.asarray(rows_t @ (vg * S))
    else:
        ga = np.empty((D, R * H))
        for c in range(R * H):
            ds = S[:, c] * (np.einsum("md,md->m", tb.rows, U[c][tb.seg]) - fg[tb.seg, c])
            ga[:, c] = tb.rows.T @ ds
    return r, ga.T.reshape(R, H, D), gB.reshape(R, H, D, K), f


@pytest.mark.parametrize("task,heads,d", [("ICL", 1, 7), ("ICL", 1, 30), ("ICL", 1, 60), ("AND", 2, 30), ("SLR", 1, 12),
                                          ("SLR", 2, 12)])
@pytest.mark.parametrize("R", [1, 3])
def test_rows_engine_is_bit_identical_to_its_reference_order(task, heads, d, R):
    """The rows layout's fast path (direct CSR kernels, skipped identity gathers, one-head sum, multiplicity-1
    rows not multiplied) gives the reference order's risks, gradients and outputs bit for bit (==), so trained
    numbers (Table 1, the sweep) do not move with it."""
    rng = np.random.default_rng(d + R)
    tb = engine.from_batch(tasks_module.sample(task, d, 64, np.random.default_rng(d)))
    assert tb.layout == "rows" and (not sparse.issparse(tb.rows) or (tb.mult != 1).any())  # repeated tokens
    _check_rows_bit_identity(tb, task, heads, d, R, rng)


@pytest.mark.parametrize("task,heads,d", [("ICL", 1, 30), ("AND", 2, 30), ("SLR", 1, 12)])
def test_rows_engine_is_bit_identical_with_empty_strings(task, heads, d):
    """The same with strings 3 and 10 emptied (their tokens removed): the engine's path for batches whose
    strings are not all non-empty (the scatter of outputs to the non-empty strings and the gathers back)."""
    batch = tasks_module.sample(task, d, 64, np.random.default_rng(d))
    m = batch.m.tolil() if sparse.issparse(batch.m) else np.array(batch.m, float)
    m[3], m[10] = 0, 0
    batch.m = m.tocsr() if sparse.issparse(batch.m) else m
    tb = engine.from_batch(batch)
    assert tb.layout == "rows" and len(tb.starts) == tb.size - 2
    for R in (1, 3):
        _check_rows_bit_identity(tb, task, heads, d, R, np.random.default_rng(d + R))


def _check_rows_bit_identity(tb, task, heads, d, R, rng):
    H, D, K = tasks_module.model_shape(task, d, heads)
    alpha, B = 0.5 * rng.standard_normal((R, H, D)), 0.5 * rng.standard_normal((R, H, D, K))
    got = engine.risk_and_grad(alpha, B, tb, "squared")
    want = _reference_rows_step(alpha, B, tb, "squared")
    for x, y in zip(got, want):
        assert x.shape == y.shape and x.tobytes() == y.tobytes()


FD_STEP = 1e-6
FD_ROUNDING = 100
FD_REL = 1e-6
"""Finite-difference checks of the engine's gradient (``_check_gradient_by_finite_differences``).  The central
difference (r(p + h v) - r(p - h v)) / 2h of a risk along v differs from the directional derivative <grad r, v>
by (i) truncation, h^2 / 6 |d^3 r / dt^3|, about 1e-12 relative at h = ``FD_STEP`` = 1e-6, and (ii) rounding:
each risk is a weighted sum of non-negative losses, computed to c ulps of r for a small c, so the difference
carries an absolute error of about c eps r / h (eps = 2.2e-16: 2.2e-10 r for c = 1).  Measured on every case
below (40 seeds, R = 3, each kind of direction): c <= 20; relative to <grad r, v> the error is 1e-8 typically
and reaches 1 only where <grad r, v> is 1e-17 (OR at d = 4: every string has length 1, the risk does not
depend on alpha).  The tolerance: ``FD_ROUNDING`` = 100 (5x the worst c seen) times eps r / h, i.e. 2.2e-8 r,
plus ``FD_REL`` = 1e-6 of |<grad r, v>| for truncation and the gradient's own rounding.  Every term of the
gradient scaled by 1.001 (or a sign flipped), in each layout and kernel, fails the tests."""


def _check_gradient_by_finite_differences(alpha, B, tb, loss, rng):
    """Central differences of ``E.risk`` match ``E.risk_and_grad``'s gradient for every run, along a random
    direction in alpha alone, one in B alone and one in both (so that an error in the smaller of the two
    gradients is not hidden by the other); the risks of the two agree too."""
    R = alpha.shape[0]
    r, ga, gB, _ = engine.risk_and_grad(alpha, B, tb, loss)
    assert r.shape == (R,) and ga.shape == alpha.shape and gB.shape == B.shape
    assert np.abs(r - engine.risk(alpha, B, tb, loss)).max() <= 1e-12 * np.abs(r).max()
    assert np.all(np.abs(gB).max(axis=(1, 2, 3)) > 0)  # every run has a gradient to check
    eps, h = np.finfo(float).eps, FD_STEP
    for which in ("alpha", "B", "both"):
        da = rng.standard_normal(alpha.shape) * (which != "B")
        dB = rng.standard_normal(B.shape) * (which != "alpha")
        rp, rm = engine.risk(alpha + h * da, B + h * dB, tb, loss), engine.risk(alpha - h * da, B - h * dB, tb, loss)
        fd = (rp - rm) / (2 * h)
        dd = np.einsum("rhd,rhd->r", ga, da) + np.einsum("rhdk,rhdk->r", gB, dB)
        tol = FD_REL * np.abs(dd) + FD_ROUNDING * eps * np.maximum(np.abs(rp), np.abs(rm)) / h
        bad = np.flatnonzero(np.abs(fd - dd) > tol)
        assert not bad.size, (f"{loss}, direction in {which}: runs {bad} of {R}: finite differences {fd[bad]}, "
                              f"gradient {dd[bad]}, tolerance {tol[bad]}")


def _losses_for(task, K, labels):
    return (["squared"] + (["cross_entropy"] if task == "ICL" else [])
            + (["logistic"] if K == 1 and labels is not None else []))


@pytest.mark.parametrize("task,heads", CASES)
@given(seed=st.integers(0, 2 ** 31 - 1), d=st.integers(3, 8))
@settings(examples(25), deadline=None)
def test_engine_gradient_by_finite_differences(task, heads, seed, d):
    """Central differences of the engine's risk along random directions match its gradient
    (``_check_gradient_by_finite_differences``) for R = 3 runs at once, every run checked, on sampled batches,
    under every loss the task takes and on both kernels where the compiled one applies (one-hot token rows).
    Layouts: occurrence, OR and AND at d <= 16 are dense bags of d types (the numpy bag path, T > 2, K = 1);
    they are also checked at d + 16, where they become one-hot token rows (numpy and compiled; two-head AND
    there takes the compiled squared loss in one pass); ICL is one-hot rows (both kernels), and at d = 3 with
    dense counts a bag of 12 types with K = 3 outputs (the bag's K > 1 branch, which no task reaches
    otherwise); SLR is dense rows (numpy only), even pairs a bag of 8 types."""
    d = max(d, tasks_module.MIN_D[task])
    rng = np.random.default_rng(seed)
    wide = task in tasks_module.POPULATION_TASKS
    variants = [(d, False)] + [(d + engine.DENSE_BAG_MAX_TYPES, False)] * wide + [(3, True)] * (task == "ICL")
    for dim, dense in variants:
        batch = tasks_module.sample(task, dim, 20, np.random.default_rng(seed + 1), seed=seed % 7)
        batch = batch.dense() if dense else batch
        bag = dense or task == "even_pairs" or (wide and dim <= engine.DENSE_BAG_MAX_TYPES)
        onehot_rows = not bag and task != "SLR"
        H, D, K = tasks_module.model_shape(task, dim, heads)
        R = 3
        alpha, B = 0.5 * rng.standard_normal((R, H, D)), 0.5 * rng.standard_normal((R, H, D, K))
        for kernel in engine.KERNELS:
            tb = engine.from_batch(batch, kernel)
            assert tb.layout == ("bag" if bag else "rows")
            assert (engine._onehot(tb) is not None) == (kernel == "compiled" and onehot_rows)
            if kernel == "compiled" and not onehot_rows:
                continue  # the compiled kernel does not apply: the numpy path again
            for loss in _losses_for(task, K, batch.labels):
                _check_gradient_by_finite_differences(alpha, B, tb, loss, rng)


POPULATION_FD_CASES = [("occurrence", False, 1), ("OR", False, 1), ("OR", True, 1), ("AND", True, 1),
                       ("AND", False, 1), ("AND", False, 2)]


@pytest.mark.parametrize("task,merged,heads", POPULATION_FD_CASES)
@given(seed=st.integers(0, 2 ** 31 - 1), d=st.integers(4, 8))
@settings(examples(25), deadline=None)
def test_population_gradient_by_finite_differences(task, merged, heads, seed, d):
    """The same on the exact populations (bag layout over the class table, weighted classes): occurrence and
    merged OR and AND (2 types, one output: the forward pass is ``kernels.bag_forward``), unmerged OR and AND
    (3 types: the numpy bag path; AND with one and two heads), R = 3 runs at random parameters, not
    a/b-symmetric ones (the merged population's risk is a function of them all the same), squared and
    logistic losses.  Loose truncation (1e-2) keeps them small: 3 to 3,300 classes at d = 4..8."""
    batch = population(task, d, 1e-2, 1e-2, merged=merged)
    tb = engine.from_batch(batch)
    T = 2 if (merged or task == "occurrence") else 3
    assert tb.layout == "bag" and tb.counts.shape == (batch.extra["classes"], T)
    assert engine._bag_compiled(T, 1) == (T == 2 and kernels.usable())
    rng = np.random.default_rng(seed)
    R = 3
    alpha, B = 0.5 * rng.standard_normal((R, heads, d)), 0.5 * rng.standard_normal((R, heads, d, 1))
    for loss in ("squared", "logistic"):
        _check_gradient_by_finite_differences(alpha, B, tb, loss, rng)


@pytest.mark.parametrize("task", ["OR", "AND"])
@pytest.mark.parametrize("d", [5, 7])
def test_merged_population_is_exact_at_symmetric_parameters(task, d):
    """The a/b-symmetric reduction (classes (c_a + c_b, rest), AND's label split by 1 - 2^(1-c)) gives the
    same risk and gradient as the full (c_a, c_b, rest) classes wherever the parameters are equal on a and
    b; control: at parameters that differ on a and b it does not."""
    full, merged = (engine.from_batch(population(task, d, 1e-300, 1e-15, merged=m)) for m in (False, True))
    rng = np.random.default_rng(d)
    a = rng.standard_normal((2, 1, 2))
    b = rng.standard_normal((2, 1, 2, 1))
    alpha = np.concatenate([a[:, :, :1], a[:, :, :1], np.repeat(a[:, :, 1:], d - 2, 2)], axis=2)
    B = np.concatenate([b[:, :, :1], b[:, :, :1], np.repeat(b[:, :, 1:], d - 2, 2)], axis=2)
    r1, ga1, gB1, _ = engine.risk_and_grad(alpha, B, full)
    r2, ga2, gB2, _ = engine.risk_and_grad(alpha, B, merged)
    assert np.abs(r1 - r2).max() <= 1e-11 * np.abs(r1).max()
    assert np.abs(ga1 - ga2).max() <= 1e-11 * np.abs(ga1).max()
    assert np.abs(gB1 - gB2).max() <= 1e-11 * np.abs(gB1).max()
    B[:, :, 0] += 0.5  # break the a/b symmetry: the reduction no longer applies
    assert np.abs(engine.risk(alpha, B, full) - engine.risk(alpha, B, merged)).max() > 1e-3


# ------------------------------------------------------------------------------------------------ protocol


def test_grid_extends_to_a_minimiser_outside_the_first_grid():
    """Score (offset - 3)^2 on one axis: the first grid {-1, 0, 1} has its best at the top edge; the search
    extends until it brackets 3.  Control: with one extension allowed it stops at 2 and reports the edge."""
    def run(max_ext, f, axes=1):
        g = GridSearch(axes, 3, max_ext)
        while not g.done:
            g.record({p: f(p) for p in g.pending})
        return g

    g = run(6, lambda p: (p[0] - 3.0) ** 2)
    assert g.best() == (3,) and g.edges() == [] and (4,) in g.tried
    g = run(1, lambda p: (p[0] - 3.0) ** 2)
    assert g.best() == (2,) and g.edges() == [(0, 1)]
    # a diverged neighbour bounds the edge: the best point is then not an artefact of the grid
    g = run(6, lambda p: None if p[0] >= 2 else -p[0])
    assert g.best() == (1,) and g.edges() == [] and g.tried[(2,)] is None
    # every point of the first grid fails (steps too large): smaller steps are tried on every axis
    g = run(6, lambda p: None if sum(p) > -3 else 1.0 + sum(p) ** 2, axes=2)
    assert g.best() is not None and sum(g.best()) <= -3
    g = run(0, lambda p: None)
    assert g.best() is None and g.done
    # two axes: the minimiser at (-2, 3) is reached face by face
    g = run(6, lambda p: (p[0] + 2.0) ** 2 + (p[1] - 3.0) ** 2, axes=2)
    assert g.best() == (-2, 3) and g.edges() == []
    # every point ties: insensitive, offset 0, no edge
    g = run(6, lambda p: 0.5)
    assert g.insensitive() and g.best() == (0,) and g.edges() == [] and len(g.tried) == 3
    # flat at the edge (inner neighbour within the flat tolerance): no extension, no edge
    g = GridSearch(1, 3, 6, flat=1e-3)
    g.record({(-1,): 1.0, (0,): 0.5, (1,): 0.5 - 1e-4})
    assert g.done and g.edges() == []


def test_plateau_rule_on_synthetic_curves():
    """A curve decaying like e^(-t/5) plateaus once its decrease over a window falls below tol; a steady
    linear decrease above tol never does; a flat noisy curve does; a curve that is still falling steeply
    at the end does not."""
    tol, patience = 1e-3, 10
    decay = [0.5 * np.exp(-k / 5) for k in range(200)]
    stop = next(k for k in range(len(decay)) if bank.plateau(decay[:k + 1], patience, tol))
    # the mean of the older part minus the newer half is about 7.5 steps of decay: e^(-k/5) * 0.5 * (e^1.5 - 1)
    assert 0.5 * np.exp(-stop / 5) * (np.exp(1.5) - 1) < tol / 2 * np.exp(1.0)
    assert not bank.plateau(decay[:stop], patience, tol)
    linear = [1.0 - 2 * tol * k / patience for k in range(200)]
    assert not any(bank.plateau(linear[:k + 1], patience, tol) for k in range(200))
    # the halves: a drop of tol just after the oldest value of the window moves the older part's mean by
    # tol / 6 only (plateau); the same drop in the middle of the window separates the halves by tol (not)
    assert bank.plateau([1.0] + [1.0 - tol] * patience, patience, tol)
    assert not bank.plateau([1.0] * 6 + [1.0 - tol] * 5, patience, tol)
    assert bank.plateau([1.0] * patience + [1.0 - tol], patience, tol)  # one new low value is not a trend
    noise = list(0.3 + 1e-5 * np.random.default_rng(0).standard_normal(50))
    assert bank.plateau(noise, patience, tol)
    assert not bank.plateau(noise[:patience], patience, tol)  # too few evaluations yet


def test_sampled_data_builds_its_test_set_on_first_use_and_the_same_one():
    """make_data builds a sampled task's test set only when it is read (the step-size search never reads it), and
    then the one drawn from its own generator [seed, task, 2, 0]: the same strings as drawing it directly, and
    SLR's recorded k*, v* are that batch's own."""
    cfg = runner.Config.quick(tasks=("ICL", "SLR"))
    for task in ("ICL", "SLR"):
        data = runner.make_data(runner.Row.of(cfg, task), 3)
        assert data._test is None
        direct = tasks_module.sample(task, cfg.d, cfg.test_size, np.random.default_rng([3, tasks_module.TASKS.index(task), 2, 0]), seed=3)
        want = engine.from_batch(direct)
        got = data.test
        assert data.test is got and got.size == cfg.test_size
        for name in ("y", "mult", "starts", "seg"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), (task, name)
        if task == "SLR":
            assert np.array_equal(data.info["k"], direct.extra["k"]) and np.array_equal(data.info["v"], direct.extra["v"])


def test_bank_runs_its_programs_and_stops_by_the_rule():
    """One bank, four plans on the exact occurrence population: every run ends converged (plateau) or at the
    cap; attention-only from zero never moves (its attention gradient is 0 at B = 0); three-phase's
    phases end at k1 and after k2 steps."""
    cfg = runner.Config.quick(tasks=("occurrence",))
    r = cfg.reading.with_(k2=3)
    data = runner.make_data(runner.Row.of(cfg, "occurrence"), 0)
    progs = [bank.Program("three_phase", 2.0, 256.0), bank.Program("joint", 2.0, 2.0), bank.Program("output_only", 2.0, 0.0),
             bank.Program("attention_only", 0.0, 64.0)]
    a0, b0 = runner.initial_params(runner.Row.of(cfg, "occurrence"), 0)
    recs = bank.train_bank(np.repeat(a0[None], 4, 0), np.repeat(b0[None], 4, 0), progs, data.train, data.val,
                         "squared", r, record=True)
    assert all(rec.converged or rec.capped for rec in recs)
    assert recs[0].phase_ends == [1, 4]
    assert recs[3].alpha_dist[-1] == 0.0 and recs[3].val_risk[-1] == recs[3].val_risk[0]
    assert recs[0].final_val < 1e-3 < recs[2].final_val
    # the recorded snapshot of the last step is the final parameters
    last = recs[1].snapshots[recs[1].steps]
    assert np.array_equal(last[1], recs[1].final_B)


def test_functional_lag_on_trajectories_with_a_known_answer():
    """Synthetic trajectories on the exact occurrence population: the output block is set first (steps 1-10)
    and the attention block later (steps 30-40), so attention lags output under every measure; reversing
    the order reverses the answer; with attention frozen the attention gain is 0 and has no t_half."""
    d = 8
    cfg = runner.Config.quick(tasks=("occurrence",), d=d)
    test = runner.make_data(runner.Row.of(cfg, "occurrence"), 0).test
    a_final = np.zeros((1, d))
    a_final[0, 0] = 4.0
    b_final = -np.ones((1, d, 1))
    b_final[0, 0, 0] = 1.0
    steps = list(range(61))

    def traj(t_out, t_att):
        snaps = {}
        for s in steps:
            fa = np.clip((s - t_att[0]) / (t_att[1] - t_att[0]), 0, 1)
            fb = np.clip((s - t_out[0]) / (t_out[1] - t_out[0]), 0, 1)
            snaps[s] = (fa * a_final, fb * b_final)
        return snaps

    def run(snaps):
        func = lag.functional_curves(snaps, steps, test, "squared")
        align = lag.alignment_curves("occurrence", d, snaps, steps)
        ad = [float(np.linalg.norm(snaps[s][0])) for s in steps]
        bd = [float(np.linalg.norm(snaps[s][1])) for s in steps]
        return lag.measures(steps, ad, bd, func, align)

    late = run(traj((0, 10), (30, 40)))
    early = run(traj((30, 40), (0, 10)))
    for m in ("displacement", "function", "alignment"):
        assert late[m]["t_half_att"] > late[m]["t_half_out"], m
        assert early[m]["t_half_att"] < early[m]["t_half_out"], m
    frozen = traj((0, 10), (1000, 2000))
    f = lag.functional_curves(frozen, steps, test, "squared")
    assert max(abs(x) for x in f["gain_att"]) == 0.0
    assert lag.t_half(steps, f["gain_att"]) is None


@pytest.mark.parametrize("task,heads,d", [("ICL", 2, 9), ("AND", 2, 20), ("ICL", 1, 7), ("table", 2, 12)])
def test_sparse_token_rows_agree_with_the_dense_model(task, heads, d):
    """The sparse token-row path (mean embedding by scatter-add, score gradient by gather; AND at d = 20 has
    more than DENSE_BAG_MAX_TYPES symbols, so it takes this path too; "table": a sparse table of 40 types
    with random non-unit entries, its last token row all zero) against numerics.model.Model to 1e-12, for several runs and heads."""
    if task == "table":
        rng = np.random.default_rng(0)
        X = rng.standard_normal((40, d)) * (rng.random((40, d)) < 0.15)
        m = rng.integers(0, 3, (25, 40)) * (rng.random((25, 40)) < 0.3)
        X[-1], m[-1, -1] = 0.0, 2          # a zero embedding as the very last token row
        sampled = tasks_module.Batch(X, m.astype(float), rng.standard_normal((25, 1)))
        shape = (heads, d, 1)
    else:
        sampled = tasks_module.sample(task, d, 25, np.random.default_rng(d))
        shape = tasks_module.model_shape(task, d, heads)
    tb = engine.from_batch(sampled)
    assert tb.layout == "rows" and engine.sp.issparse(tb.rows)
    batch = sampled.dense()
    model = Model(*shape)
    rng = np.random.default_rng(heads)
    alpha, B = rng.standard_normal((3, heads, model.D)), rng.standard_normal((3, heads, model.D, model.K))
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb)
    for i in range(3):
        rr, g, ff = model.risk_and_grad(Params(alpha[i], B[i]), batch.X, batch.y, batch.m)
        assert abs(r[i] - rr) <= 1e-12 * abs(rr)
        assert np.abs(ga[i] - g.alpha).max() <= 1e-12 * np.abs(g.alpha).max()
        assert np.abs(gB[i] - g.B).max() <= 1e-12 * np.abs(g.B).max()
        assert np.abs(f[:, i] - ff).max() <= 1e-12 * max(np.abs(ff).max(), 1.0)


@pytest.mark.parametrize("task,merged", [("occurrence", False), ("AND", False), ("OR", True)])
def test_bag_layout_at_large_scores_and_empty_strings(task, merged):
    """The bag layout (softmax shift and exponentials per presence pattern of the few types) against the
    dense model at scores far beyond exp's range (differences of hundreds), for 3 runs of 2 heads; a string
    with no tokens has f = 0 and contributes finite gradients."""
    d = 7
    pop = population(task, d, 1e-6, 1e-6, merged=merged)
    m = np.vstack([pop.m[:40], np.zeros((1, pop.m.shape[1]))])
    batch = tasks_module.Batch(pop.X, m, np.vstack([pop.y[:40], [[1.0]]]), weights=np.full(41, 1 / 41))
    tb = engine.from_batch(batch)
    assert tb.layout == "bag"
    rng = np.random.default_rng(3)
    alpha = 300.0 * rng.standard_normal((3, 2, d))
    B = rng.standard_normal((3, 2, d, 1))
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb)
    assert np.all(f[-1] == 0) and np.isfinite(ga).all() and np.isfinite(gB).all()
    model = Model(2, d, 1)
    for i in range(3):
        rr, g, ff = model.risk_and_grad(Params(alpha[i], B[i]), batch.X[:, :], batch.y[:40], batch.m[:40],
                                        weights=batch.weights[:40])
        empty = 0.5 * (0.0 - 1.0) ** 2 / 41       # the empty string: f = 0, target 1, no gradient
        assert abs(r[i] - (rr + empty)) <= 1e-12 * abs(rr)
        assert np.abs(gB[i] - g.B).max() <= 1e-12 * np.abs(g.B).max()
        # saturated attention: the alpha gradient is tiny (1e-60) and the engine's is a difference of terms
        # of the size of the B gradient, so it is compared at that scale
        assert np.abs(ga[i] - g.alpha).max() <= 1e-12 * np.abs(g.B).max()
        assert np.abs(f[:40, i] - ff).max() <= 1e-12 * max(np.abs(ff).max(), 1.0)


@pytest.mark.parametrize("layout", ["bag", "rows"])
def test_chunks_of_runs_do_not_change_the_result(monkeypatch, layout):
    """Runs split into chunks (CHUNK_ELEMENTS) give the same risks and gradients as one chunk of all runs,
    in both layouts (rows: ICL, whose runs and heads share one sparse product per chunk)."""
    if layout == "bag":
        tb, D, K = engine.from_batch(population("occurrence", 9, 1e-8, 1e-8)), 9, 1
    else:
        tb, D, K = engine.from_batch(tasks_module.sample("ICL", 9, 30, np.random.default_rng(4))), 18, 9
    assert tb.layout == layout
    rng = np.random.default_rng(0)
    alpha, B = rng.standard_normal((7, 2, D)), rng.standard_normal((7, 2, D, K))
    monkeypatch.setattr(engine, "CHUNK_ELEMENTS", 10 ** 9)
    assert engine._chunk(tb, 2, K) >= 7
    whole = engine.risk_and_grad(alpha, B, tb)
    monkeypatch.setattr(engine, "CHUNK_ELEMENTS", 1)
    assert engine._chunk(tb, 2, K) == 1
    split = engine.risk_and_grad(alpha, B, tb)
    for x, y in zip(whole, split):
        assert x.shape == y.shape and np.abs(x - y).max() <= 1e-14 * np.abs(y).max()


def _whole_moment(tb):
    """The moment as ``runner.output_curvature`` computed it before the blocks: the mean tokens of every
    string at once (the forward pass at alpha = 0 with B = I) and one product, on one BLAS thread as in
    table1's rows (``runner.run_row``)."""
    D = tb.table.shape[1]
    with threadpool_limits(limits=1):
        xbar = engine.forward(np.zeros((1, 1, D)), np.eye(D)[None, None], tb).f[:, 0, :]
        return (xbar * tb.weights[:, None]).T @ xbar


@pytest.mark.parametrize("task,d", [("occurrence", 49), ("OR", 40), ("AND", 53), ("ICL", 20), ("SLR", 45)])
def test_uniform_mean_token_moment_in_blocks_is_bit_identical(task, d, monkeypatch):
    """The moment in blocks of columns equals the whole product bit for bit (==, not a tolerance), on exact
    populations (bag) and sampled rows, with D a multiple of the block or not, and so does lambda_B;
    controls: one class weight changed moves it, an unaligned block is refused."""
    tb = engine.from_batch(population(task, d, 1e-10, 1e-10, merged=task != "occurrence") if task in tasks_module.POPULATION_TASKS
                      else tasks_module.sample(task, d, 300, np.random.default_rng(3), seed=1))
    D = tb.table.shape[1]
    ref = _whole_moment(tb)
    assert np.array_equal(engine.uniform_mean_token_moment(tb), np.tril(ref))
    for block in (16, 32):
        assert block < D
        assert np.array_equal(engine.uniform_mean_token_moment(tb, block), np.tril(ref)), block
    monkeypatch.setattr(engine, "MOMENT_ELEMENTS", tb.size * 16)  # the default then takes blocks of 16
    assert np.array_equal(engine.uniform_mean_token_moment(tb), np.tril(ref))
    lam = float(np.linalg.eigvalsh(ref)[-1])
    assert runner.output_curvature(tb, "squared") == lam
    assert runner.output_curvature(tb, "cross_entropy") == lam / tb.y.shape[1]
    with pytest.raises(SettingError, match="multiple of 16"):
        engine.uniform_mean_token_moment(tb, 12)
    tb.weights = tb.weights.copy()
    tb.weights[np.argmax(tb.weights)] *= 1.5
    assert np.abs(engine.uniform_mean_token_moment(tb, 16) - np.tril(ref)).max() > 1e-6 * np.abs(ref).max()


def test_bag_patterns_are_kept_per_count_matrix():
    """The presence patterns kept on a bag batch are those of its current count matrix: replacing the
    matrix gives the risk of a batch built with the new one (and not the old patterns' risk)."""
    from dataclasses import replace

    tb = engine.from_batch(population("OR", 9, 1e-8, 1e-8, merged=True))
    assert tb.layout == "bag"
    rng = np.random.default_rng(2)
    a, B = rng.standard_normal((2, 1, 9)), rng.standard_normal((2, 1, 9, 1))
    before = engine.risk(a, B, tb)
    counts = tb.counts.copy()
    counts[counts[:, 0] == 0, 0] = 1.0  # strings without the first type gain one
    fresh = replace(tb, counts=counts)
    fresh.__dict__.pop("_pat", None)
    tb.counts = counts
    after = engine.risk(a, B, tb)
    assert np.array_equal(after, engine.risk(a, B, fresh)) and not np.array_equal(after, before)


def test_dense_rows_scatter_is_the_converted_and_transposed_csr():
    """The scatter of dense token rows (SLR), built from their layout, is the CSR matrix of the general
    construction (rows converted to CSR, which drops zeros; columns shifted to each string's block;
    transposed): the same indptr, indices and data bytes, so the same products bit for bit; with zeros, a
    zero row, strings of one row, and no rows."""
    import scipy.sparse as sparse

    def reference(rows, starts):
        X = sparse.csr_matrix(rows)
        M, D = rows.shape
        seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, M)))
        row_of = np.repeat(np.arange(M), np.diff(X.indptr))
        gather = sparse.csr_matrix((X.data, X.indices + seg[row_of] * D, X.indptr), shape=(M, len(starts) * D))
        return gather.T.tocsr()

    rng = np.random.default_rng(3)
    cases = []
    for d, seed in ((2, 0), (7, 1), (50, 2)):
        tb = engine.from_batch(tasks_module.sample("SLR", d, 40, np.random.default_rng(seed), seed=seed))
        cases.append((tb.rows.copy(), tb.starts))
    rows, starts = cases[1]
    rows[3] = 0.0
    rows[5, ::2] = 0.0
    rows[rng.random(rows.shape) < 0.1] = 0.0
    cases += [(rng.standard_normal((6, 4)), np.arange(6)), (np.zeros((0, 3)), np.zeros(0, np.int64))]
    for rows, starts in cases:
        got, want = engine._dense_scatter(rows, starts), reference(rows, starts)
        assert got.shape == want.shape
        for a, b in ((got.indptr, want.indptr), (got.indices, want.indices)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert got.data.tobytes() == want.data.tobytes()


def test_segments_equal_numpy_unique_on_sorted_string_indices():
    """from_batch's run reading of the token rows' strings equals np.unique with its first index and inverse (same
    values and dtypes), on non-decreasing indices with repeats and gaps (empty strings), one row, and none."""
    from numerics.experiments.layout import _segments
    rng = np.random.default_rng(14)
    cases = [np.sort(rng.integers(0, k, n)) for k, n in ((1, 1), (3, 10), (50, 400), (64, 37000))]
    cases.append(np.zeros(0, dtype=np.int64))
    for n_idx in cases:
        for got, want in zip(_segments(n_idx), np.unique(n_idx, return_index=True, return_inverse=True)):
            assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.slow  # a subprocess
def test_temporaries_on_the_heap_stop_the_page_faults_of_population_steps():
    """A step of 8 runs on OR's exact population at d = 50 (22,513 classes, temporaries of 1-3 MB): in a fresh
    process glibc maps and unmaps those temporaries at every step (thousands of page faults a step); after
    ``keep_temporaries_on_heap`` the steps fault no page.  Each case in a process of its own (the allocator's state is per process)."""
    import subprocess
    import sys

    script = """
import resource, sys, numpy as np
from numerics.experiments import engine as E
from numerics.experiments.population import population
if sys.argv[1] == "on" and not E.keep_temporaries_on_heap():
    print("no-glibc"); sys.exit()
tb = E.from_batch(population("OR", 50, 1e-13, 1e-13, merged=True))
rng = np.random.default_rng(0)
a, B = 0.3 * rng.standard_normal((8, 1, 50)), 0.3 * rng.standard_normal((8, 1, 50, 1))
for _ in range(3):
    E.risk_and_grad(a, B, tb, with_f=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    E.risk_and_grad(a, B, tb, with_f=False)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
    faults = {}
    for case in ("off", "on"):
        out = subprocess.run([sys.executable, "-c", script, case], capture_output=True, text=True, check=True)
        faults[case] = out.stdout.strip()
    if faults["on"] == "no-glibc":
        pytest.skip("no glibc: nothing to set")
    if int(faults["off"]) < 10_000:
        pytest.skip(f"this allocator does not fault on these steps by itself ({faults['off']} faults)")
    assert int(faults["on"]) < 100, faults


def test_a_runs_cpu_time_counts_each_row_once(monkeypatch):
    """The results' cpu_s is the rows' CPU plus the driver's own: rows trained in the driver's process (one job)
    are not counted a second time through its process time; rows resumed from an interrupted run
    count with their recorded time."""
    import time as _time

    def burn(name):
        t0 = _time.process_time()
        while _time.process_time() - t0 < 0.3:
            pass
        return {"name": name, "cpu_s": _time.process_time() - t0}

    monkeypatch.setattr(runner, "run_row", lambda row: burn(row.name))
    cfg = runner.Config.quick(tasks=("occurrence", "OR"), jobs=1)
    done = {"OR": {"name": "OR", "cpu_s": 5.0}}
    # the driver's own work (here its callback, burning CPU at each row) counts once too
    res = runner.run(cfg, quiet=True, done=done, on_row=lambda partial: burn("") and None)
    rows = sum(r["cpu_s"] for r in res["rows"].values())
    assert rows >= 5.3 and res["rows"]["OR"]["cpu_s"] == 5.0
    assert rows + 0.3 <= res["cpu_s"] <= rows + 0.5


def test_weighted_sum_is_one_product_up_to_a_block_and_exactly_added_blocks_above():
    """``engine.weighted_sum`` (the reported risks): up to SUM_BLOCK strings the one BLAS product, bit for bit
    (every sampled set is summed as before); above, each run's block sums added exactly (math.fsum; a plain
    sum of the blocks differs in the last bits on some of 40 columns), the same bits whichever runs a column
    is summed with, and within SUM_BLOCK + 1 units in the last place of the exact weighted sum."""
    from fractions import Fraction

    from numerics.experiments import engine
    rng = np.random.default_rng(7)
    for n in (1, engine.SUM_BLOCK):
        w, v = rng.random(n), rng.random((n, 3))
        assert engine.weighted_sum(w, v).tobytes() == (w @ v).tobytes()
        assert engine.weighted_sum(w, v[:, 0]) == w @ v[:, 0]
    n = 5 * engine.SUM_BLOCK + 17
    w, v = rng.random(n) ** 8, rng.random((n, 40)) * 10.0 ** rng.integers(-8, 8, (n, 40))
    got = engine.weighted_sum(w, v)
    blocks = np.array([np.add.reduce(np.ascontiguousarray(v[i:i + engine.SUM_BLOCK].T) * w[i:i + engine.SUM_BLOCK], axis=1)
                       for i in range(0, n, engine.SUM_BLOCK)])
    assert got.tobytes() == np.array([math.fsum(c) for c in blocks.T]).tobytes()
    assert np.any(got != blocks.sum(axis=0))
    for j, others in ((5, [5]), (13, [2, 13, 39]), (39, [39, 0])):
        assert engine.weighted_sum(w, v[:, j]) == got[j]
        assert engine.weighted_sum(w, np.ascontiguousarray(v[:, others]))[others.index(j)] == got[j]
    u = np.finfo(float).eps / 2
    for j in (0, 13, 39):
        exact = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(w, v[:, j]))
        assert abs(Fraction(float(got[j])) - exact) <= (engine.SUM_BLOCK + 1) * u * exact


def test_gains_within_rounding_are_zero_and_others_are_kept():
    """``lag._gain``: a risk one unit in the last place from the start (the same model in another column of a
    stacked evaluation), or 3 eps of it, is no gain; 6 eps (about 12 units at 0.6) and 1e-12 (about 4,500 units)
    are kept, with their sign: the cut lies between 3 and 6 eps times the risk."""
    r0 = 0.6021946
    eps = np.finfo(float).eps
    risks = np.array([r0, np.nextafter(r0, 1), np.nextafter(r0, 0), r0 * (1 - 3 * eps), r0 * (1 - 6 * eps),
                      r0 - 1e-12, r0 + 1e-12])
    g = lag._gain(risks)
    assert g[:4].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert g[4] == pytest.approx(6 * eps * r0, rel=0.1)
    assert g[5] == pytest.approx(1e-12, rel=1e-3) and g[6] == pytest.approx(-1e-12, rel=1e-3)


def test_bag_layout_with_several_outputs_agrees_with_the_dense_model():
    """The bag layout's score gradient for K > 1 outputs (the pairwise form sum_s (V_t - V_s) . M_ts, with
    M_ts = sum_n w_tn w_sn g_n) against numerics.model.Model on a shared table of 3 types in D = 4, K = 2,
    two heads, three runs, an empty string and strings missing some types: within 1e-12 relative.  No task
    takes this path (ICL, the only K > 1 task, has too many types for a bag), so it is checked here."""
    rng = np.random.default_rng(5)
    T, D, K, H, R, N = 3, 4, 2, 2, 3, 12
    X = rng.standard_normal((T, D))
    m = rng.integers(0, 4, size=(N, T)).astype(float)
    m[0] = 0.0          # an empty string
    m[1] = [2, 0, 0]    # one type only
    m[2] = [0, 3, 1]
    y = rng.standard_normal((N, K))
    batch = tasks_module.Batch(X, m, y, weights=rng.random(N) / N)
    tb = engine.from_batch(batch)
    assert tb.layout == "bag"
    model = Model(H, D, K)
    alpha = 2 * rng.standard_normal((R, H, D))
    B = rng.standard_normal((R, H, D, K))
    r, ga, gB, _ = engine.risk_and_grad(alpha, B, tb)
    w = batch.weights
    for i in range(R):
        rr, g, _ = model.risk_and_grad(Params(alpha[i], B[i]), X, y, m, weights=w)
        assert abs(r[i] - rr) <= 1e-12 * abs(rr)
        assert np.abs(ga[i] - g.alpha).max() <= 1e-12 * np.abs(g.alpha).max()
        assert np.abs(gB[i] - g.B).max() <= 1e-12 * np.abs(g.B).max()


def test_predictions_decide_ties_by_the_stated_rule():
    """``engine.predictions``: a +-1 output within the margin counts as -1 and is tied, whatever its sign;
    outside it the sign decides.  Class outputs: the first class within the margin of the largest wins, tied
    where two are; at margin 0 the rule is the plain sign (f = 0 is -1) and the plain argmax."""
    f = np.array([1e-13, -1e-13, 0.0, 2e-9, -2e-9, 0.5])[:, None]
    pred, tied = engine.predictions(f, 1e-9)
    assert pred.tolist() == [-1, -1, -1, 1, -1, 1]
    assert tied.tolist() == [True, True, True, False, False, False]
    assert engine.predictions(f, 0.0)[0].tolist() == [1, -1, -1, 1, -1, 1]
    assert engine.predictions(f, 0.0)[1].tolist() == [False, False, True, False, False, False]
    g = np.array([[1.0, 1.0 + 1e-12, 0.0], [0.0, 1.0, 1.0 - 1e-3], [2.0, -1.0, 2.0]])
    pred, tied = engine.predictions(g, 1e-9)
    assert pred.tolist() == [0, 1, 0] and tied.tolist() == [True, False, True]
    assert engine.predictions(g, 0.0)[0].tolist() == [1, 1, 0]
    # the margin per run broadcasts against (strings, runs): run 0 at 1e-9, run 1 at 0
    pr, ti = engine.predictions(np.array([[[1e-13], [1e-13]]]), np.array([1e-9, 0.0]))
    assert pr.tolist() == [[-1, 1]] and ti.tolist() == [[True, False]]
    # the margin is TIE_RTOL times the largest |f| the readout allows: the sum over heads of max |B_h|
    B = np.zeros((2, 2, 3, 1))
    B[0, 0, 1, 0], B[0, 1, 2, 0], B[1, 0, 0, 0] = -4.0, 3.0, 0.5
    assert engine.tie_margin(B).tolist() == pytest.approx([7.0 * engine.TIE_RTOL, 0.5 * engine.TIE_RTOL], rel=1e-15)


def test_a_trained_accuracy_does_not_depend_on_the_rounding_of_its_ties():
    """OR's output-only run (d = 10, step 10, exact population) converges to a readout with
    beta_a / beta_u = -(d/2 - 1) to 2e-15 relative, so every class with r = (d/2 - 1) c sits at f = 0 up to
    rounding (|f| <= 1e-15 here; the next class is at |f| >= 1e-4).  Perturbing the marked readout by up to
    3.4e-13 relative (256 k eps, |k| <= 6; the ties seen in trained runs sit within 1e-13) moves the
    plain-sign accuracy by the tied mass (0.0395; the control), and leaves the reported accuracy
    (``risk_and_accuracy``, ties at the stated rule) and its tied mass unchanged."""
    cfg = runner.Config(tasks=("OR",), d=10)
    recs, data = runner._train(runner.Row.of(cfg, "OR"), 0, [runner._program("output_only", {"out": 10.0}, {"plan": "output_only"})])
    A, B, tb = recs[0].final_alpha[None], recs[0].final_B[None], data.test
    assert B[0, 0, 0, 0] / B[0, 0, 2, 0] == pytest.approx(-4.0, rel=1e-14)  # beta_a / beta_u = -(d/2 - 1)
    f = engine.forward(A, B, tb).f[:, 0, 0]
    near = np.abs(f) <= 1e-9 * np.abs(B).max()
    assert near.any() and np.abs(f[near]).max() <= 1e-15 and np.abs(f[~near]).min() >= 1e-4
    eps = np.finfo(float).eps
    plain, reported = set(), set()
    for k in range(-6, 7):
        Bk = B.copy()
        Bk[..., :2, :] *= 1 + 256 * k * eps  # the two marked symbols' values
        plain.add(float(engine.accuracy(engine.forward(A, Bk, tb).f, tb)[0]))
        _, acc, tied = engine.risk_and_accuracy(A, Bk, tb)
        reported.add((float(acc[0]), float(tied[0])))
    assert len(reported) == 1
    (acc, tied), = reported
    assert tied == pytest.approx(float(tb.weights @ near), rel=1e-12) and tied > 0.03
    assert max(plain) - min(plain) == pytest.approx(tied, rel=1e-9)  # the control: rounding decided them
    assert acc == pytest.approx(min(plain), abs=1e-15)  # every tie counted as -1 (their labels are +1 here)


def test_tie_margins_are_per_run_and_scale_with_the_tokens_l1_norm():
    """``risk_and_accuracy``'s tied masses: each run at its own margin (a readout scaled by 1e6 beside it does
    not widen the first run's ties), and on ICL's pair tokens (two ones, |x|_1 = 2 after the first position)
    the margin doubles, so class outputs 0.9e-9 x S apart (S = sum_t w_t |x_t|_1, between 1.5 and 2 here)
    tie on every string, where a margin for one-hot tokens would tie none."""
    cfg = runner.Config(tasks=("OR",), d=10)
    recs, data = runner._train(runner.Row.of(cfg, "OR"), 0, [runner._program("output_only", {"out": 10.0}, {"plan": "output_only"})])
    B0, A0, tb = recs[0].final_B, recs[0].final_alpha, data.test
    one = engine.risk_and_accuracy(A0[None], B0[None], tb)[2][0]
    both = engine.risk_and_accuracy(np.stack([A0, A0]), np.stack([B0, 1e6 * B0]), tb)[2]
    assert one > 0.03 and both[0] == one and both[1] == one  # scaled outputs, scaled margin: the same ties
    assert engine.tie_margin(np.stack([B0, 1e6 * B0])).tolist() == pytest.approx(
        [engine.TIE_RTOL * np.abs(B0).max(), 1e6 * engine.TIE_RTOL * np.abs(B0).max()], rel=1e-15)
    d = 6
    batch = tasks_module.sample("ICL", d, 40, np.random.default_rng(3), seed=1)
    tb = engine.from_batch(batch.dense() if hasattr(batch, "dense") else batch)
    assert engine._largest_l1(tb.table) == 2.0
    _, D, K = tasks_module.model_shape("ICL", d, 1)
    B = np.zeros((1, 1, D, K))
    B[..., 1], B[..., 2] = 1.0, 1.0 - 0.9e-9
    _, acc, tied = engine.risk_and_accuracy(np.zeros((1, 1, D)), B, tb)
    assert tied.tolist() == pytest.approx([1.0], abs=1e-15)
    assert acc.tolist() == pytest.approx([float(tb.weights @ (np.asarray(tb.labels) == 1))], abs=1e-15)
    f = engine.forward(np.zeros((1, 1, D)), B, tb).f
    assert float(tb.weights @ engine.prediction_hits(f, tb.labels, engine.tie_margin(B))[1][:, 0]) == 0.0  # one-hot margin


def test_a_plans_tied_mass_is_the_largest_of_its_seeds():
    """``assemble_row``: a plan's acc_tied is the largest tied mass of its seeds (None where none records one)."""
    found = {p: {"chosen": {"out": 1.0}} for p in runner.PLANS}
    rec = {"test_risk": 0.1, "test_acc": 0.9, "diverged": False, "unstable": False, "capped": False,
           "converged": True, "steps": 10}
    per_plan = {"output_only": [rec | {"seed": 0, "test_acc_tied": 0.1}, rec | {"seed": 1, "test_acc_tied": 0.3},
                                rec | {"seed": 2, "test_acc_tied": 0.2}]}
    row = runner.assemble_row(runner.Row.of(runner.Config(tasks=("ICL",), d=5), "ICL"), found, per_plan, {}, {})
    assert row["plans"]["output_only"]["acc_tied"] == 0.3 and row["plans"]["joint"]["acc_tied"] is None


def test_a_configuration_is_frozen_and_changed_by_replace():
    """A run's configuration cannot be changed in place (a row holds the run's own); ``dataclasses.replace``
    makes the changed one and leaves the first as it was."""
    import dataclasses

    cfg = runner.Config.quick(tasks=("occurrence",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.jobs = 1
    other = dataclasses.replace(cfg, jobs=1)
    assert other.jobs == 1 and cfg.jobs == 2 and runner.rows(cfg)[0].config is cfg


def test_rows_carry_what_their_functions_read_of_the_configuration():
    """``rows``: each row built once from the configuration, in table order, with its name, the task's loss
    (ICL's the configured one), the alphabet size, the kernel and how its data is made (exact: occurrence, OR
    and one-head AND; the integral: AND with two heads under and_heads_data="integral"; even pairs under its
    default "ends" embedding with two heads, the fewest that represent it)."""
    cfg = runner.Config(d=9, icl_loss="cross_entropy", kernel="numpy", and_heads=(2, 1), and_heads_data="integral")
    got = [(r.name, r.task, r.heads, r.loss, r.exact, r.integral) for r in runner.rows(cfg)]
    assert got == [("occurrence", "occurrence", 1, "squared", True, False), ("OR", "OR", 1, "squared", True, False),
                   ("AND (H=2)", "AND", 2, "squared", False, True), ("AND (H=1)", "AND", 1, "squared", True, False),
                   ("ICL", "ICL", 1, "cross_entropy", False, False), ("SLR", "SLR", 1, "squared", False, False),
                   ("even_pairs", "even_pairs", 2, "squared", False, False)]
    assert all(r.d == 9 and r.kernel == "numpy" and r.config is cfg for r in runner.rows(cfg))
    zero = runner.rows(runner.Config(tasks=("AND",), init_scale=0.0, and_heads_data="integral"))
    assert [(r.exact, r.integral) for r in zero] == [(True, False), (True, False)]  # a zero start keeps symmetry


def test_a_quick_run_shortens_the_named_reading():
    """``Config.build``: a quick run is ``Config.quick``'s sizes; under a named reading that reading with the
    quick budget (its cap the smaller one), under no name the quick reading; reading changes come last."""
    from numerics.experiments import protocol

    assert runner.Config.build(quick=True) == runner.Config.quick()
    adam = runner.Config.build(quick=True, reading="adam").reading
    assert adam == protocol.READINGS["adam"].with_(**protocol.QUICK_BUDGET)
    t52 = runner.Config.build(quick=True, reading="theory-52", reading_changes={"k1": 2}).reading
    assert (t52.name, t52.max_steps, t52.eval_every, t52.k1) == ("theory-52", 52, 10, 2)
    full = runner.Config.build(reading="adam")
    assert full.reading == protocol.READINGS["adam"] and full.d == runner.Config().d
