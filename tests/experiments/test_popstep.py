"""The fused population step (``numerics.experiments.popstep``), which ``engine.risk_and_grad`` takes without
outputs on a bag of two token types (the exact populations of occurrence, OR and one-head AND): it agrees with
the dense reference model to 1e-12 on random populations and parameters (the engine's stated accuracy), gives
the same bits with numba as in its numpy replay, holds the population exactly in its narrow copy, keeps the
accuracy the exact rows rely on (the certified integral, the saturated score gradient), and is taken exactly
where it applies."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from checks.strategies import examples
from numerics.experiments import engine
from numerics.experiments import kernels
from numerics.experiments import popstep
from numerics.experiments import tasks
from numerics.experiments.population import population
from numerics.model import Model, Params
from tests.experiments.test_tasks import saturated_alpha_gradient


def _random_population(rng, N: int, D: int, y_kind: str) -> tasks.Batch:
    """N classes of two token types over a (2, D) table (type 0 one-hot, type 1 a dense mean token), counts
    0..40 (some classes empty, some of one type only), weights summing to 1, targets +-1, 0/1 or real."""
    X = np.zeros((2, D))
    X[0, 0] = 1.0
    X[1, 1:] = 1.0 / (D - 1)
    counts = rng.integers(0, 41, (N, 2)).astype(float)
    counts[rng.random(N) < 0.1, 0] = 0.0
    counts[rng.random(N) < 0.1, 1] = 0.0
    counts[rng.random(N) < 0.05] = 0.0
    w = rng.random(N)
    w /= w.sum()
    y = {"pm": rng.choice([-1.0, 1.0], N), "01": rng.choice([0.0, 1.0], N), "real": rng.standard_normal(N)}[y_kind]
    return tasks.Batch(X, counts, y[:, None], weights=w, labels=None)


@given(seed=st.integers(0, 2 ** 31 - 1), N=st.integers(1, 3000), R=st.integers(1, 4), scale=st.sampled_from([0.3, 3.0]),
       y_kind=st.sampled_from(["pm", "01", "real"]))
@examples(25)
def test_fused_step_agrees_with_the_dense_model(seed, N, R, scale, y_kind):
    """Risk and gradients of R runs within 1e-12 (relative to each array's largest entry) of the dense model
    (``numerics.model``), on random populations with empty and one-type classes, across block boundaries."""
    rng = np.random.default_rng(seed)
    D = 6
    batch = _random_population(rng, N, D, y_kind)
    tb = engine.from_batch(batch)
    assert popstep.applies(tb, 1, 1, "squared")
    alpha, B = scale * rng.standard_normal((R, 1, D)), scale * rng.standard_normal((R, 1, D, 1))
    r, ga, gB, f = engine.risk_and_grad(alpha, B, tb, with_f=False)
    assert f is None
    model = Model(1, D, 1)
    for i in range(R):
        rr, g, _ = model.risk_and_grad(Params(alpha[i], B[i]), batch.X, batch.y, batch.m, weights=batch.weights)
        assert abs(r[i] - rr) <= 1e-12 * max(abs(rr), 1e-300)
        assert np.abs(ga[i] - g.alpha).max() <= 1e-12 * max(np.abs(g.alpha).max(), 1e-300)
        assert np.abs(gB[i] - g.B).max() <= 1e-12 * max(np.abs(g.B).max(), 1e-300)


@given(seed=st.integers(0, 2 ** 31 - 1), N=st.integers(1, 2500), R=st.integers(1, 3), scale=st.sampled_from([0.3, 30.0]))
@examples(15)
def test_the_compiled_pass_gives_its_numpy_replays_bits(seed, N, R, scale):
    """With numba and without it (``kernels.numpy_paths``) the step's risks and gradients are the same bits,
    saturated attention (scale 30: the smaller type's exponential underflows) included."""
    if not kernels.available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(seed)
    tb = engine.from_batch(_random_population(rng, N, 5, "pm"))
    alpha, B = scale * rng.standard_normal((R, 1, 5)), rng.standard_normal((R, 1, 5, 1))
    loops = popstep.risk_and_grad(alpha, B, tb)
    with kernels.numpy_paths():
        plain = popstep.risk_and_grad(alpha, B, tb)
    for a, b in zip(loops, plain):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_narrow_copy_holds_every_count_target_and_weight_exactly():
    """Counts in int16 when they fit, int32 above 32767, float64 when not integers; targets in int8 when they
    are small integers, float64 otherwise; weights float64; every value the same number, the padding empty and
    of weight 0; the copy is made once per count matrix."""
    rng = np.random.default_rng(3)
    base = _random_population(rng, 1500, 4, "pm")
    tb = engine.from_batch(base)
    nar = popstep.narrow(tb)
    assert nar.counts.dtype == np.int16 and nar.y.dtype == np.int8 and nar.weights.dtype == np.float64
    assert nar.bytes_per_class == 2 * 2 + 1 + 8
    N, Np = tb.size, nar.counts.shape[1]
    assert Np % popstep.BLOCK == 0 and Np - N < popstep.BLOCK
    assert np.array_equal(nar.counts[:, :N].T.astype(float), tb.counts)
    assert np.array_equal(nar.y[:N].astype(float), tb.y[:, 0]) and np.array_equal(nar.weights[:N], tb.weights)
    assert not nar.counts[:, N:].any() and not nar.weights[N:].any()
    assert popstep.narrow(tb) is nar
    big = tasks.Batch(base.X, base.m * 1000.0, base.y, weights=base.weights)
    assert popstep.narrow(engine.from_batch(big)).counts.dtype == np.int32
    half = tasks.Batch(base.X, base.m + 0.5, base.y * 0.5, weights=base.weights)
    nh = popstep.narrow(engine.from_batch(half))
    assert nh.counts.dtype == np.float64 and nh.y.dtype == np.float64
    assert np.array_equal(nh.counts[:, :N].T, base.m + 0.5) and np.array_equal(nh.y[:N], base.y[:, 0] * 0.5)


def test_a_class_of_one_type_keeps_its_whole_weight_when_the_other_type_dominates():
    """A class with tokens of the weaker type only, whose exponential underflows after the shift by the
    stronger type's score (a score gap of 800), still attends to its own tokens (weight 1, output V_1), and an
    empty class has output 0: the risk is the dense model's, not a 0 / 0."""
    X = np.eye(2)
    batch = tasks.Batch(X, np.array([[0.0, 3.0], [2.0, 1.0], [0.0, 0.0]]), np.array([[1.0], [-1.0], [1.0]]),
                        weights=np.array([0.5, 0.3, 0.2]))
    tb = engine.from_batch(batch)
    alpha, B = np.array([[[400.0, -400.0]]]), np.array([[[[0.25], [-2.0]]]])
    r, ga, gB, _ = engine.risk_and_grad(alpha, B, tb, with_f=False)
    want = 0.5 * 0.5 * (-2.0 - 1.0) ** 2 + 0.3 * 0.5 * (0.25 + 1.0) ** 2 + 0.2 * 0.5 * 1.0
    assert r[0] == pytest.approx(want, rel=1e-15)
    rr, g, _ = Model(1, 2, 1).risk_and_grad(Params(alpha[0], B[0]), X, batch.y, batch.m, weights=batch.weights)
    assert np.allclose(gB[0], g.B, rtol=1e-15, atol=0) and np.allclose(ga[0], g.alpha, rtol=1e-15, atol=1e-300)


def test_the_engine_takes_the_fused_pass_exactly_where_it_applies(monkeypatch):
    """Without outputs on a two-type bag with one head, one output and the squared loss: the fused pass; with
    outputs, with two heads, or with another loss: the layout's passes (whose outputs and bits are unchanged)."""
    rng = np.random.default_rng(5)
    batch = _random_population(rng, 200, 4, "pm")
    tb = engine.from_batch(batch)
    calls = []
    real = popstep.risk_and_grad
    monkeypatch.setattr(popstep, "risk_and_grad", lambda *a: calls.append(1) or real(*a))
    a1, B1 = rng.standard_normal((2, 1, 4)), rng.standard_normal((2, 1, 4, 1))
    fused = engine.risk_and_grad(a1, B1, tb, with_f=False)
    assert len(calls) == 1
    layered = engine.risk_and_grad(a1, B1, tb)
    engine.risk_and_grad(np.stack([a1, a1], 1)[:, :, 0], np.stack([B1, B1], 1)[:, :, 0], tb, with_f=False)
    engine.risk_and_grad(a1, B1, tb, "logistic", with_f=False)
    assert len(calls) == 1
    for x, y in zip(fused[:3], layered[:3]):
        assert np.abs(x - y).max() <= 1e-13 * np.abs(y).max()
    assert not popstep.applies(engine.from_batch(tasks.sample("ICL", 6, 8, np.random.default_rng(0))), 1, 5,
                               "squared")


@pytest.mark.parametrize("d", [50, 200])
def test_fused_step_on_occurrence_is_within_1e_12_of_the_certified_integral(d):
    """The trainer's step (no outputs: the fused pass) on the exact population occurrence trains on, against the
    integral representation's arb balls at symmetric points up to |alpha| = 20, |B| = 12: risk and every
    gradient coordinate within 1e-12 (relative to the value at |alpha| = 20), as the layout's passes are
    (tests/experiments/test_tasks.py)."""
    from numerics.experiments.runner import Config
    from numerics.theorem.integral import IntegralEvaluator
    from theory.setting import Setting

    cfg = Config()
    tb = engine.from_batch(population("occurrence", d, cfg.mass_tol, cfg.len_tol))
    ev = IntegralEvaluator(Setting(d=d), dps=20)
    H, D, K = tasks.model_shape("occurrence", d, 1)
    for aa, ab, ba, bb in [(0.0, 0.0, 0.0, 0.0), (2.3, -0.1, 1.5, -0.9), (-1.0, 0.5, -0.5, 0.7),
                           (20.0, -3.0, 12.0, -11.0)]:
        alpha = np.full((1, H, D), ab)
        alpha[..., 0] = aa
        B = np.full((1, H, D, K), bb)
        B[..., 0, :] = ba
        risk, ga, gB, _ = engine.risk_and_grad(alpha, B, tb, with_f=False)
        ref = ev.evaluate_symmetric(aa, ab, ba, bb)
        got = [risk[0], ga[0, 0, 0], ga[0, 0, 1], gB[0, 0, 0, 0], gB[0, 0, 1, 0]]
        for g, w in zip(got, [ref.risk, *ref.grad_alpha, *ref.grad_beta]):
            scale = 1.0 if aa < 20 else max(1.0, abs(float(w.mid())))
            assert abs(g - float(w.mid())) <= 1e-12 * scale, (d, (aa, ab, ba, bb), g, w)


def test_fused_score_gradient_keeps_its_relative_digits_at_saturated_attention():
    """Occurrence's alpha gradient at alpha = (20, -3), beta = (12, -11) (an entry of 5e-7 made of terms that
    the pair form keeps small): within 1e-13 relative of the same sum taken term by term and added exactly
    (math.fsum), and within 1e-14 relative of itself with the classes in another order (the compensated sum
    over blocks)."""
    g = saturated_alpha_gradient(50, with_f=False)
    assert abs(g["got"] - g["want"]) <= 1e-13 * abs(g["want"]), g
    assert abs(g["again"] - g["got"]) <= 1e-14 * abs(g["want"]), g
