"""numerics.model: gradients against finite differences over random shapes and parameters, large scores,
empty strings, multiplicities, and the contexts (mp, arb) agreeing with float."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerics.contexts import ArbContext, MPContext
from numerics.model import (
    Model,
    Params,
    attend_backward,
    attend_pair,
    attention_weights,
    loss_terms,
    pair_squared_sums,
)
from theory.validation import SettingError

shapes = st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 5), st.integers(1, 4))


def _problem(H, D, K, L, N, seed, loss, scale=1.0):
    rng = np.random.default_rng(seed)
    model = Model(H=H, D=D, K=K)
    params = Params(scale * rng.standard_normal((H, D)), rng.standard_normal((H, D, K)))
    X = rng.standard_normal((N, L, D))
    m = (rng.random((N, L)) < 0.8).astype(float)
    if loss == "cross_entropy":
        y = rng.integers(0, K, size=N)
    elif loss == "logistic":
        y = rng.choice([-1.0, 1.0], size=(N, K))
    else:
        y = rng.standard_normal((N, K))
    weights = rng.dirichlet(np.ones(N))
    return model, params, X, y, m, weights


def _unflat(model, v):
    na = model.H * model.D
    return Params(v[:na].reshape(model.H, model.D), v[na:].reshape(model.H, model.D, model.K))


def _fd_check(model, params, X, y, m, weights, loss, h=1e-6):
    risk, grad, _ = model.risk_and_grad(params, X, y, m, loss=loss, weights=weights)
    v = params.flat()
    num = np.empty_like(v)
    for i in range(len(v)):
        e = np.zeros_like(v)
        e[i] = h
        rp = model.risk_and_grad(_unflat(model, v + e), X, y, m, loss=loss, weights=weights)[0]
        rm = model.risk_and_grad(_unflat(model, v - e), X, y, m, loss=loss, weights=weights)[0]
        num[i] = (rp - rm) / (2 * h)
    scale = max(1.0, np.abs(num).max())
    assert np.abs(num - grad.flat()).max() <= 1e-6 * scale
    return risk


@settings(max_examples=25)
@given(shapes, st.integers(0, 10**6), st.sampled_from(["squared", "logistic", "cross_entropy"]))
def test_gradients_match_finite_differences(shape, seed, loss):
    H, D, K, L, N = shape
    if loss == "logistic":
        K = 1
    if loss == "cross_entropy":
        K = max(K, 2)
    _fd_check(*_problem(H, D, K, L, N, seed, loss), loss=loss)


@settings(max_examples=15)
@given(st.integers(0, 10**6), st.floats(200.0, 5000.0))
def test_large_scores_do_not_overflow(seed, scale):
    """Scores of size up to ~10^4 (e^score overflows double at 710): weights stay a softmax and the
    gradient still matches finite differences (step relative to the score scale)."""
    model, params, X, y, m, w = _problem(2, 3, 1, 4, 3, seed, "squared", scale=scale)
    risk, grad, f = model.risk_and_grad(params, X, y, m, weights=w)
    assert np.isfinite(risk) and np.all(np.isfinite(grad.flat()))
    s = np.einsum("nld,hd->nhl", X, params.alpha)
    wts = attention_weights(s, m[:, None, :])
    nonempty = m.sum(axis=1) > 0
    assert np.allclose(wts.sum(axis=-1)[nonempty], 1.0, rtol=0, atol=1e-14)
    # the top-scoring present token carries all but at most L e^{-(top - second)} of the weight
    present = np.where(m[:, None, :] > 0, s, -np.inf)
    ordered = np.sort(present, axis=-1)
    picked = np.take_along_axis(wts, present.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    slack = m.shape[1] * np.exp(ordered[..., -2] - ordered[..., -1])
    assert np.all((1 - picked <= slack + 1e-14)[nonempty])


def test_empty_string_has_zero_output_and_gradient():
    model = Model(H=1, D=2, K=1)
    params = Params(np.array([[1.0, -2.0]]), np.array([[[3.0], [1.0]]]))
    X = np.eye(2)
    m = np.array([[0, 0], [2, 1]])
    f, w = model.forward(params, X, m)
    assert f[0, 0] == 0.0 and np.all(w[0] == 0)
    risk, grad, _ = model.risk_and_grad(params, X, np.array([[-1.0], [1.0]]), m, weights=np.array([1.0, 0.0]))
    assert risk == 0.5 and np.all(grad.flat() == 0)


def test_attention_gradient_vanishes_at_zero_readout():
    """SPEC: at B = 0 the attention gradient is exactly 0, whatever alpha and the data."""
    model, params, X, y, m, w = _problem(2, 4, 3, 5, 6, 7, "squared")
    params.B[:] = 0
    _, grad, _ = model.risk_and_grad(params, X, y, m, weights=w)
    assert np.all(grad.alpha == 0)


def test_multiplicities_equal_repeated_tokens():
    """A bag of tokens with counts gives the same output as the tokens written out."""
    rng = np.random.default_rng(3)
    model = Model(H=2, D=3, K=2)
    params = Params(rng.standard_normal((2, 3)), rng.standard_normal((2, 3, 2)))
    table = rng.standard_normal((3, 3))
    counts = np.array([[2, 0, 1]])
    written = table[[0, 0, 2]][None]
    f_bag, _ = model.forward(params, table, counts)
    f_tok, _ = model.forward(params, written)
    assert np.allclose(f_bag, f_tok, rtol=0, atol=1e-15)


@pytest.mark.parametrize("loss", ["squared", "logistic", "cross_entropy"])
def test_contexts_agree_with_float(loss):
    K = 1 if loss == "logistic" else 3
    model, params, X, y, m, w = _problem(2, 3, K, 4, 5, 11, loss)
    risk, grad, _ = model.risk_and_grad(params, X, y, m, loss=loss, weights=w)
    with ArbContext(120) as ctx:
        pa = Params(ctx.asarray(params.alpha), ctx.asarray(params.B))
        yb = y if loss == "cross_entropy" else ctx.asarray(y)
        rb, gb, _ = model.risk_and_grad(pa, X, yb, m, loss=loss, weights=ctx.asarray(w), ctx=ctx)
        assert float(rb.rad()) < 1e-30
        assert abs(float(rb.mid()) - risk) < 1e-14
        assert np.allclose(ctx.to_float(np.concatenate([gb.alpha.ravel(), gb.B.ravel()])),
                           grad.flat(), rtol=0, atol=1e-14)
    with MPContext(40) as ctx:
        pm = Params(ctx.asarray(params.alpha), ctx.asarray(params.B))
        ym = y if loss == "cross_entropy" else ctx.asarray(y)
        rm, _, _ = model.risk_and_grad(pm, X, ym, m, loss=loss, weights=ctx.asarray(w), ctx=ctx)
        assert rb.contains(rm)


def test_bad_shapes_are_refused():
    with pytest.raises(SettingError, match="H must be"):
        Model(H=0)
    model = Model(H=1, D=2, K=1)
    with pytest.raises(SettingError, match="D = 2"):
        model.forward(model.zeros(), np.zeros((1, 3, 3)))
    with pytest.raises(SettingError, match="loss must be"):
        loss_terms("hinge", np.zeros((1, 1)), np.zeros((1, 1)))


@settings(max_examples=20)
@given(st.integers(0, 10**6), st.floats(-3, 3), st.floats(-3, 3), st.floats(-30, 30))
def test_fused_pair_sums_equal_the_model_pieces(seed, beta_a, beta_b, gap):
    """The fused two-class squared-loss sums of the float series equal attend_pair + loss_terms +
    attend_backward on two tokens, weighted and summed."""
    rng = np.random.default_rng(seed)
    n = 50
    c = rng.integers(0, 6, n).astype(float)
    r = rng.integers(0, 6, n).astype(float)
    r[c + r == 0] = 1.0
    y = np.where(c > 0, 1.0, -1.0)
    W = rng.dirichlet(np.ones(n))
    cu = c * np.exp(gap)
    buf = {name: np.empty(n) for name in ("w", "f", "g", "tmp")}
    risk, gw, g_total, ga = pair_squared_sums(cu, r, y, W, beta_a, beta_b, buf)
    f, w = attend_pair(cu, r, beta_a, beta_b)
    loss, dl = loss_terms("squared", f[:, None], y[:, None])
    V = np.stack([np.full(n, beta_a), np.full(n, beta_b)], axis=1)[..., None]
    ds, dV = attend_backward(np.stack([w, 1 - w], axis=1), V, f[:, None], (W[:, None] * dl))
    scale = 1 + abs(beta_a) + abs(beta_b)
    assert abs(risk - W @ loss) <= 1e-14 * scale ** 2
    assert abs(gw - dV[:, 0, 0].sum()) <= 1e-14 * scale
    assert abs(g_total - dV[:, :, 0].sum()) <= 1e-14 * scale
    assert abs(ga - ds[:, 0].sum()) <= 1e-13 * scale ** 2
